//===- CpuDnnl.cpp - oneDNN's sgemm for the float GEMMs -------------------===//
#include "runtime/cpu/CpuDnnl.h"

#include "runtime/cpu/CpuKernels.h"

#ifdef QCC_HAVE_DNNL
#include <dnnl.h>
#include <omp.h>
#endif

bool qcc::rt::dnnlSgemm(bool transA, bool transB, int64_t M, int64_t N,
                        int64_t K, float alpha, const float *A, int64_t lda,
                        const float *B, int64_t ldb, float beta, float *C,
                        int64_t ldc) {
#ifdef QCC_HAVE_DNNL
  if (cpuKernelPath() != CpuKernelPath::Fast)
    return false;
  // On the calling thread: callers split their GEMMs over the pool
  // themselves, and an OpenMP team of oneDNN's own would wake the passive
  // workers for each call.
  const bool outside = !omp_in_parallel();
  const int before = omp_get_max_threads();
  if (outside)
    omp_set_num_threads(1);
  dnnl_status_t status =
      dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', M, N, K, alpha, A,
                 lda, B, ldb, beta, C, ldc);
  if (outside)
    omp_set_num_threads(before);
  return status == dnnl_success;
#else
  (void)transA, (void)transB, (void)M, (void)N, (void)K, (void)alpha,
      (void)A, (void)lda, (void)B, (void)ldb, (void)beta, (void)C, (void)ldc;
  return false;
#endif
}
