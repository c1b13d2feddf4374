//===- CpuInt8Gemm.cpp - packed int8 GEMM: AVX-512 VNNI and portable ------===//
//
// See CpuInt8Gemm.h for the layout and the exactness argument. Compiled with
// -ffp-contract=off (runtime/cpu/CMakeLists.txt): the qlinear epilogue is
// QLinearEpilogue, rounded as the reference rounds it.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuInt8Gemm.h"
#include "runtime/cpu/CpuChunkPool.h"
#include "runtime/cpu/CpuQuantKernels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "runtime/cpu/X86Intrinsics.h"
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define QCC_HAVE_VNNI_KERNEL 1
#define QCC_HAVE_AMX_KERNEL 1
#endif

using namespace qcc::rt;

namespace {

using Block = PackedI8Weight::Block;
constexpr int64_t kCols = PackedI8Weight::kCols;
constexpr int64_t kGroup = PackedI8Weight::kGroup;
/// A tile: up to kTileRows rows x kTileBlocks column blocks.
constexpr int kTileRows = 8, kTileBlocks = 2;
constexpr int64_t kTileCols = kTileBlocks * kCols;

/// Multiply-adds (M N K) from which a GEMM of more than a decode's rows
/// threads over its tiles in an OpenMP region: the dense qlinear's bound.
/// Decode-sized GEMMs split over parallelChunks instead (chunkPoolFits),
/// which neither wakes a sleeping worker nor waits at a barrier for one.
constexpr int64_t kI8GemmParallelWork = kQLinearParallelWork;

/// One tile's operands: rows [x, x + MR * ldx) of the padded activations,
/// NB blocks of the weight from `w` (block b at w + b * groups), their column
/// sums, and out[MR][kTileCols] for the exact int32 sums.
struct Tile {
  const uint8_t *x;
  int64_t ldx;
  const Block *w;
  int64_t groups;
  const int32_t *colSum;
  int32_t *out;
};

#ifdef QCC_HAVE_VNNI_KERNEL
#define QCC_VNNI_TARGET                                                        \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

template <int MR, int NB> QCC_VNNI_TARGET void tileVnni(const Tile &t) {
  __m512i acc[MR][NB];
  for (int b = 0; b < NB; ++b) {
    // -128 * colsum: undoes the +128 on every x.
    __m512i init = _mm512_slli_epi32(
        _mm512_sub_epi32(_mm512_setzero_si512(),
                         _mm512_loadu_si512(t.colSum + b * kCols)),
        7);
    for (int m = 0; m < MR; ++m)
      acc[m][b] = init;
  }
  for (int64_t g = 0; g < t.groups; ++g) {
    __m512i w[NB];
    for (int b = 0; b < NB; ++b)
      w[b] = _mm512_load_si512(t.w[b * t.groups + g].b);
    for (int m = 0; m < MR; ++m) {
      int32_t x4;
      std::memcpy(&x4, t.x + m * t.ldx + g * kGroup, 4);
      __m512i xb = _mm512_set1_epi32(x4);
      for (int b = 0; b < NB; ++b)
        acc[m][b] = _mm512_dpbusd_epi32(acc[m][b], xb, w[b]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int b = 0; b < NB; ++b)
      _mm512_storeu_si512(t.out + m * kTileCols + b * kCols, acc[m][b]);
}
#endif

#ifdef QCC_HAVE_VNNI_KERNEL
using TileFn = void (*)(const Tile &);

template <int MR> TileFn tileFor(int nb) {
  return nb == 2 ? tileVnni<MR, 2> : tileVnni<MR, 1>;
}

TileFn tileFor(int mr, int nb) {
  switch (mr) {
  case 1: return tileFor<1>(nb);
  case 2: return tileFor<2>(nb);
  case 3: return tileFor<3>(nb);
  case 4: return tileFor<4>(nb);
  case 5: return tileFor<5>(nb);
  case 6: return tileFor<6>(nb);
  case 7: return tileFor<7>(nb);
  default: return tileFor<8>(nb);
  }
}
#endif

#ifdef QCC_HAVE_AMX_KERNEL
// AMX: the packed weight's 16 x 64-byte rows of a column block (16 columns
// x 4 k each) are an int8 B tile as the tile multiply reads it (K = 64 per
// tile), so the same packing serves. A 32 x 32 block of the result is four
// int32 C tiles (0-3) from two A tiles of 16 rows (4, 5) and two B tiles
// (6, 7); _tile_dpbssd multiplies signed by signed bytes, so neither the
// +128 nor the column sums are needed, and the int32 sums wrap as vpdpbusd's
// do (exact, the bound in CpuInt8Gemm.h).
#define QCC_AMX_TARGET __attribute__((target("amx-tile,amx-int8")))
constexpr int kAmxRows = 32;  ///< rows of a block (two A tiles)
constexpr int64_t kAmxK = 64; ///< k per tile multiply (16 groups)

/// The palette-1 configuration: eight tiles of 16 rows x 64 bytes.
struct alignas(64) AmxConfig {
  uint8_t palette = 1, startRow = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
  AmxConfig() {
    for (int t = 0; t < 8; ++t)
      colsb[t] = 64, rows[t] = 16;
  }
};

/// Loads the configuration on this thread once (the OS keeps it across
/// context switches; nothing else in the process uses the tiles).
QCC_AMX_TARGET void configureAmx() {
  static thread_local bool configured = false;
  if (configured)
    return;
  static const AmxConfig config;
  _tile_loadconfig(&config);
  configured = true;
}

/// out[32][kTileCols] = x rows [x, x + 32 * ldx) (whole 64-byte steps of
/// K) times NB column blocks of the weight.
template <int NB>
QCC_AMX_TARGET void blockAmx(const int8_t *x, int64_t ldx, const Block *w,
                             int64_t groups, int32_t *out) {
  configureAmx();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const int64_t steps = groups * kGroup / kAmxK, groupsPerStep = kAmxK / kGroup;
  for (int64_t s = 0; s < steps; ++s) {
    _tile_loadd(4, x + s * kAmxK, ldx);
    _tile_loadd(5, x + 16 * ldx + s * kAmxK, ldx);
    _tile_loadd(6, w + s * groupsPerStep, sizeof(Block));
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(2, 5, 6);
    if constexpr (NB == 2) {
      _tile_loadd(7, w + groups + s * groupsPerStep, sizeof(Block));
      _tile_dpbssd(1, 4, 7);
      _tile_dpbssd(3, 5, 7);
    }
  }
  constexpr int64_t ld = kTileCols * sizeof(int32_t);
  _tile_stored(0, out, ld);
  _tile_stored(2, out + 16 * kTileCols, ld);
  if constexpr (NB == 2) {
    _tile_stored(1, out + kCols, ld);
    _tile_stored(3, out + 16 * kTileCols + kCols, ld);
  }
}

/// Whether the CPU has AMX-INT8 and the kernel lets this process use the
/// tile data (Linux asks each process to request it: arch_prctl
/// ARCH_REQ_XCOMP_PERM for XTILEDATA).
bool amxUsable() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) ||
      !(d & (1u << 25)))
    return false;
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#endif

/// Whether runTiles takes AMX for an x of M rows against `w`: prefill-sized
/// (decode's few rows stay on VNNI, which reads the weight once per 8 rows
/// as well, without a 32-row block's padding) and K in whole tile steps.
bool takesAmx(int64_t M, const PackedI8Weight &w) {
  return M > kTileRows && w.k % 64 == 0 && cpuHasAmxInt8() &&
         cpuKernelPath() == CpuKernelPath::Fast;
}

/// Runs every tile of x [M, K] times `w` (VNNI: the caller checked
/// cpuHasVnni(); AMX where takesAmx), then sink(m0, rows, n0, cols, acc)
/// with acc[r * kTileCols + c] the exact sum of row m0 + r, column n0 + c.
template <class Sink>
void runTiles(const int8_t *x, int64_t M, const PackedI8Weight &w,
              Sink &&sink) {
#ifdef QCC_HAVE_AMX_KERNEL
  if (takesAmx(M, w)) {
    const int64_t K = w.k, blocks = w.columnBlocks();
    const int64_t strips = (blocks + kTileBlocks - 1) / kTileBlocks;
    const int64_t rowBlocks = (M + kAmxRows - 1) / kAmxRows;
    // The last block's rows past M read zeros.
    std::vector<int8_t> tail;
    const int64_t whole = M / kAmxRows * kAmxRows;
    if (whole < M) {
      tail.assign((size_t)(kAmxRows * K), 0);
      std::memcpy(tail.data(), x + whole * K, (size_t)((M - whole) * K));
    }
    auto block = [&](int64_t s, int64_t r) {
      const int64_t b0 = s * kTileBlocks, m0 = r * kAmxRows;
      const int nb = (int)std::min<int64_t>(kTileBlocks, blocks - b0);
      const int rows = (int)std::min<int64_t>(kAmxRows, M - m0);
      const int8_t *xs = m0 < whole ? x + m0 * K : tail.data();
      alignas(64) int32_t acc[kAmxRows * kTileCols];
      const Block *wb = w.blocks.data() + b0 * w.groups;
      if (nb == 2)
        blockAmx<2>(xs, K, wb, w.groups, acc);
      else
        blockAmx<1>(xs, K, wb, w.groups, acc);
      const int64_t n0 = b0 * kCols;
      sink(m0, rows, n0, std::min<int64_t>(nb * kCols, w.n - n0), acc);
    };
    const int64_t work = M * w.n * K;
#pragma omp parallel for collapse(2) schedule(static) if (work >= kI8GemmParallelWork)
    for (int64_t s = 0; s < strips; ++s)
      for (int64_t r = 0; r < rowBlocks; ++r)
        block(s, r);
    return;
  }
#endif
#ifdef QCC_HAVE_VNNI_KERNEL
  const int64_t K = w.k, ldx = w.groups * kGroup;
  // The activations as x + 128, padded to whole groups (the weight's
  // padding is zero).
  std::vector<uint8_t> xs(M * ldx, 0x80);
  for (int64_t m = 0; m < M; ++m) {
    uint8_t *dst = xs.data() + m * ldx;
    const uint8_t *src = (const uint8_t *)(x + m * K);
    for (int64_t k = 0; k < K; ++k)
      dst[k] = src[k] ^ 0x80;
  }
  const int64_t blocks = w.columnBlocks();
  const int64_t strips = (blocks + kTileBlocks - 1) / kTileBlocks;
  const int64_t rowTiles = (M + kTileRows - 1) / kTileRows;
  const uint8_t *X = xs.data();
  auto tile = [&](int64_t s, int64_t r) {
    const int64_t b0 = s * kTileBlocks, m0 = r * kTileRows;
    const int nb = (int)std::min<int64_t>(kTileBlocks, blocks - b0);
    const int mr = (int)std::min<int64_t>(kTileRows, M - m0);
    alignas(64) int32_t acc[kTileRows * kTileCols];
    Tile t{X + m0 * ldx,          ldx,
           w.blocks.data() + b0 * w.groups, w.groups,
           w.colSum.data() + b0 * kCols,    acc};
    tileFor(mr, nb)(t);
    const int64_t n0 = b0 * kCols;
    sink(m0, mr, n0, std::min<int64_t>(nb * kCols, w.n - n0), acc);
  };
  const int64_t work = M * w.n * K;
  if (chunkPoolFits(M, work)) {
    // Decode: column strips in about four chunks per thread.
    const int64_t per = std::max<int64_t>(1, strips / (4 * cpuThreads()));
    parallelChunks((strips + per - 1) / per, [&](int64_t c) {
      for (int64_t s = c * per; s < std::min(strips, (c + 1) * per); ++s)
        for (int64_t r = 0; r < rowTiles; ++r)
          tile(s, r);
    });
  } else if (work >= kI8GemmParallelWork) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t s = 0; s < strips; ++s)
      for (int64_t r = 0; r < rowTiles; ++r)
        tile(s, r);
  } else {
    for (int64_t s = 0; s < strips; ++s)
      for (int64_t r = 0; r < rowTiles; ++r)
        tile(s, r);
  }
