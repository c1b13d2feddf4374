//===- gemm_f16.cuh - f16 / bf16 tensor-core GEMM (qcc.linear), sm_80+ ---===//
//
//   acc[m, n] = sum_k A[m, k] * B[n, k]     f32 accumulation
//   A: activations [M, K] row-major; B: weights [N, K] row-major;
//   mma.sync m16n8k16 f16.f16.f32 (bf16: .bf16.bf16.f32).
//
// Same structure, tile parameters and epilogue chain as gemm_i8.cuh, minus
// the dequant stage: the chain takes the f32 accumulator, e.g.
//   qcc::Chain<qcc::AddBias<>, qcc::Silu, qcc::StoreF16>
//
// Launch (GemmF16Config members, gemm_config.h):
//   blockDim  = (kThreads, 1, 1), kThreads = 32 * (BlockM/WarpM) * (BlockN/WarpN)
//   gridDim   = (ceil(N / BlockN), ceil(M / BlockM), 1)
//   dynamic shared memory kSmemBytes = Stages * (BlockM + BlockN) * (2 * BlockK + 16)
// Requirements: A, B 16-byte aligned, K % 8 == 0, M, N arbitrary.
// Tile constraints: WarpM, WarpN multiples of 16, BlockK multiple of 16.
//
// Skinny M (decode, M <= MaxM): gemv_f16 / gemv_bf16, f32 accumulation
// (gemv_f16 also over f32 activations, rounded to f16 as it loads them);
//   blockDim = (32 * Warps), gridDim = (ceil(N / (Warps * ColsPerWarp))),
//   no dynamic shared memory; K % 8 == 0.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_GEMM_F16_CUH
#define QCC_KERNELS_GEMM_F16_CUH

#include "qcc/gemm_core.cuh"

namespace qcc {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
template <int BlockM, int BlockN, int BlockK, int WarpM, int WarpN, int Stages,
          class Epilogue>
QCC_DEVICE void gemm_f16_mainloop(const __half *A, const __half *B, int M,
                                  int N, int K, Epilogue epi) {
  static_assert(!Epilogue::kIntInput,
                "gemm_f16: the epilogue takes the f32 accumulator");
  gemm_tc_mainloop<detail::MmaF16, BlockM, BlockN, BlockK, WarpM, WarpN,
                   Stages>(A, B, M, N, K, epi);
}

/// The tile of `Cfg` (a GemmF16Config) over `p`.
template <class Cfg, class Epilogue>
QCC_DEVICE void gemm_f16(const GemmParams<__half> &p, Epilogue epi) {
  gemm_f16_mainloop<Cfg::kBlockM, Cfg::kBlockN, Cfg::kBlockK, Cfg::kWarpM,
                    Cfg::kWarpN, Cfg::kStages>(p.A, p.B, p.M, p.N, p.K, epi);
}

template <int BlockM, int BlockN, int BlockK, int WarpM, int WarpN, int Stages,
          class Epilogue>
QCC_DEVICE void gemm_bf16_mainloop(const __nv_bfloat16 *A,
                                   const __nv_bfloat16 *B, int M, int N, int K,
                                   Epilogue epi) {
  static_assert(!Epilogue::kIntInput,
                "gemm_bf16: the epilogue takes the f32 accumulator");
  gemm_tc_mainloop<detail::MmaBF16, BlockM, BlockN, BlockK, WarpM, WarpN,
                   Stages>(A, B, M, N, K, epi);
}
#endif

/// A: f16 activations, or f32 ones rounded to f16 as they are loaded (the
/// f32 GEMM's decode GEMV, without a cast launch); column block `block`
/// (blockIdx.x, or a grouped GEMV member's block index within its range).
template <int MaxM, int Warps, int ColsPerWarp, int KSteps = 1, class Epilogue,
          class AElement>
QCC_DEVICE void gemv_f16(const AElement *A, const __half *B, int M, int N,
                         int K, Epilogue epi, int block) {
  static_assert(!Epilogue::kIntInput,
                "gemv_f16: the epilogue takes the f32 accumulator");
  gemv_mainloop<detail::DotF16, MaxM, Warps, ColsPerWarp, KSteps, Epilogue,
                AElement>(A, B, M, N, K, epi, block);
}
template <int MaxM, int Warps, int ColsPerWarp, int KSteps = 1, class Epilogue,
          class AElement>
QCC_DEVICE void gemv_f16(const AElement *A, const __half *B, int M, int N,
                         int K, Epilogue epi) {
  gemv_f16<MaxM, Warps, ColsPerWarp, KSteps>(A, B, M, N, K, epi,
                                             (int)blockIdx.x);
}

/// `Cfg` (a GemvF16Config) over `p` (p.M <= Cfg::kMaxM), column block
/// `block`, or blockIdx.x.
template <class Cfg, class Epilogue, class AElement>
QCC_DEVICE void gemv_f16(const GemmParams<__half, AElement> &p, Epilogue epi,
                         int block) {
  gemv_f16<Cfg::kMaxM, Cfg::kWarps, Cfg::kColsPerWarp, Cfg::kKSteps>(
      p.A, p.B, p.M, p.N, p.K, epi, block);
}
template <class Cfg, class Epilogue, class AElement>
QCC_DEVICE void gemv_f16(const GemmParams<__half, AElement> &p, Epilogue epi) {
  gemv_f16<Cfg>(p, epi, (int)blockIdx.x);
}

/// The f32 GEMM's first step, x (f32) -> x16 (f16, round to nearest even):
/// one element per thread of a CastF32ToF16Config launch.
/// The fields are declared in gemm_config.h (QCC_CAST_F32_TO_F16_PARAMS).
struct CastF32ToF16Params {
  QCC_CAST_F32_TO_F16_PARAMS(QCC_PARAMS_MEMBER, QCC_PARAMS_LINE)
};
template <class Cfg>
QCC_DEVICE void cast_f32_to_f16(const CastF32ToF16Params &p) {
  const long long i = (long long)blockIdx.x * Cfg::kThreads + threadIdx.x;
  if (i < p.n)
    p.x16[i] = __float2half_rn(p.x[i]);
}

template <int MaxM, int Warps, int ColsPerWarp, int KSteps = 1, class Epilogue>
QCC_DEVICE void gemv_bf16(const __nv_bfloat16 *A, const __nv_bfloat16 *B,
                          int M, int N, int K, Epilogue epi) {
  static_assert(!Epilogue::kIntInput,
                "gemv_bf16: the epilogue takes the f32 accumulator");
  gemv_mainloop<detail::DotBF16, MaxM, Warps, ColsPerWarp, KSteps>(A, B, M, N,
                                                                    K, epi);
}

} // namespace qcc

#endif // QCC_KERNELS_GEMM_F16_CUH
