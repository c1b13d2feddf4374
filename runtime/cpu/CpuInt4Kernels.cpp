//===- CpuInt4Kernels.cpp - W4A16 linears on the CPU ----------------------===//
#include "runtime/cpu/CpuInt4Kernels.h"

#include "format/Int4.h"
#include "runtime/cpu/CpuChunkPool.h"
#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/CpuQuantKernels.h"
#include "runtime/core/HalfFloat.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>

#if defined(__x86_64__)
#include "runtime/cpu/X86Intrinsics.h"
#include <cpuid.h>
#endif
#include <string>
#include <vector>

using namespace qcc::rt;
namespace i4 = qcc::format::int4;

namespace {

[[noreturn]] void fail(const std::string &why) {
  throw std::runtime_error(why);
}

} // namespace

Int4Weight qcc::rt::int4Weight(const Tensor &packed, const Tensor &scales,
                               const Tensor *perm, const Tensor *offsets,
                               int64_t groupSize) {
  if (scales.dtype() != DType::F16)
    fail(std::string("weight_int4 needs f16 scales, got ") +
         dtypeName(scales.dtype()));
  checkInt4Operands(packed, scales, perm, offsets, groupSize);
  return {&packed, &scales, perm, offsets, groupSize};
}

namespace {

/// The lanes' fixed sum (CpuInt4Kernels.h).
inline float addLanes(const float *l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

constexpr int64_t kWeightRows = 4; // weight rows per block of the kernel
constexpr int64_t kBlockRows = 4;  // input rows per blockDots4x4 call

#if defined(__x86_64__)
/// The nibble decode table: two's complement, or the nibble itself with
/// offsets.
__attribute__((target("avx2"))) inline __m128i nibbleCodes(bool unsigned_) {
  return unsigned_ ? _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                   13, 14, 15)
                   : _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5,
                                   -4, -3, -2, -1);
}

/// Columns j .. j + 31 of a packed row, dequantized into w[0..3] (8 columns
/// each, in column order): q s, or q s + m with offsets (mul then add).
__attribute__((target("avx2"))) inline void
dequantize32(const int8_t *packed, int64_t j, __m128i codes, __m256 s,
             const __m256 *m, __m256 w[4]) {
  const __m128i low = _mm_set1_epi8(0x0F);
  __m128i b =
      _mm_loadu_si128(reinterpret_cast<const __m128i *>(packed + j / 2));
  __m128i lo = _mm_and_si128(b, low);
  __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), low);
  __m128i q[2] = {_mm_shuffle_epi8(codes, _mm_unpacklo_epi8(lo, hi)),
                  _mm_shuffle_epi8(codes, _mm_unpackhi_epi8(lo, hi))};
  for (int h = 0; h < 2; ++h)
    for (int e = 0; e < 2; ++e) {
      __m128i eight = e ? _mm_srli_si128(q[h], 8) : q[h];
      __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight));
      __m256 v = _mm256_mul_ps(f, s);
      w[2 * h + e] = m ? _mm256_add_ps(v, *m) : v;
    }
}

/// format::int4::dequantize of one row in its stored order (no perm) with
/// AVX2, for group sizes that are multiples of 32: 16 packed bytes (32
/// columns) at a time, nibbles split and interleaved back into column
/// order, decoded by a 16-entry table (pshufb), widened to i32 and f32,
/// multiplied by the group's scale and (with offsets) added to its offset,
/// mul then add as format/Int4.cpp: the products are exact, so the same
/// bits (Int4LinearTest).
__attribute__((target("avx2"))) void
dequantizeRowAvx2(const int8_t *packed, const float *scale, const float *offset,
                  int64_t K, int64_t G, float *out) {
  const __m128i codes = nibbleCodes(offset != nullptr);
  for (int64_t j = 0; j < K; j += 32) {
    __m256 m = _mm256_set1_ps(offset ? offset[j / G] : 0.0f), w[4];
    dequantize32(packed, j, codes, _mm256_set1_ps(scale[j / G]),
                 offset ? &m : nullptr, w);
    for (int e = 0; e < 4; ++e)
      _mm256_storeu_ps(out + j + 8 * e, w[e]);
  }
}