#else
  (void)x, (void)M, (void)w, (void)sink;
  throw std::logic_error("the packed int8 GEMM needs AVX-512 VNNI");
#endif
}

/// The portable GEMM from the dense [N, K] weight: one dot product per
/// (row, column), K innermost and contiguous (what compilers vectorize, SSE2
/// included; measured: 4 rows at a time per weight row vectorize worse),
/// each weight row read from memory once for all rows.
template <class Sink>
void runPortable(const int8_t *x, int64_t M, const int8_t *w, int64_t N,
                 int64_t K, Sink &&sink) {
#pragma omp parallel for schedule(static) if (M * N * K >= kI8GemmParallelWork)
  for (int64_t n = 0; n < N; ++n) {
    const int8_t *wr = w + n * K;
    for (int64_t m = 0; m < M; ++m) {
      const int8_t *xr = x + m * K;
      int32_t a = 0;
      for (int64_t k = 0; k < K; ++k)
        a += (int32_t)xr[k] * (int32_t)wr[k];
      sink(m, n, a);
    }
  }
}

} // namespace

bool qcc::rt::cpuHasVnni() {
#ifdef QCC_HAVE_VNNI_KERNEL
  static const bool has = __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512vnni");
  return has;
#else
  return false;
#endif
}

bool qcc::rt::cpuHasAmxInt8() {
#ifdef QCC_HAVE_AMX_KERNEL
  // QCC_CPU_AMX=0 keeps the VNNI kernel on an AMX CPU (to compare them).
  static const bool has = [] {
    const char *env = std::getenv("QCC_CPU_AMX");
    return !(env && std::string(env) == "0") && amxUsable();
  }();
  return has;
#else
  return false;
#endif
}

