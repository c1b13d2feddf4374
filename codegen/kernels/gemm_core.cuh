//===- gemm_core.cuh - tensor-core GEMM and skinny GEMV mainloops --------===//
//
// The shared body of gemm_i8.cuh and gemm_f16.cuh ("TN" GEMM, the layout of
// qcc.linear / qcc.qlinear):
//
//   C[m, n] = sum_k A[m, k] * B[n, k]      A [M, K] row-major, B [N, K] row-major
//
// Both mma shapes used (m16n8k32 s8, m16n8k16 f16/bf16) consume 32 bytes of K
// per instruction with the same fragment layout in bytes, so one mainloop
// serves both: tiles are staged as bytes, an `Mma` policy names the element
// type, the accumulator type and the instruction.
//
// Mainloop: a CTA computes a BlockM x BlockN tile with (BlockM/WarpM) x
// (BlockN/WarpN) warps, each a WarpM x WarpN tile of 16x8 mma tiles. K is
// walked in BlockK steps through a `Stages`-deep cp.async pipeline in dynamic
// shared memory; each smem row is padded by 16 bytes so that ldmatrix reads
// of 8 rows hit 8 distinct 16-byte bank groups. Out-of-range rows (m >= M,
// n >= N) and the K tail (k >= K, at a 16-byte granularity) are zero-filled
// by cp.async (src-size 0) and contribute exactly 0.
//
// Requirements (the emitter guarantees them or pads):
//   - A, B 16-byte aligned; K * sizeof(element) a multiple of 16 (int8:
//     K % 16 == 0, f16/bf16: K % 8 == 0). M and N are arbitrary (predicated;
//     N % 16 == 0 is what the emitter produces).
//   - launch: grid (ceil(N / BlockN), ceil(M / BlockM)), block kThreads,
//     dynamic shared memory kSmemBytes, members of the Config types of
//     gemm_config.h (above 48 KiB the kernel needs
//     CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES set to kSmemBytes).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_GEMM_CORE_CUH
#define QCC_KERNELS_GEMM_CORE_CUH

#include "qcc/common.cuh"
#include "qcc/epilogue.cuh"
#include "qcc/gemm_config.h"

