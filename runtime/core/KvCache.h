//===- KvCache.h - the KV cache and the kv_attention kernel -----*- C++ -*-===//
//
// The runtime side of docs/KV_CACHE.md. A KvCache holds, for every layer, the
// keys and values of the tokens each live sequence has seen so far, in one of
// two layouts:
//   contiguous  `max_sequences` slots of [layers, 2, kv_heads, max_tokens, D]
//   paged       a pool of `num_blocks` blocks of
//               [layers, 2, kv_heads, block_tokens, D] and a block table per
//               sequence (block i holds positions [i*bt, (i+1)*bt))
// Both are read and written only through key()/value(), so the kv_attention
// kernel and its tests are shared by the two layouts.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_KVCACHE_H
#define QCC_RUNTIME_KVCACHE_H

#include "format/KvCacheConfig.h"
#include "runtime/core/HugePageAllocator.h"
#include "runtime/core/Tensor.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <string>
#include <type_traits>
#include <vector>

namespace qcc::rt {

using format::KvCacheConfig;

/// Capacity, chosen by the runtime (qrun options).
struct KvCacheOptions {
  int64_t maxSequences = 1; // live sequences at once (both layouts)
  int64_t maxTokens = 0;    // contiguous: tokens per sequence slot
  int64_t numBlocks = 0;    // paged: blocks in the pool
  /// false: only the bookkeeping (sequences, lengths, block tables) lives
  /// here; the CUDA backend keeps the keys and values in device memory of
  /// storageElements() elements, in the same layout.
  bool hostStorage = true;
  /// Host storage holds layers [hostFirstLayer, layers) only: those a layer
  /// split runs on the CPU (GpuSession::setGpuLayers; the device holds the
  /// others). Every other layout fact is unchanged.
  int64_t hostFirstLayer = 0;
};

/// The element type a cache of each dtype is read as: float (f32),
/// uint16_t (f16: IEEE binary16 bits, format/HalfFloat.h), int8_t (i8) and
/// uint8_t (fp8: OCP E4M3 codes, format/device/numerics.h).
template <typename T>
inline constexpr const char *kKvElementDType =
    std::is_same_v<T, float>      ? "f32"
    : std::is_same_v<T, uint16_t> ? "f16"
    : std::is_same_v<T, int8_t>   ? "i8"
    : std::is_same_v<T, uint8_t>  ? "fp8"
                                  : nullptr;

class KvCache {
public:
  KvCache(const KvCacheConfig &config, const KvCacheOptions &options);

  /// Checks what the constructor checks before it allocates (positive
  /// counts; the pool's size within 64 bits and, host storage, within
  /// memory, the error naming --kv-blocks or --max-tokens) and returns the
  /// elements of one block (paged) or slot (contiguous). Tools call it
  /// before setting up a backend, so a pool too large is refused first.
  static size_t checkCapacity(const KvCacheConfig &config,
                              const KvCacheOptions &options);
  /// The bytes() a cache of `config` and `options` will have (checked as
  /// checkCapacity checks, which it calls).
  static uint64_t poolBytes(const KvCacheConfig &config,
                            const KvCacheOptions &options);

  const KvCacheConfig &config() const { return cfg; }
  bool paged() const { return isPaged; }

  /// A new empty sequence; throws when every slot is taken.
  /// `adapter`: the runtime LoRA adapter the sequence runs with (0: none;
  /// qcc.lora, docs/LORA.md); its prefix blocks are shared only with
  /// sequences of the same adapter.
  int64_t addSequence(int64_t adapter = 0);
  /// The LoRA adapter of `seq` (addSequence's).
  int64_t adapter(int64_t seq) const;
  /// Ends a sequence: its slot (and, paged, its blocks) become free.
  void release(int64_t seq);
  /// Tokens cached for `seq`.
  int64_t length(int64_t seq) const;
  /// Makes room for positions [0, newLength) (paged: allocates blocks);
  /// does not change length(). Throws when the capacity is exceeded.
  void reserve(int64_t seq, int64_t newLength);
  /// Marks n more tokens as cached (they must have been reserved).
  void advance(int64_t seq, int64_t n);
  /// Rolls `seq` back to its first `newLength` tokens (<= length()), as when
  /// a verify step's drafted tokens are rejected: the length and the
  /// reservation become newLength and, paged, the blocks past it go back to
  /// the free list in the order reserve() took them, so the bookkeeping is
  /// what it was before they were appended. Stale keys/values past the length
  /// stay in memory; attention never reads them and the next append
  /// overwrites them. Host bookkeeping only: works the same when the CUDA
  /// backend holds the storage (hostStorage false).
  void truncate(int64_t seq, int64_t newLength);

