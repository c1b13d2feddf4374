//===- CpuSparseKernels.h - 2:4 sparse linears on the CPU -------*- C++ -*-===//
//
// A linear or qlinear whose weight is `qcc.sparse_2_4 %values, %meta` of
// constants runs straight from the compressed form (format/Sparse24.h): per
// output row n and input row m, for each group of four k the two kept values
// times the two x elements at the positions the metadata names. The dense
// weight is never built, and the weight bytes read are the compressed ones
// (int8: values K/2 + metadata K/8 bytes per row, 5/8 of the dense K).
//
// The reference is the op-by-op semantics: sparse_2_4 decompresses (its CPU
// kernel), then the dense linear / qlinear. The two agree:
//   qlinear  bit for bit: the int32 sum is exact whatever its order, and the
//            epilogue is QLinearEpilogue (runtime/cpu/CpuQuantKernels.h) on both.
//   linear   f32 (f16/bf16 values widened exactly, as the dense path widens
//            the weight) summed in another order than BLAS: each result
//            differs by at most 2 * gamma(K/2 + 1) * sum_k |w_nk x_mk| from
//            the reference, gamma(n) = n u / (1 - n u), u = 2^-24 (both are
//            sums of the same K/2 nonzero products and the bias, each within
//            gamma(K/2 + 1) of the exact sum; Higham, "Accuracy and
//            Stability of Numerical Algorithms", 3.1). BLAS adds zeros too,
//            which is exact. An f16/bf16 result is then rounded to its type,
//            so the two may differ by one unit in its last place more.
// The path is the backend's one knob (CpuKernelPath in CpuKernels.h): Fast
// runs from the compressed form, the int8 dot product vectorized where the
// CPU allows (SSSE3); Portable the same without SIMD intrinsics; Reference
// decompresses, then runs the dense kernel.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUSPARSEKERNELS_H
#define QCC_RUNTIME_CPUSPARSEKERNELS_H

#include "runtime/cpu/CpuKernels.h"

namespace qcc::rt {

/// A 2:4 compressed weight: values [N, K/2], i32 meta [N, K/32] whose
/// metadata has been validated (the artifact loader does it for constants;
/// sparseWeight() for anything else).
struct Sparse24Weight {
  const Tensor *values = nullptr, *meta = nullptr;
  int64_t n() const { return values->dim(0); }
  int64_t k() const { return values->dim(1) * 2; }
};

/// Whether the session expands 2:4 weights (int8 and float32 values) to
/// the dense layout once and runs the dense packed kernels instead of the
/// sparse ones: on the fast path on CPUs with AVX-512 VNNI, where the dense
/// GEMMs are 2-5x faster than these sparse kernels (the demo's W8A8 + 2:4:
/// prefill 4,836 against 25,229 tokens/s, decode 2,470 against 4,295),
/// so that 2:4 is never slower than dense (docs/SPARSITY.md). The memory
/// is the dense weight's.
bool sparseRunsDense();
/// How 2:4 linears run on the fast path: Auto (sparseRunsDense's rule),
/// Sparse (the sparse kernels: what they are tested and compared with) or
/// Dense; also QCC_CPU_SPARSE=auto|sparse|dense, read at the first call.
enum class SparseMode { Auto, Sparse, Dense };
void setSparseMode(SparseMode mode);
SparseMode sparseMode();

/// Checks the shapes and types of values and meta (and, with `checkMeta`,
/// every group's metadata); throws std::runtime_error with the reason.
Sparse24Weight sparseWeight(const Tensor &values, const Tensor &meta,
                            bool checkMeta);

/// linear(x, sparse_2_4(values, meta), bias): `ops` are the linear's
/// operands with the weight slot (ops[1]) not read; x and bias f32 (the
/// caller widens f16/bf16 ones, computeInF32), values f32, f16 or bf16.
std::vector<Tensor> sparseLinearKernel(const Operands &ops,
                                       const Sparse24Weight &w);

/// qlinear(..., sparse_2_4(values, meta), ...): `ops` are the qlinear's
/// operands with the weight slot (ops[3]) not read; values i8.
std::vector<Tensor> sparseQLinearKernel(const Operands &ops,
                                        const Sparse24Weight &w);

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPUSPARSEKERNELS_H