PackedI8Weight qcc::rt::packI8Weight(const int8_t *w, int64_t n, int64_t k,
                                     const SourceDone &done) {
  PackedI8Weight p;
  p.n = n;
  p.k = k;
  p.groups = (k + kGroup - 1) / kGroup;
  const int64_t blocks = p.columnBlocks();
  p.blocks.assign(blocks * p.groups, Block{});
  p.colSum.assign(blocks * kCols, 0);
  packInChunks(w, n, (size_t)k, kCols, done, [&](int64_t r0, int64_t r1) {
    for (int64_t c = r0; c < r1; ++c) {
      const int8_t *row = w + c * k;
      Block *col = p.blocks.data() + c / kCols * p.groups;
      int32_t sum = 0;
      for (int64_t i = 0; i < k; ++i) {
        col[i / kGroup].b[c % kCols * kGroup + i % kGroup] = row[i];
        sum += row[i];
      }
      p.colSum[c] = sum;
    }
  });
  return p;
}

std::optional<PackedI8Weight> qcc::rt::packForPath(const int8_t *w,
                                                   int64_t n, int64_t k,
                                                   CpuKernelPath path,
                                                   const SourceDone &done) {
  if (path != CpuKernelPath::Fast || !cpuHasVnni())
    return std::nullopt;
  return packI8Weight(w, n, k, done);
}

