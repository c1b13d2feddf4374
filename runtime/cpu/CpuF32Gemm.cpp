//===- CpuF32Gemm.cpp - packed float32 GEMM, AVX-512F ---------------------===//
//
// See CpuF32Gemm.h for the layout and why it exists.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuF32Gemm.h"
#include "runtime/cpu/CpuChunkPool.h"
#include "runtime/cpu/CpuKernels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <omp.h>
#include <stdexcept>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "runtime/cpu/X86Intrinsics.h"
#define QCC_HAVE_F32_KERNEL 1
#define QCC_AVX512F_TARGET __attribute__((target("avx512f")))
#define QCC_AVX512BF16_TARGET __attribute__((target("avx512f,avx512bf16")))
#endif

using namespace qcc::rt;

namespace {

constexpr int64_t kCols = PackedF32Weight::kCols;
/// At most this much K per slice, in equal slices: a slice's partial sums
/// go through C. Measured on SmolLM2's prefill GEMMs (K = 576 and 1,536),
/// weights from memory: 384 (the rows' slice in L1) lost 5-10% at 512 rows
/// to 1,024 (none for K = 576, two of 768 for K = 1,536).
constexpr int64_t kMaxSliceK = 1024;

/// One tile: MR rows of x from `x` (row stride lda), kLen k from k0 on, NB
/// column blocks from `w` (block b's 16 values of k at w + b * blockStride +
/// k * kStride, already offset to k0), into C (row stride ldc) for the
/// first `cols` columns; goes on from C unless `first`. `prefetch`, when set, is
/// the same slice of the next strip, pulled into L2 while this tile
/// computes (measured: 240 to 270 GFLOP/s on SmolLM2's prefill GEMMs, whose
/// weights come from memory).
/// T: float (f32 weights), or uint32_t (bf16 pairs: k counts pairs, each
/// element two bf16 of consecutive k, the lower one in the low half).
template <typename T> struct Tile {
  const T *x;
  int64_t lda;
  const T *w;
  int64_t blockStride, kStride, kLen;
  float *c;
  int64_t ldc, cols;
  bool first;
  const T *prefetch;
};

#ifdef QCC_HAVE_F32_KERNEL
/// A tile's sums start at zero, or (a later K slice) at C's partial sums.
template <int MR, int NB, typename T>
QCC_AVX512F_TARGET __attribute__((always_inline)) inline void
loadSums(const Tile<T> &t, __m512 (&acc)[MR][NB]) {
  for (int m = 0; m < MR; ++m)
    for (int b = 0; b < NB; ++b) {
      int64_t left = t.cols - b * kCols;
      acc[m][b] = t.first || left <= 0
                      ? _mm512_setzero_ps()
                      : _mm512_maskz_loadu_ps(firstLanes(left),
                                              t.c + m * t.ldc + b * kCols);
    }
}

/// The tile's sums into C, its first `cols` columns.
template <int MR, int NB, typename T>
QCC_AVX512F_TARGET __attribute__((always_inline)) inline void
storeSums(const Tile<T> &t, __m512 (&acc)[MR][NB]) {
  for (int b = 0; b < NB; ++b) {
    int64_t left = t.cols - b * kCols;
    if (left <= 0)
      break;
    __mmask16 mask = firstLanes(left);
    for (int m = 0; m < MR; ++m)
      _mm512_mask_storeu_ps(t.c + m * t.ldc + b * kCols, mask, acc[m][b]);
  }
}

template <int MR, int NB>
QCC_AVX512F_TARGET void tileAvx512(const Tile<float> &t) {
  // A later slice goes on from C's partial sums, so that every element is
  // one FMA chain over k whatever the slicing (a sum's bits then depend on
  // K only, not on how K was cut: attention's P V, whose K is the keys a
  // task sees, stays batch-invariant).
  __m512 acc[MR][NB];
  loadSums(t, acc);
  for (int64_t k = 0; k < t.kLen; ++k) {
    __m512 w[NB];
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      w[b] = _mm512_loadu_ps(t.w + b * t.blockStride + k * t.kStride);
      if (t.prefetch)
        _mm_prefetch((const char *)(t.prefetch + b * t.blockStride +
                                    k * t.kStride),
                     _MM_HINT_T1);
    }
    // Unrolled so that the accumulators live in registers (-O2 kept them
    // on the stack: 60 against 165 GFLOP/s on one core).
#pragma GCC unroll 12
    for (int m = 0; m < MR; ++m) {
      __m512 xb = _mm512_set1_ps(t.x[m * t.lda + k]);
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b)
        acc[m][b] = _mm512_fmadd_ps(xb, w[b], acc[m][b]);
    }
  }
  storeSums(t, acc);
}

