//===- attention_decode.cuh - decode attention, split-K (flash-decoding) ----===//
//
// NVRTC include name "qcc/attention_decode.cuh". Semantics: `qcc.kv_attention`
// with one query token per sequence (docs/KV_CACHE.md). Per batch row b:
//   past = cached_lens[b]; valid = valid_lens ? valid_lens[b] : 1 (0 or 1);
//   when valid: the new token's K/V (K rotated when Rotary) are written to
//   cache position past, and the query attends to positions [0, past]
//   (L = past + 1 keys), with window > 0 only to [max(L - window, 0), past];
//   scores scale * (q . k), softcap * tanh(score / softcap) when
//   softcap > 0, plus alibi[h] * (pos - past) with ALiBi slopes (after
//   the softcap, as the CPU kernel); position past is read from the inputs
//   (rounded through the cache storage), older ones from the cache (dequantized:
//   int8 q * scale). When not valid the output row is zeros.
//
// Template: HeadDim (64, 128; multiple of 32), NumWarps, ChunkSize (positions
// per split CTA), Rotary, T (q/k/v/out: float or __half), RopeT (cos/sin:
// [B, 1, R] with rope.batch_stride = R, or [1, R] with 0; R = rope.rotary_dim,
// see rotary.cuh), Cache
// (ContiguousCache<S> / PagedCache<S>, S = float, __half or signed char).
//
// Work split: CTA (s, h, b) handles positions [s * ChunkSize, min((s + 1) *
// ChunkSize, L)) of head h, or all of [0, L) when gridDim.x == 1 (no split).
// Warp w takes positions w, w + NumWarps, ...: the lanes load the key row
// coalesced (lane owns D/32 consecutive dims), reduce the dot with shuffles,
// and keep a running (m, l, acc) with the online-softmax update. The warps'
// states merge in shared memory:
//   M = max_w m_w, l = sum_w l_w e^(m_w - M), acc = sum_w acc_w e^(m_w - M).
// Without split the CTA writes acc / l. With split it writes the partial
// (M, l) to ws_ml[((b * H + h) * splits + s) * 2 + {0, 1}] and acc (not
// normalized) to ws_acc[((b * H + h) * splits + s) * D + d]; an empty split
// writes (-inf, 0, 0). attentionDecodeCombine then computes
//   out = sum_s acc_s e^(M_s - M) / sum_s l_s e^(M_s - M), M = max_s M_s
// (zeros when every l_s is 0).
// The KV append is done by the CTA with h % (H / Hkv) == 0 whose split holds
// position past (s = past / ChunkSize; s = 0 without split).
//
// Launch (AttnDecodeLaunch<HeadDim, NumWarps, ChunkSize>, attention_config.h):
//   splits = numSplits(max over rows of past + 1), >= 1; use 1 (no combine)
//            for short contexts
//   grid   = (splits, num_heads, batch), block = NumWarps * 32,
//   dynamic shared memory = 0; static = 4 * NumWarps * (HeadDim + 2) bytes
//            (<128, 4, *>: 2,080 B; <64, 4, *>: 1,056 B)
//   workspace = batch * num_heads * splits * (HeadDim + 2) * 4 bytes (split only)
// Combine (AttnDecodeCombineLaunch<HeadDim>): grid = (num_heads, batch),
//   block = HeadDim, dynamic shared memory = 0.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_ATTENTION_DECODE_CUH
#define QCC_KERNELS_ATTENTION_DECODE_CUH

#include "qcc/attention_config.h"
#include "qcc/common.cuh"
#include "qcc/kv_cache.cuh"
#include "qcc/rotary.cuh"

