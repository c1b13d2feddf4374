//===- CpuInt4Kernels.h - W4A16 linears on the CPU --------------*- C++ -*-===//
//
// A linear whose weight is `qcc.weight_int4 %packed, %scales [, %perm]
// [offsets %offsets]` of constants (format/Int4.h) runs from the packed
// form: per output row n the row's groups are dequantized to f32 (q * s,
// exact, or u * s + m, one rounding, in the stored column order), then the row
// is dotted with every input row (with act-order, the input's columns taken in
// the stored order, x'[j] = x[perm[j]], once per call), so the weight bytes
// read are the packed ones (K/2 bytes + 2 K/G bytes of scales per row, and
// as many of offsets). Output rows go in blocks of 4: for prefill the
// block's rows are dequantized once and dotted 4 input rows at a time
// (4 x 4 dots per load); the input rows left over (decode's one: the GEMV)
// dot the block's 4 packed rows dequantized in registers (AVX-512 looks up
// each group's 16 values; AVX2 decodes them), on the chunk pool when
// decode-sized. Every path has the order below.
//
// The dot product has one fixed order, so the result is bit for bit that of
// a naive loop in the same order (test/unit/Int4LinearTest.cpp):
//   lane l (0..7) sums w'[j] x'[j] over the stored columns j = l (mod 8) in
//   ascending j (w'[j] = q[j] s[j / G] or u[j] s[j / G] + m[j / G], the
//   weight's column perm[j]), in f32,
//   no FMA (-ffp-contract=off); the lanes are then added as
//   ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), and the bias last.
// The reference path (CpuKernelPath::Reference) is the op-by-op semantics:
// weight_int4 dequantizes (its CPU kernel), then the dense linear (BLAS): the
// same weight, summed in BLAS's order, so the two agree within
// 2 * gamma(K + 1) * sum_k |w_nk x_mk|, gamma(n) = n u / (1 - n u), u = 2^-24
// (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUINT4KERNELS_H
#define QCC_RUNTIME_CPUINT4KERNELS_H

#include "runtime/cpu/CpuKernels.h"

namespace qcc::rt {

/// A packed int4 weight (format/Int4.h): i8 packed [N, K/2], f16 scales
/// [N, K/G], i32 perm [K] or null, f16 offsets [N, K/G] or null (null:
/// symmetric); checked by int4Weight().
struct Int4Weight {
  const Tensor *packed = nullptr, *scales = nullptr, *perm = nullptr,
               *offsets = nullptr;
  int64_t groupSize = 0;
  int64_t n() const { return packed->dim(0); }
  int64_t k() const { return packed->dim(1) * 2; }
};

/// checkInt4Operands with f16 scales (and offsets).
Int4Weight int4Weight(const Tensor &packed, const Tensor &scales,
                      const Tensor *perm, const Tensor *offsets,
                      int64_t groupSize);

/// One row of a packed weight dequantized in its stored order (no perm):
/// format::int4::dequantize of one row, with AVX2 where the CPU has it and
/// G is a multiple of 32 (the same bits). `offset` null: symmetric.
void dequantizeInt4Row(const int8_t *packed, const float *scale,
                       const float *offset, int64_t K, int64_t G, float *out);

/// The instructions the int4 kernels use: the CPU's widest on the fast
/// path (at most the cap), none on the others. Every choice gives the same
/// bits; setInt4SimdCap lets the tests run each on one CPU.
enum class Int4Simd { Plain, Avx2, Avx512 };
Int4Simd int4Simd();
void setInt4SimdCap(Int4Simd cap);

/// The fixed-order dot product above over K elements (no bias).
float int4RowDot(const float *w, const float *x, int64_t K);

/// linear(x, weight_int4(...), bias): `ops` are the linear's operands with
/// the weight slot (ops[1]) not read; x and bias f32 (computeInF32 widens
/// f16/bf16 ones).
std::vector<Tensor> int4LinearKernel(const Operands &ops, const Int4Weight &w);

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPUINT4KERNELS_H