/// The bf16 tile: the f32 tile's loop over k pairs, `vdpbf16ps` adding
/// both products of a pair to the f32 accumulator (exact products; each
/// addition rounded to nearest even; subnormals flushed: Intel's and AMD's
/// definition of the instruction).
template <int MR, int NB>
QCC_AVX512BF16_TARGET void tileBf16(const Tile<uint32_t> &t) {
  __m512 acc[MR][NB];
  loadSums(t, acc);
  for (int64_t k = 0; k < t.kLen; ++k) {
    __m512i w[NB];
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      w[b] = _mm512_loadu_si512(t.w + b * t.blockStride + k * t.kStride);
      if (t.prefetch)
        _mm_prefetch((const char *)(t.prefetch + b * t.blockStride +
                                    k * t.kStride),
                     _MM_HINT_T1);
    }
#pragma GCC unroll 12
    for (int m = 0; m < MR; ++m) {
      __m512i xb = _mm512_set1_epi32((int)t.x[m * t.lda + k]);
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b)
        acc[m][b] = _mm512_dpbf16_ps(acc[m][b], (__m512bh)xb, (__m512bh)w[b]);
    }
  }
  storeSums(t, acc);
}

/// The tiles of one element type: f32 or bf16 pairs.
struct F32Tiles {
  using Elem = float;
  template <int MR, int NB> static void run(const Tile<float> &t) {
    tileAvx512<MR, NB>(t);
  }
};
struct Bf16Tiles {
  using Elem = uint32_t;
  template <int MR, int NB> static void run(const Tile<uint32_t> &t) {
    tileBf16<MR, NB>(t);
  }
};

/// The tile shapes: (rows, blocks) with rows x blocks <= 24 accumulators.
template <class Tiles, int NB>
auto tileFor(int mr) -> void (*)(const Tile<typename Tiles::Elem> &) {
  if constexpr (NB == 4) {
    switch (mr) {
    case 1: return Tiles::template run<1, 4>;
    case 2: return Tiles::template run<2, 4>;
    case 3: return Tiles::template run<3, 4>;
    default: return Tiles::template run<4, 4>;
    }
  } else {
    switch (mr) {
    case 1: return Tiles::template run<1, NB>;
    case 2: return Tiles::template run<2, NB>;
    case 3: return Tiles::template run<3, NB>;
    case 4: return Tiles::template run<4, NB>;
    case 5: return Tiles::template run<5, NB>;
    case 6: return Tiles::template run<6, NB>;
    case 7: return Tiles::template run<7, NB>;
    case 8: return Tiles::template run<8, NB>;
    case 9: return Tiles::template run<9, NB>;
    case 10: return Tiles::template run<10, NB>;
    case 11: return Tiles::template run<11, NB>;
    default: return Tiles::template run<12, NB>;
    }
  }
}

template <class Tiles>
auto tileFor(int mr, int nb) -> void (*)(const Tile<typename Tiles::Elem> &) {
  switch (nb) {
  case 1: return tileFor<Tiles, 1>(mr);
  case 2: return tileFor<Tiles, 2>(mr);
  case 3: return tileFor<Tiles, 3>(mr);
  default: return tileFor<Tiles, 4>(mr);
  }
}
#endif

void freeAligned(float *p) { std::free(p); }

} // namespace

bool qcc::rt::cpuHasAvx512F() {
#ifdef QCC_HAVE_F32_KERNEL
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
#else
  return false;
#endif
}

