//===- gemm_sp.cuh - 2:4 sparse tensor-core GEMM and GEMV, sm_80+ --------===//
//
// The linear / qlinear of a 2:4 sparse weight (kinds gemm_i8_sp,
// gemm_f16_sp), read straight from the compressed form of format/Sparse24.h:
//
//   acc[m, n] = sum_k x[m, k] * W[n, k]      W = qcc.sparse_2_4(values, meta)
//   x [M, K] row-major; values [N, K/2] (two kept elements of every four k,
//   ascending); meta i32 [N, K/32] (a nibble per group of four k).
//
// int8: exact int32 accumulation (bit for bit the dense GEMM on the pruned
// weight), mma.sp::ordered_metadata m16n8k64 s8.s8.s32; f16: f32
// accumulation, m16n8k32 f16.f16.f32. The weight is the sparse operand A
// (16 weight rows per instruction: y^T = W x^T), x the dense operand B (8
// tokens). The accumulator goes to the same epilogue chain as the dense
// GEMMs (epilogue.cuh), with (m = token, n = weight row) as there:
//
//   typedef qcc::GemmSpI8Config<64, 64, 128, 32, 32, 4> Cfg;
//   extern "C" __global__ void __launch_bounds__(Cfg::kThreads)
//   qcc_k7(const qcc::int8_t *x, const qcc::int8_t *wv,
//          const qcc::int32_t *wmeta, const float *xs, ..., int M, int N,
//          int K) {
//     qcc::GemmSpParams<qcc::int8_t> p = {x, wv, wmeta, M, N, K};
//     qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::StoreF32> epi(...);
//     qcc::gemm_i8_sp<Cfg>(p, epi);
//   }
//
// Mainloop (gemm_sp_mainloop): as gemm_core.cuh's, a CTA computes a BlockM
// (tokens) x BlockN (weight rows) tile with a Stages-deep cp.async pipeline;
// one stage holds BlockM rows of x, BlockN rows of values (BlockK / 2) and
// BlockN rows of metadata (BlockK / 32 words: one 16-byte cp.async). Values
// and x rows are padded by 16 bytes for conflict-free ldmatrix. Per mma.sp:
// the values fragment is a dense 16 x 32-byte A fragment (ldmatrix_x4, as in
// gemm_core), x two 8 x 32-byte B fragments (k 0-31 and 32-63 in bytes), and
// the metadata register is built from the row-major words by
// sparse_fragment.h (which documents the lane mapping and which
// test/unit/SparseFragmentTest.cpp checks on the CPU). Rows past M or N and
// the K tail are zero-filled (metadata too: replaced by a valid pattern), so
// K % 32 == 0 (the layout's own rule) is all the GEMM needs; the int8
// m16n8k64 step over a K that is an odd multiple of 32 reads a zero half.
//
// Launch (GemmSpConfig members, gemm_config.h): blockDim kThreads,
// gridDim (ceil(N / BlockN), ceil(M / BlockM)), dynamic shared memory
// kSmemBytes (> 48 KiB: CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
// Requirements: x, values, meta 16-byte aligned; K % 32 == 0.
//
// Skinny M (decode, M <= MaxM): gemv_i8_sp / gemv_f16_sp (GemvSpConfig):
// a warp computes ColsPerWarp weight rows for all M tokens; a lane takes 32
// k at a time: one metadata word, 16 values (one or two 16-byte loads) and
// 32 x elements, picks the x elements the kept values multiply with byte
// permutes (sparse_fragment.h) and accumulates with dp4a (int8, exact) or
// f32 FMAs (f16). It reads 20 of every 32 weight bytes of the dense int8
// GEMV (5/8), 36 of 64 for f16. Launch as gemv_i8.cuh's; K % 32 == 0.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_GEMM_SP_CUH
#define QCC_KERNELS_GEMM_SP_CUH

