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
// S (storage) is float, __half or signed char (int8). For int8, k_scales /
// v_scales are [layers][kv_heads] floats (docs/QUANTIZATION.md section 4):
// stored q = clamp(rhe(x / scale), -127, 127), read back q * scale
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

// Common part: scale lookup.
template <typename S> struct KvCacheBase {
  using Storage = S;
  static constexpr bool kHasCache = true;
  const float *k_scales; // [layers][kv_heads], int8 only (may be null otherwise)
  const float *v_scales;
  int layers;
  int layer;
  int kv_heads;
  int head_dim;
  __device__ __forceinline__ float scale(int which, int g) const {
    if (!KvElem<S>::kScaled) return 1.0f;
    const float *s = which == 0 ? k_scales : v_scales;
    return s[layer * kv_heads + g];
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
};

struct NoCache {
  using Storage = float;
  static constexpr bool kHasCache = false;
  __device__ __forceinline__ float scale(int, int) const { return 1.0f; }
  __device__ __forceinline__ float roundTrip(float x, float) const { return x; }
  __device__ __forceinline__ float *row(int, int, int, int) const { return nullptr; }
};

} // namespace qcc

#endif // QCC_KERNELS_KV_CACHE_CUH
