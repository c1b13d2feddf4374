//===- norm.cuh - fused layer_norm / rms_norm (+ per-token int8 quantize) ---===//
//
// NVRTC include name "qcc/norm.cuh". Semantics: QccOps.td `qcc.layer_norm`,
// `qcc.rms_norm`, and for the fused quantize docs/QUANTIZATION.md section 3
// (symmetric per-token: scale = absmax / 127 (1 if 0), q = clamp(rhe(y /
// scale), -127, 127), zero point 0).
//
//   template <int BlockThreads, NormKind Kind, bool Quantize,
//             typename InT, typename OutT, typename ParamT = float>
//   __device__ void normRow(const NormParams<InT, OutT, ParamT> &p);
//
// InT / OutT / ParamT: float or __half. Statistics are float, two-pass:
//   layer_norm: mean = sum(x) / D; var = sum((x - mean)^2) / D (biased);
//               y = (x - mean) / sqrt(var + eps) * gamma + beta
//   rms_norm:   ms = sum(x^2) / D;  y = x / sqrt(ms + eps) * gamma
// The element epilogue uses __fmul_rn / __fadd_rn / __fdiv_rn (no FMA
// contraction), so recomputing y in the quantize pass gives the same value
// bit for bit as the value written to `out`.
//
// Launch (NormLaunch<BlockThreads>, norm_config.h): grid = rows (one CTA per row, rows in
// gridDim.x, up to 2^31-1), block = BlockThreads (multiple of 32, <= 1024;
// 128-256 for D <= 4096, 512-1024 above), dynamic shared memory = 0 (static
// shared: BlockThreads / 32 floats for the reductions).
// With Quantize, `out` may be null (only the int8 row is wanted).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_NORM_CUH
#define QCC_KERNELS_NORM_CUH

#include "qcc/common.cuh"
#include "qcc/norm_config.h"

namespace qcc {

enum class NormKind { LayerNorm = 0, RmsNorm = 1 };

/// The fields are declared in norm_config.h (QCC_NORM_PARAMS).
template <typename InT, typename OutT, typename ParamT = float> struct NormParams {
  QCC_NORM_PARAMS(QCC_PARAMS_MEMBER, QCC_PARAMS_LINE)
};

namespace detail {
template <NormKind Kind, typename ParamT>
__device__ __forceinline__ float normElement(float x, float center, float denom,
                                             const ParamT *gamma, const ParamT *beta,
                                             int i) {
  float y = __fdiv_rn(__fadd_rn(x, -center), denom);
  y = __fmul_rn(y, toFloat(gamma[i]));
  if (Kind == NormKind::LayerNorm && beta != nullptr)
    y = __fadd_rn(y, toFloat(beta[i]));
  return y;
}
} // namespace detail

template <int BlockThreads, NormKind Kind, bool Quantize, typename InT,
          typename OutT, typename ParamT = float>
__device__ __forceinline__ void normRow(const NormParams<InT, OutT, ParamT> &p) {
  __shared__ float scratch[BlockThreads / kWarpSize];
  const int row = blockIdx.x;
  if (row >= p.rows) return;
  const int D = p.dim;
  const InT *x = p.in + (int64_t)row * D;

  float center = 0.0f, denom;
  if (Kind == NormKind::LayerNorm) {
    float s = 0.0f;
    for (int i = threadIdx.x; i < D; i += BlockThreads) s += toFloat(x[i]);
    center = blockReduce<BlockThreads, ReduceOp::Sum>(s, scratch) / (float)D;
    float v = 0.0f;
    for (int i = threadIdx.x; i < D; i += BlockThreads) {
      float d = toFloat(x[i]) - center;
      v += d * d;
    }
    float var = blockReduce<BlockThreads, ReduceOp::Sum>(v, scratch) / (float)D;
    denom = sqrtf(var + p.epsilon);
  } else {
    float v = 0.0f;
    for (int i = threadIdx.x; i < D; i += BlockThreads) {
      float a = toFloat(x[i]);
      v += a * a;
    }
    float ms = blockReduce<BlockThreads, ReduceOp::Sum>(v, scratch) / (float)D;
    denom = sqrtf(ms + p.epsilon);
  }

  float absmax = 0.0f;
  for (int i = threadIdx.x; i < D; i += BlockThreads) {
    float y = detail::normElement<Kind>(toFloat(x[i]), center, denom, p.gamma,
                                        p.beta, i);
    if (p.out != nullptr) p.out[(int64_t)row * D + i] = fromFloat<OutT>(y);
    if (Quantize) absmax = fmaxf(absmax, fabsf(y)); // fmaxf ignores NaN, as the CPU
  }
  if (!Quantize) return;

  absmax = blockReduce<BlockThreads, ReduceOp::Max>(absmax, scratch);
  const float scale = numerics::symmetricScale(absmax);
  for (int i = threadIdx.x; i < D; i += BlockThreads) {
    float y = detail::normElement<Kind>(toFloat(x[i]), center, denom, p.gamma,
                                        p.beta, i);
    p.q[(int64_t)row * D + i] = numerics::quantizeSymmetric(y, scale);
  }
  if (threadIdx.x == 0) {
    p.q_scale[row] = scale;
    if (p.q_zero_point != nullptr) p.q_zero_point[row] = 0;
  }
}

// A ready-made kernel; codegen may also wrap normRow in its own extern "C"
// kernel with the parameters spelled out.
template <int BlockThreads, NormKind Kind, bool Quantize, typename InT,
          typename OutT, typename ParamT = float>
__global__ void __launch_bounds__(BlockThreads)
normKernel(NormParams<InT, OutT, ParamT> p) {
  normRow<BlockThreads, Kind, Quantize, InT, OutT, ParamT>(p);
}

} // namespace qcc

#endif // QCC_KERNELS_NORM_CUH