#include "qcc/gemm_core.cuh"
#include "qcc/gemm_f16.cuh" // cast_f32_to_f16: f32 linears run as f16 GEMMs
#include "qcc/sparse_fragment.h"

namespace qcc {

/// The sparse GEMM family's parameters: the operands of
/// C = x * sparse_2_4(values, meta)^T. The epilogue chain holds the rest.
/// The fields are declared in gemm_config.h (QCC_GEMM_SP_PARAMS).
template <class Element> struct GemmSpParams {
  QCC_GEMM_SP_PARAMS(QCC_PARAMS_MEMBER, QCC_PARAMS_LINE)
};

namespace detail {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
/// mma.sp policies: element, accumulator, one instruction (values fragment
/// a, x fragment b: k 0-31 bytes in b[0..1], 32-63 in b[2..3]).
struct MmaSpS8 {
  typedef int8_t Element;
  typedef int32_t Acc;
  static constexpr int kElemBytes = 1;
  QCC_DEVICE static void mma(Acc (&d)[4], const uint32_t (&a)[4],
                             const uint32_t (&b)[4], uint32_t e) {
    asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col."
                 "s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0x0;\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                   "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
  }
};
struct MmaSpF16 {
  typedef __half Element;
  typedef float Acc;
  static constexpr int kElemBytes = 2;
  QCC_DEVICE static void mma(Acc (&d)[4], const uint32_t (&a)[4],
                             const uint32_t (&b)[4], uint32_t e) {
    asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col."
                 "f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0x0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                   "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
  }
};
#endif

} // namespace detail

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800

/// The sparse tensor-core mainloop for `Cfg` (a GemmSpConfig). Called by all
/// kThreads threads with kSmemBytes of dynamic shared memory; hands each
/// in-range element to epi.visit(acc, m, n).
template <class Mma, class Cfg, class Epilogue>
QCC_DEVICE void gemm_sp_mainloop(const GemmSpParams<typename Mma::Element> &p,
                                 const Epilogue &epi) {
  static_assert(Cfg::kElemBytes == Mma::kElemBytes, "config / mma mismatch");
  typedef typename Mma::Acc Acc;
  constexpr int BlockM = Cfg::kBlockM, BlockN = Cfg::kBlockN;
  constexpr int kNT = Cfg::kMmaTilesN, kMT = Cfg::kMmaTilesM;
  constexpr int kXRow = Cfg::kXRowBytes, kVRow = Cfg::kValuesRowBytes;
  constexpr int kERow = Cfg::kMetaRowBytes;
  constexpr int kXChunks = Cfg::kBlockK * Cfg::kElemBytes / 16;     // per row
  constexpr int kVChunks = Cfg::kBlockK / 2 * Cfg::kElemBytes / 16; // per row
  constexpr int kEChunks = kERow / 16;                              // per row
  constexpr int kSteps = Cfg::kBlockK / Cfg::kMmaK;

  extern __shared__ __align__(128) unsigned char qcc_gemm_smem[];

  const char *gX = reinterpret_cast<const char *>(p.x);
  const char *gV = reinterpret_cast<const char *>(p.values);
  const char *gE = reinterpret_cast<const char *>(p.meta);
  const int M = p.M, N = p.N, K = p.K;
  const int XB = K * Cfg::kElemBytes;     // bytes per x row
  const int VB = K / 2 * Cfg::kElemBytes; // bytes per values row
  const int EB = K / 8;                   // bytes per metadata row
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / Cfg::kWarpsN, warp_n = warp % Cfg::kWarpsN;
  const int m0 = blockIdx.y * BlockM, n0 = blockIdx.x * BlockN;
  const int kTiles = ceil_div(K, Cfg::kBlockK);

  // cp.async of `rows` rows of `chunks` 16-byte chunks (from byte `b0` of
  // each global row of `rowBytes` bytes; row r at `pitch` in shared memory).
  // Rows at or past `rowEnd` and bytes past a row's end are zero-filled.
  // Only metadata rows end inside a chunk (K % 32 == 0 alone).
  auto load_rows = [&](unsigned char *dst, int pitch, int chunks, int rows,
                       int rowEnd, const char *src, int rowBytes, int b0) {
    for (int c = tid; c < rows * chunks; c += Cfg::kThreads) {
      int r = c / chunks, b = b0 + c % chunks * 16;
      int bytes = r < rowEnd ? imax(0, imin(16, rowBytes - b)) : 0;
      cp_async_16_partial(dst + r * pitch + (c % chunks) * 16,
                          bytes ? src + static_cast<int64_t>(r) * rowBytes + b
                                : src,
                          bytes);
    }
  };
  // Stage layout: x rows, then values rows, then metadata rows.
  auto load_tile = [&](int stage, int kt) {
    unsigned char *sX = qcc_gemm_smem + stage * Cfg::kStageBytes;
    unsigned char *sV = sX + BlockM * kXRow;
    unsigned char *sE = sV + BlockN * kVRow;
    const int xb0 = kt * Cfg::kBlockK * Cfg::kElemBytes;
    load_rows(sX, kXRow, kXChunks, BlockM, M - m0,
              gX + static_cast<int64_t>(m0) * XB, XB, xb0);
    load_rows(sV, kVRow, kVChunks, BlockN, N - n0,
              gV + static_cast<int64_t>(n0) * VB, VB, xb0 / 2);
    load_rows(sE, kERow, kEChunks, BlockN, N - n0,
              gE + static_cast<int64_t>(n0) * EB, EB, kt * kERow);
  };

  Acc acc[kNT][kMT][4];
#pragma unroll
  for (int i = 0; i < kNT; ++i)
#pragma unroll
    for (int j = 0; j < kMT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[i][j][e] = Acc(0);

#pragma unroll
  for (int s = 0; s < Cfg::kStages - 1; ++s) {
    if (s < kTiles)
      load_tile(s, s);
    cp_async_commit();
  }

  // ldmatrix lane offsets, as gemm_core.cuh's: values as the A operand
  // (16 rows x 32 bytes), x as the B operand (16 tokens x 32 bytes).
  const int a_row = warp_n * Cfg::kWarpN + (lane & 7) + ((lane >> 3) & 1) * 8;
  const int a_col = (lane >> 4) * 16;
  const int b_row = warp_m * Cfg::kWarpM + (lane & 7) + (lane >> 4) * 8;
  const int b_col = ((lane >> 3) & 1) * 16;
  // Metadata: rows g and g+8 of each 16-row tile.
  const int g = lane >> 2;
  const int e_row = warp_n * Cfg::kWarpN + g;

  for (int kt = 0; kt < kTiles; ++kt) {
    cp_async_wait<Cfg::kStages - 2>();
    __syncthreads();
    {
      int nt = kt + Cfg::kStages - 1;
      if (nt < kTiles)
        load_tile(nt % Cfg::kStages, nt);
      cp_async_commit();
    }
    const unsigned char *sX =
        qcc_gemm_smem + (kt % Cfg::kStages) * Cfg::kStageBytes;
    const unsigned char *sV = sX + BlockM * kXRow;
    const unsigned char *sE = sV + BlockN * kVRow;
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      uint32_t af[kNT][4], bf[kMT][4], ef[kNT];
#pragma unroll
      for (int i = 0; i < kNT; ++i) {
        ldmatrix_x4(af[i], sV + (a_row + i * 16) * kVRow + ks * 32 + a_col);
        const uint32_t *rowG = reinterpret_cast<const uint32_t *>(
            sE + (e_row + i * 16) * kERow);
        const uint32_t *rowG8 = reinterpret_cast<const uint32_t *>(
            sE + (e_row + i * 16 + 8) * kERow);
        ef[i] = sparse_fragment::metaRegister<Cfg::kMetaWordsPerMma>(
            rowG, rowG8, ks, lane);
      }
#pragma unroll
      for (int j = 0; j < kMT / 2; ++j) {
        uint32_t lo[4], hi[4];
        const unsigned char *row = sX + (b_row + j * 16) * kXRow + ks * 64;
        ldmatrix_x4(lo, row + b_col);
        ldmatrix_x4(hi, row + 32 + b_col);
        bf[2 * j][0] = lo[0];
        bf[2 * j][1] = lo[1];
        bf[2 * j][2] = hi[0];
        bf[2 * j][3] = hi[1];
        bf[2 * j + 1][0] = lo[2];
        bf[2 * j + 1][1] = lo[3];
        bf[2 * j + 1][2] = hi[2];
        bf[2 * j + 1][3] = hi[3];
      }
#pragma unroll
      for (int i = 0; i < kNT; ++i)
#pragma unroll
        for (int j = 0; j < kMT; ++j)
          Mma::mma(acc[i][j], af[i], bf[j], ef[i]);
    }
  }
  cp_async_wait<0>();

  // c[0], c[1]: weight row g, tokens 2t, 2t+1; c[2], c[3]: weight row g+8.
  const int t = lane & 3;
#pragma unroll
  for (int i = 0; i < kNT; ++i)
#pragma unroll
    for (int j = 0; j < kMT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        int n = n0 + warp_n * Cfg::kWarpN + i * 16 + g + h * 8;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          int m = m0 + warp_m * Cfg::kWarpM + j * 8 + t * 2 + e;
          if (m < M && n < N)
            epi.visit(acc[i][j][h * 2 + e], m, n);
        }
      }
}