bool qcc::rt::cpuHasAvx512Bf16() {
#ifdef QCC_HAVE_F32_KERNEL
  static const bool has = __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

uint16_t qcc::rt::floatToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep it one, quiet
    return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u); // nearest even (overflow rounds to inf)
  return (uint16_t)(u >> 16);
}

std::optional<PackedF32Weight>
qcc::rt::packLinearWeight(const float *w, int64_t n, int64_t k,
                          const SourceDone &done) {
  if (cpuFloatPrecision() != CpuFloatPrecision::Bf16 || !cpuHasAvx512Bf16())
    return packF32Weight(w, n, k, done);
  if (n <= 0 || k <= 0)
    return std::nullopt;
  PackedF32Weight p;
  p.n = n;
  p.k = k;
  p.bf16 = true;
  size_t bytes = (size_t)p.bytes();
  void *mem = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!mem)
    throw std::bad_alloc();
  p.data = {static_cast<float *>(mem), freeAligned};
  std::memset(mem, 0, bytes); // N's padding and an odd K's last half: zero
  const int64_t pairs = p.kPairs();
  uint32_t *out = reinterpret_cast<uint32_t *>(mem);
  packInChunks(w, n, (size_t)k * sizeof(float), kCols, done,
               [&](int64_t r0, int64_t r1) {
                 const int64_t b0 = r0 / kCols, b1 = (r1 + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if ((r1 - r0) * k >= kParallelWork)
                 for (int64_t b = b0; b < b1; ++b) {
                   uint32_t *dst = out + b * pairs * kCols;
                   for (int64_t c = b * kCols; c < std::min(n, (b + 1) * kCols);
                        ++c) {
                     const float *row = w + c * k;
                     for (int64_t i = 0; i < pairs; ++i) {
                       uint32_t lo = floatToBf16(row[2 * i]);
                       uint32_t hi =
                           2 * i + 1 < k ? floatToBf16(row[2 * i + 1]) : 0;
                       dst[i * kCols + c % kCols] = lo | hi << 16;
                     }
                   }
                 }
               });
  return p;
}

std::optional<PackedF32Weight> qcc::rt::packF32Weight(const float *w,
                                                      int64_t n, int64_t k,
                                                      int64_t ldw,
                                                      const SourceDone &done) {
  if (!cpuHasAvx512F() || n <= 0 || k <= 0)
    return std::nullopt;
  PackedF32Weight p;
  p.n = n;
  p.k = k;
  size_t bytes = (size_t)p.bytes();
  void *mem = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!mem)
    throw std::bad_alloc();
  p.data = {static_cast<float *>(mem), freeAligned};
  std::memset(mem, 0, bytes); // N's padding: zero weights
  packInChunks(w, n, (size_t)ldw * sizeof(float), kCols, done,
               [&](int64_t r0, int64_t r1) {
                 const int64_t b0 = r0 / kCols, b1 = (r1 + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if ((r1 - r0) * k >= kParallelWork)
                 for (int64_t b = b0; b < b1; ++b) {
                   float *dst = p.data.get() + b * k * kCols;
                   for (int64_t c = b * kCols; c < std::min(n, (b + 1) * kCols);
                        ++c) {
                     const float *row = w + c * ldw;
                     for (int64_t i = 0; i < k; ++i)
                       dst[i * kCols + c % kCols] = row[i];
                   }
                 }
               });
  return p;
}

