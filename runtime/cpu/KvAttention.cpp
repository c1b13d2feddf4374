//===- KvAttention.cpp - qcc.kv_attention on the CPU ----------------------===//
#include "runtime/cpu/KvAttention.h"

#include "format/Checked.h"
#include "runtime/cpu/CpuChunkPool.h"
#include "runtime/cpu/CpuF32Gemm.h"
#include "runtime/cpu/CpuQuantKernels.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <stdexcept>

using namespace qcc::rt;

static std::string str(int64_t v) { return std::to_string(v); }

/// Calls fn(T()) with T the element type the cache's dtype is read as
/// (kKvElementDType).
template <typename F>
static void withElementType(const KvCacheConfig &c, F &&fn) {
  if (c.isInt8())
    fn(int8_t());
  else if (c.isFp8())
    fn(uint8_t());
  else if (c.isF16())
    fn(uint16_t());
  else
    fn(float());
}

//===----------------------------------------------------------------------===//
// kv_attention
//===----------------------------------------------------------------------===//

/// Step 1 of kv_attention for batch row b, with the cache holding T: float
/// stores the values as they are; int8_t stores
/// clamp(round_half_even(x / s), -127, 127), with s the layer's key scale of
/// the channel and the value scale of the kv head, or with kivi the V row's
/// own, symmetricScale(its absmax), stored beside it (docs/QUANTIZATION.md
/// section 4); uint8_t (fp8) stores numerics::quantizeE4M3(x, s) with the
/// same key and per-head value scales; uint16_t (f16) format::floatToHalf(x).
template <typename T>
static void appendRow(KvCache &cache, int64_t seq, int64_t layer, int64_t b,
                      int64_t S, int64_t valid, int64_t cached, int64_t Hkv,
                      int64_t D, const float *K, const float *V) {
  constexpr bool isI8 = std::is_same_v<T, int8_t>;
  constexpr bool isFp8 = std::is_same_v<T, uint8_t>;
  const KvCacheConfig &c = cache.config();
  // 1. append the valid tokens' keys and values.
  for (int64_t t = 0; t < valid; ++t)
    for (int64_t g = 0; g < Hkv; ++g) {
      const float *kt = K + (b * S + t) * Hkv * D + g * D;
      const float *vt = V + (b * S + t) * Hkv * D + g * D;
      if constexpr (isI8) {
        const float *ks = c.keyScales(layer, g);
        float vs;
        if (c.valueScalePerToken()) {
          float absmax = 0.0f;
          for (int64_t d = 0; d < D; ++d)
            absmax = std::max(absmax, std::fabs(vt[d])); // NaN: ignored
          vs = qcc::numerics::symmetricScale(absmax);
          *cache.valueScales(seq, layer, g, cached + t) = vs;
        } else {
          vs = c.vScales[layer][g];
        }
        int8_t *kc = cache.keyI8(seq, layer, g, cached + t);
        int8_t *vc = cache.valueI8(seq, layer, g, cached + t);
        quantizeSymmetricRow(kt, D, ks, 0.0f, kc);
        quantizeSymmetricRow(vt, D, nullptr, vs, vc);
      } else if constexpr (std::is_same_v<T, uint16_t>) {
        bool vector = cpuKernelPath() == CpuKernelPath::Fast;
        narrowToHalves(kt, D, cache.element<uint16_t>(seq, layer, 0, g, cached + t),
                       vector);
        narrowToHalves(vt, D, cache.element<uint16_t>(seq, layer, 1, g, cached + t),
                       vector);
      } else if constexpr (isFp8) {
        const float *ks = c.keyScales(layer, g);
        float vs = c.vScales[layer][g];
        uint8_t *kc = cache.element<uint8_t>(seq, layer, 0, g, cached + t);
        uint8_t *vc = cache.element<uint8_t>(seq, layer, 1, g, cached + t);
        for (int64_t d = 0; d < D; ++d) {
          kc[d] = qcc::numerics::quantizeE4M3(kt[d], ks[d]);
          vc[d] = qcc::numerics::quantizeE4M3(vt[d], vs);
        }
      } else {
        std::copy(kt, kt + D, cache.key(seq, layer, g, cached + t));
        std::copy(vt, vt + D, cache.value(seq, layer, g, cached + t));
      }
    }
}