void qcc::rt::i8Gemm(const int8_t *x, int64_t M, const int8_t *w,
                     const PackedI8Weight *packed, int64_t N, int64_t K,
                     int32_t *C) {
  if (packed) {
    runTiles(x, M, *packed,
             [&](int64_t m0, int rows, int64_t n0, int64_t cols,
                 const int32_t *acc) {
               for (int r = 0; r < rows; ++r)
                 std::memcpy(C + (m0 + r) * N + n0, acc + r * kTileCols,
                             cols * sizeof(int32_t));
             });
    return;
  }
  runPortable(x, M, w, N, K,
              [&](int64_t m, int64_t n, int32_t acc) { C[m * N + n] = acc; });
}

/// The float part of a qlinear with outlier columns, F[m, n] = sum_j
/// G[m, j] * Wf[n, j] (G: the gathered columns), vectorized over n: each
/// element is summed from 0 in ascending j like the reference's, so the two
/// agree bit for bit (this file is built with -ffp-contract=off).
static std::vector<float> outlierProduct(const QLinearEpilogue &e) {
  namespace num = qcc::numerics;
  const int64_t M = e.M, N = e.N, n = (int64_t)e.outlierColumns.size();
  std::vector<float> g = e.gatherOutliers(), wt((size_t)(n * N)),
                     f((size_t)(M * N), 0.0f);
  for (int64_t c = 0; c < N; ++c)
    for (int64_t j = 0; j < n; ++j)
      wt[j * N + c] = e.outlierWeight[c * n + j];
#pragma omp parallel for schedule(static) if (M * N * n >= kI8GemmParallelWork)
  for (int64_t m = 0; m < M; ++m) {
    float *fr = f.data() + m * N;
    for (int64_t j = 0; j < n; ++j) {
      const float a = g[m * n + j], *wr = wt.data() + j * N;
      for (int64_t c = 0; c < N; ++c)
        fr[c] = num::fadd(fr[c], num::fmul(a, wr[c]));
    }
  }
  return f;
}

