//===- attention_prefill.cuh - flash-attention prefill (+ rotary + KV append) ===//
//
// NVRTC include name "qcc/attention_prefill.cuh". Semantics: QccOps.td
// `qcc.attention` (causal or bidirectional, GQA, no additive mask) and
// `qcc.kv_attention` (docs/KV_CACHE.md). Per batch row b:
//   past  = cache ? cached_lens[b] : 0         (tokens already in the cache)
//   nq    = valid_lens ? valid_lens[b] : seq_q  (real query tokens, rows right-padded)
//   nk    = cache ? nq : seq_kv                (keys/values from the inputs)
//   total = past + nk, offset = total - nq     (= Skv - Sq for plain attention)
//   key position p < past comes from the cache (dequantized), p >= past is
//   input token p - past (rotated when Rotary, then rounded through the cache
//   storage type so it equals what the cache holds);
//   query t < nq attends to p <= t + offset (Causal) or all p < total, and
//   with window > 0 only to p > t + offset - window (HF's sliding window);
//   out rows t >= nq are zeros.
// Scores are scale * (q . k), softcapped to softcap * tanh(score / softcap)
// when softcap > 0, plus alibi[h] * (p - (t + offset)) with ALiBi slopes
// (the key's distance behind the query; kv_attention's `alibi`).
// With a cache, the CTAs with h % (H / Hkv) == 0 write the K/V of their query
// block's tokens (t < nq) to cache position past + t ("attention + KV append"
// region). Other CTAs never read those positions from the cache, so there is
// no ordering hazard inside the launch.
//
// Template: HeadDim (64, 128; multiple of 32), BlockQ (query rows per CTA,
// multiple of NumWarps), BlockKV (keys per shared tile, multiple of 32),
// NumWarps, Causal, Rotary, T (q/k/v/out: float or __half), RopeT (cos/sin
// tables), Cache (NoCache, ContiguousCache<S>, PagedCache<S>).
//
// Math: SIMT, float throughout. A warp owns BlockQ / NumWarps query rows
// (rows warp, warp + NumWarps, ...). For each 32-key chunk of the shared tile,
// lane j scores key j (dot over HeadDim from shared memory), then the online
// softmax update m' = max(m, max_j s_j), l' = l e^(m-m') + sum_j e^(s_j-m'),
// acc'[d] = acc[d] e^(m-m') + sum_j e^(s_j-m') V[j][d], lane owning
// d = lane + 32 i.
//
// Launch (AttnPrefillLaunch<HeadDim, BlockQ, BlockKV, NumWarps>, attention_config.h):
//   grid  = (ceil(seq_q / BlockQ), num_heads, batch)
//   block = NumWarps * 32
//   dynamic shared memory = 4 * (BlockQ * HeadDim + BlockKV * (HeadDim + 1)
//                                + BlockKV * HeadDim) bytes
//   (and 4 * BlockKV static: a kivi cache's V scales of a tile)
//   (> 48 KB needs cudaFuncAttributeMaxDynamicSharedMemorySize):
//     <64, 64, 64, 4>:  49,408 B     <64, 32, 64, 4>:  41,216 B
//     <128, 64, 64, 8>: 98,560 B     <128, 32, 64, 4>: 82,176 B
//   all within sm_80's 163 KB (167,936 B) opt-in limit.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_ATTENTION_PREFILL_CUH
#define QCC_KERNELS_ATTENTION_PREFILL_CUH

#include "qcc/attention_config.h"
#include "qcc/common.cuh"
#include "qcc/kv_cache.cuh"
#include "qcc/rotary.cuh"

