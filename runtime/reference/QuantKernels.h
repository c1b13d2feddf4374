//===- QuantKernels.h - int8 quantization, the reference --------*- C++ -*-===//
//
// The reference semantics of docs/QUANTIZATION.md section 3 (`qcc.quantize`,
// `qcc.qlinear`) and the element rule of the int8 KV cache (section 4). The
// scalar rules are those of format/device/numerics.h, shared with the CUDA
// kernels, the KV cache and the tests.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_REFERENCE_QUANTKERNELS_H
#define QCC_RUNTIME_REFERENCE_QUANTKERNELS_H

#include "format/Quant.h"
#include "runtime/reference/ReferenceKernels.h"

#include "format/device/numerics.h"

namespace qcc::rt {

/// round_half_even, clamp(round_half_even(v), lo, hi) and the symmetric int8
/// element rule clamp(round_half_even(x / scale), -127, 127).
using numerics::quantizeSymmetric;
using numerics::roundClamp;
using numerics::roundHalfEven;

// numerics.h spells the int8 range out for NVRTC; the compiler's comes from
// the bit width. They are one range:
static_assert(numerics::kQMax == (float)format::symmetricQMax() &&
              numerics::kQMinAsym == (float)format::asymmetricQMin() &&
              numerics::kQSteps == (float)format::asymmetricSteps());

/// A qlinear's operands but the weight, checked against a weight of [N, K]
/// (the dense [N, K] i8 tensor, or the 2:4 compressed form of one), and the
/// epilogue that turns row m, column n's int32 sum into the result: the one
/// definition of it for every CPU qlinear (dense, 2:4 sparse). Inline, so its
/// callers must be compiled with -ffp-contract=off (runtime/reference and
/// runtime/cpu CMakeLists.txt).
struct QLinearEpilogue {
  int64_t M = 0, N = 0, K = 0; ///< rows of the input, of the weight, depth
  Shape resultShape;            ///< the input's shape with N last
  const int8_t *x = nullptr;    ///< [M, K]: int8, or E4M3 codes when fp8
  /// FP8 W8A8: input and weight are E4M3 codes (numerics.h), the products
  /// summed in f32 (fp8Result), the zero points and weight sums unused.
  bool fp8 = false;
  const float *xScale = nullptr, *wScale = nullptr, *bias = nullptr;
  const int32_t *xZero = nullptr, *wSum = nullptr;
  bool rowScale = false, rowZero = false; ///< per token (else per tensor)
  /// The LLM.int8()-style fallback (QccOps.td, qcc.qlinear): the outlier
  /// columns c_j, the float input [M, K] and the float weight [N, columns];
  /// empty / null without outliers.
  std::vector<int64_t> outlierColumns;
  const float *outlierInput = nullptr, *outlierWeight = nullptr;

  /// Checks `ops` (qlinear's operand order; ops[3], the weight, is not read)
  /// for a weight of [n, k], with the outlier operands when `attrs` has
  /// outlier_columns; throws std::runtime_error naming the operand.
  static QLinearEpilogue check(const Attrs &attrs, const Operands &ops,
                               int64_t n, int64_t k);

  /// The outlier columns of the float input, gathered: [M, columns].
  std::vector<float> gatherOutliers() const;

  /// (float(acc - zp * wsum[n]) * (xs * ws[n]) + f) + bias[n] (numerics.h),
  /// with f = sum_j outlierInput[m, c_j] * outlierWeight[n, j] summed in
  /// f32 from 0 in ascending j (0 without outliers).
  float operator()(int32_t acc, int64_t m, int64_t n, float f = 0.0f) const {
    float y = numerics::dequantize(acc, xZero[rowZero ? m : 0], wSum[n],
                                   xScale[rowScale ? m : 0], wScale[n]);
    return finish(y, n, f);
  }