#ifdef QCC_HAVE_VNNI_KERNEL
/// y[c] = e(acc[c], m, n0 + c) for c < cols without outlier columns, 16
/// columns at a time: the same IEEE steps in the same order as
/// numerics::dequantize and the bias add (the integer ones wrapping), so
/// bit for bit the scalar epilogue's (this file has no FMA contraction).
QCC_VNNI_TARGET void epilogueRow(const QLinearEpilogue &e, const int32_t *acc,
                                 int64_t m, int64_t n0, int64_t cols,
                                 float *y) {
  const __m512i zp = _mm512_set1_epi32(e.xZero[e.rowZero ? m : 0]);
  const __m512 xs = _mm512_set1_ps(e.xScale[e.rowScale ? m : 0]);
  for (int64_t c = 0; c < cols; c += 16) {
    const __mmask16 k = (__mmask16)(cols - c >= 16 ? 0xFFFF
                                                   : (1u << (cols - c)) - 1);
    const int64_t n = n0 + c;
    __m512i a = _mm512_maskz_loadu_epi32(k, acc + c);
    __m512i ws = _mm512_maskz_loadu_epi32(k, e.wSum + n);
    __m512i centered = _mm512_sub_epi32(a, _mm512_mullo_epi32(zp, ws));
    __m512 scale = _mm512_mul_ps(xs, _mm512_maskz_loadu_ps(k, e.wScale + n));
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(centered), scale);
    if (e.bias)
      v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, e.bias + n));
    _mm512_mask_storeu_ps(y, k, v);
    y += 16;
  }
}
#endif

std::vector<Tensor> qcc::rt::fastQLinearKernel(const Attrs &attrs,
                                               const Operands &ops,
                                               const PackedI8Weight *packed,
                                               const LinearEpilogue &epi) {
  const Tensor *w = ops.size() > 3 ? ops[3] : nullptr;
  if (!w || w->dtype() != DType::I8 || w->rank() != 2)
    return qlinearKernel(attrs, ops); // its errors
  const QLinearEpilogue e =
      QLinearEpilogue::check(attrs, ops, w->dim(0), w->dim(1));
  if (packed && (packed->n != e.N || packed->k != e.K))
    throw std::logic_error("packed weight does not match the qlinear's");
  Tensor r = Tensor::uninitialized(DType::F32, e.resultShape); // all set
  float *Y = r.data<float>();
  const int64_t N = e.N;
  // The mixed GEMM: the int8 GEMM and the small float GEMM on the outlier
  // columns, summed in the epilogue.
  const std::vector<float> f =
      e.outlierWeight ? outlierProduct(e) : std::vector<float>();
  auto outlier = [&](int64_t m, int64_t n) {
    return f.empty() ? 0.0f : f[m * N + n];
  };
  for (const auto &[t, what] : {std::pair{epi.residual, "residual"},
                                 std::pair{epi.factor, "factor"}})
    if (t && (t->dtype() != DType::F32 || t->shape() != e.resultShape))
      throw std::runtime_error(std::string("qlinear ") + what + " " +
                               shapeString(t->shape()) + " must be f32 " +
                               shapeString(e.resultShape));
  // The fused epilogue over rows [m0, m0 + rows), columns [n0, n0 + cols).
  auto then = [&](int64_t m0, int64_t rows, int64_t n0, int64_t cols) {
    applyLinearEpilogue(epi, Y, N, m0, rows, n0, cols);
  };
  if (packed)
    runTiles(e.x, e.M, *packed,
             [&](int64_t m0, int rows, int64_t n0, int64_t cols,
                 const int32_t *acc) {
#ifdef QCC_HAVE_VNNI_KERNEL
               if (f.empty()) {
                 for (int i = 0; i < rows; ++i)
                   epilogueRow(e, acc + i * kTileCols, m0 + i, n0, cols,
                               Y + (m0 + i) * N + n0);
                 then(m0, rows, n0, cols);
                 return;
               }
#endif
               for (int i = 0; i < rows; ++i)
                 for (int64_t c = 0; c < cols; ++c)
                   Y[(m0 + i) * N + n0 + c] =
                       e(acc[i * kTileCols + c], m0 + i, n0 + c,
                         outlier(m0 + i, n0 + c));
               then(m0, rows, n0, cols);
             });
  else {
    runPortable(e.x, e.M, w->data<int8_t>(), N, e.K,
                [&](int64_t m, int64_t n, int32_t acc) {
                  Y[m * N + n] = e(acc, m, n, outlier(m, n));
                });
    then(0, e.M, 0, N);
  }
  return {std::move(r)};
}
