//===- KvCache.cpp - the KV cache: blocks, sequences, prefixes ------------===//
#include "runtime/core/KvCache.h"

#include "format/Checked.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <stdexcept>

using namespace qcc::rt;

static std::string str(int64_t v) { return std::to_string(v); }

[[noreturn]] static void fail(const std::string &msg) {
  throw std::runtime_error("KV cache: " + msg);
}

size_t KvCache::checkCapacity(const KvCacheConfig &cfg,
                              const KvCacheOptions &opts) {
  bool paged = cfg.layout == "paged";
  if (cfg.layers <= 0 || cfg.kvHeads <= 0 || cfg.headDim <= 0)
    fail("layers, kv_heads and head_dim must be positive");
  if (opts.maxSequences <= 0)
    fail("max_sequences must be positive, got " + str(opts.maxSequences));
  if (paged) {
    if (cfg.blockTokens <= 0)
      fail("block_tokens must be positive");
    if (opts.numBlocks <= 0)
      fail("the paged layout needs num_blocks > 0, got " +
           str(opts.numBlocks));
  } else if (opts.maxTokens <= 0) {
    fail("the contiguous layout needs max_tokens > 0, got " +
         str(opts.maxTokens));
  }
  int64_t unitTokens = paged ? cfg.blockTokens : opts.maxTokens;
  int64_t units = paged ? opts.numBlocks : opts.maxSequences;
  // Sizes from the manifest and from flags (--kv-blocks, --max-tokens,
  // --kv-block-tokens at compile time): checked before the allocation.
  std::optional<int64_t> unit = qcc::format::checkedNumElements(
      std::vector<int64_t>{cfg.layers, 2, cfg.kvHeads, unitTokens, cfg.headDim});
  std::optional<uint64_t> checked =
      unit ? qcc::format::checkedBytes(std::vector<int64_t>{*unit, units},
                                       cfg.elementBytes())
           : std::nullopt;
  std::string what =
      str(units) +
      (paged ? " blocks of " + str(unitTokens) + " tokens (--kv-blocks)"
             : " sequences of " + str(unitTokens) + " tokens (--max-tokens)");
  if (!checked)
    fail(what + ": the size is beyond 64 bits");
  uint64_t total = *checked;
  // kivi: a float per cached V row besides (a fraction 2 / head_dim of
  // the elements, so it cannot overflow where they did not).
  if (cfg.valueScalePerToken())
    total += (total / (uint64_t)(2 * cfg.headDim)) * sizeof(float);
  if (opts.hostStorage)
    qcc::format::requireMemory(total, "KV cache: " + what);
  return (size_t)*unit;
}

uint64_t KvCache::poolBytes(const KvCacheConfig &cfg,
                           const KvCacheOptions &opts) {
  // Within 64 bits: checkCapacity checked the pool's bytes, scales included.
  uint64_t elements = (uint64_t)checkCapacity(cfg, opts) *
                      (uint64_t)(cfg.layout == "paged" ? opts.numBlocks
                                                       : opts.maxSequences);
  return elements * cfg.elementBytes() +
         (cfg.valueScalePerToken() ? elements / (2 * cfg.headDim) * 4 : 0);
}

