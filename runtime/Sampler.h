//===- Sampler.h - choosing the next token from logits ----------*- C++ -*-===//
#ifndef QCC_RUNTIME_SAMPLER_H
#define QCC_RUNTIME_SAMPLER_H

#include <cstdint>
#include <random>
#include <vector>

namespace qcc::rt {

struct SamplerOptions {
  /// 0 (or less): greedy, the first token of largest logit.
  double temperature = 0.0;
  /// Keep only the k most likely tokens (0: all).
  int64_t topK = 0;
  /// Nucleus: keep the smallest set of most likely tokens whose probability
  /// reaches p (1: all). At least one token is always kept.
  double topP = 1.0;
  uint64_t seed = 0;
};

/// Greedy, temperature, top-k and top-p sampling. Draws come from one
/// std::mt19937_64 seeded with `seed`, so a given seed and call sequence
/// always gives the same tokens.
class Sampler {
public:
  explicit Sampler(const SamplerOptions &options = {});
  const SamplerOptions &options() const { return opts; }
  /// The next token id for one row of `vocab` logits.
  int64_t sample(const float *logits, int64_t vocab);
  /// The distribution sample() draws from (after temperature, top-k, top-p;
  /// renormalized), or a one-hot vector when greedy. For tests and tools.
  std::vector<double> probabilities(const float *logits, int64_t vocab) const;

private:
  SamplerOptions opts;
  std::mt19937_64 rng;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_SAMPLER_H
