//===- KvCacheCheck.cpp - cached generation equals full recompute ---------===//
//
//   qcc-kv-check MODEL.qpkg[@ADAPTER,...][=REFERENCE.qpkg]...
//   qcc-kv-check --batch-invariance-only MODEL.qpkg...   (3 only: int8 KV
//        caches, whose logits differ from the float `main` by quantization)
//
// The full-sequence logits come from MODEL's `main`, or from REFERENCE's for
// a model whose `main` takes past_key_values (same weights, no past).
// For each artifact (a decoder compiled with a KV cache), on random token
// sequences of different lengths in one batch:
//  1. logits of a ragged prefill followed by single-token decode steps
//     (teacher-forced with the sequences' own tokens) equal the logits of
//     `main` run over each whole sequence;
//  2. greedy generation through the cache produces exactly the tokens of
//     greedy generation by full recompute;
//  3. batch invariance (docs/SERVING.md): the logits of 1 are bit for bit
//     those of each sequence run alone, its prompt prefilled whole, then
//     decoded one row at a time, since a server's request must not depend on
//     what else is in the batch, and again with the prompt prefilled in
//     chunks of 2 tokens (a server prefills long prompts in chunks). No
//     tolerance: equal bits;
//  4. prefill_last (when the artifact has it): the logits of each prompt's
//     last token are bit for bit those of prefill at that position (the
//     head's rows gathered first compute the same row-wise arithmetic).
// With @ADAPTER,... (runtime LoRA adapters, docs/LORA.md; "base" for none),
// sequence i runs with the (i mod n)-th: one batch mixes adapters, and
// `main` runs each sequence with its own (a REFERENCE without adapters, e.g.
// the adapter merged by qcc --lora, ignores them).
// Tolerance for 1: max |cached - full| <= 1e-4 * max |full| per sequence.
// Both paths do the same float operations per token; only the summation
// order differs (per-row attention over the cache versus one GEMM), so the
// differences are a few ulps of the largest logit. A model that stores its
// values in f16/bf16 rounds every node's result to that type: an f32 ulp of
// difference can move a value by one f16 (bf16) ulp, 2^-11 (2^-8) relative,
// so its tolerance is 4 such ulps.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/Artifact.h"
#include "runtime/generate/Generator.h"
#include "runtime/core/KvCache.h"
#include "runtime/cpu/Session.h"

#include <algorithm>
#include <map>
#include <optional>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

using namespace qcc::rt;

namespace {

/// The tolerance for logits stored as `t` (see the top of the file).
double toleranceFor(DType t) {
  return t == DType::F16 ? 4 * 0x1p-11 : t == DType::BF16 ? 4 * 0x1p-8 : 1e-4;
}

/// Logits of `main` over one whole, unpadded sequence with LoRA adapter
/// `adapter`: [seq, vocab].
Tensor fullLogits(Session &s, const Artifact &a, const std::vector<int64_t> &ids,
                  int64_t adapter = 0) {
  return sequenceLogits(s, a.function("main"), ids, adapter);
}

/// One prefill/decode call over the rows `seqs` (runtime/generate/Generator.h's
/// cachedLogits); returns the logits [B, S, vocab].
Tensor cachedStep(Session &s, const Artifact &a, KvCache &cache,
                  const std::string &entry,
                  const std::vector<int64_t> &seqs,
                  const std::vector<std::vector<int64_t>> &tokens) {
  return cachedLogits(s, a.function(entry), cache, seqs,
                      {tokens.begin(), tokens.end()});
}

double maxAbs(const float *p, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i)
    m = std::max(m, (double)std::abs(p[i]));
  return m;
}

int64_t argmax(const float *p, int64_t n) {
  return std::max_element(p, p + n) - p;
}

