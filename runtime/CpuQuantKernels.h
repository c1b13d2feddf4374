//===- CpuQuantKernels.h - int8 quantization on the CPU ---------*- C++ -*-===//
//
// The reference semantics of docs/QUANTIZATION.md section 3 (`qcc.quantize`,
// `qcc.qlinear`) and the element rule of the int8 KV cache (section 4). The
// kernels are cases of runCpuKernel(); the scalar rules are those of
// codegen/kernels/numerics.h, shared with the CUDA kernels, the KV cache and
// the tests.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUQUANTKERNELS_H
#define QCC_RUNTIME_CPUQUANTKERNELS_H

#include "format/Quant.h"
#include "runtime/CpuKernels.h"

#include "codegen/kernels/numerics.h"

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

/// The kernels behind "quantize" and "qlinear" (see QccOps.td).
std::vector<Tensor> quantizeKernel(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> qlinearKernel(const Attrs &attrs, const Operands &ops);

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPUQUANTKERNELS_H