/// Step 2 of kv_attention for batch row b, the reference path: one query
/// head and token at a time; the cached elements read as floats
/// (kvElementValue: int8_t q * s, uint8_t the E4M3 value times s, uint16_t
/// the f16 value).
template <typename T>
static void attendRow(KvCache &cache, int64_t seq, int64_t layer, int64_t b,
                      int64_t S, int64_t valid, int64_t cached, int64_t H,
                      int64_t Hkv, int64_t D, float scale, int64_t window,
                      float softcap, const std::vector<float> &alibi,
                      const float *Q, float *O, std::vector<float> &P) {
  constexpr bool scaled = kScaledKvElement<T>;
  const KvCacheConfig &c = cache.config();
  int64_t group = H / Hkv;
  // 2. causal attention over cache positions [0, cached + t], or its last
  //    `window` ones, (cached + t - window, cached + t].
  P.resize((size_t)(cached + valid));
  for (int64_t h = 0; h < H; ++h) {
    int64_t g = h / group;
    // The cached element as a float: itself, or dequantized with s the key
    // channel's scale or the value row's.
    auto load = [](const T *p, int64_t d, float s) {
      return kvElementValue(p[d], s);
    };
    auto keyScale = [&](int64_t d) {
      if constexpr (scaled)
        return c.keyScales(layer, g)[d];
      else
        return (void)d, 1.0f;
    };
    auto valueScale = [&](int64_t pos) {
      if constexpr (scaled)
        return c.valueScalePerToken() ? *cache.valueScales(seq, layer, g, pos)
                                      : c.vScales[layer][g];
      else
        return (void)pos, 1.0f;
    };
    for (int64_t t = 0; t < valid; ++t) {
      const float *qt = Q + (b * S + t) * H * D + h * D;
      int64_t n = cached + t + 1;
      int64_t begin = window > 0 ? std::max<int64_t>(n - window, 0) : 0;
      float mx = -std::numeric_limits<float>::infinity();
      cache.template forEachRun<T>(
          seq, layer, 0, g, begin, n,
          [&](int64_t first, const T *run, int64_t count) {
            for (int64_t j = 0; j < count; ++j) {
              const T *kj = run + j * D;
              float dot = 0;
              for (int64_t d = 0; d < D; ++d)
                dot += qt[d] * load(kj, d, keyScale(d));
              float x = scale * dot;
              P[first + j] =
                  softcap > 0.0f ? qcc::numerics::softcap(x, softcap) : x;
              if (!alibi.empty())
                P[first + j] +=
                    qcc::numerics::alibi(alibi[(size_t)h], first + j, n - 1);
              mx = std::max(mx, P[first + j]);
            }
          });
      // softmax as reference::softmaxRow (double sum).
      double sum = 0;
      for (int64_t j = begin; j < n; ++j) {
        float e = std::exp(P[j] - mx);
        P[j] = e;
        sum += e;
      }
      float *ot = O + (b * S + t) * H * D + h * D;
      cache.template forEachRun<T>(
          seq, layer, 1, g, begin, n,
          [&](int64_t first, const T *run, int64_t count) {
            for (int64_t j = 0; j < count; ++j) {
              float p = (float)(P[first + j] / sum);
              const T *vj = run + j * D;
              float vs = valueScale(first + j);
              for (int64_t d = 0; d < D; ++d)
                ot[d] += p * load(vj, d, vs);
            }
          });
    }
  }
}

/// A run of cached values with its scales (int8: per token or per head;
/// fp8: per head).
template <typename T>
static KvRun<T> valueRunOf(KvCache &cache, int64_t seq, int64_t layer,
                           int64_t g, int64_t pos, const T *run, int64_t n) {
  KvRun<T> r{pos, run, n};
  if constexpr (kScaledKvElement<T>) {
    const KvCacheConfig &c = cache.config();
    if (c.valueScalePerToken())
      r.scales = cache.valueScales(seq, layer, g, pos), r.scaleStride = 1;
    else
      r.scales = &c.vScales[layer][g];
  }
  return r;
}