namespace qcc {
namespace detail {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
/// mma policies: element, accumulator, one 32-byte-K mma.
struct MmaS8 {
  typedef int8_t Element;
  typedef int32_t Acc;
  static constexpr int kElemBytes = 1;
  QCC_DEVICE static void mma(Acc (&d)[4], const uint32_t (&a)[4],
                             const uint32_t (&b)[2]) {
    mma_s8_16832(d, a, b, d);
  }
};
struct MmaF16 {
  typedef __half Element;
  typedef float Acc;
  static constexpr int kElemBytes = 2;
  QCC_DEVICE static void mma(Acc (&d)[4], const uint32_t (&a)[4],
                             const uint32_t (&b)[2]) {
    mma_f16_16816(d, a, b, d);
  }
};
struct MmaBF16 {
  typedef __nv_bfloat16 Element;
  typedef float Acc;
  static constexpr int kElemBytes = 2;
  QCC_DEVICE static void mma(Acc (&d)[4], const uint32_t (&a)[4],
                             const uint32_t (&b)[2]) {
    mma_bf16_16816(d, a, b, d);
  }
};
#endif

} // namespace detail

/// The GEMM family's parameters (CUTLASS Params style): the operands of
/// C = A * B^T. The epilogue chain holds the rest (scales, bias, residual,
/// output). The emitter's extern "C" wrappers take the launch record's
/// parameters one by one and build this.
/// The fields are declared in gemm_config.h (QCC_GEMM_PARAMS).
/// AElement: the activations' storage type, the weights' (Element) but for
/// a decode GEMV of f32 activations against f16 weights (rounded on load).
template <class Element, class AElement = Element> struct GemmParams {
  QCC_GEMM_PARAMS(QCC_PARAMS_MEMBER, QCC_PARAMS_LINE)
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800

/// The tensor-core mainloop. Must be called by all kThreads threads of a 1-D
/// block with kSmemBytes of dynamic shared memory; the CTA computes the tile
/// (blockIdx.y * BlockM, blockIdx.x * BlockN) and hands each in-range element
/// to epi.visit(acc, m, n).
template <class Mma, int BlockM, int BlockN, int BlockK, int WarpM, int WarpN,
          int Stages, class Epilogue>
QCC_DEVICE void gemm_tc_mainloop(const typename Mma::Element *A,
                                 const typename Mma::Element *B, int M, int N,
                                 int K, const Epilogue &epi) {
  typedef GemmTcConfig<Mma::kElemBytes, BlockM, BlockN, BlockK, WarpM, WarpN,
                       Stages>
      Cfg;
  typedef typename Mma::Acc Acc;
  constexpr int kMT = Cfg::kMmaTilesM, kNT = Cfg::kMmaTilesN;
  constexpr int kRow = Cfg::kRowBytes;
  constexpr int kChunksA = BlockM * Cfg::kChunksPerRow;
  constexpr int kChunksB = BlockN * Cfg::kChunksPerRow;

  extern __shared__ __align__(128) unsigned char qcc_gemm_smem[];

  const char *gA = reinterpret_cast<const char *>(A);
  const char *gB = reinterpret_cast<const char *>(B);
  const int KB = K * Mma::kElemBytes; // bytes per row of A and B
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / Cfg::kWarpsN, warp_n = warp % Cfg::kWarpsN;
  const int m0 = blockIdx.y * BlockM, n0 = blockIdx.x * BlockN;
  const int kTiles = ceil_div(KB, Cfg::kBlockKBytes);

  // Issues the cp.async of K tile `kt` into pipeline stage `stage`.
  auto load_tile = [&](int stage, int kt) {
    unsigned char *sA = qcc_gemm_smem + stage * Cfg::kStageBytes;
    unsigned char *sB = sA + BlockM * kRow;
    const int kb0 = kt * Cfg::kBlockKBytes;
#pragma unroll
    for (int i = 0; i < ceil_div(kChunksA, Cfg::kThreads); ++i) {
      int c = tid + i * Cfg::kThreads;
      if (c < kChunksA) {
        int r = c / Cfg::kChunksPerRow, cc = c % Cfg::kChunksPerRow;
        int gm = m0 + r, kb = kb0 + cc * 16;
        bool pred = gm < M && kb < KB;
        const char *src = pred ? gA + static_cast<int64_t>(gm) * KB + kb : gA;
        cp_async_16(sA + r * kRow + cc * 16, src, pred);
      }
    }
#pragma unroll
    for (int i = 0; i < ceil_div(kChunksB, Cfg::kThreads); ++i) {
      int c = tid + i * Cfg::kThreads;
      if (c < kChunksB) {
        int r = c / Cfg::kChunksPerRow, cc = c % Cfg::kChunksPerRow;
        int gn = n0 + r, kb = kb0 + cc * 16;
        bool pred = gn < N && kb < KB;
        const char *src = pred ? gB + static_cast<int64_t>(gn) * KB + kb : gB;
        cp_async_16(sB + r * kRow + cc * 16, src, pred);
      }
    }
  };

  Acc acc[kMT][kNT][4];
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[i][j][e] = Acc(0);

  // Prologue: tiles 0 .. Stages-2 in flight, one commit group each (empty
  // groups past the last tile keep "group kt holds tile kt").
#pragma unroll
  for (int s = 0; s < Stages - 1; ++s) {
    if (s < kTiles)
      load_tile(s, s);
    cp_async_commit();
  }

  // ldmatrix lane -> (row, byte) offsets inside a 16 x 32-byte A slab and a
  // 16 (n) x 32-byte B slab; see the fragment layouts in common.cuh.
  const int a_row = warp_m * WarpM + (lane & 7) + ((lane >> 3) & 1) * 8;
  const int a_col = (lane >> 4) * 16;
  const int b_row = warp_n * WarpN + (lane & 7) + (lane >> 4) * 8;
  const int b_col = ((lane >> 3) & 1) * 16;

  for (int kt = 0; kt < kTiles; ++kt) {
    // Groups committed so far: Stages-1 + kt; tile kt is group kt.
    cp_async_wait<Stages - 2>();
    __syncthreads(); // tile kt visible; every warp is done with tile kt-1
    {
      int nt = kt + Stages - 1; // refill the stage tile kt-1 used
      if (nt < kTiles)
        load_tile(nt % Stages, nt);
      cp_async_commit();
    }
    const unsigned char *sA =
        qcc_gemm_smem + (kt % Stages) * Cfg::kStageBytes;
    const unsigned char *sB = sA + BlockM * kRow;
#pragma unroll
    for (int ks = 0; ks < Cfg::kBlockKBytes / 32; ++ks) {
      uint32_t af[kMT][4], bf[kNT][2];
#pragma unroll
      for (int i = 0; i < kMT; ++i)
        ldmatrix_x4(af[i], sA + (a_row + i * 16) * kRow + ks * 32 + a_col);
#pragma unroll
      for (int j = 0; j < kNT / 2; ++j) {
        uint32_t r[4];
        ldmatrix_x4(r, sB + (b_row + j * 16) * kRow + ks * 32 + b_col);
        bf[2 * j][0] = r[0];
        bf[2 * j][1] = r[1];
        bf[2 * j + 1][0] = r[2];
        bf[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
          Mma::mma(acc[i][j], af[i], bf[j]);
    }
  }
  cp_async_wait<0>();

  // Epilogue: c[0], c[1] at (g, 2t), (g, 2t+1); c[2], c[3] at row g+8.
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        int m = m0 + warp_m * WarpM + i * 16 + g + h * 8;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          int n = n0 + warp_n * WarpN + j * 8 + t * 2 + e;
          if (m < M && n < N)
            epi.visit(acc[i][j][h * 2 + e], m, n);
        }
      }
}

#endif // sm_80+

//===--- skinny M (decode) ------------------------------------------------===//
//
// M <= MaxM rows (decode: a handful of sequences). Each warp computes
// ColsPerWarp output columns for all M rows: lane l reads the 16-byte chunks
// l, l+32, ... of each weight row (streamed, not kept in L1) and of each
// activation row (re-read by every warp, served by L1/L2), accumulates
// 16-byte dot products, and the warp is reduced with shuffles.
//
// Launch: grid ceil(N / (Warps * ColsPerWarp)), block 32 * Warps, no dynamic
// shared memory. Requirements: A, B 16-byte aligned; K * sizeof(element) a
// multiple of 16; M <= MaxM (rows >= M are not computed).

namespace detail {

/// 16 bytes of a weight row, read once: bypass L1.
QCC_DEVICE int4 ld_stream_16(const void *p) {
  int4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

/// 16-byte dot products: int8 with dp4a (exact), f16/bf16 in f32.
struct DotS8 {
  typedef int8_t Element;
  typedef int32_t Acc;
  static constexpr int kElemBytes = 1;
  QCC_DEVICE static Acc dot(int4 a, int4 w, Acc acc) {
    acc = __dp4a(a.x, w.x, acc);
    acc = __dp4a(a.y, w.y, acc);
    acc = __dp4a(a.z, w.z, acc);
    acc = __dp4a(a.w, w.w, acc);
    return acc;
  }
};
struct DotF16 {
  typedef __half Element;
  typedef float Acc;
  static constexpr int kElemBytes = 2;
  QCC_DEVICE static Acc dot2(int a, int w, Acc acc) {
    float2 af = __half22float2(*reinterpret_cast<const __half2 *>(&a));
    float2 wf = __half22float2(*reinterpret_cast<const __half2 *>(&w));
    return fmaf(af.y, wf.y, fmaf(af.x, wf.x, acc));
  }
  QCC_DEVICE static Acc dot(int4 a, int4 w, Acc acc) {
    return dot2(a.w, w.w, dot2(a.z, w.z, dot2(a.y, w.y, dot2(a.x, w.x, acc))));
  }
};
struct DotBF16 {
  typedef __nv_bfloat16 Element;
  typedef float Acc;
  static constexpr int kElemBytes = 2;
  QCC_DEVICE static Acc dot2(int a, int w, Acc acc) {
    float2 af =
        __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&a));
    float2 wf =
        __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&w));
    return fmaf(af.y, wf.y, fmaf(af.x, wf.x, acc));
  }
  QCC_DEVICE static Acc dot(int4 a, int4 w, Acc acc) {
    return dot2(a.w, w.w, dot2(a.z, w.z, dot2(a.y, w.y, dot2(a.x, w.x, acc))));
  }
};

} // namespace detail