/// int4RowDot of kWeightRows packed rows (pc bytes apart; their scales and
/// offsets `groups` apart) with one input row, dequantized in registers:
/// the lanes, products and order of dequantizeRowAvx2 then int4RowDot (the
/// same bits), without the row's round trip through memory. K and G
/// multiples of 32.
__attribute__((target("avx2"))) void
dotInt4RowsAvx2(const int8_t *packed, int64_t pc, const float *scale,
                const float *offset, int64_t groups, const float *x,
                int64_t K, int64_t G, float *out) {
  constexpr int W = kWeightRows;
  const __m128i codes = nibbleCodes(offset != nullptr);
  __m256 acc[W];
  for (int i = 0; i < W; ++i)
    acc[i] = _mm256_setzero_ps();
  for (int64_t j = 0; j < K; j += 32) {
    __m256 xv[4];
    for (int e = 0; e < 4; ++e)
      xv[e] = _mm256_loadu_ps(x + j + 8 * e);
    for (int i = 0; i < W; ++i) {
      __m256 m = _mm256_set1_ps(offset ? offset[i * groups + j / G] : 0.0f),
             w[4];
      dequantize32(packed + i * pc, j, codes,
                   _mm256_set1_ps(scale[i * groups + j / G]),
                   offset ? &m : nullptr, w);
      for (int e = 0; e < 4; ++e)
        acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(w[e], xv[e]));
    }
  }
  for (int i = 0; i < W; ++i) {
    alignas(32) float l[8];
    _mm256_store_ps(l, acc[i]);
    out[i] = addLanes(l);
  }
}

/// dotInt4RowsAvx2 with AVX-512F: per group each row's 16 possible values
/// (code c: c s, or c s + m, the products and sums of dequantize32) in one
/// register, and 16 columns at a time looked up by their nibbles
/// (vpermps); the products summed into 8 lanes, the low 8 columns then the
/// high 8, in dotInt4RowsAvx2's order: the same bits, in half the
/// instructions.
__attribute__((target("avx512f"))) void
dotInt4RowsAvx512(const int8_t *packed, int64_t pc, const float *scale,
                  const float *offset, int64_t groups, const float *x,
                  int64_t K, int64_t G, float *out) {
  constexpr int W = kWeightRows;
  // Nibble n's code: n with offsets, else n's two's complement.
  const __m512 codes =
      offset ? _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                              15)
             : _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3,
                              -2, -1);
  const __m128i low = _mm_set1_epi8(0x0F);
  __m256 acc[W];
  for (int i = 0; i < W; ++i)
    acc[i] = _mm256_setzero_ps();
  for (int64_t g = 0; g * G < K; ++g) {
    __m512 lut[W];
    for (int i = 0; i < W; ++i) {
      __m512 v = _mm512_mul_ps(codes, _mm512_set1_ps(scale[i * groups + g]));
      lut[i] = offset ? _mm512_add_ps(v, _mm512_set1_ps(offset[i * groups + g]))
                      : v;
    }
    for (int64_t j = g * G; j < (g + 1) * G; j += 32) {
      const __m512 x0 = _mm512_loadu_ps(x + j), x1 = _mm512_loadu_ps(x + j + 16);
      for (int i = 0; i < W; ++i) {
        __m128i b = _mm_loadu_si128(
            reinterpret_cast<const __m128i *>(packed + i * pc + j / 2));
        __m128i lo = _mm_and_si128(b, low);
        __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), low);
        __m512 p0 = _mm512_mul_ps(
            _mm512_permutexvar_ps(
                _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)), lut[i]),
            x0);
        __m512 p1 = _mm512_mul_ps(
            _mm512_permutexvar_ps(
                _mm512_cvtepu8_epi32(_mm_unpackhi_epi8(lo, hi)), lut[i]),
            x1);
        for (__m512 p : {p0, p1}) {
          acc[i] = _mm256_add_ps(acc[i], _mm512_castps512_ps256(p));
          acc[i] = _mm256_add_ps(
              acc[i], _mm256_castpd_ps(
                          _mm512_extractf64x4_pd(_mm512_castps_pd(p), 1)));
        }
      }
    }
  }
  for (int i = 0; i < W; ++i) {
    alignas(32) float l[8];
    _mm256_store_ps(l, acc[i]);
    out[i] = addLanes(l);
  }
}