bool qcc::rt::kvAttentionSplitsDecode(int64_t pairs, int threads) {
  return pairs > 0 && pairs < threads;
}

/// Step 2 of kv_attention for a decode step (one query token per sequence)
/// with fewer (sequence, kv head) pairs than threads
/// (kvAttentionSplitsDecode): attendRuns's phases run apart over the chunk
/// pool, each a barrier apart: the scores by key range (about two ranges per
/// thread), each row's softmax, then the weighted sums by column blocks of a
/// cache line (16 f32, 32 f16, 64 int8 or fp8 columns: narrower blocks read
/// each line from several cores). A task per pair left the other threads
/// idle: at batch 1 a model with one kv head (Gemma-2B, Falcon, StarCoder)
/// attended on one core. A row gets attendRuns's bits whatever the split
/// (CpuKernels.h), so a request's tokens still do not depend on the batch.
/// Returns false, having done nothing, where it does not apply (prefill or
/// verify rows, the portable path, tiny work).
template <typename T>
static bool attendDecodeSplit(KvCache &cache, const KvBatch &kv, int64_t layer,
                              int64_t S, int64_t H, int64_t Hkv, int64_t D,
                              float scale, int64_t window, float softcap,
                              const std::vector<float> &alibi, const float *Q,
                              float *O) {
  const KvCacheConfig &c = cache.config();
  const int64_t group = H / Hkv, B = (int64_t)kv.seqs.size();
  if (!attendRunsSplit(D))
    return false;
  // One pair per (row with a token, kv head); rows r of a pair are the
  // group's heads, D apart in Q and O.
  struct Pair {
    int64_t b, g, seq, lo, hi, s; // s: its scores' offset, group x (hi - lo)
  };
  struct Piece { // a key range of a pair's scores
    int64_t pair, a, e;
  };
  // The calling thread's buffers, reused from step to step. The chunks run
  // on other threads: they reach them through these references (a
  // thread_local named there would be that thread's own).
  struct Buffers {
    std::vector<Pair> pairs;
    std::vector<Piece> pieces;
    std::vector<std::vector<KvRun<T>>> keyRuns, valueRuns;
    std::vector<float> weights; // scores, then softmax
    std::vector<int64_t> rowLo, rowHi;
  };
  thread_local Buffers buffers;
  std::vector<Pair> &pairs = buffers.pairs;
  std::vector<Piece> &pieces = buffers.pieces;
  std::vector<std::vector<KvRun<T>>> &keyRuns = buffers.keyRuns,
                                     &valueRuns = buffers.valueRuns;
  std::vector<float> &weights = buffers.weights;
  std::vector<int64_t> &rowLo = buffers.rowLo, &rowHi = buffers.rowHi;
  pairs.clear();
  int64_t work = 0, tokens = 0, scores = 0;
  for (int64_t b = 0; b < B; ++b) {
    if (kv.valid[b] > 1)
      return false;
    if (kv.valid[b] == 0)
      continue;
    ++tokens;
    int64_t seq = kv.seqs[b], hi = cache.length(seq) + 1;
    int64_t lo = window > 0 ? std::max<int64_t>(hi - window, 0) : 0;
    for (int64_t g = 0; g < Hkv; ++g) {
      pairs.push_back({b, g, seq, lo, hi, scores});
      scores += group * (hi - lo);
      work += group * (hi - lo) * D * 2;
    }
  }
  const int threads = cpuThreads();
  if (!chunkPoolFits(tokens, work) ||
      !kvAttentionSplitsDecode((int64_t)pairs.size(), threads))
    return false;
  const int64_t P = (int64_t)pairs.size();
  keyRuns.resize((size_t)P);
  valueRuns.resize((size_t)P);
  weights.resize((size_t)scores);
  rowLo.resize((size_t)(P * group));
  rowHi.resize((size_t)(P * group));
  for (int64_t p = 0; p < P; ++p) {
    const Pair &pr = pairs[(size_t)p];
    std::fill_n(rowLo.begin() + p * group, group, pr.lo);
    std::fill_n(rowHi.begin() + p * group, group, pr.hi);
    keyRuns[(size_t)p].clear();
    valueRuns[(size_t)p].clear();
    cache.template forEachRun<T>(
        pr.seq, layer, 0, pr.g, pr.lo, pr.hi,
        [&](int64_t pos, const T *run, int64_t n) {
          keyRuns[(size_t)p].push_back({pos, run, n});
        });
    cache.template forEachRun<T>(
        pr.seq, layer, 1, pr.g, pr.lo, pr.hi,
        [&](int64_t pos, const T *run, int64_t n) {
          valueRuns[(size_t)p].push_back(
              valueRunOf(cache, pr.seq, layer, pr.g, pos, run, n));
        });
  }
  auto query = [&](const Pair &pr) {
    return Q + pr.b * S * H * D + pr.g * group * D;
  };
  // 1. Scores, by key ranges of whole 16-key tiles: about two per thread.
  pieces.clear();
  int64_t perPair = std::max<int64_t>(1, (2 * threads + P - 1) / P);
  for (int64_t p = 0; p < P; ++p) {
    const Pair &pr = pairs[(size_t)p];
    int64_t n = pr.hi - pr.lo, len = (n + perPair - 1) / perPair;
    len = std::max<int64_t>(64, (len + 15) / 16 * 16);
    for (int64_t a = pr.lo; a < pr.hi; a += len)
      pieces.push_back({p, a, std::min(pr.hi, a + len)});
  }
  parallelChunks((int64_t)pieces.size(), [&](int64_t i) {
    const Piece &pc = pieces[(size_t)i];
    const Pair &pr = pairs[(size_t)pc.pair];
    const float *kScales = nullptr;
    if constexpr (kScaledKvElement<T>)
      kScales = c.keyScales(layer, pr.g);
    attendRunScores(group, D, query(pr), D, keyRuns[(size_t)pc.pair], kScales,
                    scale, pc.a, pc.e, weights.data() + pr.s, pr.hi - pr.lo,
                    pr.lo);
  });
  // 2. Each row's softmax.
  parallelChunks(P * group, [&](int64_t i) {
    const Pair &pr = pairs[(size_t)(i / group)];
    int64_t r = i % group, n = pr.hi - pr.lo;
    attendRowSoftmax(weights.data() + pr.s + r * n, pr.lo, pr.hi, softcap,
                     alibi.empty() ? nullptr : &alibi[(size_t)(pr.g * group + r)]);
  });
  // 3. The weighted sums, by column blocks of a cache line.
  const int64_t width =
      std::min<int64_t>(D, std::max<int64_t>(16, 64 / (int64_t)sizeof(T)));
  const int64_t blocks = (D + width - 1) / width;
  parallelChunks(P * blocks, [&](int64_t i) {
    int64_t p = i / blocks, c0 = i % blocks * width;
    const Pair &pr = pairs[(size_t)p];
    attendRunColumns(group, D, valueRuns[(size_t)p], rowLo.data() + p * group,
                     rowHi.data() + p * group, weights.data() + pr.s,
                     pr.hi - pr.lo, pr.lo, c0, std::min(D, c0 + width),
                     O + pr.b * S * H * D + pr.g * group * D, D);
  });
  return true;
}