/// The end of a skinny-M mainloop: each lane holds partial sums acc[c][m]
/// of output columns n0 + c; the warp reduces them and one lane per element
/// hands it to the epilogue.
template <int ColsPerWarp, int MaxM, class Acc, class Epilogue>
QCC_DEVICE void gemv_reduce_visit(Acc (&acc)[ColsPerWarp][MaxM], int lane,
                                  int M, int N, int n0, const Epilogue &epi) {
  // Butterfly reduction: every lane ends with the same sum.
#pragma unroll
  for (int c = 0; c < ColsPerWarp; ++c)
#pragma unroll
    for (int m = 0; m < MaxM; ++m)
      acc[c][m] = warpSum(acc[c][m]);

#pragma unroll
  for (int c = 0; c < ColsPerWarp; ++c)
#pragma unroll
    for (int m = 0; m < MaxM; ++m)
      if (lane == (c * MaxM + m) % 32 && m < M && n0 + c < N)
        epi.visit(acc[c][m], m, n0 + c);
}

/// KSteps: how many 512-byte K chunks (32 lanes x 16 bytes) of each weight
/// row a lane loads before it uses the first, so that KSteps * ColsPerWarp
/// 16-byte loads per lane are in flight: decode is a stream of weight bytes,
/// and with one chunk at a time a warp waits a full memory latency per 1 KB.
namespace detail {
/// 16 bytes of an activation row in the weights' element type, at byte
/// offset `kb` of such a row: a plain load when the activations are stored
/// so, else converted on load.
template <class Element, class AElement> struct ActivationChunk;
template <class Element> struct ActivationChunk<Element, Element> {
  QCC_DEVICE static int4 load(const Element *row, int kb) {
    return __ldg(reinterpret_cast<const int4 *>(
        reinterpret_cast<const char *>(row) + kb));
  }
};
/// f32 activations against f16 weights: eight floats (32 bytes) rounded to
/// f16 (nearest even), the values the f32 GEMM's cast step
/// (cast_f32_to_f16) writes, so the product is the same bit for bit without
/// that launch. Needs 32-byte aligned rows (K % 8 == 0).
template <> struct ActivationChunk<__half, float> {
  QCC_DEVICE static int4 load(const float *row, int kb) {
    const float4 *p = reinterpret_cast<const float4 *>(row + kb / 2);
    const float4 a = __ldg(p), b = __ldg(p + 1);
    __half2 h[4] = {__floats2half2_rn(a.x, a.y), __floats2half2_rn(a.z, a.w),
                    __floats2half2_rn(b.x, b.y), __floats2half2_rn(b.z, b.w)};
    return *reinterpret_cast<const int4 *>(h);
  }
};
} // namespace detail

