//===- Speculative.h - speculative decoding and prompt lookup ---*- C++ -*-===//
//
// Several tokens per target forward pass (docs/SPECULATIVE.md). A proposer
// drafts up to K tokens after the sequence so far: a smaller draft model
// (Leviathan et al. 2023, Chen et al. 2023) or a copy of the span that
// followed an earlier occurrence of the last n tokens in the prompt or a
// reference text (LLMA, Yang et al. 2023; llama.cpp's prompt lookup). The
// target verifies the K drafts in one `prefill` call over its KV cache
// (kv_attention is causal inside the new tokens), giving K + 1 rows of
// logits; rejection sampling keeps a prefix of the drafts and adds one token
// of its own, and the cache is rolled back past the rejected ones
// (KvCache::truncate). The tokens follow the target's distribution exactly;
// greedy decoding gives exactly the target's greedy tokens.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_SPECULATIVE_H
#define QCC_RUNTIME_SPECULATIVE_H

#include "runtime/generate/Backend.h"
#include "runtime/generate/Generator.h"

#include <iosfwd>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <vector>

namespace qcc::rt {

/// The outcome of verifying K drafted tokens.
struct Verdict {
  int64_t accepted = 0; // drafts kept: a prefix of length 0..K
  int64_t next = 0;     // the token after them (correction or bonus)
};

/// Speculative sampling (Leviathan et al., algorithm 1). `target` holds K + 1
/// distributions: row i is the target's distribution for the token after
/// draft[0, i). `proposal` holds the K distributions the drafts were drawn
/// from, or is empty when the drafts are deterministic (prompt lookup: each a
/// point mass). Draft i is accepted with probability
/// min(1, target[i][x] / proposal[i][x]); at the first rejection the next
/// token is drawn from normalize(max(0, target[i] - proposal[i])), and when
/// all K are accepted from target[K] (the bonus token). The result is
/// distributed as the target's own sampling. One-hot (greedy) rows make it
/// deterministic: drafts are kept while they are the target's argmax.
Verdict verifyDrafts(std::span<const int64_t> draft,
                     const std::vector<std::vector<double>> &target,
                     const std::vector<std::vector<double>> &proposal,
                     std::mt19937_64 &rng);

/// Prompt lookup: the tokens that followed the most recent earlier occurrence
/// of the last n tokens of `history` (n from `ngram` down to 1, the longest
/// match first), searched in `history` itself, then in `reference`; at most
/// `maxTokens`. Empty when nothing matches.
std::vector<int64_t> lookupDrafts(std::span<const int64_t> history,
                                  std::span<const int64_t> reference,
                                  int64_t ngram, int64_t maxTokens);

struct SpeculativeOptions {
  int64_t draftTokens = 4; // K: tokens proposed per verify step
  int64_t lookupNgram = 0; // > 0: prompt lookup with n-grams up to this
  /// Token ids of the --reference text: lookup searches it after the
  /// sequence itself.
  std::vector<int64_t> reference;
};

struct SpeculativeStats {
  int64_t steps = 0;    // target verify calls after the prefill
  int64_t proposed = 0; // drafted tokens
  int64_t accepted = 0; // drafted tokens kept
  int64_t emitted = 0;  // tokens from verify steps (kept drafts + one each)
  double acceptanceRate() const {
    return proposed > 0 ? (double)accepted / proposed : 0;
  }
  /// Tokens per target forward pass.
  double tokensPerStep() const { return steps > 0 ? (double)emitted / steps : 0; }
};

/// A draft model (qrun --draft): the artifact, its backend and a KV cache
/// sized like the target's.
struct DraftModel {
  /// Loads `path` on `backend` (its backend line, if not quiet, to `log`)
  /// with a cache for `prompts`, `maxNewTokens` new tokens each, whose
  /// contiguous slots hold the target's `targetCache.maxTokens` rounded up to
  /// the draft's block. Throws one line when the draft has no KV cache.
  DraftModel(const std::string &path, const KvCacheOptions &targetCache,
             const std::vector<std::vector<int64_t>> &prompts,
             int64_t maxNewTokens, const BackendOptions &backend,
             std::ostream &log, FileAccess access = FileAccess::Map);
  Artifact artifact;
  std::unique_ptr<Executor> session;
  std::optional<KvCache> cache;
};

/// Generation with a draft model or prompt lookup over the target's KV cache.
/// Sequences run one after another (each drafts and accepts its own count).
/// Distributions, for the target and the draft alike, are Sampler::
/// probabilities(): after the repetition penalty (over the sequence including
/// the drafts before the position), temperature, top-k and top-p; greedy
/// (temperature 0) makes them one-hot. Seeded draws differ from Generator's
/// (other uses of the random stream), the distribution does not.
class SpeculativeGenerator {
public:
  /// `draft` (with its session and cache) may be null: prompt lookup only.
  /// Throws a one-line error when the draft's vocabulary or tokenizer is not
  /// the target's.
  SpeculativeGenerator(const Artifact &target, Executor &targetSession,
                       KvCache &targetCache, const Artifact *draft = nullptr,
                       Executor *draftSession = nullptr,
                       KvCache *draftCache = nullptr);
  /// The same with `draft`'s artifact, session and cache (null: lookup only).
  SpeculativeGenerator(const Artifact &target, Executor &targetSession,
                       KvCache &targetCache, DraftModel *draft)
      : SpeculativeGenerator(target, targetSession, targetCache,
                             draft ? &draft->artifact : nullptr,
                             draft ? draft->session.get() : nullptr,
                             draft ? &*draft->cache : nullptr) {}
  GenerateResult generate(const std::vector<std::vector<int64_t>> &prompts,
                          const GenerateOptions &options,
                          const SpeculativeOptions &spec,
                          SpeculativeStats *stats = nullptr);

private:
  struct Model {
    const Artifact *artifact;
    Executor *session;
    KvCache *cache;
  };
  /// Feeds `tokens` after the cached ones of `seq` through `prefill`; returns
  /// the f32 logits [tokens, vocab].
  Tensor extend(Model &m, int64_t seq, std::span<const int64_t> tokens);
  /// The same, the logits of the last token only, [vocab] (prefill_last
  /// when the artifact has it: the LM head at that position alone).
  Tensor extendLast(Model &m, int64_t seq, std::span<const int64_t> tokens);
  Model target;
  std::optional<Model> draft;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_SPECULATIVE_H