/// int8: the tile of `Cfg` (a GemmSpI8Config) over `p`.
template <class Cfg, class Epilogue>
QCC_DEVICE void gemm_i8_sp(const GemmSpParams<int8_t> &p, Epilogue epi) {
  static_assert(Epilogue::kIntInput,
                "gemm_i8_sp: the epilogue must start with an int32 stage "
                "(DequantPerTokenPerChannel or StoreI32)");
  gemm_sp_mainloop<detail::MmaSpS8, Cfg>(p, epi);
}

/// f16: the tile of `Cfg` (a GemmSpF16Config) over `p`.
template <class Cfg, class Epilogue>
QCC_DEVICE void gemm_f16_sp(const GemmSpParams<__half> &p, Epilogue epi) {
  static_assert(!Epilogue::kIntInput,
                "gemm_f16_sp: the epilogue takes the f32 accumulator");
  gemm_sp_mainloop<detail::MmaSpF16, Cfg>(p, epi);
}

#endif // sm_80+

//===--- skinny M (decode) ------------------------------------------------===//

namespace detail {

/// 32 k of one weight row against one x row: values `v` (s8: 4 words; f16:
/// 8), metadata word `meta`, x words `x` (s8: 8; f16: 16).
struct SpDotS8 {
  typedef int8_t Element;
  typedef int32_t Acc;
  static constexpr int kValueWords = 4, kXWords = 8;
  QCC_DEVICE static Acc dot(const uint32_t *v, uint32_t meta,
                            const uint32_t *x, Acc acc) {
#pragma unroll
    for (int q = 0; q < 4; ++q)
      acc = __dp4a((int)v[q], (int)sparse_fragment::s8PickX(x, meta, q), acc);
    return acc;
  }
};
struct SpDotF16 {
  typedef __half Element;
  typedef float Acc;
  static constexpr int kValueWords = 8, kXWords = 16;
  QCC_DEVICE static Acc dot(const uint32_t *v, uint32_t meta,
                            const uint32_t *x, Acc acc) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      acc = DotF16::dot2((int)sparse_fragment::f16PickX(x, meta, j), (int)v[j],
                         acc);
    return acc;
  }
};