namespace qcc {

/// The fields are declared in attention_config.h (QCC_ATTN_PREFILL_PARAMS).
template <typename T, typename RopeT, typename Cache> struct AttnPrefillParams {
  QCC_ATTN_PREFILL_PARAMS(QCC_PARAMS_MEMBER, QCC_PARAMS_LINE)
};

namespace detail {
// Input token t's row of kv head g in k or v ([B, seq_kv, Hkv * D]).
template <int HeadDim, typename T, typename RopeT, typename Cache>
__device__ __forceinline__ const T *newKvRow(const AttnPrefillParams<T, RopeT, Cache> &p,
                                             const T *base, int b, int t, int g,
                                             int seq_kv) {
  return base + ((long long)b * seq_kv + t) * p.num_kv_heads * HeadDim +
         (long long)g * HeadDim;
}

// Value of key/value element d of input token t (rotated for K when Rotary),
// rounded through the cache storage: keys with their channel's scale, values
// with `vScale`, the row's.
template <int HeadDim, bool Rotary, typename T, typename RopeT, typename Cache>
__device__ __forceinline__ float newKvElement(const AttnPrefillParams<T, RopeT, Cache> &p,
                                              const T *base, int b, int t, int g,
                                              int d, int which, int seq_kv,
                                              float vScale) {
  const T *head = newKvRow<HeadDim>(p, base, b, t, g, seq_kv);
  float x = (Rotary && which == 0) ? ropeElement<HeadDim>(head, d, p.rope, b, t)
                                   : toFloat(head[d]);
  return p.cache.roundTrip(x, which == 0 ? p.cache.keyScale(g, d) : vScale);
}

// The V scale of input token t's row, reduced by the calling warp (all 32
// lanes call it): kivi, from the row's absmax; per-head, the head's.
template <int HeadDim, typename T, typename RopeT, typename Cache>
__device__ __forceinline__ float newRowValueScale(const AttnPrefillParams<T, RopeT, Cache> &p,
                                                  int b, int t, int g, int seq_kv,
                                                  int lane) {
  float vAbs = 0.0f;
  if (p.cache.valueScalePerToken()) {
    const T *row = newKvRow<HeadDim>(p, p.v, b, t, g, seq_kv);
    for (int d = lane; d < HeadDim; d += 32) vAbs = fmaxf(vAbs, fabsf(toFloat(row[d])));
  }
  return newValueScale(p.cache, g, vAbs);
}
} // namespace detail

template <int HeadDim, int BlockQ, int BlockKV, int NumWarps, bool Causal,
          bool Rotary, typename T, typename RopeT, typename Cache>
__device__ __forceinline__ void
attentionPrefillTile(const AttnPrefillParams<T, RopeT, Cache> &p, float *smem) {
  using L = AttnPrefillLaunch<HeadDim, BlockQ, BlockKV, NumWarps>;
  constexpr int kThreads = L::kBlockThreads;
  constexpr int kRowsPerWarp = BlockQ / NumWarps;
  constexpr int kDPerLane = HeadDim / 32;
  constexpr int kChunks = BlockKV / 32;

  float *Qs = smem;
  float *Ks = Qs + L::kQFloats;
  float *Vs = Ks + L::kKFloats;

  const int q0 = blockIdx.x * BlockQ, h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = p.num_heads / p.num_kv_heads;
  const int g = h / group;
  const int past = Cache::kHasCache ? p.cached_lens[b] : 0;
  const int nq = p.valid_lens != nullptr ? p.valid_lens[b] : p.seq_q;
  const int seq_kv = Cache::kHasCache ? p.seq_q : p.seq_kv;
  const int nk = Cache::kHasCache ? nq : p.seq_kv;
  const int total = past + nk;
  const int offset = total - nq;
  const long long qStride = (long long)p.num_heads * HeadDim;
  const int qEnd = imin(q0 + BlockQ, nq); // valid rows are [q0, qEnd)

  // 1. KV append for this query block's tokens (one CTA per kv head, a warp
  //    per token: kivi reduces the row's V scale).
  if (Cache::kHasCache && h % group == 0 && q0 < qEnd) {
    using KvS = KvElem<typename Cache::Storage>;
    for (int t = q0 + warp; t < qEnd; t += NumWarps) {
      const T *kh = detail::newKvRow<HeadDim>(p, p.k, b, t, g, seq_kv);
      const T *vh = detail::newKvRow<HeadDim>(p, p.v, b, t, g, seq_kv);
      const float vs = detail::newRowValueScale<HeadDim>(p, b, t, g, seq_kv, lane);
      for (int d = lane; d < HeadDim; d += 32) {
        float kx = Rotary ? ropeElement<HeadDim>(kh, d, p.rope, b, t) : toFloat(kh[d]);
        p.cache.row(b, 0, g, past + t)[d] = KvS::store(kx, p.cache.keyScale(g, d));
        p.cache.row(b, 1, g, past + t)[d] = KvS::store(toFloat(vh[d]), vs);
      }
      if (lane == 0 && p.cache.valueScalePerToken())
        *p.cache.valueScaleAt(b, g, past + t) = vs;
    }
  }

  // 2. Padding rows are zeros; a block with no valid rows is done.
  for (int i = tid; i < BlockQ * HeadDim; i += kThreads) {
    const int t = q0 + i / HeadDim, d = i % HeadDim;
    if (t >= qEnd && t < p.seq_q)
      p.out[((long long)b * p.seq_q + t) * qStride + (long long)h * HeadDim + d] =
          fromFloat<T>(0.0f);
  }
  if (q0 >= qEnd) return;

  // 3. Q tile (rotated), zeros past qEnd.
  for (int i = tid; i < BlockQ * HeadDim; i += kThreads) {
    const int r = i / HeadDim, d = i % HeadDim, t = q0 + r;
    float x = 0.0f;
    if (t < qEnd) {
      const T *head = p.q + ((long long)b * p.seq_q + t) * qStride + (long long)h * HeadDim;
      x = Rotary ? ropeElement<HeadDim>(head, d, p.rope, b, t) : toFloat(head[d]);
    }
    Qs[i] = x;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDPerLane];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    m[i] = negInf();
    l[i] = 0.0f;
#pragma unroll
    for (int e = 0; e < kDPerLane; ++e) acc[i][e] = 0.0f;
  }

