//===- CpuW4A8Kernels.h - W4A8 linears: int8 x int4 products ----*- C++ -*-===//
//
// W4A8 (docs/QUANTIZATION.md section 13) is, in the IR, a linear whose input
// is a `qcc.quantize` with an f32 result (per token, symmetric: each value
// is its int8 code a read back, fl(a xs)) and whose weight is
// `qcc.weight_int4` of constants (format/Int4.h). On the fast path, on CPUs
// with AVX-512 VNNI, such a linear multiplies the codes themselves:
//
//   a[m, k] = round(x'[m, k] / xs[m])   exact: x' = fl(a xs), |a| <= 127,
//                                       so the quotient is within 2^-16 of a
//   d[g]    = sum_{j in g} c[n, j] a'[m, j]       (int32, exact)
//   t[g]    = sum_{j in g} a'[m, j]               (int32, exact)
//   acc = 0; for each group g ascending:
//     acc = fma(float(d[g]), s[n, g], acc)
//     with offsets:  acc = fma(float(t[g]), o[n, g], acc)
//   y[m, n] = acc * xs[m]   (+ bias[n], rounded after the product)
//
// c is the signed code q (symmetric) or the unsigned u (with offsets), a'
// the codes in the weight's stored order (a'[j] = a[perm[j]] with
// act-order), g the groups of G stored columns. The weight is repacked once
// at load into the layout vpdpbusd reads (PackedW4A8Weight), the symmetric
// codes as u = q + 8 (vpdpbusd multiplies unsigned by signed bytes), whose
// extra 8 t[g] is subtracted from d[g] before the conversion: still exact.
// The portable loop below computes the same definition and is the test's
// reference for the AVX-512 path (bit for bit: the int parts are exact and
// the float steps the same single roundings).
//
// Against the op-by-op semantics (the reference path: the quantize's f32
// values times the dequantized weight, summed in f32) the difference is
// rounding only: both are within gamma(K + 2) sum_k |x'_k w_k| of the exact
// sum (Higham 3.1; u = 2^-24), so they agree within twice that.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUW4A8KERNELS_H
#define QCC_RUNTIME_CPUW4A8KERNELS_H

#include "runtime/cpu/CpuInt4Kernels.h"
#include "runtime/cpu/PackChunks.h"

#include <cstdint>
#include <vector>

namespace qcc::rt {

/// An int4 weight in the layout the VNNI loop reads: blocks of 16 output
/// rows; in a block, for each step of 8 stored columns, 64 bytes: row r's
/// 4 bytes at 4 r, byte b holding column 8 j + b in its low nibble and
/// 8 j + 4 + b in its high one, as unsigned codes (q + 8 when symmetric).
/// Scales (and offsets) as stored, f16, [blocks][groups][16] (widened
/// exactly where read). Rows past N are zero with scale 0.
struct PackedW4A8Weight {
  static constexpr int64_t kRows = 16; ///< output rows per block
  static constexpr int64_t kStep = 8;  ///< stored columns per 64 bytes
  int64_t n = 0, k = 0, groupSize = 0;
  bool symmetric = true;
  std::vector<uint8_t> codes; ///< [blocks][k / 8][64]
  std::vector<uint16_t> scales, offsets; ///< f16
  const Tensor *perm = nullptr; ///< i32 [K] or null (the weight's own)

  int64_t blocks() const { return (n + kRows - 1) / kRows; }
  int64_t groups() const { return k / groupSize; }
};

/// Whether `w` can be packed: K and G multiples of 8.
bool w4a8Packs(const Int4Weight &w);

/// Packs `w` (w4a8Packs(w)); `done` gets the packed bytes' spans once read.
PackedW4A8Weight packW4A8Weight(const Int4Weight &w,
                                const SourceDone &done = {});

/// Whether the fast path multiplies codes here: AVX-512 VNNI, and int4Simd()
/// at Avx512 (setInt4SimdCap lets tests run the portable loop).
bool w4a8RunsVnni();

/// linear(x', weight_int4(...), bias) as above: `ops` are the linear's
/// operands (ops[0] = x' f32 [..., K], ops[1] not read, ops[2] the bias or
/// absent), `scale` the quantize's per-row scales [..., 1].
std::vector<Tensor> w4a8LinearKernel(const Operands &ops,
                                     const PackedW4A8Weight &w,
                                     const Tensor &scale);

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPUW4A8KERNELS_H
