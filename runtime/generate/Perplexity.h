//===- Perplexity.h - a model's perplexity over a token sequence -*- C++ -*-===//
//
// qrun --perplexity: non-overlapping windows of `context` tokens; inside a
// window each token after the first is predicted from the tokens before it in
// the window. With a KV cache (the artifact's `prefill` and "kv_cache"), each
// window goes through `prefill`, attending over the cache, so an int8 cache's
// rounding counts; else through the full-sequence entry point.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_PERPLEXITY_H
#define QCC_RUNTIME_PERPLEXITY_H

#include "runtime/core/Artifact.h"
#include "runtime/core/KvCache.h"
#include "runtime/cpu/Session.h"

#include <memory>
#include <string>
#include <vector>

namespace qcc::rt {

struct PerplexityOptions {
  std::string function = "main"; ///< the full-sequence entry point
  int64_t context = 128;         ///< tokens per window (> 0)
  bool useCache = true;  ///< through `prefill` when the artifact has a cache
  bool progress = false; ///< a progress line on stderr
  int64_t adapter = 0;   ///< runtime LoRA adapter (0: none)
};

struct PerplexityResult {
  double perplexity = 0; ///< exp(mean negative log-likelihood); 0: none
  int64_t predicted = 0; ///< tokens predicted (0: fewer than 2 tokens)
};

class PerplexityEvaluator {
public:
  /// Looks up the entry points and sizes the KV cache: errors (an unknown
  /// entry point, a context longer than the model's positions) throw here,
  /// before any text is read.
  PerplexityEvaluator(const Artifact &artifact, Executor &executor,
                      const PerplexityOptions &options);
  ~PerplexityEvaluator();
  PerplexityResult evaluate(const std::vector<int64_t> &ids);

private:
  /// Logits [1, n, vocab] of one window.
  Tensor windowLogits(const std::vector<int64_t> &window);

  const Artifact &artifact;
  Executor &executor;
  PerplexityOptions options;
  const Function &fn;
  std::unique_ptr<KvCache> cache; ///< null: through `fn`
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_PERPLEXITY_H