#endif

/// The widest instruction set the int4 kernels may use (setInt4Simd).
std::atomic<int> gInt4SimdCap{(int)Int4Simd::Avx512};

} // namespace

Int4Simd qcc::rt::int4Simd() {
  if (cpuKernelPath() != CpuKernelPath::Fast)
    return Int4Simd::Plain;
#if defined(__x86_64__)
  static const Int4Simd cpu =
      __builtin_cpu_supports("avx512f") ? Int4Simd::Avx512
      : __builtin_cpu_supports("avx2")  ? Int4Simd::Avx2
                                        : Int4Simd::Plain;
  return (Int4Simd)std::min((int)cpu, gInt4SimdCap.load());
#else
  return Int4Simd::Plain;
#endif
}

void qcc::rt::setInt4SimdCap(Int4Simd cap) { gInt4SimdCap = (int)cap; }

namespace {

#if defined(__x86_64__)
/// n f16 values to f32 with F16C, 8 at a time: halfToFloat's values (the
/// conversion is exact, subnormals included; a signalling NaN comes back
/// quiet). The per-group scales were a third of a W4A16 decode step when
/// converted one at a time.
__attribute__((target("avx2,f16c"))) void halvesToFloatF16c(const uint16_t *h,
                                                           int64_t n,
                                                           float *out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i *>(h + i))));
  for (; i < n; ++i)
    out[i] = halfToFloat(h[i]);
}

/// n f32 values to f16 with F16C, rounding to nearest even: floatToHalf's
/// bits (KvCacheF16.ElementsRoundTrip checks subnormals, overflow, ties).
__attribute__((target("avx2,f16c"))) void floatsToHalfF16c(const float *x,
                                                          int64_t n,
                                                          uint16_t *out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                     _MM_FROUND_TO_NEAREST_INT |
                                         _MM_FROUND_NO_EXC));
  for (; i < n; ++i)
    out[i] = floatToHalf(x[i]);
}

bool haveF16c() {
  // CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports has no
  // "f16c").
  static const bool have = [] {
    unsigned a, b, c, d;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) &&
           (c & bit_F16C) != 0;
  }();
  return have;
}
#endif

/// n f16 values to f32 with F16C when `simd` (int4Simd()) allows AVX2: the
/// portable path uses no intrinsics.
void halvesToFloat(const uint16_t *h, int64_t n, float *out, Int4Simd simd) {
  widenHalves(h, n, out, simd >= Int4Simd::Avx2);
}

/// int4RowDot of W weight rows (`ldw` apart) with R input rows (`ldx`
/// apart) at once, each loaded once per 8 columns for all the pairs:
/// out[r * W + i] = int4RowDot(w + i * ldw, x + r * ldx, K). Every pair
/// keeps int4RowDot's lanes (the same bits); the W x R add chains run side
/// by side. Compiled for AVX2 and AVX-512 too (8 lanes = one register,
/// 32 registers for the 4 x 4 accumulators; no FMA, so the same roundings)
/// through the wrappers below: clang 14 (the fuzz build) takes
/// target_clones on plain functions only, not on templates. Always inlined:
/// GCC otherwise calls one baseline copy from every clone.
template <int W, int R>
[[gnu::always_inline]] inline void blockDots(const float *w, int64_t ldw, const float *x, int64_t ldx,
                      int64_t K, float *out) {
  float l[R][W][8] = {};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < W; ++i)
        for (int j = 0; j < 8; ++j)
          l[r][i][j] += w[i * ldw + k + j] * x[r * ldx + k + j];
  for (; k < K; ++k)
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < W; ++i)
        l[r][i][k % 8] += w[i * ldw + k] * x[r * ldx + k];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < W; ++i)
      out[r * W + i] = addLanes(l[r][i]);
}


