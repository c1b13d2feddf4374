//===- gemm_i8.cuh - int8 tensor-core GEMM (qcc.qlinear), sm_80+ ---------===//
//
//   acc[m, n] = sum_k A[m, k] * B[n, k]     int32, exact
//   A: int8 activations [M, K] row-major; B: int8 weights [N, K] row-major
//   (the mma "col" operand); mma.sync m16n8k32 s8.s8.s32.
//
// The exact int32 accumulator goes to the epilogue chain, whose first stage
// must take int32 (qcc::DequantPerTokenPerChannel, or qcc::StoreI32 alone);
// see epilogue.cuh. The emitter writes the kernel:
//
//   typedef qcc::GemmI8Config<128, 128, 64, 64, 64, 4> Cfg;
//   extern "C" __global__ void __launch_bounds__(Cfg::kThreads)
//   qcc_k7(const qcc::int8_t *x, const qcc::int8_t *w, const float *xs,
//          const qcc::int32_t *xz, const float *ws, const qcc::int32_t *wsum,
//          const float *bias, float *y, int M, int N, int K) {
//     qcc::GemmParams<qcc::int8_t> p = {x, w, M, N, K};
//     qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::AddBias<>, qcc::StoreF32>
//         epi(qcc::DequantPerTokenPerChannel{xs, 1, xz, 1, ws, wsum},
//             qcc::AddBias<>{bias}, qcc::StoreF32{y, N});
//     qcc::gemm_i8<Cfg>(p, epi);
//   }
//
// Launch (GemmI8Config members, gemm_config.h; the emitter reads them too):
//   blockDim  = (kThreads, 1, 1), kThreads = 32 * (BlockM/WarpM) * (BlockN/WarpN)
//   gridDim   = (ceil(N / BlockN), ceil(M / BlockM), 1)
//   dynamic shared memory kSmemBytes = Stages * (BlockM + BlockN) * (BlockK + 16)
//   (> 48 KiB: set CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
// Requirements: A, B 16-byte aligned, K % 16 == 0 (K tails below BlockK are
// zero-filled), M, N arbitrary (the emitter gives N % 16 == 0).
// Tile constraints: WarpM, WarpN multiples of 16, BlockK multiple of 32.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_GEMM_I8_CUH
#define QCC_KERNELS_GEMM_I8_CUH

#include "qcc/gemm_core.cuh"

namespace qcc {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
template <int BlockM, int BlockN, int BlockK, int WarpM, int WarpN, int Stages,
          class Epilogue>
QCC_DEVICE void gemm_i8_mainloop(const int8_t *A, const int8_t *B, int M,
                                 int N, int K, Epilogue epi) {
  static_assert(Epilogue::kIntInput,
                "gemm_i8: the epilogue must start with an int32 stage "
                "(DequantPerTokenPerChannel or StoreI32)");
  gemm_tc_mainloop<detail::MmaS8, BlockM, BlockN, BlockK, WarpM, WarpN,
                   Stages>(A, B, M, N, K, epi);
}

/// The tile of `Cfg` (a GemmI8Config) over `p`.
template <class Cfg, class Epilogue>
QCC_DEVICE void gemm_i8(const GemmParams<int8_t> &p, Epilogue epi) {
  gemm_i8_mainloop<Cfg::kBlockM, Cfg::kBlockN, Cfg::kBlockK, Cfg::kWarpM,
                   Cfg::kWarpN, Cfg::kStages>(p.A, p.B, p.M, p.N, p.K, epi);
}
#endif

} // namespace qcc

#endif // QCC_KERNELS_GEMM_I8_CUH