KvCache::KvCache(const KvCacheConfig &config, const KvCacheOptions &options)
    : cfg(config), opts(options), isPaged(config.layout == "paged") {
  unitFloats = checkCapacity(cfg, opts);
  unitTokens = isPaged ? cfg.blockTokens : opts.maxTokens;
  if (opts.hostFirstLayer < 0 || opts.hostFirstLayer > cfg.layers)
    fail("the host's first layer " + str(opts.hostFirstLayer) +
         " is outside 0.." + str(cfg.layers));
  hostUnitFloats =
      unitFloats / (size_t)cfg.layers * (size_t)(cfg.layers - opts.hostFirstLayer);
  if (cfg.isScaled()) {
    auto ok = [&](const std::vector<std::vector<float>> &sc) {
      if ((int64_t)sc.size() != cfg.layers)
        return false;
      for (const auto &row : sc)
        if ((int64_t)row.size() != cfg.kvHeads)
          return false;
      return true;
    };
    if ((int64_t)cfg.kChannelScales.size() !=
            cfg.layers * cfg.kvHeads * cfg.headDim ||
        !(cfg.valueScalePerToken() ? cfg.vScales.empty() : ok(cfg.vScales)))
      fail("dtype " + cfg.dtype + " needs key scales per channel and, "
           "per-head, v_scales of [layers][kv_heads] "
           "(KvCacheConfig::fromJson makes them)");
    if (opts.hostStorage)
      storage8.assign(hostUnitFloats * units(), 0);
    if (opts.hostStorage && cfg.valueScalePerToken())
      vTokenScales.assign(hostUnitFloats * units() / (2 * cfg.headDim),
                          1.0f);
  } else if (opts.hostStorage && cfg.isF16()) {
    storage16.assign(hostUnitFloats * units(), 0);
  } else if (opts.hostStorage) {
    storage.assign(hostUnitFloats * units(), 0.0f);
  }
  seqs.resize(opts.maxSequences);
  if (isPaged) {
    for (int64_t b = opts.numBlocks - 1; b >= 0; --b)
      freeList.push_back(b); // pops 0, 1, 2, ... first
    refs.assign((size_t)opts.numBlocks, 0);
    published.resize((size_t)opts.numBlocks);
    evictPos.resize((size_t)opts.numBlocks);
  }
}

