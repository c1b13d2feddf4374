//===- QuantizeW4Methods.h - int4 weights per group: RTN, GPTQ --*- C++ -*-===//
//
// The numerics of the quantize-w4 pass (docs/QUANTIZATION.md, section 7),
// free of MLIR so that unit tests call them on plain arrays. Each takes a
// row-major weight W [n, k] in double and returns its int4 form in the
// layout of format/Int4.h before packing: q [n, k] in [-7, 7] (stored column
// order), f16 scales [n, k/g], for act-order the permutation and, with
// `asymmetric`, f16 offsets [n, k/g] with the codes u in [0, 15].
//
//   grid  per group, symmetric: s = f16(max|w| / 7),
//         q = clamp(round_half_even(w / s), -7, 7), w' = q s;
//         asymmetric (GGUF Q4_1's "scale + min"): m = f16(min w),
//         s = f16(max(0, max w - m) / 15) (1 when 0),
//         u = clamp(round_half_even((w - m) / s), 0, 15), w' = u s + m
//         (rounded once to f32, as every backend)
//   rtn   round to nearest per group on the grid of the float weights
//   gptq  GPTQ (Frantar et al., 2022): columns left to right (act-order:
//         by descending diag H), each group's grid from the weights as
//         updated so far at its first column, each column's rounding error
//         w - w' compensated on the later columns through the inverse-Hessian
//         factor (passes/InverseHessian.h) in lazy batches of columns
//
//===----------------------------------------------------------------------===//
#ifndef QCC_PASSES_QUANTIZEW4METHODS_H
#define QCC_PASSES_QUANTIZEW4METHODS_H

#include "passes/InverseHessian.h"

#include <cstdint>
#include <vector>

namespace qcc::w4 {

struct Int4Weight {
  std::vector<int8_t> q;        ///< [n, k], stored column order
  std::vector<uint16_t> scales; ///< [n, k / groupSize], f16 bits
  std::vector<int32_t> perm;    ///< [k] with act-order, else empty
  /// [n, k / groupSize], f16 bits: asymmetric (q holds u in [0, 15]),
  /// else empty.
  std::vector<uint16_t> offsets;
};

/// The f16 scale of a group whose largest |w| is `absmax`: f16(absmax / 7)
/// (rounded to nearest even), clamped to the largest finite f16; 1 when
/// that is zero (an all-zero group, or one too small for f16: its q are 0).
uint16_t groupScale(double absmax);
/// The f16 bits `h` as a double.
double scaleValue(uint16_t h);
/// q = clamp(round_half_even(w / s), -7, 7).
int8_t quantizeValue(double w, double s);

/// The asymmetric grid of a group with smallest and largest weight `lo`,
/// `hi`: the f16 offset m = f16(lo) (clamped to the finite f16 range; 0 for
/// NaN) and the f16 scale f16(max(0, hi - m) / 15) (1 when that is zero,
/// clamped as groupScale).
struct AsymGrid {
  uint16_t offset, scale;
};
AsymGrid asymGroupGrid(double lo, double hi);
/// u = clamp(round_half_even((w - m) / s), 0, 15).
int8_t quantizeAsymValue(double w, double s, double m);
/// u s + m as the backends compute it (f32; u s exact, one rounding).
double asymValue(int8_t u, double s, double m);

/// Round to nearest, per group of `groupSize` consecutive k.
Int4Weight quantizeRtn(const std::vector<double> &w, int64_t n, int64_t k,
                       int64_t groupSize, bool asymmetric = false);

/// The act-order permutation: input columns by descending H_jj (ties: the
/// lower column first).
std::vector<int32_t> actOrder(const std::vector<double> &H, int64_t k);

/// GPTQ with `hinv`, the factor of the Hessian in the stored column order
/// (with act-order: of obs::permuteHessian(H, perm)); `perm` empty or the
/// act-order permutation (w is given in the original order). blockSize:
/// columns per lazy batch.
Int4Weight quantizeGptq(const std::vector<double> &w, int64_t n, int64_t k,
                        int64_t groupSize, const obs::InverseHessian &hinv,
                        const std::vector<int32_t> &perm,
                        int64_t blockSize = 128, bool asymmetric = false);

/// The dequantized weight [n, k] in the original column order (for tests
/// and error reports; the backends use format::int4::dequantize).
std::vector<double> dequantize(const Int4Weight &w, int64_t n, int64_t k,
                               int64_t groupSize);

} // namespace qcc::w4

#endif // QCC_PASSES_QUANTIZEW4METHODS_H