bool check(const std::string &spec, bool invarianceOnly) {
  size_t eq = spec.find('=');
  std::string path = spec.substr(0, eq);
  std::vector<std::string> adapterNames;
  if (size_t at = path.find('@'); at != std::string::npos) {
    std::string list = path.substr(at + 1);
    path.resize(at);
    for (size_t b = 0, e; b <= list.size(); b = e + 1) {
      e = std::min(list.find(',', b), list.size());
      adapterNames.push_back(list.substr(b, e - b));
    }
  }
  Artifact a = Artifact::load(path);
  std::vector<int64_t> adapters;
  for (const std::string &n : adapterNames)
    adapters.push_back(a.loraAdapterIndex(n));
  if (adapters.empty())
    adapters = {0};
  auto adapterOf = [&](size_t i) { return adapters[i % adapters.size()]; };
  std::optional<Artifact> refArtifact;
  if (eq != std::string::npos)
    refArtifact = Artifact::load(spec.substr(eq + 1));
  const Artifact &ref = refArtifact ? *refArtifact : a;
  Session refSession(ref);
  if (!a.kvCache())
    throw std::runtime_error(path + ": no KV cache in the artifact");
  const KvCacheConfig &cfg = *a.kvCache();
  const Port &logits = logitsOutput(a.function("prefill"));
  int64_t vocab = logits.shape.back();
  double tolerance = toleranceFor(logits.dtype);
  Session session(a);

  // Three sequences of different lengths: prompt lengths 5, 1 and 9, then 4
  // teacher-forced decode steps each (total <= 13 < every fixture's limit).
  const std::vector<int64_t> promptLens = {5, 1, 9};
  const int64_t steps = 4;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  std::vector<std::vector<int64_t>> seqTokens;
  for (int64_t p : promptLens) {
    std::vector<int64_t> t;
    for (int64_t i = 0; i < p + steps; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      t.push_back((int64_t)(x % (uint64_t)vocab));
    }
    seqTokens.push_back(t);
  }

  KvCacheOptions opts;
  opts.maxSequences = promptLens.size();
  opts.maxTokens = 32;
  opts.numBlocks = (int64_t)promptLens.size() * (32 / cfg.blockTokens + 1);
  KvCache cache(cfg, opts);
  std::vector<int64_t> seqs;
  for (size_t i = 0; i < promptLens.size(); ++i)
    seqs.push_back(cache.addSequence(adapterOf(i)));

  double worst = 0;
  std::vector<Tensor> full;
  for (size_t i = 0; i < seqTokens.size(); ++i)
    full.push_back(fullLogits(refSession, ref, seqTokens[i], adapterOf(i)));
  // The batched logits per sequence and position, for check 3.
  std::vector<std::vector<std::vector<float>>> batched(seqs.size());
  auto compare = [&](size_t i, const float *row, int64_t pos) {
    batched[i].emplace_back(row, row + vocab);
    const float *ref = full[i].data<float>() + pos * vocab;
    double scale = std::max(maxAbs(ref, vocab), 1e-6), err = 0;
    for (int64_t v = 0; v < vocab; ++v)
      err = std::max(err, (double)std::abs(row[v] - ref[v]));
    worst = std::max(worst, err / scale);
    if (getenv("QCC_KV_CHECK_VERBOSE") && err / scale > tolerance)
      std::fprintf(stderr, "  sequence %zu position %lld: rel err %.3g\n", i,
                   (long long)pos, err / scale);
  };

  std::vector<std::vector<int64_t>> prompts;
  for (size_t i = 0; i < seqs.size(); ++i)
    prompts.emplace_back(seqTokens[i].begin(),
                         seqTokens[i].begin() + promptLens[i]);
  Tensor pre = cachedStep(session, a, cache, "prefill", seqs, prompts);
  int64_t width = pre.dim(1);
  for (size_t i = 0; i < seqs.size(); ++i)
    for (int64_t t = 0; t < promptLens[i]; ++t)
      compare(i, pre.data<float>() + (i * width + t) * vocab, t);
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<std::vector<int64_t>> next;
    for (size_t i = 0; i < seqs.size(); ++i)
      next.push_back({seqTokens[i][promptLens[i] + step]});
    Tensor dec = cachedStep(session, a, cache, "decode", seqs, next);
    for (size_t i = 0; i < seqs.size(); ++i)
      compare(i, dec.data<float>() + i * vocab, promptLens[i] + step);
  }
  for (int64_t s : seqs)
    cache.release(s);

  // prefill_last against prefill's rows at each prompt's last token.
  std::string lastDiffers = "none";
  if (const Function *last = prefillLast(a)) {
    std::vector<int64_t> fresh;
    std::vector<std::span<const int64_t>> spans;
    for (size_t i = 0; i < seqs.size(); ++i) {
      fresh.push_back(cache.addSequence(adapterOf(i)));
      spans.push_back(prompts[i]);
    }
    Tensor l = cachedLastLogits(session, a.function("prefill"), last, cache,
                                fresh, spans);
    lastDiffers = "yes";
    for (size_t i = 0; i < seqs.size(); ++i)
      if (std::memcmp(l.data<float>() + i * vocab,
                      pre.data<float>() + (i * width + promptLens[i] - 1) * vocab,
                      vocab * sizeof(float)) != 0)
        lastDiffers = "NO, sequence " + std::to_string(i);
    for (int64_t s : fresh)
      cache.release(s);
  }
  bool lastOk = lastDiffers == "yes" || lastDiffers == "none";

  // Batch invariance: each sequence alone, its prompt whole (chunk 0) and in
  // chunks of 2, then the same decode steps one row at a time.
  std::string variance, chunkedVariance;
  for (int64_t chunk : {int64_t(0), int64_t(2)}) {
    std::string &found = chunk ? chunkedVariance : variance;
    for (size_t i = 0; i < seqs.size() && found.empty(); ++i) {
      int64_t seq = cache.addSequence(adapterOf(i));
      std::vector<std::vector<float>> alone;
      int64_t p = promptLens[i];
      for (int64_t t0 = 0; t0 < p;) {
        int64_t n = chunk ? std::min(chunk, p - t0) : p;
        Tensor l = cachedStep(session, a, cache, "prefill", {seq},
                              {std::vector<int64_t>(seqTokens[i].begin() + t0,
                                                    seqTokens[i].begin() + t0 + n)});
        for (int64_t t = 0; t < n; ++t)
          alone.emplace_back(l.data<float>() + t * vocab,
                             l.data<float>() + (t + 1) * vocab);
        t0 += n;
      }
      for (int64_t step = 0; step < steps; ++step) {
        Tensor l = cachedStep(session, a, cache, "decode", {seq},
                              {{seqTokens[i][p + step]}});
        alone.emplace_back(l.data<float>(), l.data<float>() + vocab);
      }
      cache.release(seq);
      for (size_t pos = 0; pos < alone.size() && found.empty(); ++pos) {
        if (std::memcmp(alone[pos].data(), batched[i][pos].data(),
                        vocab * sizeof(float)) == 0)
          continue;
        double diff = 0;
        for (int64_t v = 0; v < vocab; ++v)
          diff = std::max(diff, (double)std::abs(alone[pos][v] - batched[i][pos][v]));
        char buf[160];
        std::snprintf(buf, sizeof buf,
                      "sequence %zu position %zu: max |alone - batched| %.3g",
                      i, pos, diff);
        found = buf;
      }
    }
  }

  if (invarianceOnly) {
    bool ok = variance.empty() && chunkedVariance.empty() && lastOk;
    std::printf("%-40s %-10s batch-invariant: %s  (prompt in chunks of 2: %s)  "
                "prefill_last == prefill: %s  %s\n",
                path.c_str(), cfg.layout.c_str(),
                variance.empty() ? "yes" : ("NO, " + variance).c_str(),
                chunkedVariance.empty() ? "yes" : ("NO, " + chunkedVariance).c_str(),
                lastDiffers.c_str(), ok ? "PASS" : "FAIL");
    return ok;
  }

  // Greedy generation: cached versus full recompute.
  const int64_t newTokens = 12;
  Generator gen(a, session, cache);
  // One batch when every sequence has the same adapter (a Generator call
  // runs one adapter), else one call per sequence.
  std::vector<std::vector<int64_t>> cachedTokens;
  if (adapters.size() == 1) {
    GenerateOptions g;
    g.maxNewTokens = newTokens;
    g.adapter = adapters[0];
    cachedTokens = gen.generate(prompts, g).tokens;
  } else {
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenerateOptions g;
      g.maxNewTokens = newTokens;
      g.adapter = adapterOf(i);
      cachedTokens.push_back(gen.generate({prompts[i]}, g).tokens[0]);
    }
  }
  bool same = true;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int64_t> ids = prompts[i], out;
    for (int64_t n = 0; n < newTokens; ++n) {
      Tensor l = fullLogits(refSession, ref, ids, adapterOf(i));
      int64_t next = argmax(l.data<float>() + (ids.size() - 1) * vocab, vocab);
      out.push_back(next);
      ids.push_back(next);
    }
    same &= out == cachedTokens[i];
  }

  bool ok = worst <= tolerance && same && variance.empty() &&
            chunkedVariance.empty() && lastOk;
  std::printf("%-40s %-10s prefill+decode vs full: max rel err %.3g  "
              "greedy cached == recompute: %s  batch-invariant: %s  "
              "(prompt in chunks of 2: %s)  prefill_last == prefill: %s  %s\n",
              path.c_str(), cfg.layout.c_str(), worst, same ? "yes" : "NO",
              variance.empty() ? "yes" : ("NO, " + variance).c_str(),
              chunkedVariance.empty() ? "yes" : ("NO, " + chunkedVariance).c_str(),
              lastDiffers.c_str(), ok ? "PASS" : "FAIL");
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  int first = 1;
  bool invarianceOnly = argc > 1 && std::string(argv[1]) == "--batch-invariance-only";
  first += invarianceOnly;
  if (argc <= first) {
    std::cerr << "usage: qcc-kv-check [--batch-invariance-only] MODEL.qpkg...\n";
    return 2;
  }
  int failed = 0;
  for (int i = first; i < argc; ++i) {
    try {
      failed += !check(argv[i], invarianceOnly);
    } catch (const std::exception &e) {
      std::cout << argv[i] << ": FAIL: " << e.what() << "\n";
      ++failed;
    }
  }
  std::cout << "kv-cache: " << (argc - first - failed) << " passed, " << failed
            << " failed\n";
  return failed ? 1 : 0;
}