namespace {

/// A block's prefix hash: its parent's and its tokens', through splitmix64's
/// finalizer (a good 64-bit mix; matches are confirmed by the tokens).
uint64_t blockHash(uint64_t parent, std::span<const int64_t> tokens) {
  auto mix = [](uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(parent ^ 0x9E3779B97F4A7C15ull);
  for (int64_t t : tokens)
    h = mix(h ^ (uint64_t)t);
  return h;
}

} // namespace

int64_t KvCache::takeBlock() {
  int64_t b;
  if (!freeList.empty()) {
    b = freeList.back();
    freeList.pop_back();
  } else if (!evictable.empty()) {
    b = evictable.front();
    evictable.pop_front();
    unpublish(b);
  } else {
    fail("out of blocks");
  }
  refs[b] = 1;
  return b;
}

void KvCache::dropBlock(int64_t b) {
  if (--refs[b] > 0)
    return;
  if (published[b])
    evictPos[b] = evictable.insert(evictable.end(), b);
  else
    freeList.push_back(b);
}

void KvCache::unpublish(int64_t b) {
  auto it = byHash.find(published[b]->hash);
  if (it != byHash.end() && it->second == b)
    byHash.erase(it);
  published[b].reset();
}

/// The hash a sequence's chain of prefix blocks starts from: the adapter's
/// (0 for none), so that blocks are shared only within one adapter.
static uint64_t rootHash(int64_t adapter) {
  return adapter == 0 ? 0 : 0x9e3779b97f4a7c15ull * (uint64_t)adapter + 1;
}

KvCache::PrefixMatch KvCache::matchPrefix(std::span<const int64_t> tokens,
                                          int64_t maxTokens,
                                          int64_t adapter) const {
  PrefixMatch m;
  m.adapter = adapter;
  m.hash = rootHash(adapter);
  if (!isPaged)
    return m;
  int64_t bt = cfg.blockTokens;
  int64_t full = std::min<int64_t>((int64_t)tokens.size(), maxTokens) / bt;
  for (int64_t i = 0; i < full; ++i) {
    std::span<const int64_t> block = tokens.subspan(i * bt, bt);
    uint64_t h = blockHash(m.hash, block);
    auto it = byHash.find(h);
    if (it == byHash.end())
      break;
    const Published &p = *published[it->second];
    if (p.parent != m.hash || !std::equal(block.begin(), block.end(),
                                          p.tokens.begin(), p.tokens.end()))
      break;
    m.blocks.push_back(it->second);
    m.unheld += refs[it->second] == 0;
    m.hash = h;
  }
  m.tokens = (int64_t)m.blocks.size() * bt;
  return m;
}

void KvCache::attachPrefix(int64_t seq, const PrefixMatch &m) {
  Seq &s = get(seq);
  if (!s.blocks.empty() || s.reserved != 0)
    fail("sequence " + str(seq) + ": a prefix attaches to a new sequence only");
  if (m.adapter != s.adapter)
    fail("sequence " + str(seq) + ": a prefix of adapter " + str(m.adapter) +
         " cannot start a sequence of adapter " + str(s.adapter));
  for (int64_t b : m.blocks) {
    if (b < 0 || b >= opts.numBlocks || !published[b])
      fail("block " + str(b) + " is not a published prefix block");
    if (refs[b]++ == 0)
      evictable.erase(evictPos[b]);
    s.blocks.push_back(b);
  }
  s.length = s.reserved = m.tokens;
  s.publishedBlocks = (int64_t)m.blocks.size();
  s.chainHash = m.hash;
}

void KvCache::publishPrefix(int64_t seq, std::span<const int64_t> tokens) {
  if (!isPaged)
    return;
  Seq &s = get(seq);
  int64_t bt = cfg.blockTokens;
  int64_t full = std::min<int64_t>((int64_t)tokens.size(), s.length) / bt;
  for (int64_t i = s.publishedBlocks; i < full; ++i) {
    std::span<const int64_t> block = tokens.subspan(i * bt, bt);
    uint64_t h = blockHash(s.chainHash, block);
    int64_t b = s.blocks[i];
    // The first block published with this content stays the one shared.
    if (!published[b] && !byHash.count(h)) {
      published[b] = Published{h, s.chainHash, {block.begin(), block.end()}};
      byHash[h] = b;
    }
    s.chainHash = h;
    s.publishedBlocks = i + 1;
  }
}

KvCache::Seq &KvCache::get(int64_t seq) {
  return const_cast<Seq &>(static_cast<const KvCache *>(this)->get(seq));
}

const KvCache::Seq &KvCache::get(int64_t seq) const {
  if (seq < 0 || seq >= (int64_t)seqs.size() || !seqs[seq].live)
    fail("sequence " + str(seq) + " is not live");
  return seqs[seq];
}

int64_t KvCache::addSequence(int64_t adapter) {
  if (adapter < 0)
    fail("a sequence's adapter must be >= 0, not " + str(adapter));
  for (size_t i = 0; i < seqs.size(); ++i)
    if (!seqs[i].live) {
      seqs[i] = Seq();
      seqs[i].live = true;
      seqs[i].adapter = adapter;
      seqs[i].chainHash = rootHash(adapter);
      return (int64_t)i;
    }
  fail("no free sequence slot (max_sequences = " + str(opts.maxSequences) +
       ")");
}

void KvCache::release(int64_t seq) {
  Seq &s = get(seq);
  // Reverse order keeps the free list's LIFO reuse predictable.
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it)
    dropBlock(*it);
  s = Seq();
}

int64_t KvCache::length(int64_t seq) const { return get(seq).length; }

int64_t KvCache::adapter(int64_t seq) const { return get(seq).adapter; }

int64_t KvCache::liveSequences() const {
  int64_t n = 0;
  for (const Seq &s : seqs)
    n += s.live;
  return n;
}

const std::vector<int64_t> &KvCache::blockTable(int64_t seq) const {
  return get(seq).blocks;
}

void KvCache::reserve(int64_t seq, int64_t newLength) {
  Seq &s = get(seq);
  if (newLength <= s.reserved)
    return;
  if (!isPaged) {
    if (newLength > opts.maxTokens)
      fail("sequence " + str(seq) + " would exceed max_tokens " +
           str(opts.maxTokens) + " (needs " + str(newLength) + ")");
    s.reserved = newLength;
    return;
  }
  int64_t need = (newLength + cfg.blockTokens - 1) / cfg.blockTokens -
                 (int64_t)s.blocks.size();
  if (need > freeBlocks())
    fail("out of blocks: sequence " + str(seq) + " needs " + str(need) +
         " more blocks, " + str(freeBlocks()) + " free of " +
         str(opts.numBlocks));
  for (int64_t i = 0; i < need; ++i)
    s.blocks.push_back(takeBlock());
  s.reserved = newLength;
}