namespace qcc {

/// The fields are declared in attention_config.h (QCC_ATTN_DECODE_PARAMS).
template <typename T, typename RopeT, typename Cache> struct AttnDecodeParams {
  QCC_ATTN_DECODE_PARAMS(QCC_PARAMS_MEMBER, QCC_PARAMS_LINE)
};

template <int HeadDim, int NumWarps, int ChunkSize, bool Rotary, typename T,
          typename RopeT, typename Cache>
__device__ __forceinline__ void
attentionDecodeSplit(const AttnDecodeParams<T, RopeT, Cache> &p) {
  static_assert(Cache::kHasCache, "decode attention reads a KV cache");
  using S = typename Cache::Storage;
  constexpr int kVpl = HeadDim / 32; // dims per lane: lane * kVpl + e
  __shared__ float sm_m[NumWarps], sm_l[NumWarps];
  __shared__ float sm_acc[NumWarps][HeadDim];

  const int s = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int splits = gridDim.x;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = p.num_heads / p.num_kv_heads, g = h / group;
  const int past = p.cached_lens[b];
  const int valid = p.valid_lens != nullptr ? p.valid_lens[b] : 1;
  const int len = valid > 0 ? past + 1 : 0;
  const int lo = p.window > 0 ? imax(len - p.window, 0) : 0; // window start
  const int chunk0 = splits == 1 ? 0 : imin(s * ChunkSize, len);
  const int end = splits == 1 ? len : imin(chunk0 + ChunkSize, len);
  const int begin = imax(chunk0, lo); // an empty range when the split is older
  const T *kNew = p.k + ((long long)b * p.num_kv_heads + g) * HeadDim;
  const T *vNew = p.v + ((long long)b * p.num_kv_heads + g) * HeadDim;
  // This lane's key scales (one per channel) and the new V row's scale
  // (every warp reduces it for itself).
  float ks[kVpl], vAbs = 0.0f;
#pragma unroll
  for (int e = 0; e < kVpl; ++e) {
    ks[e] = p.cache.keyScale(g, lane * kVpl + e);
    vAbs = fmaxf(vAbs, fabsf(toFloat(vNew[lane * kVpl + e])));
  }
  const float vNewScale = newValueScale(p.cache, g, vAbs);

  // KV append of the new token.
  if (len > 0 && h % group == 0 && s == (splits == 1 ? 0 : past / ChunkSize)) {
    for (int d = tid; d < HeadDim; d += NumWarps * 32) {
      float kx = Rotary ? ropeElement<HeadDim>(kNew, d, p.rope, b, 0) : toFloat(kNew[d]);
      p.cache.row(b, 0, g, past)[d] = KvElem<S>::store(kx, p.cache.keyScale(g, d));
      p.cache.row(b, 1, g, past)[d] = KvElem<S>::store(toFloat(vNew[d]), vNewScale);
    }
    if (tid == 0 && p.cache.valueScalePerToken()) *p.cache.valueScaleAt(b, g, past) = vNewScale;
  }

  // Query slice of this lane.
  const T *qh = p.q + ((long long)b * p.num_heads + h) * HeadDim;
  float qv[kVpl], acc[kVpl];
#pragma unroll
  for (int e = 0; e < kVpl; ++e) {
    const int d = lane * kVpl + e;
    qv[e] = Rotary ? ropeElement<HeadDim>(qh, d, p.rope, b, 0) : toFloat(qh[d]);
    acc[e] = 0.0f;
  }
  float m = negInf(), l = 0.0f;

  for (int pos = begin + warp; pos < end; pos += NumWarps) {
    float kx[kVpl], vx[kVpl];
    if (pos < past) {
      const S *kr = p.cache.row(b, 0, g, pos);
      const S *vr = p.cache.row(b, 1, g, pos);
      const float vs = p.cache.valueScale(b, g, pos);
#pragma unroll
      for (int e = 0; e < kVpl; ++e) {
        kx[e] = KvElem<S>::load(kr[lane * kVpl + e], ks[e]);
        vx[e] = KvElem<S>::load(vr[lane * kVpl + e], vs);
      }
    } else { // pos == past: the new token, as the cache will hold it
#pragma unroll
      for (int e = 0; e < kVpl; ++e) {
        const int d = lane * kVpl + e;
        float kk = Rotary ? ropeElement<HeadDim>(kNew, d, p.rope, b, 0) : toFloat(kNew[d]);
        kx[e] = p.cache.roundTrip(kk, ks[e]);
        vx[e] = p.cache.roundTrip(toFloat(vNew[d]), vNewScale);
      }
    }
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < kVpl; ++e) dot += qv[e] * kx[e];
    float sc = warpSum(dot) * p.scale;
    if (p.softcap > 0.0f) sc = numerics::softcap(sc, p.softcap);
    if (p.alibi != nullptr) sc += numerics::alibi(p.alibi[h], pos, past);
    const float mNew = fmaxf(m, sc);
    const float corr = expf(m - mNew); // 0 when m = -inf
    const float pw = expf(sc - mNew);
    l = l * corr + pw;
#pragma unroll
    for (int e = 0; e < kVpl; ++e) acc[e] = acc[e] * corr + pw * vx[e];
    m = mNew;
  }