/// `Words` 32-bit words from 16-byte aligned global memory.
template <int Words, bool Stream>
QCC_DEVICE void load_words(uint32_t *dst, const char *src) {
#pragma unroll
  for (int i = 0; i < Words / 4; ++i) {
    int4 v = Stream ? ld_stream_16(src + 16 * i)
                    : __ldg(reinterpret_cast<const int4 *>(src) + i);
    dst[4 * i] = v.x;
    dst[4 * i + 1] = v.y;
    dst[4 * i + 2] = v.z;
    dst[4 * i + 3] = v.w;
  }
}

} // namespace detail

template <class Dot, class Cfg, class Epilogue>
QCC_DEVICE void gemv_sp_mainloop(const GemmSpParams<typename Dot::Element> &p,
                                 const Epilogue &epi) {
  typedef typename Dot::Acc Acc;
  constexpr int MaxM = Cfg::kMaxM, Cols = Cfg::kColsPerWarp;
  constexpr int kEB = sizeof(typename Dot::Element);
  const char *gX = reinterpret_cast<const char *>(p.x);
  const char *gV = reinterpret_cast<const char *>(p.values);
  const int M = p.M, N = p.N, K = p.K;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n0 = (blockIdx.x * Cfg::kWarps + warp) * Cols;
  const int words = K / 32; // metadata words per row

  Acc acc[Cols][MaxM];
#pragma unroll
  for (int c = 0; c < Cols; ++c)
#pragma unroll
    for (int m = 0; m < MaxM; ++m)
      acc[c][m] = Acc(0);

  for (int w = lane; w < words; w += 32) {
    uint32_t v[Cols][Dot::kValueWords], e[Cols];
#pragma unroll
    for (int c = 0; c < Cols; ++c) {
      if (n0 + c < N) {
        const int64_t row = static_cast<int64_t>(n0 + c);
        detail::load_words<Dot::kValueWords, true>(
            v[c], gV + (row * (K / 2) + w * 16) * kEB);
        e[c] = (uint32_t)__ldg(p.meta + row * words + w);
      } else {
#pragma unroll
        for (int i = 0; i < Dot::kValueWords; ++i)
          v[c][i] = 0;
        e[c] = sparse_fragment::kZeroFillMeta;
      }
    }
#pragma unroll
    for (int m = 0; m < MaxM; ++m)
      if (m < M) {
        uint32_t x[Dot::kXWords];
        detail::load_words<Dot::kXWords, false>(
            x, gX + (static_cast<int64_t>(m) * K + w * 32) * kEB);
#pragma unroll
        for (int c = 0; c < Cols; ++c)
          acc[c][m] = Dot::dot(v[c], e[c], x, acc[c][m]);
      }
  }

  gemv_reduce_visit<Cols, MaxM>(acc, lane, M, N, n0, epi);
}

/// int8, `Cfg` a GemvSpI8Config (p.M <= Cfg::kMaxM).
template <class Cfg, class Epilogue>
QCC_DEVICE void gemv_i8_sp(const GemmSpParams<int8_t> &p, Epilogue epi) {
  static_assert(Epilogue::kIntInput,
                "gemv_i8_sp: the epilogue must start with an int32 stage "
                "(DequantPerTokenPerChannel or StoreI32)");
  gemv_sp_mainloop<detail::SpDotS8, Cfg>(p, epi);
}

/// f16, `Cfg` a GemvSpF16Config (p.M <= Cfg::kMaxM).
template <class Cfg, class Epilogue>
QCC_DEVICE void gemv_f16_sp(const GemmSpParams<__half> &p, Epilogue epi) {
  static_assert(!Epilogue::kIntInput,
                "gemv_f16_sp: the epilogue takes the f32 accumulator");
  gemv_sp_mainloop<detail::SpDotF16, Cfg>(p, epi);
}

} // namespace qcc

#endif // QCC_KERNELS_GEMM_SP_CUH
