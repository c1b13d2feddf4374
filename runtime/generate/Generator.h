//===- Generator.h - batched generation with a KV cache ---------*- C++ -*-===//
//
// One prefill over the right-padded batch of prompts, then one decode step per
// new token over the sequences still live ([B_live, 1]); a sequence ends on
// EOS or at max_new_tokens and its cache is released while the others go on.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_GENERATOR_H
#define QCC_RUNTIME_GENERATOR_H

#include "runtime/core/KvCache.h"
#include "runtime/generate/Sampler.h"
#include "runtime/cpu/Session.h"

#include <chrono>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace qcc::rt {

/// Wall-clock seconds since `t0` (the prefill and decode timings).
inline double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

struct GenerateOptions {
  int64_t maxNewTokens = 32;
  /// The runtime LoRA adapter every sequence runs with (Artifact::
  /// loraAdapterIndex; 0: none).
  int64_t adapter = 0;
  int64_t eosId = -1; // < 0: none
  /// Each sequence is sampled with its own prompt and generated tokens as
  /// the repetition penalty's history.
  SamplerOptions sampler;
  /// Called for each new token (not for EOS): (prompt index, token id).
  std::function<void(size_t, int64_t)> onToken;
  /// Called when a sequence ends: (prompt index).
  std::function<void(size_t)> onFinish;
  /// Asked after each onToken: true ends that sequence there (a stop string
  /// matched, the consumer went away). Empty: sequences end on EOS or at
  /// maxNewTokens only.
  std::function<bool(size_t)> stopAfter;
};

struct GenerateResult {
  std::vector<std::vector<int64_t>> tokens; // per prompt, EOS excluded
  int64_t prefillTokens = 0;                // prompt tokens
  double prefillSeconds = 0;
  int64_t decodeTokens = 0;                 // tokens sampled in decode steps
  double decodeSeconds = 0;
  double prefillTokensPerSecond() const {
    return prefillSeconds > 0 ? prefillTokens / prefillSeconds : 0;
  }
  double decodeTokensPerSecond() const {
    return decodeSeconds > 0 ? decodeTokens / decodeSeconds : 0;
  }
};

/// The logits port of an entry point: its first rank-3 f32 output.
const Port &logitsOutput(const Function &fn);

/// The inputs of a full-sequence entry point for unpadded token ids [B, S]:
/// the ids (its first input, int64 [batch, seq]) and what an exporter's other
/// inputs mean for them: `attention_mask` all ones, `position_ids` 0..S-1,
/// past keys/values ([B, heads, P, head_dim]) of length 0. Throws for any
/// other input, naming it.
std::map<std::string, Tensor> sequenceInputs(const Function &fn,
                                             const Tensor &ids);

/// The logits among `outputs` of `fn` (logitsOutput), in f32 (f16/bf16
/// logits widened).
Tensor logitsOf(const std::map<std::string, Tensor> &outputs,
                const Function &fn);
/// Logits for one sequence of `ids` through full-sequence entry point `fn`:
/// [1, seq, vocab].
/// `adapter`: the runtime LoRA adapter to run with (0: none).
Tensor sequenceLogits(Executor &executor, const Function &fn,
                      const std::vector<int64_t> &ids, int64_t adapter = 0);

/// One call of a cache entry point `fn` (prefill or decode): row b
/// continues sequence seqs[b] of `cache` with tokens[b] at positions
/// length(seqs[b]) + t, right-padded to the longest row with id 0 at
/// position 0 (docs/KV_CACHE.md). Returns the logits [B, S, vocab] in f32.
Tensor cachedLogits(Executor &executor, const Function &fn, KvCache &cache,
                    const std::vector<int64_t> &seqs,
                    const std::vector<std::span<const int64_t>> &tokens);

/// The logits [B, vocab] (f32) of each row's last token after one prefill
/// call with `tokens` (each row non-empty; the call as cachedLogits): from
/// `last`, the artifact's prefill_last (docs/KV_CACHE.md: the LM head runs
/// at those positions only), when given, else from `prefill`'s rows.
Tensor cachedLastLogits(Executor &executor, const Function &prefill,
                        const Function *last, KvCache &cache,
                        const std::vector<int64_t> &seqs,
                        const std::vector<std::span<const int64_t>> &tokens);

/// Whether `artifact` has an entry point named `name`.
bool hasFunction(const Artifact &artifact, const std::string &name);
/// The artifact's `prefill_last` entry point, or nullptr (an artifact whose
/// logits come from no linear head has none). Throws when it does not take
/// the ids, the positions and `last` i64 [B, 1].
const Function *prefillLast(const Artifact &artifact);

/// Generation without a KV cache: for each prompt in turn, every new token
/// recomputes the last `context` tokens through full-sequence entry point
/// `fn`. One sampler serves the prompts in order; the result has
/// decodeTokens and decodeSeconds (the whole run) only.
GenerateResult generateByRecompute(Executor &executor, const Function &fn,
                                   const std::vector<std::vector<int64_t>> &prompts,
                                   const GenerateOptions &options,
                                   int64_t context);

/// A KV cache for generating `maxNewTokens` after each of `prompts` at once:
/// a paged pool of `kvBlocks` blocks (0: enough for every sequence) and
/// contiguous slots of `maxTokens` (0: the longest, rounded up to a block).
/// Throws one line when the longest exceeds the model's positions.
KvCacheOptions generationCacheOptions(
    const KvCacheConfig &config,
    const std::vector<std::vector<int64_t>> &prompts, int64_t maxNewTokens,
    int64_t kvBlocks = 0, int64_t maxTokens = 0);

/// How generateText keeps the context.
struct GenerationMode {
  /// Recompute every token with `function` over the last `context` tokens
  /// even when the artifact has a KV cache.
  bool noCache = false;
  int64_t kvBlocks = 0, maxTokens = 0; ///< generationCacheOptions'
  std::string function = "main";
  int64_t context = 128;
};

/// Whether generateText over `artifact` runs through its KV cache: it has
/// prefill, decode and a cache configuration, and `noCache` is off.
bool generatesWithCache(const Artifact &artifact, bool noCache);

/// Generation as `qrun --prompt` runs it (not speculative): through a KV
/// cache sized for `prompts` (Generator) when generatesWithCache, else by
/// recompute (generateByRecompute). `cacheBytes`, when given, receives the
/// cache's size (0 without one).
GenerateResult generateText(const Artifact &artifact, Executor &executor,
                            const std::vector<std::vector<int64_t>> &prompts,
                            const GenerateOptions &options,
                            const GenerationMode &mode = {},
                            size_t *cacheBytes = nullptr);

class Generator {
public:
  /// `artifact` must have "prefill" and "decode" entry points.
  Generator(const Artifact &artifact, Executor &session, KvCache &cache);
  GenerateResult generate(const std::vector<std::vector<int64_t>> &prompts,
                          const GenerateOptions &options);

private:
  const Artifact &artifact;
  Executor &session;
  KvCache &cache;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_GENERATOR_H