/// A decode GEMV block's weight rows (Cfg::kBlockN of [N, K] from column
/// block `block`'s first column), asked of L2 by one thread of row chunk 0:
/// under programmatic dependent launch this runs while the kernel before is
/// still streaming its own weights, so this one starts from L2 (weights
/// only: nothing in the step writes them).
template <class Cfg, class Element>
QCC_DEVICE void gemv_prefetch_weights(const Element *B, int N, int K, int block) {
  if (threadIdx.x != 0 || blockIdx.y != 0)
    return;
  const int n0 = block * Cfg::kBlockN;
  const int rows = N - n0 < Cfg::kBlockN ? N - n0 : Cfg::kBlockN;
  if (rows <= 0)
    return;
  // K * sizeof(Element) is a multiple of 16 (the GEMV's own requirement).
  const char *p = reinterpret_cast<const char *>(B + static_cast<int64_t>(n0) * K);
  prefetch_l2_bulk(p, static_cast<uint32_t>(rows) * K * sizeof(Element));
}
/// The block's own column block (blockIdx.x).
template <class Cfg, class Element>
QCC_DEVICE void gemv_prefetch_weights(const Element *B, int N, int K) {
  gemv_prefetch_weights<Cfg>(B, N, K, (int)blockIdx.x);
}