__attribute__((target_clones("avx512f", "avx2", "default"))) void
blockDots4x4(const float *w, int64_t ldw, const float *x, int64_t ldx,
             int64_t K, float *out) {
  blockDots<kWeightRows, kBlockRows>(w, ldw, x, ldx, K, out);
}

__attribute__((target_clones("avx2", "default"))) void
weightRowDots4(const float *w, int64_t ldw, const float *x, int64_t K,
               float *out) {
  blockDots<kWeightRows, 1>(w, ldw, x, 0, K, out);
}

__attribute__((target_clones("avx2", "default"))) void
rowDots1(const float *w, const float *x, int64_t K, float *out) {
  blockDots<1, 1>(w, 0, x, 0, K, out);
}

} // namespace

void qcc::rt::dequantizeInt4Row(const int8_t *packed, const float *scale,
                                const float *offset, int64_t K, int64_t G,
                                float *out) {
#if defined(__x86_64__)
  if (G % 32 == 0 && int4Simd() >= Int4Simd::Avx2)
    return dequantizeRowAvx2(packed, scale, offset, K, G, out);
#endif
  i4::dequantize(packed, scale, offset, nullptr, 1, K, G, out);
}

float qcc::rt::int4RowDot(const float *w, const float *x, int64_t K) {
  float out;
  rowDots1(w, x, K, &out);
  return out;
}

