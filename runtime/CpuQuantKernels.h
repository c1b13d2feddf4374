//===- CpuQuantKernels.h - int8 quantization on the CPU ---------*- C++ -*-===//
//
// The reference semantics of docs/QUANTIZATION.md section 3 (`qcc.quantize`,
// `qcc.qlinear`) and the element rule of the int8 KV cache (section 4). The
// kernels are cases of runCpuKernel(); the scalar helpers are shared with
// the KV cache and the tests.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUQUANTKERNELS_H
#define QCC_RUNTIME_CPUQUANTKERNELS_H

#include "format/Quant.h"
#include "runtime/CpuKernels.h"

#include <cmath>
#include <cstdint>

namespace qcc::rt {

/// Round half to even, independent of the floating-point rounding mode
/// (the same as std::nearbyint under FE_TONEAREST and CUDA's __float2int_rn).
/// v - floor(v) is exact in float, so the tie test is exact.
inline float roundHalfEven(float v) {
  if (!(std::fabs(v) < 8388608.0f)) // |v| >= 2^23 is integral; NaN / inf
    return v;
  float f = std::floor(v);
  float d = v - f;
  if (d > 0.5f)
    return f + 1.0f;
  if (d < 0.5f)
    return f;
  return std::fmod(f, 2.0f) == 0.0f ? f : f + 1.0f;
}

/// clamp(round_half_even(v), lo, hi) as an integer; NaN gives 0.
inline int32_t roundClamp(float v, float lo, float hi) {
  if (std::isnan(v))
    return 0;
  float r = roundHalfEven(v);
  return (int32_t)(r < lo ? lo : (r > hi ? hi : r));
}

/// Symmetric int8: clamp(round_half_even(x / scale), -qmax, qmax), qmax =
/// 127 (format/Quant.h).
inline int8_t quantizeSymmetric(float x, float scale) {
  constexpr float qmax = format::symmetricQMax();
  return (int8_t)roundClamp(x / scale, -qmax, qmax);
}

/// The kernels behind "quantize" and "qlinear" (see QccOps.td).
std::vector<Tensor> quantizeKernel(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> qlinearKernel(const Attrs &attrs, const Operands &ops);

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPUQUANTKERNELS_H