void KvCache::advance(int64_t seq, int64_t n) {
  Seq &s = get(seq);
  if (n < 0 || s.length + n > s.reserved)
    fail("sequence " + str(seq) + ": cannot advance by " + str(n) +
         " (length " + str(s.length) + ", reserved " + str(s.reserved) + ")");
  s.length += n;
}

void KvCache::truncate(int64_t seq, int64_t newLength) {
  Seq &s = get(seq);
  if (newLength < 0 || newLength > s.length)
    fail("sequence " + str(seq) + ": cannot roll back to " + str(newLength) +
         " tokens (length " + str(s.length) + ")");
  if (isPaged) {
    size_t keep = (size_t)((newLength + cfg.blockTokens - 1) / cfg.blockTokens);
    // A kept block that the roll-back leaves partly filled will be written
    // again: it must be this sequence's alone, and no longer published.
    if (newLength % cfg.blockTokens != 0) {
      int64_t b = s.blocks[keep - 1];
      if (refs[b] > 1)
        fail("sequence " + str(seq) + ": cannot roll back into block " +
             str(b) + ", which other sequences share");
      if (published[b])
        unpublish(b);
    }
    // publishPrefix walks the chain again from the first block.
    if (s.publishedBlocks > newLength / cfg.blockTokens)
      s.publishedBlocks = 0, s.chainHash = rootHash(s.adapter);
    // Last block first: reserve() popped them from the back in table order.
    while (s.blocks.size() > keep) {
      dropBlock(s.blocks.back());
      s.blocks.pop_back();
    }
  }
  s.length = s.reserved = newLength;
}

void KvCache::requireDType(const char *dtype) const {
  if (!opts.hostStorage)
    fail("this cache keeps its keys and values on the GPU");
  if (cfg.dtype != dtype)
    fail("the cache holds " + cfg.dtype + ", not " + dtype);
}

float *KvCache::valueScales(int64_t seq, int64_t layer, int64_t head,
                            int64_t pos) {
  if (!cfg.valueScalePerToken() || vTokenScales.empty())
    fail("the cache has no per-token value scales (kivi, host storage)");
  // [host layers][kv_heads][units][unit tokens], as the values' runs.
  size_t unit = unitOf(seq, layer, head, pos);
  size_t run = (size_t)((layer - opts.hostFirstLayer) * cfg.kvHeads + head);
  return vTokenScales.data() + (run * units() + unit) * (size_t)unitTokens +
         (size_t)(pos % unitTokens);
}

size_t KvCache::unitOf(int64_t seq, int64_t layer, int64_t head, int64_t pos) {
  Seq &s = get(seq);
  if (pos < 0 || pos >= s.reserved || layer < 0 || layer >= cfg.layers ||
      head < 0 || head >= cfg.kvHeads)
    fail("sequence " + str(seq) + ": layer " + str(layer) + ", kv head " +
         str(head) + ", position " + str(pos) + " is out of range (reserved " +
         str(s.reserved) + ")");
  if (layer < opts.hostFirstLayer)
    fail("layer " + str(layer) + " is on the GPU (a layer split keeps layers " +
         str(opts.hostFirstLayer) + ".." + str(cfg.layers - 1) + " here)");
  return isPaged ? (size_t)s.blocks[pos / unitTokens] : (size_t)seq;
}

size_t KvCache::offset(int64_t seq, int64_t layer, int64_t kv, int64_t head,
                       int64_t pos) {
  // Host storage is [host layers][2][kv_heads][units][unit tokens][head_dim]:
  // each (layer, K or V, head) a pool of its own, so the blocks a sequence
  // took in order lie next to each other and attention streams them (a
  // block-major pool left each 16-token run 4 KiB alone, SmolLM2's next one
  // 737 KB away, and the CPU's prefetchers restarting at every run).
  size_t unit = unitOf(seq, layer, head, pos);
  size_t run = (size_t)(((layer - opts.hostFirstLayer) * 2 + kv) *
                            cfg.kvHeads +
                        head);
  return ((run * units() + unit) * (size_t)unitTokens +
          (size_t)(pos % unitTokens)) *
         (size_t)cfg.headDim;
}
