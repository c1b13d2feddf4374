//===- CpuAttentionLoops.cpp - attention's inner loops --------------------===//
//
// attendRows (score tiles over packed keys, BLAS or plain loops) and
// attendRuns (a few rows over runs of the KV cache, AVX-512 where the path
// and the CPU allow), shared by attention and kv_attention.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuKernelsInternal.h"

#include "runtime/cpu/CpuF32Gemm.h"
#include "runtime/cpu/CpuQuantKernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "runtime/cpu/CpuE4M3.h"
#include "runtime/cpu/X86Intrinsics.h"
#define QCC_HAVE_AVX512_ATTENTION 1
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

using namespace qcc::rt;

using namespace qcc::rt::cpukernels;

void qcc::rt::attendRows(int64_t R, int64_t D, const float *Q, int64_t ldq,
                         const float *K, int64_t ldk, const float *V,
                         int64_t ldv, float scale, float softcap,
                         const int64_t *lo, const int64_t *hi,
                         const float *mask, int64_t maskRow, int64_t maskCol,
                         float *O, int64_t ldo, std::vector<float> &scratch,
                         const PackedF32Weight *packedK, const float *alibi) {
  // Each row's range without the keys its mask sets to -inf at either end
  // (a causal or padding mask given as a tensor): exp(-inf) adds nothing.
  std::vector<int64_t> range(2 * (size_t)R);
  for (int64_t r = 0; r < R; ++r) {
    int64_t a = lo[r], e = std::max(lo[r], hi[r]);
    const float *m = mask ? mask + r * maskRow : nullptr;
    const float ninf = -std::numeric_limits<float>::infinity();
    while (m && e > a && m[(e - 1) * maskCol] == ninf)
      --e;
    while (m && a < e && m[a * maskCol] == ninf)
      ++a;
    range[2 * r] = a;
    range[2 * r + 1] = e;
  }
  // Keys [j0, j1) hold every row's range; S is R x n over them.
  int64_t j0 = std::numeric_limits<int64_t>::max(), j1 = 0;
  for (int64_t r = 0; r < R; ++r)
    if (range[2 * r] < range[2 * r + 1]) {
      j0 = std::min(j0, range[2 * r]);
      j1 = std::max(j1, range[2 * r + 1]);
    }
  if (j1 <= j0) { // nothing to attend: zeros, as fully masked rows are
    for (int64_t r = 0; r < R; ++r)
      std::fill(O + r * ldo, O + r * ldo + D, 0.0f);
    return;
  }
  bool few = R < 4;
  // The packed keys' tiles start at multiples of 16: the keys before j0
  // become part of S, outside every row's range (zeros below).
  const bool tiles = !few && packedK;
  if (tiles)
    j0 -= j0 % 16;
  // Values through the same tiles where D is whole 16-float blocks.
  const bool valueTiles = !few && D % 16 == 0 && cpuHasAvx512F();
  int64_t n = j1 - j0;
  scratch.resize((size_t)(R * n));
  float *S = scratch.data();
  // GEMMs in chunks of keys with M*N*K <= 2^18, which OpenBLAS runs on the
  // calling thread (interface/gemm.c): the caller's OpenMP threads share the
  // cores, rather than each call also spreading over OpenBLAS's pool.
  // A few rows (decode): plain loops, which beat a BLAS call per row.
  int64_t chunk = std::max<int64_t>(16, (int64_t(1) << 18) / (R * D));
  if (tiles) {
    f32GemmPackedOnThread(Q, ldq, R, *packedK, j0, j1, S, n);
    for (int64_t i = 0; i < R * n; ++i)
      S[i] *= scale;
  } else if (few)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < n; ++j) {
        const float *q = Q + r * ldq, *k = K + (j0 + j) * ldk;
        float dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t d = 0; d < D; ++d)
          dot += q[d] * k[d];
        S[r * n + j] = scale * dot;
      }
  else
    for (int64_t c = 0; c < n; c += chunk) // S = scale * Q K^T
      sgemm(false, true, R, std::min(chunk, n - c), D, scale, Q, ldq,
            K + (j0 + c) * ldk, ldk, 0.0f, S + c, n);
  for (int64_t r = 0; r < R; ++r) {
    float *row = S + r * n;
    int64_t a = std::clamp(range[2 * r] - j0, int64_t(0), n),
            e = std::clamp(range[2 * r + 1] - j0, a, n);
    std::fill(row, row + a, 0.0f);
    std::fill(row + e, row + n, 0.0f);
    if (softcap > 0.0f)
      for (int64_t j = a; j < e; ++j)
        row[j] = qcc::numerics::softcap(row[j], softcap);
    if (alibi)
      for (int64_t j = a; j < e; ++j)
        row[j] += qcc::numerics::alibi(alibi[r], j0 + j, hi[r] - 1);
    if (mask)
      for (int64_t j = a; j < e; ++j)
        row[j] += mask[r * maskRow + (j0 + j) * maskCol];
    softmaxRowFast(row + a, e - a); // fully masked rows become zeros
  }
  if (few)
    for (int64_t r = 0; r < R; ++r) {
      float *o = O + r * ldo;
      std::fill(o, o + D, 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        float p = S[r * n + j];
        const float *v = V + (j0 + j) * ldv;
#pragma omp simd
        for (int64_t d = 0; d < D; ++d)
          o[d] += p * v[d];
      }
    }
  else if (valueTiles)
    f32GemmRowMajorB(S, n, R, V + j0 * ldv, ldv, D, n, O, ldo);
  else
    for (int64_t c = 0; c < n; c += chunk) // O = P V
      sgemm(false, false, R, D, std::min(chunk, n - c), 1.0f, S + c, n,
            V + (j0 + c) * ldv, ldv, c == 0 ? 0.0f : 1.0f, O, ldo);
}