std::vector<Tensor> qcc::rt::int4LinearKernel(const Operands &ops,
                                              const Int4Weight &w) {
  const int64_t N = w.n(), K = w.k(), G = w.groupSize;
  auto [xp, bias] = compressedLinearOperands(ops, N, K);
  const Tensor &x = *xp;
  int64_t M = 1;
  for (int64_t d = 0; d + 1 < x.rank(); ++d)
    M *= x.dim(d);
  Shape out = x.shape();
  out.back() = N;
  Tensor r(DType::F32, out);
  float *Y = r.data<float>();
  const float *X = x.data<float>(), *B = bias ? bias->data<float>() : nullptr;
  const int8_t *P = w.packed->data<int8_t>();
  const uint16_t *S = w.scales->data<uint16_t>(),
                 *O = w.offsets ? w.offsets->data<uint16_t>() : nullptr;
  const int64_t groups = i4::scaleCols(K, G), pc = i4::packedCols(K);
  // Act-order: the input's columns in the stored order, x'[j] = x[perm[j]],
  // once per call, so that every row is dotted in its stored order.
  std::vector<float> permuted;
  if (w.perm) {
    const int32_t *perm = w.perm->data<int32_t>();
    permuted.resize((size_t)(M * K));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < K; ++j)
        permuted[m * K + j] = X[m * K + perm[j]];
    X = permuted.data();
  }
  // Rows left after the blocks of 4 (decode's one) take whole blocks of
  // weight rows dequantized in registers where AVX2 decodes their groups.
  const Int4Simd simd = int4Simd();
  const bool fused = M % kBlockRows != 0 && K % 32 == 0 && G % 32 == 0 &&
                     simd >= Int4Simd::Avx2;
  // Blocks [b0, b1) of kWeightRows output channels, with the caller's
  // scratch: the rows dequantized for the blocks of 4 input rows, and the
  // block's scales and offsets in f32.
  struct Scratch {
    std::vector<float> rows, scale, offset;
  };
  auto runBlocks = [&](int64_t b0, int64_t b1, Scratch &s) {
    s.rows.resize((size_t)(kWeightRows * K));
    s.scale.resize((size_t)(kWeightRows * groups));
    s.offset.resize(O ? (size_t)(kWeightRows * groups) : 0);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * kWeightRows,
                    nw = std::min(kWeightRows, N - n0);
      const bool fusedBlock = fused && nw == kWeightRows;
      float *rows = s.rows.data(), *scale = s.scale.data(),
            *offset = O ? s.offset.data() : nullptr;
      for (int64_t i = 0; i < nw; ++i) {
        const int64_t n = n0 + i;
        halvesToFloat(S + n * groups, groups, scale + i * groups, simd);
        if (O)
          halvesToFloat(O + n * groups, groups, offset + i * groups, simd);
        // The row in its stored order (no perm), unless only the fused
        // dots read it.
        if (M >= kBlockRows || !fusedBlock)
          dequantizeInt4Row(P + n * pc, scale + i * groups,
                            O ? offset + i * groups : nullptr, K, G,
                            rows + i * K);
      }
      float acc[kBlockRows * kWeightRows];
      int64_t m = 0;
      // Blocks of 4 input rows against the block's 4 weight rows.
      for (; nw == kWeightRows && m + kBlockRows <= M; m += kBlockRows) {
        blockDots4x4(rows, K, X + m * K, K, K, acc);
        for (int64_t r = 0; r < kBlockRows; ++r)
          for (int64_t i = 0; i < nw; ++i)
            Y[(m + r) * N + n0 + i] =
                B ? acc[r * kWeightRows + i] + B[n0 + i]
                  : acc[r * kWeightRows + i];
      }
      // The rest (decode's one row): the block's weight rows against each.
      for (; m < M; ++m) {
        if (fusedBlock) {
#if defined(__x86_64__)
          (simd == Int4Simd::Avx512 ? dotInt4RowsAvx512 : dotInt4RowsAvx2)(
              P + n0 * pc, pc, scale, offset, groups, X + m * K, K, G, acc);
#endif
        } else if (nw == kWeightRows)
          weightRowDots4(rows, K, X + m * K, K, acc);
        else
          for (int64_t i = 0; i < nw; ++i)
            rowDots1(rows + i * K, X + m * K, K, &acc[i]);
        for (int64_t i = 0; i < nw; ++i)
          Y[m * N + n0 + i] = B ? acc[i] + B[n0 + i] : acc[i];
      }
    }
  };
  // Decode-sized calls over parallelChunks (CpuChunkPool.h: no worker to
  // wake, no barrier), about four chunks per thread; larger ones threaded
  // as the dense qlinear of the same MACs; small ones on this thread.
  const int64_t blocks = (N + kWeightRows - 1) / kWeightRows,
                work = M * N * K;
  if (chunkPoolFits(M, work)) {
    const int64_t per = std::max<int64_t>(1, blocks / (4 * cpuThreads()));
    parallelChunks((blocks + per - 1) / per, [&](int64_t c) {
      thread_local Scratch s;
      runBlocks(c * per, std::min(blocks, (c + 1) * per), s);
    });
  } else {
#pragma omp parallel if (work > kQLinearParallelWork)
    {
      Scratch s;
#pragma omp for schedule(static)
      for (int64_t b = 0; b < blocks; ++b)
        runBlocks(b, b + 1, s);
    }
  }
  return {std::move(r)};
}

void qcc::rt::widenHalves(const uint16_t *h, int64_t n, float *out,
                          bool vector) {
#if defined(__x86_64__)
  if (vector && haveF16c())
    return halvesToFloatF16c(h, n, out);
#endif
  for (int64_t i = 0; i < n; ++i)
    out[i] = halfToFloat(h[i]);
}

void qcc::rt::narrowToHalves(const float *x, int64_t n, uint16_t *out,
                             bool vector) {
#if defined(__x86_64__)
  if (vector && haveF16c())
    return floatsToHalfF16c(x, n, out);
#endif
  for (int64_t i = 0; i < n; ++i)
    out[i] = floatToHalf(x[i]);
}
