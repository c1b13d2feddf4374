//===- CpuQuantKernels.h - int8 quantization on the CPU backend -*- C++ -*-===//
//
// The CPU backend's quantize and qlinear: the reference rules
// (runtime/reference/QuantKernels.h), with AVX-512F for the symmetric rule
// on the fast path (bit for bit) and the dense qlinear over the pool.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUQUANTKERNELS_H
#define QCC_RUNTIME_CPUQUANTKERNELS_H

#include "runtime/cpu/CpuKernels.h"
#include "runtime/reference/QuantKernels.h"

namespace qcc::rt {

/// out[i] = quantizeSymmetric(in[i], scales ? scales[i] : scale) for i < n:
/// a row of the int8 KV cache (per-channel key scales, or one value scale).
/// 16 values at a time with AVX-512F on the fast path, bit for bit.
void quantizeSymmetricRow(const float *in, int64_t n, const float *scales,
                          float scale, int8_t *out);

/// The kernels behind "quantize" and "qlinear" (see QccOps.td) on the
/// current path (cpuKernelPath()).
std::vector<Tensor> quantizeKernel(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> qlinearKernel(const Attrs &attrs, const Operands &ops);

/// Multiply-adds (M N K, counted dense) above which a CPU qlinear, dense or
/// 2:4 sparse, threads over its outputs (OpenMP).
inline constexpr int64_t kQLinearParallelWork = int64_t(1) << 20;

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPUQUANTKERNELS_H
