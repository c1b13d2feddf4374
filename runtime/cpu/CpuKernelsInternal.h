//===- CpuKernelsInternal.h - what the fast kernels share -------*- C++ -*-===//
//
// Private to runtime/cpu: the reference helpers (ReferenceInternal.h), the
// threaded float GEMM, and the faster kernels runCpuKernel's overrides
// (CpuKernels.cpp) dispatch to. The families: CpuKernels.cpp (the dispatch,
// elementwise), CpuContractionKernels.cpp (BLAS sgemm),
// CpuTransformerKernels.cpp (linear, norms, activations, softmax, attention,
// moe), CpuAttentionLoops.cpp (the attention inner loops),
// CpuQuantKernels.cpp, CpuKernelSettings.cpp (threads, the kernel path).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPU_CPUKERNELSINTERNAL_H
#define QCC_RUNTIME_CPU_CPUKERNELSINTERNAL_H

#include "runtime/cpu/CpuChunkPool.h"
#include "runtime/cpu/CpuF32Gemm.h"
#include "runtime/cpu/CpuKernels.h"
#include "runtime/reference/ReferenceInternal.h"

#include <omp.h>

namespace qcc::rt::cpukernels {

/// C[M,N] = alpha * A B + beta * C with row-major A [M,K] (lda) and B (ldb),
/// on the calling thread (OpenBLAS runs single-threaded: setCpuThreads).
void blasSgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
               float alpha, const float *A, int64_t lda, const float *B,
               int64_t ldb, float beta, float *C, int64_t ldc);

/// sgemm (CpuKernels.h), then `epilogue(m0, m1, n0, n1)` on each block of C
/// by the thread that computed it, while the block is still in its cache.
template <typename Epilogue>
void sgemmThen(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
               float alpha, const float *A, int64_t lda, const float *B,
               int64_t ldb, float beta, float *C, int64_t ldc,
               Epilogue epilogue) {
  int threads = omp_in_parallel() ? 1 : cpuThreads();
  const int64_t work = M * N * std::max<int64_t>(K, 1);
  if (threads > 1 && N >= 32 * threads && chunkPoolFits(M, work)) {
    // Decode: column blocks of 16-float multiples, about four per thread.
    int64_t per = (N + 4 * threads - 1) / (4 * threads);
    per = (per + 15) / 16 * 16;
    parallelChunks((N + per - 1) / per, [&](int64_t c) {
      int64_t n0 = c * per, n1 = std::min(N, n0 + per);
      blasSgemm(transA, transB, M, n1 - n0, K, alpha, A, lda,
                B + (transB ? n0 * ldb : n0), ldb, beta, C + n0, ldc);
      epilogue(int64_t(0), M, n0, n1);
    });
    return;
  }
  if (threads <= 1 || work < kParallelWork) {
    blasSgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    epilogue(int64_t(0), M, int64_t(0), N);
    return;
  }
  // Column blocks (each thread reads all of A and its slice of B: a linear's
  // weight is read once) in multiples of 16 floats; row blocks when N is
  // too narrow to give every thread one.
  bool byColumns = N >= 32 * threads;
  int64_t extent = byColumns ? N : M, align = byColumns ? 16 : 1;
  int64_t per = (extent + threads - 1) / threads;
  per = (per + align - 1) / align * align;
#pragma omp parallel num_threads(threads)
  {
    int64_t b0 = std::min(extent, omp_get_thread_num() * per),
            b1 = std::min(extent, b0 + per);
    if (b0 < b1 && byColumns) {
      blasSgemm(transA, transB, M, b1 - b0, K, alpha, A, lda,
                B + (transB ? b0 * ldb : b0), ldb, beta, C + b0, ldc);
      epilogue(int64_t(0), M, b0, b1);
    } else if (b0 < b1) {
      blasSgemm(transA, transB, b1 - b0, N, K, alpha,
                A + (transA ? b0 : b0 * lda), lda, B, ldb, beta,
                C + b0 * ldc, ldc);
      epilogue(b0, b1, int64_t(0), N);
    }
  }
}

/// unaryF32 of `fn` over the pool for large tensors (the same value per
/// element as the reference's one thread): elementwise math (erf, tanh,
/// exp) is the costly part of small models after the GEMMs.
template <typename F>
std::vector<Tensor> threadedUnaryF32(OpKind op, const Operands &ops, F fn) {
  return unaryF32With(op, ops, [&](const float *in, float *out, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= (1 << 16))
    for (int64_t i = 0; i < n; ++i)
      out[i] = fn(in[i]);
  });
}

/// reference::softmaxRow, with AVX-512 for a contiguous row on the fast path
/// (the softmax op runs softmaxK with it).
void softmaxRowFast(float *v, int64_t n, int64_t stride = 1);

// The faster kernels (CpuTransformerKernels.cpp); each checks its operands
// as the reference does and computes the same values up to the order of
// float sums (and gelu's rational erf).
std::vector<Tensor> attentionFastK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> geluFast(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> layerNormFast(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> linearK(const Operands &ops, const LinearEpilogue &epi,
                            const PackedF32Weight *packed = nullptr);
std::vector<Tensor> moeFast(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> rmsNormFast(const Attrs &attrs, const Operands &ops);
/// qcc.hadamard: the reference's rows (hadamardRow) over the pool.
std::vector<Tensor> hadamardFast(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> siluFast(const Operands &ops);

} // namespace qcc::rt::cpukernels

#endif // QCC_RUNTIME_CPU_CPUKERNELSINTERNAL_H
