//===- Sampler.h - choosing the next token from logits ----------*- C++ -*-===//
#ifndef QCC_RUNTIME_SAMPLER_H
#define QCC_RUNTIME_SAMPLER_H

#include <cstdint>
#include <random>
#include <span>
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
  /// Repetition penalty (CTRL, Keskar et al. 2019, as llama.cpp applies it):
  /// each distinct token id among the last `repeatLastN` tokens of the
  /// sequence has its logit divided by this when positive and multiplied by
  /// it otherwise, before greedy or sampling. 1: off; must be finite, > 0.
  double repeatPenalty = 1.0;
  /// The penalty window in tokens (llama.cpp's repeat_last_n; 0: off).
  int64_t repeatLastN = 64;
};

/// A draw from distribution `p` (non-negative, summing to about 1) by
/// inverse CDF at u in [0, 1): the first id whose running sum exceeds u (the
/// last positive one when rounding leaves u above the total).
int64_t drawFrom(std::span<const double> p, double u);
/// u in [0, 1) from the top 53 bits of one draw: the same on every standard
/// library (std::uniform_real_distribution is not).
inline double uniform01(std::mt19937_64 &rng) {
  return (double)(rng() >> 11) * 0x1.0p-53;
}

/// Greedy, temperature, top-k and top-p sampling, after an optional
/// repetition penalty. Draws come from one std::mt19937_64 seeded with
/// `seed`, so a given seed and call sequence always gives the same tokens.
///
/// `recent` is the sequence so far (prompt and generated tokens, oldest
/// first); only its last repeatLastN ids count, and ids outside [0, vocab)
/// are ignored. Each sequence of a batch passes its own.
class Sampler {
public:
  explicit Sampler(const SamplerOptions &options = {});
  const SamplerOptions &options() const { return opts; }
  /// The next token id for one row of `vocab` logits.
  int64_t sample(const float *logits, int64_t vocab,
                 std::span<const int64_t> recent = {});
  /// The distribution sample() draws from (after the penalty, temperature,
  /// top-k, top-p; renormalized), or a one-hot vector when greedy. For tests
  /// and tools.
  std::vector<double> probabilities(const float *logits, int64_t vocab,
                                    std::span<const int64_t> recent = {}) const;
  /// The logits after the repetition penalty for `recent`.
  std::vector<float> penalized(const float *logits, int64_t vocab,
                               std::span<const int64_t> recent) const;

private:
  /// `logits`, or a penalized copy of them in `buffer` when the penalty
  /// changes anything.
  const float *applyPenalty(const float *logits, int64_t vocab,
                            std::span<const int64_t> recent,
                            std::vector<float> &buffer) const;
  SamplerOptions opts;
  std::mt19937_64 rng;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_SAMPLER_H