  /// The head_dim floats of the key / value of `pos` (pos < reserved);
  /// f32 caches only.
  float *key(int64_t seq, int64_t layer, int64_t kvHead, int64_t pos) {
    return slot<float>(seq, layer, 0, kvHead, pos);
  }
  float *value(int64_t seq, int64_t layer, int64_t kvHead, int64_t pos) {
    return slot<float>(seq, layer, 1, kvHead, pos);
  }
  /// The same for i8 caches: the head_dim quantized values.
  int8_t *keyI8(int64_t seq, int64_t layer, int64_t kvHead, int64_t pos) {
    return slot<int8_t>(seq, layer, 0, kvHead, pos);
  }
  int8_t *valueI8(int64_t seq, int64_t layer, int64_t kvHead, int64_t pos) {
    return slot<int8_t>(seq, layer, 1, kvHead, pos);
  }
  /// Key (kv = 0) or value (kv = 1) elements of any dtype, as T
  /// (kKvElementDType<T> must be the cache's).
  template <typename T>
  T *element(int64_t seq, int64_t layer, int kv, int64_t kvHead,
             int64_t pos) {
    return slot<T>(seq, layer, kv, kvHead, pos);
  }

  /// kivi: the scale of the V row of `pos`, in an array that continues
  /// with the following positions of the same run (forEachRun's runs).
  float *valueScales(int64_t seq, int64_t layer, int64_t kvHead, int64_t pos);

  /// Positions [begin, n) of one layer's keys (kv = 0) or values (kv = 1)
  /// for one head, as runs of consecutive positions stored contiguously: calls
  /// fn(firstPos, data, count), `data` holding count x head_dim elements
  /// of type T (float for f32 caches, int8_t for i8; one run per block when
  /// paged, one run when contiguous). Attention walks the cache this way so
  /// that the block table is read once per block.
  template <typename T = float, typename F>
  void forEachRun(int64_t seq, int64_t layer, int kv, int64_t head,
                  int64_t begin, int64_t n, F &&fn) {
    for (int64_t pos = begin; pos < n;) {
      int64_t count = std::min(n - pos, unitTokens - pos % unitTokens);
      fn(pos, slot<T>(seq, layer, kv, head, pos), count);
      pos += count;
    }
  }

  /// Bytes of cache memory allocated (kivi: with the V rows' scales).
  size_t bytes() const {
    return storageElements() * cfg.elementBytes() +
           valueScaleElements() * sizeof(float);
  }
  /// Bytes of the keys and values (kivi: with the V rows' scales) in host
  /// memory: bytes(), none (the device holds them) or, a layer split's,
  /// those of its host layers.
  size_t hostBytes() const {
    return storage.size() * sizeof(float) + storage16.size() * 2 +
           storage8.size() + vTokenScales.size() * sizeof(float);
  }
  /// Bytes one cached token takes (all layers, K and V, kivi: V's scales).
  size_t bytesPerToken() const {
    return (size_t)(cfg.layers * 2 * cfg.kvHeads * cfg.headDim) *
               cfg.elementBytes() +
           (cfg.valueScalePerToken()
                ? (size_t)(cfg.layers * cfg.kvHeads) * sizeof(float)
                : 0);
  }
  /// kivi: the V rows' scales of the whole pool or all slots (on the GPU
  /// [units][layers][kv_heads][unit tokens], on the host
  /// [layers][kv_heads][units][unit tokens]), or of its first `layers`
  /// layers; 0 otherwise.
  size_t valueScaleElements() const { return valueScaleElements(cfg.layers); }
  size_t valueScaleElements(int64_t layers) const {
    return cfg.valueScalePerToken()
               ? storageElements(layers) / (2 * cfg.headDim)
               : 0;
  }
  /// Paged: blocks not held by any sequence (free, or holding a published
  /// prefix no sequence uses, which allocation takes back oldest first);
  /// contiguous: 0.
  int64_t freeBlocks() const {
    return (int64_t)(freeList.size() + evictable.size());
  }

