//===- gemv_i8.cuh - int8 skinny-M GEMM for decode (M <= MaxM) -----------===//
//
// Same contract and epilogue chain as gemm_i8.cuh (exact int32 accumulator,
// via __dp4a), for M <= MaxM rows (decode). Each warp computes ColsPerWarp
// output columns for all M rows with 16-byte loads of weight rows.
//
//   typedef qcc::GemvI8Config<8, 4, 2, 4> Cfg; // MaxM, Warps, ColsPerWarp, KSteps
//   extern "C" __global__ void __launch_bounds__(Cfg::kThreads)
//   qcc_k8(...) {
//     qcc::GemmParams<qcc::int8_t> p = {x, w, M, N, K};
//     ...; qcc::gemv_i8<Cfg>(p, epi);
//   }
//
// Launch: blockDim = (32 * Warps), gridDim = (ceil(N / (Warps * ColsPerWarp))),
// no dynamic shared memory. Requirements: A, B 16-byte aligned, K % 16 == 0,
// 1 <= M <= MaxM; N arbitrary.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_GEMV_I8_CUH
#define QCC_KERNELS_GEMV_I8_CUH

#include "qcc/gemm_core.cuh"

namespace qcc {

/// Column block `block` (blockIdx.x, or a grouped GEMV member's block index
/// within its range).
template <int MaxM, int Warps, int ColsPerWarp, int KSteps = 1, class Epilogue>
QCC_DEVICE void gemv_i8(const int8_t *A, const int8_t *B, int M, int N, int K,
                        Epilogue epi, int block) {
  static_assert(Epilogue::kIntInput,
                "gemv_i8: the epilogue must start with an int32 stage "
                "(DequantPerTokenPerChannel or StoreI32)");
  gemv_mainloop<detail::DotS8, MaxM, Warps, ColsPerWarp, KSteps>(A, B, M, N, K,
                                                                  epi, block);
}
template <int MaxM, int Warps, int ColsPerWarp, int KSteps = 1, class Epilogue>
QCC_DEVICE void gemv_i8(const int8_t *A, const int8_t *B, int M, int N, int K,
                        Epilogue epi) {
  gemv_i8<MaxM, Warps, ColsPerWarp, KSteps>(A, B, M, N, K, epi,
                                            (int)blockIdx.x);
}

/// `Cfg` (a GemvI8Config) over `p` (p.M <= Cfg::kMaxM), column block
/// `block`, or blockIdx.x.
template <class Cfg, class Epilogue>
QCC_DEVICE void gemv_i8(const GemmParams<int8_t> &p, Epilogue epi,
                        int block) {
  gemv_i8<Cfg::kMaxM, Cfg::kWarps, Cfg::kColsPerWarp, Cfg::kKSteps>(
      p.A, p.B, p.M, p.N, p.K, epi, block);
}
template <class Cfg, class Epilogue>
QCC_DEVICE void gemv_i8(const GemmParams<int8_t> &p, Epilogue epi) {
  gemv_i8<Cfg>(p, epi, (int)blockIdx.x);
}

} // namespace qcc

#endif // QCC_KERNELS_GEMV_I8_CUH
