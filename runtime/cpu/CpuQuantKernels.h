//===- CpuQuantKernels.h - int8 quantization on the CPU ---------*- C++ -*-===//
//
// The reference semantics of docs/QUANTIZATION.md section 3 (`qcc.quantize`,
// `qcc.qlinear`) and the element rule of the int8 KV cache (section 4). The
// kernels are cases of runCpuKernel(); the scalar rules are those of
// format/device/numerics.h, shared with the CUDA kernels, the KV cache and
// the tests.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUQUANTKERNELS_H
#define QCC_RUNTIME_CPUQUANTKERNELS_H

#include "format/Quant.h"
#include "runtime/cpu/CpuKernels.h"

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

/// out[i] = quantizeSymmetric(in[i], scales ? scales[i] : scale) for i < n:
/// a row of the int8 KV cache (per-channel key scales, or one value scale).
/// 16 values at a time with AVX-512F on the fast path, bit for bit.
void quantizeSymmetricRow(const float *in, int64_t n, const float *scales,
                          float scale, int8_t *out);

/// The kernels behind "quantize" and "qlinear" (see QccOps.td).
std::vector<Tensor> quantizeKernel(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> qlinearKernel(const Attrs &attrs, const Operands &ops);

/// Multiply-adds (M N K, counted dense) above which a CPU qlinear, dense or
/// 2:4 sparse, threads over its outputs (OpenMP).
inline constexpr int64_t kQLinearParallelWork = int64_t(1) << 20;

/// A qlinear's operands but the weight, checked against a weight of [N, K]
/// (the dense [N, K] i8 tensor, or the 2:4 compressed form of one), and the
/// epilogue that turns row m, column n's int32 sum into the result: the one
/// definition of it for every CPU qlinear (dense, 2:4 sparse). Inline, so its
/// callers must be compiled with -ffp-contract=off (runtime/cpu/CMakeLists.txt).
struct QLinearEpilogue {
  int64_t M = 0, N = 0, K = 0; ///< rows of the input, of the weight, depth
  Shape resultShape;            ///< the input's shape with N last
  const int8_t *x = nullptr;    ///< [M, K]
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
    if (outlierWeight)
      y = numerics::fadd(y, f);
    return bias ? numerics::fadd(y, bias[n]) : y;
  }
};

/// The "outlier_columns" attribute of a quantize or qlinear of depth K,
/// checked (format/Quant.h); throws std::runtime_error when invalid.
std::vector<int64_t> outlierColumns(const Attrs &attrs, int64_t K);

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPUQUANTKERNELS_H
