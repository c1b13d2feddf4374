//===- kv_cache.cuh - KV cache addressing policies for the attention kernels ===//
//
// NVRTC include name "qcc/kv_cache.cuh". Layouts: docs/KV_CACHE.md.
//
//   ContiguousCache<S>: [slots, layers, 2, kv_heads, max_tokens, head_dim];
//                       batch row b uses slot slot_of_row[b] (b if null)
//   PagedCache<S>:      [blocks, layers, 2, kv_heads, block_tokens, head_dim];
//                       position p of row b lives in block
//                       block_table[b * max_blocks_per_seq + p / block_tokens],
//                       row p % block_tokens
//   NoCache:            plain qcc.attention (keys/values only from the inputs)
//
// S (storage) is float, __half, signed char (int8) or unsigned char (FP8
// E4M3 codes: per-head K and V scales as int8's per-head, stored
// numerics::quantizeE4M3, read back dequantizeE4M3). For int8
// (docs/QUANTIZATION.md section 4) k_scales are [layers][kv_heads][head_dim]
// (a per-head scale repeated per channel), and the V scales either
// v_scales [layers][kv_heads] (per-head) or, kivi, one per cached row in
// v_token_scales, laid out as the rows without the K/V and head_dim
// dimensions and computed when the row is appended (symmetricScale of its
// absmax): stored q = clamp(rhe(x / scale), -127, 127), read back q * scale
// (numerics::quantizeSymmetric / dequantizeSymmetric, shared with the CPU).
// `which` is 0 for K and 1 for V.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_KV_CACHE_CUH
#define QCC_KERNELS_KV_CACHE_CUH

#include "qcc/common.cuh"

