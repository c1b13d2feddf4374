//===- Perplexity.cpp - a model's perplexity over a token sequence --------===//
#include "runtime/generate/Perplexity.h"
#include "runtime/generate/Generator.h"
#include "runtime/core/Progress.h"

#include <algorithm>
#include <cmath>

using namespace qcc::rt;

PerplexityEvaluator::PerplexityEvaluator(const Artifact &a, Executor &e,
                                         const PerplexityOptions &o)
    : artifact(a), executor(e), options(o), fn(a.function(o.function)) {
  if (!o.useCache || !hasFunction(a, "prefill") ||
      !a.kvCache())
    return;
  const KvCacheConfig &cfg = *a.kvCache();
  cfg.checkContext(o.context, "--context");
  KvCacheOptions copts;
  copts.maxSequences = 1;
  copts.maxTokens =
      (o.context + cfg.blockTokens - 1) / cfg.blockTokens * cfg.blockTokens;
  copts.numBlocks = copts.maxTokens / cfg.blockTokens;
  cache = std::make_unique<KvCache>(cfg, e.cacheOptions(copts));
}

PerplexityEvaluator::~PerplexityEvaluator() = default;

Tensor PerplexityEvaluator::windowLogits(const std::vector<int64_t> &window) {
  if (!cache)
    return sequenceLogits(executor, fn, window, options.adapter);
  const Function &pre = artifact.function("prefill");
  int64_t n = window.size();
  Tensor tokens(DType::I64, {1, n}), pos(DType::I64, {1, n});
  for (int64_t t = 0; t < n; ++t) {
    tokens.data<int64_t>()[t] = window[t];
    pos.data<int64_t>()[t] = t;
  }
  int64_t seq = cache->addSequence(options.adapter);
  KvBatch batch{cache.get(), {seq}, {n}, {options.adapter}};
  Tensor logits = logitsOf(
      executor.run("prefill",
                   {{pre.inputs[0].name, tokens}, {pre.inputs[1].name, pos}},
                   &batch),
      pre);
  cache->release(seq);
  return logits;
}

PerplexityResult
PerplexityEvaluator::evaluate(const std::vector<int64_t> &ids) {
  size_t context = (size_t)options.context;
  double nll = 0;
  int64_t count = 0;
  int64_t windows = ids.size() < 2 ? 0 : (ids.size() - 2) / context + 1;
  Progress progress("perplexity windows", windows, options.progress);
  for (size_t begin = 0; begin + 1 < ids.size(); begin += context) {
    progress.update(begin / context);
    size_t end = std::min(ids.size(), begin + context);
    std::vector<int64_t> window(ids.begin() + begin, ids.begin() + end);
    Tensor logits = windowLogits(window);
    int64_t vocab = logits.dim(-1);
    for (size_t t = 0; t + 1 < window.size(); ++t) {
      const float *row = logits.data<float>() + t * vocab;
      float mx = *std::max_element(row, row + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v)
        sum += std::exp((double)row[v] - mx);
      nll -= (double)row[window[t + 1]] - mx - std::log(sum);
      ++count;
    }
  }
  progress.clear();
  PerplexityResult r;
  r.predicted = count;
  if (count > 0)
    r.perplexity = std::exp(nll / count);
  return r;
}