/// Step 2 of kv_attention, the fast path (CpuKernelPath::Fast and ::Portable): tasks of
/// (batch row, kv head, block of query tokens), threaded with OpenMP (a
/// decode-sized batch: over parallelChunks, CpuChunkPool.h). A task
/// reads the keys and values its tokens see once, in one pass over the cache
/// each (as floats: int8_t dequantized to q * s; a contiguous f32 range is
/// used in place), and attends every query head of the kv head's group to
/// them at once (attendRows: the softmax of the reference path, float sums in
/// another order). A decode step is one task per (row, kv head) (with fewer
/// of those than threads, attendDecodeSplit's phases instead); its few rows
/// (R < 4) read the cache's runs in place (attendRuns), not a copy. Both
/// compute each row's sums in the same order (attendRuns's scores are the
/// score tiles' FMA chains, its weighted sum the value tiles'), so a row
/// gets the same bits from either, whatever task it falls in: a request's
/// tokens do not depend on the batch or on its prompt's chunks (batch
/// invariance, docs/SERVING.md).
template <typename T>
static void attendFast(KvCache &cache, const KvBatch &kv, int64_t layer,
                       int64_t S, int64_t H, int64_t Hkv, int64_t D,
                       float scale, int64_t window, float softcap,
                       const std::vector<float> &alibi, const float *Q,
                       float *O) {
  if (attendDecodeSplit<T>(cache, kv, layer, S, H, Hkv, D, scale, window,
                           softcap, alibi, Q, O))
    return;
  constexpr bool scaled = kScaledKvElement<T>;
  const KvCacheConfig &c = cache.config();
  int64_t group = H / Hkv, B = (int64_t)kv.seqs.size();
  // Query tokens per task: about 32 rows (tokens x heads of the group).
  int64_t tokens = std::max<int64_t>(1, 32 / group);
  struct Task {
    int64_t b, g, t0, count;
  };
  std::vector<Task> tasks;
  int64_t work = 0; // multiply-adds, about
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < Hkv; ++g)
      for (int64_t t0 = 0; t0 < kv.valid[b]; t0 += tokens) {
        tasks.push_back({b, g, t0, std::min(tokens, kv.valid[b] - t0)});
        work += group * tasks.back().count *
                (cache.length(kv.seqs[b]) + t0 + tokens) * D * 2;
      }
  // A task's buffers, reused from task to task on one thread.
  struct Scratch {
    std::vector<float> keys, values, q, out, scratch, slopes;
    std::vector<int64_t> lo, hi;
    std::vector<KvRun<T>> keyRuns, valueRuns;
  };
  auto runTask = [&](size_t i, Scratch &w) {
    std::vector<float> &keys = w.keys, &values = w.values, &q = w.q,
                       &out = w.out, &scratch = w.scratch, &slopes = w.slopes;
    std::vector<int64_t> &lo = w.lo, &hi = w.hi;
    std::vector<KvRun<T>> &keyRuns = w.keyRuns, &valueRuns = w.valueRuns;
      // Plain copies, not a structured binding: the lambdas below capture
      // them, which C++20 allows but clang 14 (the fuzz build) does not.
      const int64_t b = tasks[i].b, g = tasks[i].g, t0 = tasks[i].t0,
                    count = tasks[i].count;
      int64_t seq = kv.seqs[b], cached = cache.length(seq);
      // Token t sees positions (n - window, n], n = cached + t + 1.
      auto first = [&](int64_t t) {
        return window > 0 ? std::max<int64_t>(cached + t + 1 - window, 0)
                          : int64_t(0);
      };
      int64_t begin = first(t0), end = cached + t0 + count;
      auto valueRun = [&](int64_t pos, const T *run, int64_t n) {
        return valueRunOf(cache, seq, layer, g, pos, run, n);
      };
      // The keys or values of positions [begin, end) as n x D floats.
      auto gather = [&](int kvIndex,
                        std::vector<float> &buf) -> const float * {
        const float *inPlace = nullptr;
        buf.resize((size_t)((end - begin) * D));
        cache.template forEachRun<T>(
            seq, layer, kvIndex, g, begin, end,
            [&](int64_t pos, const T *run, int64_t n) {
              float *dst = buf.data() + (pos - begin) * D;
              if constexpr (std::is_same_v<T, float>) {
                if (n == end - begin) {
                  inPlace = run;
                  return;
                }
                std::copy_n(run, n * D, dst);
              } else if constexpr (!scaled) { // f16: widened
                widenHalves(run, n * D, dst,
                            cpuKernelPath() == CpuKernelPath::Fast);
              } else if (kvIndex == 0) {
                const float *ks = c.keyScales(layer, g);
                for (int64_t j = 0; j < n; ++j)
                  for (int64_t d = 0; d < D; ++d)
                    dst[j * D + d] = kvElementValue(run[j * D + d], ks[d]);
              } else {
                KvRun<T> r = valueRun(pos, run, n);
                for (int64_t j = 0; j < n; ++j)
                  for (int64_t d = 0; d < D; ++d)
                    dst[j * D + d] = kvElementValue(
                        run[j * D + d], r.scales[j * r.scaleStride]);
              }
            });
        return inPlace ? inPlace : buf.data();
      };
      // Rows (head of the group, token): the queries packed, D apart.
      int64_t R = group * count;
      q.resize((size_t)(R * D));
      out.resize((size_t)(R * D));
      lo.resize((size_t)R);
      hi.resize((size_t)R);
      slopes.resize(alibi.empty() ? 0 : (size_t)R);
      const float *rowSlopes = alibi.empty() ? nullptr : slopes.data();
      for (int64_t hh = 0; hh < group; ++hh)
        for (int64_t t = 0; t < count; ++t) {
          int64_t r = hh * count + t;
          if (rowSlopes)
            slopes[(size_t)r] = alibi[(size_t)(g * group + hh)];
          const float *src =
              Q + (b * S + t0 + t) * H * D + (g * group + hh) * D;
          std::copy(src, src + D, q.data() + r * D);
          lo[r] = first(t0 + t) - begin;
          hi[r] = cached + t0 + t + 1 - begin;
        }
      if (R < 4) { // decode: straight over the cache, nothing gathered
        for (int64_t r = 0; r < R; ++r)
          lo[r] += begin, hi[r] += begin;
        auto runsOf = [&](int kvIndex, std::vector<KvRun<T>> &runs) {
          runs.clear();
          cache.template forEachRun<T>(
              seq, layer, kvIndex, g, begin, end,
              [&](int64_t pos, const T *run, int64_t n) {
                runs.push_back(kvIndex == 1 ? valueRun(pos, run, n)
                                            : KvRun<T>{pos, run, n});
              });
        };
        runsOf(0, keyRuns);
        runsOf(1, valueRuns);
        if constexpr (!std::is_same_v<T, float>)
          attendRuns(R, D, q.data(), D, keyRuns, valueRuns,
                     scaled ? c.keyScales(layer, g) : nullptr, scale,
                     softcap, lo.data(),
                     hi.data(), out.data(), D, scratch, rowSlopes);
        else
          attendRuns(R, D, q.data(), D, keyRuns, valueRuns, scale, softcap,
                     lo.data(), hi.data(), out.data(), D, scratch, rowSlopes);
      } else {
        const float *Kr = gather(0, keys);
        const float *Vr = gather(1, values);
        // The keys packed for the score tiles (CpuF32Gemm.h), once for
        // every head of the group.
        std::optional<PackedF32Weight> packedK =
            packF32Weight(Kr, end - begin, D);
        attendRows(R, D, q.data(), D, Kr, D, Vr, D, scale, softcap,
                   lo.data(), hi.data(), nullptr, 0, 0, out.data(), D,
                   scratch, packedK ? &*packedK : nullptr, rowSlopes);
      }
      for (int64_t hh = 0; hh < group; ++hh)
        for (int64_t t = 0; t < count; ++t)
          std::copy_n(out.data() + (hh * count + t) * D, D,
                      O + (b * S + t0 + t) * H * D + (g * group + hh) * D);
  };
  int64_t batchTokens = 0;
  for (int64_t b = 0; b < B; ++b)
    batchTokens += kv.valid[b];
  if (tasks.size() > 1 && chunkPoolFits(batchTokens, work)) { // decode
    parallelChunks((int64_t)tasks.size(), [&](int64_t i) {
      thread_local Scratch w;
      runTask((size_t)i, w);
    });
    return;
  }
  std::exception_ptr error;