namespace qcc {

template <typename S> struct KvElem;
template <> struct KvElem<float> {
  static constexpr bool kScaled = false;
  static __device__ __forceinline__ float store(float x, float) { return x; }
  static __device__ __forceinline__ float load(float v, float) { return v; }
};
template <> struct KvElem<__half> {
  static constexpr bool kScaled = false;
  static __device__ __forceinline__ __half store(float x, float) { return __float2half_rn(x); }
  static __device__ __forceinline__ float load(__half v, float) { return __half2float(v); }
};
template <> struct KvElem<signed char> {
  static constexpr bool kScaled = true;
  static __device__ __forceinline__ signed char store(float x, float s) {
    return numerics::quantizeSymmetric(x, s);
  }
  static __device__ __forceinline__ float load(signed char v, float s) {
    return numerics::dequantizeSymmetric(v, s);
  }
};
// FP8 E4M3 codes with per-head K and V scales (no kivi).
template <> struct KvElem<unsigned char> {
  static constexpr bool kScaled = true;
  static __device__ __forceinline__ unsigned char store(float x, float s) {
    return numerics::quantizeE4M3(x, s);
  }
  static __device__ __forceinline__ float load(unsigned char v, float s) {
    return numerics::dequantizeE4M3(v, s);
  }
};

// Common part: scale lookup.
template <typename S> struct KvCacheBase {
  using Storage = S;
  static constexpr bool kHasCache = true;
  const float *k_scales; // [layers][kv_heads][head_dim], int8 only (else null)
  const float *v_scales; // [layers][kv_heads], int8 per-head only
  float *v_token_scales; // int8 kivi only: one per cached V row
  int layers;
  int layer;
  int kv_heads;
  int head_dim;
  __device__ __forceinline__ float keyScale(int g, int d) const {
    if (!KvElem<S>::kScaled) return 1.0f;
    return k_scales[((long long)layer * kv_heads + g) * head_dim + d];
  }
  // Whether each V row has its own scale (kivi).
  __device__ __forceinline__ bool valueScalePerToken() const {
    return KvElem<S>::kScaled && v_token_scales != nullptr;
  }
  // The per-head V scale (valueScalePerToken() false).
  __device__ __forceinline__ float headValueScale(int g) const {
    if (!KvElem<S>::kScaled) return 1.0f;
    return v_scales[layer * kv_heads + g];
  }
  // The value attention sees for x once it went through the cache.
  __device__ __forceinline__ float roundTrip(float x, float s) const {
    return KvElem<S>::load(KvElem<S>::store(x, s), s);
  }
};

template <typename S> struct ContiguousCache : KvCacheBase<S> {
  S *data;
  const int *slot_of_row; // [B] or null (row b -> slot b)
  int max_tokens;
  __device__ __forceinline__ S *row(int b, int which, int g, int pos) const {
    const long long slot = slot_of_row != nullptr ? slot_of_row[b] : b;
    const long long r =
        (((slot * this->layers + this->layer) * 2 + which) * this->kv_heads + g) *
            (long long)max_tokens + pos;
    return data + r * this->head_dim;
  }
  // kivi: the scale of V row (b, g, pos), [slots][layers][kv_heads][max_tokens].
  __device__ __forceinline__ float *valueScaleAt(int b, int g, int pos) const {
    const long long slot = slot_of_row != nullptr ? slot_of_row[b] : b;
    return this->v_token_scales +
           ((slot * this->layers + this->layer) * this->kv_heads + g) *
               (long long)max_tokens + pos;
  }
  __device__ __forceinline__ float valueScale(int b, int g, int pos) const {
    return this->valueScalePerToken() ? *valueScaleAt(b, g, pos)
                                      : this->headValueScale(g);
  }
};

template <typename S> struct PagedCache : KvCacheBase<S> {
  S *pool;
  const int *block_table; // [B, max_blocks_per_seq]
  int max_blocks_per_seq;
  int block_tokens;
  __device__ __forceinline__ S *row(int b, int which, int g, int pos) const {
    const long long blk =
        block_table[(long long)b * max_blocks_per_seq + pos / block_tokens];
    const long long r =
        (((blk * this->layers + this->layer) * 2 + which) * this->kv_heads + g) *
            (long long)block_tokens + pos % block_tokens;
    return pool + r * this->head_dim;
  }
  // kivi: [blocks][layers][kv_heads][block_tokens].
  __device__ __forceinline__ float *valueScaleAt(int b, int g, int pos) const {
    const long long blk =
        block_table[(long long)b * max_blocks_per_seq + pos / block_tokens];
    return this->v_token_scales +
           ((blk * this->layers + this->layer) * this->kv_heads + g) *
               (long long)block_tokens + pos % block_tokens;
  }
  __device__ __forceinline__ float valueScale(int b, int g, int pos) const {
    return this->valueScalePerToken() ? *valueScaleAt(b, g, pos)
                                      : this->headValueScale(g);
  }
};

struct NoCache {
  using Storage = float;
  static constexpr bool kHasCache = false;
  __device__ __forceinline__ float keyScale(int, int) const { return 1.0f; }
  __device__ __forceinline__ bool valueScalePerToken() const { return false; }
  __device__ __forceinline__ float headValueScale(int) const { return 1.0f; }
  __device__ __forceinline__ float valueScale(int, int, int) const { return 1.0f; }
  __device__ __forceinline__ float *valueScaleAt(int, int, int) const { return nullptr; }
  __device__ __forceinline__ float roundTrip(float x, float) const { return x; }
  __device__ __forceinline__ float *row(int, int, int, int) const { return nullptr; }
};

// The V scale of a new row: kivi, symmetricScale of the row's absmax over
// head_dim, reduced by a full warp whose lane holds `absmax` of its elements
// (every lane gets it); per-head, the head's scale.
template <typename Cache>
__device__ __forceinline__ float newValueScale(const Cache &c, int g, float absmax) {
  if (!c.valueScalePerToken()) return c.headValueScale(g);
  return numerics::symmetricScale(warpMax(absmax));
}

} // namespace qcc

#endif // QCC_KERNELS_KV_CACHE_CUH
