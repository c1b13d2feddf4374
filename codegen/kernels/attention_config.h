//===- attention_config.h - attention launch configurations as types -----===//
//
// The launch configurations of attention_prefill.cuh and attention_decode.cuh
// as types whose constexpr members are every launch quantity (block threads,
// dynamic / static shared memory, the grid). Plain C++17 like numerics.h:
// the device templates include it as "qcc/attention_config.h" (NVRTC,
// embedded), the emitter as "codegen/kernels/attention_config.h", so the
// launch record's sizes come from the type the kernel is instantiated with.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_ATTENTION_CONFIG_H
#define QCC_KERNELS_ATTENTION_CONFIG_H

#if defined(__CUDACC_RTC__)
#include "qcc/host_device.h"
#else
#include "format/device/host_device.h"
#endif

namespace qcc {

/// Prefill: one CTA per (BlockQ query rows, head, batch row).
template <int HeadDim, int BlockQ, int BlockKV, int NumWarps>
struct AttnPrefillLaunch {
  static_assert(HeadDim % 32 == 0 && HeadDim <= 256, "HeadDim: multiple of 32, <= 256");
  static_assert(BlockKV % 32 == 0, "BlockKV must be a multiple of 32");
  static_assert(BlockQ % NumWarps == 0, "BlockQ must be a multiple of NumWarps");
  static constexpr int kHeadDim = HeadDim, kBlockQ = BlockQ, kBlockKV = BlockKV;
  static constexpr int kNumWarps = NumWarps;
  static constexpr int kBlockThreads = NumWarps * 32;
  static constexpr int kQFloats = BlockQ * HeadDim;
  static constexpr int kKStride = HeadDim + 1; // padded: lane-per-key reads hit distinct banks
  static constexpr int kKFloats = BlockKV * kKStride;
  static constexpr int kVFloats = BlockKV * HeadDim;
  static constexpr int kDynamicSmemBytes = 4 * (kQFloats + kKFloats + kVFloats);
  static_assert(kDynamicSmemBytes <= 167936, "exceeds sm_80 shared memory");
  QCC_HOST_DEVICE static constexpr int gridX(int seq_q) { return (seq_q + BlockQ - 1) / BlockQ; }
  QCC_HOST_DEVICE static constexpr int gridY(int num_heads) { return num_heads; }
  QCC_HOST_DEVICE static constexpr int gridZ(int batch) { return batch; }
};

/// Decode, split-K over the cache: one CTA per (ChunkSize keys, head, row).
template <int HeadDim, int NumWarps, int ChunkSize> struct AttnDecodeLaunch {
  static_assert(HeadDim % 32 == 0 && HeadDim <= 256, "HeadDim: multiple of 32, <= 256");
  static_assert(ChunkSize >= 1, "ChunkSize must be positive");
  static constexpr int kNumWarps = NumWarps, kChunkSize = ChunkSize;
  static constexpr int kBlockThreads = NumWarps * 32;
  static constexpr int kDynamicSmemBytes = 0;
  static constexpr int kStaticSmemBytes = 4 * NumWarps * (HeadDim + 2);
  QCC_HOST_DEVICE static constexpr int numSplits(int max_len) {
    return max_len <= 0 ? 1 : (max_len + ChunkSize - 1) / ChunkSize;
  }
  QCC_HOST_DEVICE static constexpr long long
  workspaceBytes(int batch, int heads, int splits) {
    return (long long)batch * heads * splits * (HeadDim + 2) * 4;
  }
};

/// Decode's combine step: one thread per head dimension.
template <int HeadDim> struct AttnDecodeCombineLaunch {
  static constexpr int kBlockThreads = HeadDim;
  static constexpr int kDynamicSmemBytes = 0;
};

} // namespace qcc

// The parameter structs of attention_prefill.cuh and attention_decode.cuh,
// declared once: FIELD(type, name, default) in order, LINE() between groups.
// The device templates declare the structs from them and the emitter's
// wrappers fill them from them (EmitAttention.cpp), a group per line, so a
// field added here is one the wrapper must fill. `rope` and `cache` are
// structs of their own (rotary.cuh, kv_cache.cuh), filled field by field.

/// The fields both share after the sizes: the sequences' lengths, the
/// baked-in variants, rotary and the cache.
#define QCC_ATTN_SEQUENCE_PARAMS(FIELD, LINE)                                 \
  LINE()                                                                      \
  FIELD(const int *, cached_lens, ) /* [B] (prefill: cache only) */           \
  FIELD(const int *, valid_lens, )  /* [B] or null (all seq_q; decode: 1) */  \
  LINE()                                                                      \
  FIELD(int, window, = 0)           /* 0 = none */                            \
  FIELD(float, softcap, = 0.0f)     /* 0 = none */                            \
  LINE()                                                                      \
  FIELD(const float *, alibi, = nullptr) /* [num_heads] ALiBi slopes, or none */ \
  LINE()                                                                      \
  FIELD(RopeTables<RopeT>, rope, ) /* Rotary only; indexed by the input token index */ \
  LINE()                                                                      \
  FIELD(Cache, cache, )

/// AttnPrefillParams<T, RopeT, Cache>.
#define QCC_ATTN_PREFILL_PARAMS(FIELD, LINE)                                  \
  FIELD(const T *, q, )     /* [B, seq_q, H * D] */                           \
  FIELD(const T *, k, )     /* [B, seq_kv, Hkv * D] (seq_kv = seq_q with a cache) */ \
  FIELD(const T *, v, )                                                       \
  FIELD(T *, out, )         /* [B, seq_q, H * D] */                           \
  LINE()                                                                      \
  FIELD(int, batch, )                                                         \
  FIELD(int, seq_q, )                                                         \
  FIELD(int, seq_kv, )      /* NoCache only */                                \
  LINE()                                                                      \
  FIELD(int, num_heads, )                                                     \
  FIELD(int, num_kv_heads, )                                                  \
  FIELD(float, scale, )                                                       \
  QCC_ATTN_SEQUENCE_PARAMS(FIELD, LINE)

/// AttnDecodeParams<T, RopeT, Cache>.
#define QCC_ATTN_DECODE_PARAMS(FIELD, LINE)                                   \
  FIELD(const T *, q, )     /* [B, 1, H * D] */                               \
  FIELD(const T *, k, )     /* [B, 1, Hkv * D] */                             \
  FIELD(const T *, v, )                                                       \
  FIELD(T *, out, )         /* [B, 1, H * D] (no split) */                    \
  FIELD(float *, ws_ml, )   /* [B, H, splits, 2]  (split) */                  \
  FIELD(float *, ws_acc, )  /* [B, H, splits, D]  (split) */                  \
  LINE()                                                                      \
  FIELD(int, batch, )                                                         \
  FIELD(int, num_heads, )                                                     \
  FIELD(int, num_kv_heads, )                                                  \
  FIELD(float, scale, )                                                       \
  QCC_ATTN_SEQUENCE_PARAMS(FIELD, LINE)

#endif // QCC_KERNELS_ATTENTION_CONFIG_H