#pragma omp parallel if (tasks.size() > 1 && work >= kParallelWork)
  {
    Scratch w;
#pragma omp for schedule(dynamic)
    for (size_t i = 0; i < tasks.size(); ++i) {
      try {
        runTask(i, w);
      } catch (...) {
#pragma omp critical(qcc_kv_attention_error)
        if (!error)
          error = std::current_exception();
      }
    }
  }
  if (error)
    std::rethrow_exception(error);
}

Tensor qcc::rt::kvAttention(const Attrs &attrs, const Operands &ops,
                            KvBatch &kv) {
  auto err = [](const std::string &m) { throw std::runtime_error(m); };
  if (ops.size() < 3 || !ops[0] || !ops[1] || !ops[2])
    err("kv_attention needs query, key and value");
  const Tensor &q = *ops[0], &k = *ops[1], &v = *ops[2];
  for (auto [t, n] : {std::pair{&q, "query"}, {&k, "key"}, {&v, "value"}}) {
    if (t->dtype() != DType::F32)
      err(std::string(n) + " must be f32");
    if (t->rank() != 3)
      err(std::string(n) + " must be [B, S, heads * D], got " +
          shapeString(t->shape()));
  }
  if (!kv.cache)
    err("kv_attention needs a KV cache");
  KvCache &cache = *kv.cache;
  int64_t layer = attrs.i("layer");
  int64_t H = attrs.i("num_heads"), Hkv = attrs.i("num_kv_heads");
  float scale = (float)attrs.f("scale");
  int64_t window = attrs.i("window", 0);
  float softcap = (float)attrs.f("softcap", 0.0);
  std::vector<float> alibi;
  if (attrs.has("alibi"))
    alibi = attrs.floats("alibi");
  if (H <= 0 || Hkv <= 0 || H % Hkv != 0)
    err("num_heads " + str(H) + " must be a positive multiple of "
        "num_kv_heads " + str(Hkv));
  int64_t B = q.dim(0), S = q.dim(1);
  if (q.dim(2) % H != 0)
    err("query " + shapeString(q.shape()) + ": last dim is not a multiple of " +
        str(H) + " heads");
  int64_t D = q.dim(2) / H;
  if (k.dim(0) != B || v.dim(0) != B || k.dim(1) != S || v.dim(1) != S ||
      k.dim(2) != Hkv * D || v.dim(2) != Hkv * D)
    err("kv_attention shapes do not match: query " + shapeString(q.shape()) +
        ", key " + shapeString(k.shape()) + ", value " +
        shapeString(v.shape()) + " with " + str(H) + " heads and " + str(Hkv) +
        " kv heads");
  if (!alibi.empty() && (int64_t)alibi.size() != H)
    err("alibi has " + str((int64_t)alibi.size()) + " slopes for " + str(H) +
        " heads");
  const KvCacheConfig &c = cache.config();
  if (Hkv != c.kvHeads || D != c.headDim || layer < 0 || layer >= c.layers)
    err("layer " + str(layer) + " with " + str(Hkv) + " kv heads of size " +
        str(D) + " does not fit the cache (" + str(c.layers) + " layers, " +
        str(c.kvHeads) + " kv heads of size " + str(c.headDim) + ")");
  if ((int64_t)kv.seqs.size() != B || (int64_t)kv.valid.size() != B)
    err("the batch has " + str(B) + " rows but the KV batch describes " +
        str((int64_t)kv.seqs.size()) + " sequences");

  Tensor r(DType::F32, {B, S, H * D}); // zeros: padding rows stay zero
  const float *Q = q.data<float>(), *K = k.data<float>(), *V = v.data<float>();
  float *O = r.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    int64_t seq = kv.seqs[b], valid = kv.valid[b];
    if (valid < 0 || valid > S)
      err("row " + str(b) + ": " + str(valid) + " valid tokens in a row of " +
          str(S));
    int64_t cached = cache.length(seq);
    withElementType(c, [&](auto element) {
      using T = decltype(element);
      appendRow<T>(cache, seq, layer, b, S, valid, cached, Hkv, D, K, V);
    });
  }
  if (cpuKernelPath() != CpuKernelPath::Reference) {
    withElementType(c, [&](auto element) {
      attendFast<decltype(element)>(cache, kv, layer, S, H, Hkv, D, scale,
                                    window, softcap, alibi, Q, O);
    });
    return r;
  }
  std::vector<float> P;
  for (int64_t b = 0; b < B; ++b) {
    int64_t seq = kv.seqs[b], valid = kv.valid[b], cached = cache.length(seq);
    withElementType(c, [&](auto element) {
      attendRow<decltype(element)>(cache, seq, layer, b, S, valid, cached, H,
                                   Hkv, D, scale, window, softcap, alibi, Q, O,
                                   P);
    });
  }
  return r;
}
