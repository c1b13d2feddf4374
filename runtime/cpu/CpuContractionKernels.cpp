//===- CpuContractionKernels.cpp - the CPU backend's float GEMM -----------===//
//
// Float GEMMs go through OpenBLAS or oneDNN (cblas_sgemm, split over the
// process's OpenMP pool by sgemm).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuKernelsInternal.h"

#include "runtime/cpu/CpuDnnl.h"

#include <cblas.h>

using namespace qcc::rt;
using namespace qcc::rt::cpukernels;

namespace qcc::rt::cpukernels {

/// C[M,N] = alpha * A B + beta * C with row-major A [M,K] (lda) and B (ldb),
/// on the calling thread (OpenBLAS runs single-threaded: setCpuThreads).
void blasSgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
               float alpha, const float *A, int64_t lda, const float *B,
               int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0)
    return;
  if (K == 0) { // BLAS may leave C untouched; define it: C = beta * C
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        C[m * ldc + n] = beta == 0.0f ? 0.0f : beta * C[m * ldc + n];
    return;
  }
  if (M == 1) { // a GEMV (batch-1 decode): BLAS's gemm would pack B first
    cblas_sgemv(CblasRowMajor, transB ? CblasNoTrans : CblasTrans,
                (blasint)(transB ? N : K), (blasint)(transB ? K : N), alpha, B,
                (blasint)ldb, A, (blasint)(transA ? lda : 1), beta, C, 1);
    return;
  }
  if (dnnlSgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
    return;
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, (blasint)M, (blasint)N,
              (blasint)K, alpha, A, (blasint)lda, B, (blasint)ldb, beta, C,
              (blasint)ldc);
}

} // namespace qcc::rt::cpukernels

void qcc::rt::sgemm(bool transA, bool transB, int64_t M, int64_t N,
                    int64_t K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C,
                    int64_t ldc) {
  sgemmThen(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
            [](int64_t, int64_t, int64_t, int64_t) {});
}