  const int kvEnd = Causal ? imin(total, qEnd - 1 + offset + 1) : total;
  // kivi: the V scale of each row of the tile (cached rows' stored, new
  // rows' reduced from the input as step 1 stored them).
  __shared__ float vTileScale[BlockKV];

  for (int j0 = 0; j0 < kvEnd; j0 += BlockKV) {
    __syncthreads(); // previous tile fully consumed (and Qs written, first time)
    if (p.cache.valueScalePerToken()) {
      for (int jj = warp; jj < BlockKV; jj += NumWarps) {
        const int pos = j0 + jj;
        float vs = 1.0f;
        if (pos < kvEnd)
          vs = pos < past ? p.cache.valueScale(b, g, pos)
                          : detail::newRowValueScale<HeadDim>(p, b, pos - past, g,
                                                              seq_kv, lane);
        if (lane == 0) vTileScale[jj] = vs;
      }
      __syncthreads();
    }
    for (int i = tid; i < BlockKV * HeadDim; i += kThreads) {
      const int jj = i / HeadDim, d = i % HeadDim, pos = j0 + jj;
      float kx = 0.0f, vx = 0.0f;
      if (pos < kvEnd) {
        const float vs =
            p.cache.valueScalePerToken() ? vTileScale[jj] : p.cache.headValueScale(g);
        if (pos < past) {
          using KvS = KvElem<typename Cache::Storage>;
          kx = KvS::load(p.cache.row(b, 0, g, pos)[d], p.cache.keyScale(g, d));
          vx = KvS::load(p.cache.row(b, 1, g, pos)[d], vs);
        } else {
          kx = detail::newKvElement<HeadDim, Rotary>(p, p.k, b, pos - past, g, d, 0,
                                                     seq_kv, vs);
          vx = detail::newKvElement<HeadDim, Rotary>(p, p.v, b, pos - past, g, d, 1,
                                                     seq_kv, vs);
        }
      }
      Ks[jj * L::kKStride + d] = kx;
      Vs[jj * HeadDim + d] = vx;
    }
    __syncthreads();

#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = i * NumWarps + warp, t = q0 + r;
      if (t >= qEnd) continue; // warp-uniform
      const int limit = Causal ? imin(t + offset, kvEnd - 1) : kvEnd - 1;
      const int first = p.window > 0 ? t + offset - p.window + 1 : 0;
      if (j0 > limit || j0 + BlockKV <= first) continue;
      const float *qrow = Qs + r * HeadDim;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int jj = c * 32 + lane, pos = j0 + jj;
        const bool allowed = pos <= limit && pos >= first;
        float s = negInf();
        if (allowed) {
          const float *krow = Ks + jj * L::kKStride;
          float dot = 0.0f;
#pragma unroll 16
          for (int d = 0; d < HeadDim; ++d) dot += qrow[d] * krow[d];
          s = dot * p.scale;
          if (p.softcap > 0.0f) s = numerics::softcap(s, p.softcap);
          if (p.alibi != nullptr) s += numerics::alibi(p.alibi[h], pos, t + offset);
        }
        const float mNew = fmaxf(m[i], warpMax(s));
        if (mNew == negInf()) continue; // nothing allowed yet (warp-uniform)
        const float corr = expf(m[i] - mNew); // m = -inf gives 0
        const float pj = allowed ? expf(s - mNew) : 0.0f;
        l[i] = l[i] * corr + warpSum(pj);
#pragma unroll
        for (int e = 0; e < kDPerLane; ++e) acc[i][e] *= corr;
#pragma unroll 8
        for (int j = 0; j < 32; ++j) {
          const float pb = __shfl_sync(kFullMask, pj, j);
          const float *vrow = Vs + (c * 32 + j) * HeadDim;
#pragma unroll
          for (int e = 0; e < kDPerLane; ++e) acc[i][e] += pb * vrow[lane + 32 * e];
        }
        m[i] = mNew;
      }
    }
  }

  // 4. Normalize and write.
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = i * NumWarps + warp, t = q0 + r;
    if (t >= qEnd) continue;
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    T *o = p.out + ((long long)b * p.seq_q + t) * qStride + (long long)h * HeadDim;
#pragma unroll
    for (int e = 0; e < kDPerLane; ++e) o[lane + 32 * e] = fromFloat<T>(acc[i][e] * inv);
  }
}

template <int HeadDim, int BlockQ, int BlockKV, int NumWarps, bool Causal,
          bool Rotary, typename T, typename RopeT, typename Cache>
__global__ void __launch_bounds__(NumWarps * 32)
attentionPrefillKernel(AttnPrefillParams<T, RopeT, Cache> p) {
  extern __shared__ float qcc_attn_prefill_smem[];
  attentionPrefillTile<HeadDim, BlockQ, BlockKV, NumWarps, Causal, Rotary>(
      p, qcc_attn_prefill_smem);
}

} // namespace qcc

#endif // QCC_KERNELS_ATTENTION_PREFILL_CUH