  /// Prefix caching (paged; docs/SERVING.md): a full block whose tokens are
  /// known is published under the hash of its tokens and of the blocks
  /// before it, so that a later sequence starting with the same tokens
  /// shares it instead of computing it again. A shared block is never
  /// written: a sequence only appends after its shared blocks.
  struct PrefixMatch {
    std::vector<int64_t> blocks; ///< the published blocks, in order
    int64_t tokens = 0;          ///< blocks.size() * block_tokens
    int64_t unheld = 0;          ///< of them, held by no sequence now
    uint64_t hash = 0;           ///< the hash of the matched prefix
    int64_t adapter = 0;         ///< whose blocks they are
  };
  /// The longest run of leading full blocks of `tokens` (at most
  /// `maxTokens` of them) that is published. Each block's tokens are
  /// compared, not only its hash.
  PrefixMatch matchPrefix(std::span<const int64_t> tokens, int64_t maxTokens,
                          int64_t adapter = 0) const;
  /// Starts the new, empty sequence `seq` with `match`'s blocks, shared:
  /// its length and reservation become match.tokens.
  void attachPrefix(int64_t seq, const PrefixMatch &match);
  /// Publishes the full blocks of `seq` among its first tokens.size()
  /// cached tokens, whose ids are `tokens` (blocks already published stay).
  void publishPrefix(int64_t seq, std::span<const int64_t> tokens);
  /// Blocks published now (held or not).
  int64_t publishedBlocks() const { return (int64_t)byHash.size(); }
  int64_t numBlocks() const { return opts.numBlocks; }
  /// Paged: the block table of `seq`.
  const std::vector<int64_t> &blockTable(int64_t seq) const;
  int64_t maxSequences() const { return opts.maxSequences; }
  /// Elements of the whole pool (paged) or of all slots (contiguous), every
  /// layer: the layout's, wherever it is held.
  size_t storageElements() const {
    return unitFloats * units();
  }
  /// The same for `layers` of the layers (a layer split's device part).
  size_t storageElements(int64_t layers) const {
    return storageElements() / (size_t)cfg.layers * (size_t)layers;
  }
  /// Contiguous: the slot that holds `seq` (its id).
  int64_t slotOf(int64_t seq) const { return seq; }
  /// Contiguous: tokens per slot; paged: tokens per block.
  int64_t unitTokenCount() const { return unitTokens; }
  int64_t liveSequences() const;

private:
  struct Seq {
    bool live = false;
    int64_t length = 0, reserved = 0;
    int64_t adapter = 0;
    std::vector<int64_t> blocks; // paged
    int64_t publishedBlocks = 0; // leading blocks publishPrefix has seen
    uint64_t chainHash = 0;      // the hash of those blocks' prefix
  };
  Seq &get(int64_t seq);
  const Seq &get(int64_t seq) const;
  /// Element offset of (layer, kv, head, pos) of `seq` in the storage.
  size_t offset(int64_t seq, int64_t layer, int64_t kv, int64_t head,
                int64_t pos);
  /// The unit (block or slot) holding `pos` of `seq`; throws on a position,
  /// layer or head out of range, or a layer the host does not hold.
  size_t unitOf(int64_t seq, int64_t layer, int64_t head, int64_t pos);
  /// Blocks (paged) or slots (contiguous) in the pool.
  size_t units() const {
    return (size_t)(isPaged ? opts.numBlocks : opts.maxSequences);
  }
  template <typename T>
  T *slot(int64_t seq, int64_t layer, int64_t kv, int64_t head, int64_t pos) {
    static_assert(kKvElementDType<T> != nullptr,
                  "f32, f16, i8 or fp8 caches only");
    requireDType(kKvElementDType<T>);
    if constexpr (std::is_same_v<T, float>)
      return storage.data() + offset(seq, layer, kv, head, pos);
    else if constexpr (std::is_same_v<T, uint16_t>)
      return storage16.data() + offset(seq, layer, kv, head, pos);
    else // int8_t or E4M3 codes: one byte each
      return reinterpret_cast<T *>(storage8.data()) +
             offset(seq, layer, kv, head, pos);
  }
  /// Throws unless the cache holds `dtype` on the host.
  void requireDType(const char *dtype) const;

  KvCacheConfig cfg;
  KvCacheOptions opts;
  bool isPaged;
  int64_t unitTokens;  // block_tokens (paged) or max_tokens (contiguous)
  size_t unitFloats;   // elements per block / per slot
  size_t hostUnitFloats; // the same in host storage (hostFirstLayer on)
  std::vector<float, HugePageAllocator<float>> storage; // f32 caches
  std::vector<uint16_t, HugePageAllocator<uint16_t>> storage16; // f16 caches
  std::vector<int8_t, HugePageAllocator<int8_t>> storage8; // i8 and fp8 caches
  std::vector<float> vTokenScales; // kivi: valueScaleElements()
  std::vector<Seq> seqs;
  std::vector<int64_t> freeList; // paged: free block ids (LIFO)

  // Prefix caching (paged).
  struct Published {
    uint64_t hash = 0, parent = 0; ///< of this block's prefix, its parent's
    std::vector<int64_t> tokens;   ///< block_tokens ids
  };
  /// A block for a sequence: a free one, else the oldest unheld published
  /// one (unpublished first).
  int64_t takeBlock();
  /// One reference to `block` dropped: unheld, it becomes free (published:
  /// evictable, newest last).
  void dropBlock(int64_t block);
  void unpublish(int64_t block);
  std::vector<int64_t> refs;                  ///< per block: sequences holding it
  std::vector<std::optional<Published>> published; ///< per block
  std::unordered_map<uint64_t, int64_t> byHash;
  std::list<int64_t> evictable; ///< unheld published blocks, oldest first
  std::vector<std::list<int64_t>::iterator> evictPos; ///< per block
};

/// Which cache sequence each batch row of a prefill/decode call is, and how
/// many of its tokens are real (the rest is right padding).
struct KvBatch {
  KvCache *cache = nullptr;
  std::vector<int64_t> seqs;
  std::vector<int64_t> valid;
  /// Per row: the runtime LoRA adapter (qcc.lora; 0 none). Empty: none.
  /// A call without a cache (cache null) may carry these alone.
  std::vector<int64_t> adapters;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_KVCACHE_H
