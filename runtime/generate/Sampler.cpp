//===- Sampler.cpp - choosing the next token from logits ------------------===//
#include "runtime/generate/Sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

using namespace qcc::rt;

Sampler::Sampler(const SamplerOptions &options) : opts(options), rng(options.seed) {
  if (opts.topK < 0)
    throw std::runtime_error("sampler: top-k must be >= 0, got " +
                             std::to_string(opts.topK));
  if (!(opts.topP > 0.0 && opts.topP <= 1.0))
    throw std::runtime_error("sampler: top-p must be in (0, 1], got " +
                             std::to_string(opts.topP));
  if (!(std::isfinite(opts.repeatPenalty) && opts.repeatPenalty > 0.0))
    throw std::runtime_error("sampler: repeat penalty must be finite and > 0, "
                             "got " + std::to_string(opts.repeatPenalty));
  if (opts.repeatLastN < 0)
    throw std::runtime_error("sampler: repeat-last-n must be >= 0, got " +
                             std::to_string(opts.repeatLastN));
}

const float *Sampler::applyPenalty(const float *logits, int64_t vocab,
                                   std::span<const int64_t> recent,
                                   std::vector<float> &buffer) const {
  if (opts.repeatPenalty == 1.0 || opts.repeatLastN == 0 || recent.empty())
    return logits;
  size_t n = std::min<size_t>(recent.size(), (size_t)opts.repeatLastN);
  // Each distinct id once, however often it occurs (as llama.cpp).
  std::vector<int64_t> ids(recent.end() - n, recent.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  buffer.assign(logits, logits + vocab);
  float penalty = (float)opts.repeatPenalty;
  for (int64_t id : ids)
    if (id >= 0 && id < vocab)
      buffer[id] = buffer[id] > 0 ? buffer[id] / penalty : buffer[id] * penalty;
  return buffer.data();
}

std::vector<float> Sampler::penalized(const float *logits, int64_t vocab,
                                      std::span<const int64_t> recent) const {
  std::vector<float> buffer;
  const float *out = applyPenalty(logits, vocab, recent, buffer);
  return out == logits ? std::vector<float>(logits, logits + vocab) : buffer;
}

static int64_t argmax(const float *logits, int64_t vocab) {
  return std::max_element(logits, logits + vocab) - logits;
}

std::vector<double>
Sampler::probabilities(const float *logits, int64_t vocab,
                       std::span<const int64_t> recent) const {
  if (vocab <= 0)
    throw std::runtime_error("sampler: empty logits");
  std::vector<float> buffer;
  logits = applyPenalty(logits, vocab, recent, buffer);
  std::vector<double> p(vocab, 0.0);
  if (opts.temperature <= 0.0) {
    p[argmax(logits, vocab)] = 1.0;
    return p;
  }
  // Candidates by logit, largest first; ties by lower id (so top-k = 1 is
  // greedy).
  std::vector<int64_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return logits[a] > logits[b];
  });
  int64_t keep = opts.topK > 0 ? std::min(opts.topK, vocab) : vocab;
  double mx = logits[order[0]];
  std::vector<double> e(keep);
  double sum = 0;
  for (int64_t i = 0; i < keep; ++i) {
    e[i] = std::exp(((double)logits[order[i]] - mx) / opts.temperature);
    sum += e[i];
  }
  if (opts.topP < 1.0) {
    double cum = 0;
    int64_t n = 0;
    while (n < keep) {
      cum += e[n] / sum;
      ++n;
      if (cum >= opts.topP)
        break;
    }
    keep = n;
    sum = 0;
    for (int64_t i = 0; i < keep; ++i)
      sum += e[i];
  }
  for (int64_t i = 0; i < keep; ++i)
    p[order[i]] = e[i] / sum;
  return p;
}

int64_t Sampler::sample(const float *logits, int64_t vocab,
                        std::span<const int64_t> recent) {
  if (opts.temperature <= 0.0) {
    std::vector<float> buffer;
    return argmax(applyPenalty(logits, vocab, recent, buffer), vocab);
  }
  std::vector<double> p = probabilities(logits, vocab, recent);
  return drawFrom(p, uniform01(rng));
}

int64_t qcc::rt::drawFrom(std::span<const double> p, double u) {
  double cum = 0;
  int64_t last = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0)
      continue;
    cum += p[i];
    last = (int64_t)i;
    if (u < cum)
      return (int64_t)i;
  }
  return last; // rounding: u above the accumulated total
}