// The few-row attention's inner loops over one run of the cache, compiled
// for AVX-512 and AVX2 besides the baseline (picked at load by the CPU).
// int8 elements are dequantized as (float)q * s in the loop, the value
// attendRows would read from a gathered buffer.
namespace {

/// s[j] = scale * sum_d q[d] * key(j, d) over the run's keys j.
template <typename Key>
inline void scoresOver(const float *q, int64_t count, int64_t D, float scale,
                       float *s, Key key) {
  for (int64_t j = 0; j < count; ++j) {
    float dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t d = 0; d < D; ++d)
      dot += q[d] * key(j, d);
    s[j] = scale * dot;
  }
}

/// o[d] += p[j] * value(j, d) over the run's keys j.
template <typename Value>
inline void weightedSumOver(const float *p, int64_t count, int64_t D, float *o,
                            Value value) {
  for (int64_t j = 0; j < count; ++j)
#pragma omp simd
    for (int64_t d = 0; d < D; ++d)
      o[d] += p[j] * value(j, d);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
runScores(const float *q, const float *k, int64_t count, int64_t D,
          float scale, float *s) {
  scoresOver(q, count, D, scale, s,
             [&](int64_t j, int64_t d) { return k[j * D + d]; });
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
runScores(const float *q, const int8_t *k, const float *ks, int64_t count,
          int64_t D, float scale, float *s) {
  scoresOver(q, count, D, scale, s, [&](int64_t j, int64_t d) {
    return (float)k[j * D + d] * ks[d];
  });
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
runWeightedSum(const float *p, const float *v, int64_t count, int64_t D,
               float *o) {
  weightedSumOver(p, count, D, o,
                  [&](int64_t j, int64_t d) { return v[j * D + d]; });
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
runWeightedSum(const float *p, const int8_t *v, const float *vs,
               int64_t vsStride, int64_t count, int64_t D, float *o) {
  weightedSumOver(p, count, D, o, [&](int64_t j, int64_t d) {
    return (float)v[j * D + d] * vs[j * vsStride];
  });
}

// f16: widened (exact), then as float's.
__attribute__((target_clones("avx512f", "avx2", "default"))) void
runScores(const float *q, const uint16_t *k, int64_t count, int64_t D,
          float scale, float *s) {
  scoresOver(q, count, D, scale, s, [&](int64_t j, int64_t d) {
    return qcc::format::halfToFloat(k[j * D + d]);
  });
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
runWeightedSum(const float *p, const uint16_t *v, int64_t count, int64_t D,
               float *o) {
  weightedSumOver(p, count, D, o, [&](int64_t j, int64_t d) {
    return qcc::format::halfToFloat(v[j * D + d]);
  });
}

// FP8: the codes' values from e4m3Values(), then as int8's.
__attribute__((target_clones("avx512f", "avx2", "default"))) void
runScores(const float *q, const uint8_t *k, const float *ks, int64_t count,
          int64_t D, float scale, float *s) {
  const float *value = e4m3Values();
  scoresOver(q, count, D, scale, s, [&](int64_t j, int64_t d) {
    return value[k[j * D + d]] * ks[d];
  });
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
runWeightedSum(const float *p, const uint8_t *v, const float *vs,
               int64_t vsStride, int64_t count, int64_t D, float *o) {
  const float *value = e4m3Values();
  weightedSumOver(p, count, D, o, [&](int64_t j, int64_t d) {
    return value[v[j * D + d]] * vs[j * vsStride];
  });
}

#ifdef QCC_HAVE_AVX512_ATTENTION
// The same loops with AVX-512F intrinsics for head sizes that are multiples
// of 16 (the fast path): one horizontal sum per key instead of the serial
// one the compiler emits for the loops above, and the output row held in
// registers over the keys. The int8 scales are applied to the other factor
// ((q * ks) . k, (p * vs) v): float products in another order, as the fast
// path's sums already are.
#define QCC_AVX512_ATTENTION_TARGET __attribute__((target("avx512f")))

QCC_AVX512_ATTENTION_TARGET inline __m512 load16(const float *p) {
  return _mm512_loadu_ps(p);
}
QCC_AVX512_ATTENTION_TARGET inline __m512 load16(const int8_t *p) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
/// 16 f16 values, widened (exact).
QCC_AVX512_ATTENTION_TARGET inline __m512 load16(const uint16_t *p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
/// 16 E4M3 codes' values (CpuE4M3.h).
QCC_AVX512_ATTENTION_TARGET inline __m512 load16(const uint8_t *p) {
  return loadE4M3x16(p);
}

/// o[0, 16 NC) += sum_j p[j] v_j[0, 16 NC), v_j = v[j * D + ...] (int8:
/// times vs[j * vsStride] first), one FMA per j in order from o: the
/// products and order of the tiled path's P V (f32GemmRowMajorB over the
/// dequantized values), so that a row's sum is the same bits on either path.
template <int NC, typename T>
QCC_AVX512_ATTENTION_TARGET void
weightedSumAvx512(const float *p, const T *v, const float *vs,
                  int64_t vsStride, int64_t count, int64_t D, float *o) {
  __m512 acc[NC];
  for (int c = 0; c < NC; ++c)
    acc[c] = _mm512_loadu_ps(o + 16 * c);
  for (int64_t j = 0; j < count; ++j) {
    __m512 pj = _mm512_set1_ps(p[j]);
    for (int c = 0; c < NC; ++c) {
      __m512 vj = load16(v + j * D + 16 * c);
      if (vs)
        vj = _mm512_mul_ps(vj, _mm512_set1_ps(vs[j * vsStride]));
      acc[c] = _mm512_fmadd_ps(pj, vj, acc[c]);
    }
  }
  for (int c = 0; c < NC; ++c)
    _mm512_storeu_ps(o + 16 * c, acc[c]);
}

/// weightedSumAvx512 over columns [c0, c1) (multiples of 16), 64 at a time:
/// each column's sum is the same bits whatever columns are done with it.
template <typename T>
void weightedSumAvx512(const float *p, const T *v, const float *vs,
                       int64_t vsStride, int64_t count, int64_t D, int64_t c0,
                       int64_t c1, float *o) {
  for (int64_t d = c0; d < c1; d += 64) {
    const T *vd = v + d;
    switch (std::min<int64_t>(c1 - d, 64) / 16) {
    case 4: weightedSumAvx512<4>(p, vd, vs, vsStride, count, D, o + d); break;
    case 3: weightedSumAvx512<3>(p, vd, vs, vsStride, count, D, o + d); break;
    case 2: weightedSumAvx512<2>(p, vd, vs, vsStride, count, D, o + d); break;
    default: weightedSumAvx512<1>(p, vd, vs, vsStride, count, D, o + d);
    }
  }
}

/// The 16 x 16 floats of r transposed in place (r[i][j] = old r[j][i]).
QCC_AVX512_ATTENTION_TARGET inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // In each 128-bit lane L, r[i + e] gets element 4L + e of rows i..i+3.
  for (int i = 0; i < 16; i += 4)
    for (int k = 0; k < 2; ++k) {
      __m512d a = _mm512_castps_pd(t[i + k]), b = _mm512_castps_pd(t[i + k + 2]);
      r[i + 2 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[i + 2 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  for (int i = 0; i < 16; i += 8)
    for (int k = 0; k < 4; ++k) {
      t[i + k] = _mm512_shuffle_f32x4(r[i + k], r[i + k + 4], 0x88);
      t[i + k + 4] = _mm512_shuffle_f32x4(r[i + k], r[i + k + 4], 0xDD);
    }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0x88);
    r[k + 8] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0xDD);
  }
}

/// s[r][j] = scale * q_r . k_j for up to 16 keys (k_j at k + j * D; int8:
/// times ks[d] first) and R <= 3 rows, each dot as f32GemmPackedOnThread
/// sums it: from 0, one FMA per d in ascending order (the keys transposed in
/// registers so that 16 keys' sums run in the lanes), then times scale.
/// Decode's scores are therefore the bits the tiled prefill path gives.
template <typename T>
QCC_AVX512_ATTENTION_TARGET void
scoresGemmOrder(int R, const float *const q[3], const T *k, const float *ks,
                int64_t count, int64_t D, float scale, float *const s[3]) {
  __m512 acc[3] = {_mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  for (int64_t d0 = 0; d0 < D; d0 += 16) {
    __m512 rows[16];
    for (int64_t j = 0; j < 16; ++j) {
      if (j >= count) {
        rows[j] = _mm512_setzero_ps();
        continue;
      }
      rows[j] = load16(k + j * D + d0);
      if (ks)
        rows[j] = _mm512_mul_ps(rows[j], _mm512_loadu_ps(ks + d0));
    }
    transpose16(rows); // rows[i]: element d0 + i of the 16 keys
    for (int i = 0; i < 16; ++i)
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r][d0 + i]), rows[i], acc[r]);
  }
  const __m512 sv = _mm512_set1_ps(scale);
  for (int r = 0; r < R; ++r)
    _mm512_mask_storeu_ps(s[r], firstLanes(count), _mm512_mul_ps(acc[r], sv));
}

bool haveAvx512Attention(int64_t D) {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has && D % 16 == 0 && cpuKernelPath() == CpuKernelPath::Fast;
}
#endif

/// Calls fn(run, offset, n) for the part [offset, offset + n) of each run
/// that lies inside positions [a, e).
template <typename T, typename F>
void forRunsIn(const std::vector<KvRun<T>> &runs, int64_t a, int64_t e,
               F &&fn) {
  for (const KvRun<T> &run : runs) {
    int64_t from = std::max(a, run.first),
            to = std::min(e, run.first + run.count);
    if (from < to)
      fn(run, from - run.first, to - from);
  }
}

#ifdef QCC_HAVE_AVX512_ATTENTION
/// attendRunScores on AVX-512: three rows per pass over the keys.
template <typename T>
void runScoresAvx512(int64_t R, int64_t D, const float *Q, int64_t ldq,
                     const std::vector<KvRun<T>> &keys, const float *kScales,
                     float scale, int64_t a, int64_t e, float *S, int64_t lds,
                     int64_t s0) {
  for (int64_t r0 = 0; r0 < R; r0 += 3) {
    const int g = (int)std::min<int64_t>(3, R - r0);
    const float *q[3] = {Q + r0 * ldq, Q + std::min(r0 + 1, R - 1) * ldq,
                         Q + std::min(r0 + 2, R - 1) * ldq};
    forRunsIn(keys, a, e, [&](const KvRun<T> &run, int64_t off, int64_t cnt) {
      for (int64_t j = 0; j < cnt; j += 16) {
        int64_t at = run.first + off + j - s0;
        float *s[3] = {S + r0 * lds + at,
                       S + (r0 + std::min(1, g - 1)) * lds + at,
                       S + (r0 + std::min(2, g - 1)) * lds + at};
        scoresGemmOrder<T>(g, q, run.data + (off + j) * D, kScales,
                           std::min<int64_t>(16, cnt - j), D, scale, s);
      }
    });
  }
}

/// attendRunColumns on AVX-512.
template <typename T>
void runColumnsAvx512(int64_t R, int64_t D, const std::vector<KvRun<T>> &values,
                      const int64_t *lo, const int64_t *hi, const float *S,
                      int64_t lds, int64_t s0, int64_t c0, int64_t c1, float *O,
                      int64_t ldo) {
  for (int64_t r = 0; r < R; ++r) {
    float *o = O + r * ldo;
    std::fill(o + c0, o + c1, 0.0f);
    const float *row = S + r * lds; // row[j - s0]: position j's weight
    forRunsIn(values, lo[r], hi[r],
              [&](const KvRun<T> &run, int64_t off, int64_t cnt) {
                const float *vs = nullptr;
                if constexpr (kScaledKvElement<T>)
                  vs = run.scales + off * run.scaleStride;
                weightedSumAvx512(row + (run.first + off - s0),
                                  run.data + off * D, vs, run.scaleStride, cnt,
                                  D, c0, c1, o);
              });
  }
}
#endif

template <typename T>
void attendRunsImpl(int64_t R, int64_t D, const float *Q, int64_t ldq,
                    const std::vector<KvRun<T>> &keys,
                    const std::vector<KvRun<T>> &values, const float *kScales,
                    float scale, float softcap, const int64_t *lo,
                    const int64_t *hi, float *O, int64_t ldo,
                    std::vector<float> &scratch, const float *alibi) {
  constexpr bool scaled = kScaledKvElement<T>;
#ifdef QCC_HAVE_AVX512_ATTENTION
  // AVX-512: the scores of all rows over the union of their ranges, then
  // each row's softmax and weighted sum over its own range (the phases
  // kv_attention's decode split runs apart).
  if (haveAvx512Attention(D)) {
    int64_t u0 = std::numeric_limits<int64_t>::max(), u1 = 0;
    for (int64_t r = 0; r < R; ++r)
      if (lo[r] < hi[r])
        u0 = std::min(u0, lo[r]), u1 = std::max(u1, hi[r]);
    if (u1 <= u0) { // nothing to attend: zeros, as attendRows
      for (int64_t r = 0; r < R; ++r)
        std::fill(O + r * ldo, O + r * ldo + D, 0.0f);
      return;
    }
    const int64_t n = u1 - u0;
    scratch.resize((size_t)(R * n));
    float *S = scratch.data();
    runScoresAvx512(R, D, Q, ldq, keys, kScales, scale, u0, u1, S, n, u0);
    for (int64_t r = 0; r < R; ++r)
      if (lo[r] < hi[r])
        attendRowSoftmax(S + r * n + (lo[r] - u0), lo[r], hi[r], softcap,
                         alibi ? alibi + r : nullptr);
    runColumnsAvx512(R, D, values, lo, hi, S, n, u0, 0, D, O, ldo);
    return;
  }
#endif
  // Elsewhere (portable kernels, no AVX-512): the loops above, row by row.
  for (int64_t r = 0; r < R; ++r) {
    int64_t a = lo[r], e = std::max(lo[r], hi[r]);
    float *o = O + r * ldo;
    std::fill(o, o + D, 0.0f);
    if (e == a)
      continue; // nothing to attend: zeros, as attendRows
    scratch.resize((size_t)(e - a));
    float *row = scratch.data();
    const float *q = Q + r * ldq;
    forRunsIn(keys, a, e, [&](const KvRun<T> &run, int64_t off, int64_t n) {
      float *s = row + (run.first + off - a);
      if constexpr (scaled)
        runScores(q, run.data + off * D, kScales, n, D, scale, s);
      else
        (void)kScales, runScores(q, run.data + off * D, n, D, scale, s);
    });
    attendRowSoftmax(row, a, e, softcap, alibi ? alibi + r : nullptr);
    forRunsIn(values, a, e, [&](const KvRun<T> &run, int64_t off, int64_t n) {
      const float *p = row + (run.first + off - a);
      if constexpr (scaled)
        runWeightedSum(p, run.data + off * D, run.scales + off * run.scaleStride,
                       run.scaleStride, n, D, o);
      else
        runWeightedSum(p, run.data + off * D, n, D, o);
    });
  }
}

} // namespace

void qcc::rt::attendRuns(int64_t R, int64_t D, const float *Q, int64_t ldq,
                         const std::vector<KvRun<float>> &keys,
                         const std::vector<KvRun<float>> &values, float scale,
                         float softcap, const int64_t *lo, const int64_t *hi,
                         float *O, int64_t ldo, std::vector<float> &scratch,
                         const float *alibi) {
  attendRunsImpl(R, D, Q, ldq, keys, values, nullptr, scale, softcap, lo, hi,
                 O, ldo, scratch, alibi);
}

template <typename T>
void qcc::rt::attendRuns(int64_t R, int64_t D, const float *Q, int64_t ldq,
                         const std::vector<KvRun<T>> &keys,
                         const std::vector<KvRun<T>> &values,
                         const float *kScales, float scale, float softcap,
                         const int64_t *lo, const int64_t *hi, float *O,
                         int64_t ldo, std::vector<float> &scratch,
                         const float *alibi) {
  attendRunsImpl(R, D, Q, ldq, keys, values, kScales, scale, softcap, lo, hi,
                 O, ldo, scratch, alibi);
}
template void qcc::rt::attendRuns<int8_t>(
    int64_t, int64_t, const float *, int64_t, const std::vector<KvRun<int8_t>> &,
    const std::vector<KvRun<int8_t>> &, const float *, float, float,
    const int64_t *, const int64_t *, float *, int64_t, std::vector<float> &,
    const float *);
template void qcc::rt::attendRuns<uint16_t>(
    int64_t, int64_t, const float *, int64_t,
    const std::vector<KvRun<uint16_t>> &, const std::vector<KvRun<uint16_t>> &,
    const float *, float, float, const int64_t *, const int64_t *, float *,
    int64_t, std::vector<float> &, const float *);
template void qcc::rt::attendRuns<uint8_t>(
    int64_t, int64_t, const float *, int64_t,
    const std::vector<KvRun<uint8_t>> &, const std::vector<KvRun<uint8_t>> &,
    const float *, float, float, const int64_t *, const int64_t *, float *,
    int64_t, std::vector<float> &, const float *);

void qcc::rt::attendRowSoftmax(float *row, int64_t lo, int64_t hi,
                               float softcap, const float *alibiSlope) {
  int64_t len = hi - lo;
  if (softcap > 0.0f)
    for (int64_t j = 0; j < len; ++j)
      row[j] = qcc::numerics::softcap(row[j], softcap);
  if (alibiSlope)
    for (int64_t j = 0; j < len; ++j)
      row[j] += qcc::numerics::alibi(*alibiSlope, lo + j, hi - 1);
  softmaxRowFast(row, len);
}

bool qcc::rt::attendRunsSplit(int64_t D) {
#ifdef QCC_HAVE_AVX512_ATTENTION
  return haveAvx512Attention(D);
#else
  (void)D;
  return false;
#endif
}

template <typename T>
void qcc::rt::attendRunScores(int64_t R, int64_t D, const float *Q,
                              int64_t ldq, const std::vector<KvRun<T>> &keys,
                              const float *kScales, float scale, int64_t a,
                              int64_t e, float *S, int64_t lds, int64_t s0) {
  if (!attendRunsSplit(D))
    throw std::logic_error("attendRunScores without the AVX-512 path");
#ifdef QCC_HAVE_AVX512_ATTENTION
  runScoresAvx512(R, D, Q, ldq, keys, kScales, scale, a, e, S, lds, s0);
#endif
}

template <typename T>
void qcc::rt::attendRunColumns(int64_t R, int64_t D,
                               const std::vector<KvRun<T>> &values,
                               const int64_t *lo, const int64_t *hi,
                               const float *S, int64_t lds, int64_t s0,
                               int64_t c0, int64_t c1, float *O, int64_t ldo) {
  if (!attendRunsSplit(D) || c0 % 16 || c1 % 16)
    throw std::logic_error("attendRunColumns without the AVX-512 path");
#ifdef QCC_HAVE_AVX512_ATTENTION
  runColumnsAvx512(R, D, values, lo, hi, S, lds, s0, c0, c1, O, ldo);
#endif
}

#define QCC_ATTEND_RUN_PHASES(T)                                               \
  template void qcc::rt::attendRunScores<T>(                                   \
      int64_t, int64_t, const float *, int64_t, const std::vector<KvRun<T>> &, \
      const float *, float, int64_t, int64_t, float *, int64_t, int64_t);      \
  template void qcc::rt::attendRunColumns<T>(                                  \
      int64_t, int64_t, const std::vector<KvRun<T>> &, const int64_t *,        \
      const int64_t *, const float *, int64_t, int64_t, int64_t, int64_t,      \
      float *, int64_t);
QCC_ATTEND_RUN_PHASES(float)
QCC_ATTEND_RUN_PHASES(int8_t)
QCC_ATTEND_RUN_PHASES(uint16_t)
QCC_ATTEND_RUN_PHASES(uint8_t)
#undef QCC_ATTEND_RUN_PHASES

const float *qcc::rt::e4m3Values() {
  static const std::array<float, 256> values = [] {
    std::array<float, 256> v;
    for (int c = 0; c < 256; ++c)
      v[(size_t)c] = qcc::numerics::e4m3ToFloat((unsigned char)c);
    return v;
  }();
  return values.data();
}