  /// FP8: (acc * (xs * ws[n]) + f) + bias[n], acc the f32 sum of the E4M3
  /// products.
  float fp8Result(float acc, int64_t m, int64_t n, float f = 0.0f) const {
    return finish(
        numerics::fmul(acc, numerics::fmul(xScale[rowScale ? m : 0], wScale[n])),
        n, f);
  }

private:
  float finish(float y, int64_t n, float f) const {
    if (outlierWeight)
      y = numerics::fadd(y, f);
    return bias ? numerics::fadd(y, bias[n]) : y;
  }

public:
};

/// The "outlier_columns" attribute of a quantize or qlinear of depth K,
/// checked (format/Quant.h); throws std::runtime_error when invalid.
std::vector<int64_t> outlierColumns(const Attrs &attrs, int64_t K);

/// The symmetric rule for n values sharing one scale: the scale (the static
/// one, or symmetricScale of the abs-max, NaN skipped) and each value's
/// quantizeSymmetric. The signature of the reference rule and of the CPU
/// backend's vector one, which is bit for bit the same.
using QuantizeSymmetricGroup = void (*)(const float *in, int64_t n,
                                        bool isStatic, float staticScale,
                                        int8_t *out, float &scale);

/// The float outlier part of row m, column n: sum_j outlierInput[m, c_j] *
/// outlierWeight[n, j], in f32 from 0 in ascending j.
inline float outlierSum(const QLinearEpilogue &e, int64_t m, int64_t n) {
  const int64_t K = e.K, nOut = (int64_t)e.outlierColumns.size();
  float f = 0.0f;
  for (int64_t j = 0; j < nOut; ++j)
    f = numerics::fadd(f, numerics::fmul(e.outlierInput[m * K + e.outlierColumns[j]],
                                         e.outlierWeight[n * nOut + j]));
  return f;
}

/// Row m, column n of a dense qlinear: the int32 sum of x[m] . w[n] (exact),
/// the float outlier part (summed in f32 in ascending j), the epilogue. The
/// one definition of a qlinear element for the reference and the CPU
/// backend's threaded loop. Inline: callers are compiled with
/// -ffp-contract=off.
inline float qlinearElement(const QLinearEpilogue &e, const int8_t *W,
                            int64_t m, int64_t n) {
  const int64_t K = e.K;
  const int8_t *xr = e.x + m * K, *wr = W + n * K;
  int32_t acc = 0;
  for (int64_t k = 0; k < K; ++k)
    acc += (int32_t)xr[k] * (int32_t)wr[k];
  return e(acc, m, n, outlierSum(e, m, n));
}

/// Row m, column n of an FP8 qlinear: the E4M3 products (exact in f32)
/// summed in f32 in ascending k, the outlier part, the epilogue. The one
/// definition for the reference; the CPU backend's GEMM sums in its own
/// order.
inline float qlinearFp8Element(const QLinearEpilogue &e, const uint8_t *W,
                               int64_t m, int64_t n) {
  const int64_t K = e.K;
  const auto *xr = reinterpret_cast<const uint8_t *>(e.x) + m * K;
  const uint8_t *wr = W + n * K;
  float acc = 0.0f;
  for (int64_t k = 0; k < K; ++k)
    acc = numerics::fadd(acc, numerics::fmul(numerics::e4m3ToFloat(xr[k]),
                                             numerics::e4m3ToFloat(wr[k])));
  return e.fp8Result(acc, m, n, outlierSum(e, m, n));
}

/// qlinear's dense weight [N, K] (operand 3; int8, or E4M3 with an E4M3
/// input) checked, with the epilogue.
std::pair<const Tensor *, QLinearEpilogue> checkQLinear(const Attrs &attrs,
                                                        const Operands &ops);

namespace reference {

/// The FP8 rule for n values sharing one scale: the scale (the static one,
/// or fp8Scale of the abs-max, NaN skipped) and each value's quantizeE4M3.
void quantizeE4M3Group(const float *in, int64_t n, bool isStatic,
                       float staticScale, uint8_t *out, float &scale);

/// QuantizeSymmetricGroup, one value after another.
void quantizeSymmetricGroup(const float *in, int64_t n, bool isStatic,
                            float staticScale, int8_t *out, float &scale);

/// qcc.quantize, its symmetric groups by `symmetric`.
std::vector<Tensor>
quantizeKernel(const Attrs &attrs, const Operands &ops,
               QuantizeSymmetricGroup symmetric = quantizeSymmetricGroup);

/// qcc.qlinear of a dense int8 weight, one element after another.
std::vector<Tensor> qlinearKernel(const Attrs &attrs, const Operands &ops);

} // namespace reference

} // namespace qcc::rt

#endif // QCC_RUNTIME_REFERENCE_QUANTKERNELS_H