template <class Dot, int MaxM, int Warps, int ColsPerWarp, int KSteps,
          class Epilogue, class AElement = typename Dot::Element>
QCC_DEVICE void gemv_mainloop(const AElement *A,
                              const typename Dot::Element *B, int M, int N,
                              int K, const Epilogue &epi, int block) {
  static_assert(KSteps >= 1, "");
  typedef typename Dot::Acc Acc;
  typedef detail::ActivationChunk<typename Dot::Element, AElement> Chunk;
  const char *gB = reinterpret_cast<const char *>(B);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n0 = (block * Warps + warp) * ColsPerWarp;
  const int KB = K * Dot::kElemBytes;
  constexpr int kChunk = 32 * 16;

  Acc acc[ColsPerWarp][MaxM];
#pragma unroll
  for (int c = 0; c < ColsPerWarp; ++c)
#pragma unroll
    for (int m = 0; m < MaxM; ++m)
      acc[c][m] = Acc(0);

  for (int kb0 = lane * 16; kb0 < KB; kb0 += KSteps * kChunk) {
    int4 w[KSteps][ColsPerWarp];
#pragma unroll
    for (int s = 0; s < KSteps; ++s)
#pragma unroll
      for (int c = 0; c < ColsPerWarp; ++c)
        w[s][c] = n0 + c < N && kb0 + s * kChunk < KB
                      ? detail::ld_stream_16(gB + static_cast<int64_t>(n0 + c) * KB +
                                             kb0 + s * kChunk)
                      : make_int4(0, 0, 0, 0);
#pragma unroll
    for (int s = 0; s < KSteps; ++s) {
      const int kb = kb0 + s * kChunk;
      if (kb >= KB) // past K: the activation row is not there to read
        break;
#pragma unroll
      for (int m = 0; m < MaxM; ++m)
        if (m < M) {
          int4 a = Chunk::load(A + static_cast<int64_t>(m) * K, kb);
#pragma unroll
          for (int c = 0; c < ColsPerWarp; ++c)
            acc[c][m] = Dot::dot(a, w[s][c], acc[c][m]);
        }
    }
  }

  gemv_reduce_visit<ColsPerWarp, MaxM>(acc, lane, M, N, n0, epi);
}
/// Column block blockIdx.x. A grouped GEMV (several weights over one input
/// in one launch: q, k and v) gives each member its own range of blocks and
/// passes the block index within it.
template <class Dot, int MaxM, int Warps, int ColsPerWarp, int KSteps,
          class Epilogue, class AElement = typename Dot::Element>
QCC_DEVICE void gemv_mainloop(const AElement *A,
                              const typename Dot::Element *B, int M, int N,
                              int K, const Epilogue &epi) {
  gemv_mainloop<Dot, MaxM, Warps, ColsPerWarp, KSteps, Epilogue, AElement>(
      A, B, M, N, K, epi, (int)blockIdx.x);
}

} // namespace qcc

#endif // QCC_KERNELS_GEMM_CORE_CUH