#ifdef QCC_HAVE_F32_KERNEL
namespace {

/// B(k, n) = b[(n / 16) * blockStride + k * kStride + n % 16] for n < N,
/// k < K, every block's 16 values readable: a packed weight (blockStride
/// K * 16, kStride 16) or a row-major [K, N] matrix with N a multiple of 16
/// (blockStride 16, kStride its row stride). bf16: k counts pairs.
template <typename T> struct BlockedB {
  const T *b;
  int64_t blockStride, kStride, n, k;
  int64_t columnBlocks() const { return (n + kCols - 1) / kCols; }
};

/// The strips of C = x B: `blocksPerStrip` column blocks each, all M rows.
template <class Tiles> struct Strips {
  using T = typename Tiles::Elem;
  const T *x;
  int64_t lda, M;
  BlockedB<T> B;
  float *C;
  int64_t ldc;
  int rowsPerTile, blocksPerStrip;
  int64_t sliceK;

  Strips(const T *x, int64_t lda, int64_t M, BlockedB<T> B, float *C,
         int64_t ldc)
      : x(x), lda(lda), M(M), B(B), C(C), ldc(ldc) {
    // Decode's few rows: 64-column strips (a row's 4 accumulators hide the
    // FMA latency); else 32 columns by 12 rows.
    rowsPerTile = M <= 4 ? 4 : 12;
    blocksPerStrip = M <= 4 ? 4 : 2;
    // Slices of the same bytes of x: a bf16 pair is one element.
    const int64_t maxSlice = kMaxSliceK / (int64_t)(sizeof(float) / sizeof(T));
    const int64_t slices = (B.k + maxSlice - 1) / maxSlice;
    sliceK = slices ? (B.k + slices - 1) / slices : 0;
  }
  int64_t count() const {
    return (B.columnBlocks() + blocksPerStrip - 1) / blocksPerStrip;
  }
  /// Computes strip s; returns its columns [n0, n1).
  std::pair<int64_t, int64_t> run(int64_t s, bool prefetchNext) const {
    const int64_t b0 = s * blocksPerStrip;
    const int nb =
        (int)std::min<int64_t>(blocksPerStrip, B.columnBlocks() - b0);
    const int64_t n0 = b0 * kCols, cols = std::min(B.n, n0 + nb * kCols) - n0;
    const T *strip = B.b + b0 * B.blockStride;
    for (int64_t k0 = 0; k0 < B.k; k0 += sliceK) {
      const int64_t kLen = std::min(sliceK, B.k - k0);
      for (int64_t m0 = 0; m0 < M; m0 += rowsPerTile) {
        const int mr = (int)std::min<int64_t>(rowsPerTile, M - m0);
        const T *next =
            prefetchNext && m0 == 0 && s + 1 < count()
                ? strip + blocksPerStrip * B.blockStride + k0 * B.kStride
                : nullptr;
        Tile<T> t{x + m0 * lda + k0, lda,    strip + k0 * B.kStride,
                  B.blockStride,     B.kStride, kLen,
                  C + m0 * ldc + n0, ldc,    cols,
                  k0 == 0,           next};
        tileFor<Tiles>(mr, nb)(t);
      }
    }
    return {n0, n0 + cols};
  }
};

/// C = x B over all strips, threaded, epilogue(m0, m1, n0, n1) per strip.
template <class Tiles>
void gemmThen(const Strips<Tiles> &strips, int64_t work,
              const std::function<void(int64_t, int64_t, int64_t, int64_t)>
                  &epilogue) {
  const int64_t M = strips.M;
  auto strip = [&](int64_t s) {
    auto [n0, n1] = strips.run(s, /*prefetchNext=*/true);
    epilogue(0, M, n0, n1);
  };
  const int64_t count = strips.count();
  const int threads = cpuThreads();
  if (threads > 1 && chunkPoolFits(M, work)) {
    const int64_t per = std::max<int64_t>(1, count / (4 * threads));
    parallelChunks((count + per - 1) / per, [&](int64_t c) {
      for (int64_t s = c * per; s < std::min(count, (c + 1) * per); ++s)
        strip(s);
    });
  } else if (threads > 1 && work >= kParallelWork && !omp_in_parallel()) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t s = 0; s < count; ++s)
      strip(s);
  } else {
    for (int64_t s = 0; s < count; ++s)
      strip(s);
  }
}