  // Merge the warps.
  if (lane == 0) {
    sm_m[warp] = m;
    sm_l[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < kVpl; ++e) sm_acc[warp][lane * kVpl + e] = acc[e];
  __syncthreads();
  float M = negInf();
#pragma unroll
  for (int w = 0; w < NumWarps; ++w) M = fmaxf(M, sm_m[w]);
  float wgt[NumWarps];
  float lsum = 0.0f;
#pragma unroll
  for (int w = 0; w < NumWarps; ++w) {
    wgt[w] = sm_m[w] == negInf() ? 0.0f : expf(sm_m[w] - M);
    lsum += sm_l[w] * wgt[w];
  }
  const long long bh = (long long)b * p.num_heads + h;
  for (int d = tid; d < HeadDim; d += NumWarps * 32) {
    float a = 0.0f;
#pragma unroll
    for (int w = 0; w < NumWarps; ++w) a += sm_acc[w][d] * wgt[w];
    if (splits == 1) {
      p.out[bh * HeadDim + d] = fromFloat<T>(lsum > 0.0f ? a / lsum : 0.0f);
    } else {
      p.ws_acc[(bh * splits + s) * HeadDim + d] = a;
    }
  }
  if (splits > 1 && tid == 0) {
    p.ws_ml[(bh * splits + s) * 2 + 0] = M;
    p.ws_ml[(bh * splits + s) * 2 + 1] = lsum;
  }
}

template <int HeadDim, int NumWarps, int ChunkSize, bool Rotary, typename T,
          typename RopeT, typename Cache>
__global__ void __launch_bounds__(NumWarps * 32)
attentionDecodeKernel(AttnDecodeParams<T, RopeT, Cache> p) {
  attentionDecodeSplit<HeadDim, NumWarps, ChunkSize, Rotary>(p);
}

// Reduces the split partials: grid (num_heads, batch), block HeadDim.
template <int HeadDim, typename T>
__device__ __forceinline__ void attentionDecodeCombineRow(const float *ws_ml,
                                                          const float *ws_acc, T *out,
                                                          int num_heads, int splits) {
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x;
  if (d >= HeadDim) return;
  const long long bh = (long long)b * num_heads + h;
  const float *ml = ws_ml + bh * splits * 2;
  float M = negInf();
  for (int s = 0; s < splits; ++s) M = fmaxf(M, ml[2 * s]);
  float a = 0.0f, lsum = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float ms = ml[2 * s];
    if (ms == negInf()) continue; // empty split
    const float w = expf(ms - M);
    lsum += ml[2 * s + 1] * w;
    a += ws_acc[(bh * splits + s) * HeadDim + d] * w;
  }
  out[bh * HeadDim + d] = fromFloat<T>(lsum > 0.0f ? a / lsum : 0.0f);
}

template <int HeadDim, typename T>
__global__ void __launch_bounds__(HeadDim)
attentionDecodeCombine(const float *ws_ml, const float *ws_acc, T *out,
                       int num_heads, int splits) {
  attentionDecodeCombineRow<HeadDim, T>(ws_ml, ws_acc, out, num_heads, splits);
}

} // namespace qcc

#endif // QCC_KERNELS_ATTENTION_DECODE_CUH
