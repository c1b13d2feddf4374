//===- CpuKernels.cpp - the CPU backend's dispatch ------------------------===//
//
// runCpuKernel: on the fast and portable paths, the ops where the profile
// shows time (linear, gelu, layer_norm, add, attention, ...) run the faster
// kernels of this room; every other op, and every op on the reference path,
// runs its reference kernel (runtime/reference). The faster kernels compute
// the same values up to the order of float sums and gelu's rational erf.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/CpuKernelsInternal.h"

#include "runtime/cpu/CpuQuantKernels.h"

#include <optional>

using namespace qcc::rt;
using namespace qcc::rt::cpukernels;

namespace {

/// Add / Sub / Mul / Div of two f32 tensors of one shape (the residual
/// adds): a flat loop that vectorizes, over the pool when large; the same
/// float operation per element as the reference. Anything else: nullopt.
std::optional<std::vector<Tensor>> sameShapeBinary(BinOp op,
                                                   const Operands &ops) {
  const Tensor &a = need(ops, 0, "lhs"), &b = need(ops, 1, "rhs");
  if (a.dtype() != DType::F32 || b.dtype() != DType::F32 ||
      a.shape() != b.shape())
    return std::nullopt;
  Tensor r = Tensor::uninitialized(DType::F32, a.shape()); // every element set
  const float *x = a.data<float>(), *z = b.data<float>();
  float *y = r.data<float>();
  int64_t n = r.numel();
#pragma omp parallel for schedule(static) if (n >= (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    y[i] = applyBin<float>(op, x[i], z[i]);
  return std::vector<Tensor>{std::move(r)};
}

/// A float unary op (withUnaryFormula's formula) over the pool for large
/// tensors; nullopt for an op without such a formula.
std::optional<std::vector<Tensor>> threadedUnary(OpKind op,
                                                 const Operands &ops) {
  std::optional<std::vector<Tensor>> r;
  withUnaryFormula(op, [&](auto fn) { r = threadedUnaryF32(op, ops, fn); });
  return r;
}

/// The faster kernel of `op`, or nullopt where the reference kernel runs (a
/// table of overrides: a new op needs no case here).
std::optional<std::vector<Tensor>> fastKernel(OpKind op, const Attrs &attrs,
                                              const Operands &ops) {
  switch (op) {
  case OpKind::Add: return sameShapeBinary(BinOp::Add, ops);
  case OpKind::Sub: return sameShapeBinary(BinOp::Sub, ops);
  case OpKind::Mul: return sameShapeBinary(BinOp::Mul, ops);
  case OpKind::Div: return sameShapeBinary(BinOp::Div, ops);
  case OpKind::MatMul: return matmulK(attrs, ops, sgemm);
  case OpKind::Gemm: return gemmK(attrs, ops, sgemm);
  case OpKind::Linear: return linearK(ops, {});
  case OpKind::Moe: return moeFast(attrs, ops);
  case OpKind::LayerNorm: return layerNormFast(attrs, ops);
  case OpKind::RmsNorm: return rmsNormFast(attrs, ops);
  case OpKind::Hadamard: return hadamardFast(attrs, ops);
  case OpKind::Gelu: return geluFast(attrs, ops);
  case OpKind::Silu: return siluFast(ops);
  case OpKind::Softmax: return softmaxK(attrs, ops, softmaxRowFast);
  case OpKind::Attention: return attentionFastK(attrs, ops);
  case OpKind::Quantize: return quantizeKernel(attrs, ops);
  case OpKind::QLinear: return qlinearKernel(attrs, ops);
  default: return threadedUnary(op, ops); // the float unary ops, or none
  }
}

} // namespace

std::vector<Tensor> qcc::rt::runCpuKernel(OpKind op, const Attrs &attrs,
                                          const Operands &ops) {
  cpuThreads(); // sets up the pool and OpenBLAS's threads on first use
  if (cpuKernelPath() != CpuKernelPath::Reference)
    if (std::optional<std::vector<Tensor>> r = fastKernel(op, attrs, ops))
      return std::move(*r);
  return reference::runKernel(op, attrs, ops);
}