/// x [M, K] as bf16 pairs [M, ceil(K / 2)], nearest even (an odd K's last
/// pair padded with zero), converted 32 at a time by `vcvtne2ps2bf16`.
QCC_AVX512BF16_TARGET void toBf16Pairs(const float *x, int64_t lda, int64_t M,
                                       int64_t K, uint32_t *out) {
  const int64_t pairs = (K + 1) / 2;
  for (int64_t m = 0; m < M; ++m) {
    const float *row = x + m * lda;
    uint32_t *dst = out + m * pairs;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + k + 16),
                                       _mm512_loadu_ps(row + k));
      _mm512_storeu_si512(dst + k / 2, (__m512i)h);
    }
    if (k < K) {
      const int64_t left = K - k;
      __mmask16 lo = firstLanes(left),
                hi = left > 16 ? firstLanes(left - 16) : 0;
      __m512bh h = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, row + k + 16),
                                       _mm512_maskz_loadu_ps(lo, row + k));
      _mm512_mask_storeu_epi32(dst + k / 2, firstLanes((K - k + 1) / 2),
                               (__m512i)h);
    }
  }
}

} // namespace
#endif

void qcc::rt::f32GemmThen(
    const float *x, int64_t lda, int64_t M, const PackedF32Weight &w,
    float *C, int64_t ldc,
    const std::function<void(int64_t, int64_t, int64_t, int64_t)> &epilogue) {
#ifdef QCC_HAVE_F32_KERNEL
  if (M <= 0)
    return;
  const int64_t work = M * w.n * w.k;
  if (w.bf16) {
    const int64_t pairs = w.kPairs();
    std::vector<uint32_t> xb((size_t)(M * pairs));
    toBf16Pairs(x, lda, M, w.k, xb.data());
    gemmThen(Strips<Bf16Tiles>(xb.data(), pairs, M,
                               {w.pairBlock(0), pairs * kCols, kCols, w.n,
                                pairs},
                               C, ldc),
             work, epilogue);
    return;
  }
  gemmThen(Strips<F32Tiles>(x, lda, M,
                            {w.block(0), w.k * kCols, kCols, w.n, w.k}, C,
                            ldc),
           work, epilogue);
#else
  (void)x, (void)lda, (void)M, (void)w, (void)C, (void)ldc, (void)epilogue;
  throw std::logic_error("the packed float32 GEMM needs AVX-512F");
#endif
}

void qcc::rt::f32GemmRowMajorB(const float *x, int64_t lda, int64_t M,
                               const float *b, int64_t ldb, int64_t N,
                               int64_t K, float *C, int64_t ldc) {
#ifdef QCC_HAVE_F32_KERNEL
  if (N % kCols != 0)
    throw std::logic_error("f32GemmRowMajorB: N must be a multiple of 16");
  if (M <= 0 || N <= 0)
    return;
  if (K <= 0) {
    for (int64_t m = 0; m < M; ++m)
      std::fill(C + m * ldc, C + m * ldc + N, 0.0f);
    return;
  }
  const Strips<F32Tiles> strips(x, lda, M, {b, kCols, ldb, N, K}, C, ldc);
  for (int64_t s = 0; s < strips.count(); ++s)
    strips.run(s, /*prefetchNext=*/false);
#else
  (void)x, (void)lda, (void)M, (void)b, (void)ldb, (void)N, (void)K,
      (void)C, (void)ldc;
  throw std::logic_error("the packed float32 GEMM needs AVX-512F");
#endif
}

void qcc::rt::f32GemmPackedOnThread(const float *x, int64_t lda, int64_t M,
                                    const PackedF32Weight &w, int64_t n0,
                                    int64_t n1, float *C, int64_t ldc) {
#ifdef QCC_HAVE_F32_KERNEL
  if (n0 % kCols != 0 || n0 < 0 || n1 > w.n || w.bf16)
    throw std::logic_error("f32GemmPackedOnThread: bad column range or a "
                           "bf16 weight");
  if (M <= 0 || n1 <= n0)
    return;
  const Strips<F32Tiles> strips(
      x, lda, M, {w.block(n0 / kCols), w.k * kCols, kCols, n1 - n0, w.k}, C,
      ldc);
  for (int64_t s = 0; s < strips.count(); ++s)
    strips.run(s, /*prefetchNext=*/true);
#else
  (void)x, (void)lda, (void)M, (void)w, (void)n0, (void)n1, (void)C,
      (void)ldc;
  throw std::logic_error("the packed float32 GEMM needs AVX-512F");
#endif
}
