//===- Speculative.cpp - speculative decoding and prompt lookup -----------===//
#include "runtime/generate/Speculative.h"
#include "runtime/core/HalfFloat.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

using namespace qcc::rt;

/// A draw from `p`; none from `rng` when p is one-hot (greedy), so greedy
/// decoding uses no randomness.
static int64_t draw(std::span<const double> p, std::mt19937_64 &rng) {
  int64_t only = -1;
  for (size_t v = 0; v < p.size(); ++v)
    if (p[v] > 0) {
      if (only >= 0)
        return drawFrom(p, uniform01(rng));
      only = (int64_t)v;
    }
  return std::max<int64_t>(only, 0);
}

Verdict qcc::rt::verifyDrafts(std::span<const int64_t> draft,
                              const std::vector<std::vector<double>> &target,
                              const std::vector<std::vector<double>> &proposal,
                              std::mt19937_64 &rng) {
  size_t K = draft.size();
  if (target.size() != K + 1 || (!proposal.empty() && proposal.size() != K))
    throw std::runtime_error("verifyDrafts: " + std::to_string(K) +
                             " drafts need " + std::to_string(K + 1) +
                             " target rows and 0 or " + std::to_string(K) +
                             " proposal rows");
  for (size_t i = 0; i < K; ++i) {
    const std::vector<double> &p = target[i];
    int64_t x = draft[i];
    if (x < 0 || x >= (int64_t)p.size())
      throw std::runtime_error("verifyDrafts: draft token " +
                               std::to_string(x) + " is outside the "
                               "vocabulary");
    double q = proposal.empty() ? 1.0 : proposal[i][x];
    // Accept with probability min(1, p/q); no draw when that is 0 or 1, so
    // greedy verification consumes no randomness.
    double ratio = q > 0 ? p[x] / q : 1.0;
    if (ratio >= 1.0 || (ratio > 0.0 && uniform01(rng) < ratio))
      continue;
    // Rejected: the residual max(0, p - q), renormalized.
    std::vector<double> r(p.size());
    double sum = 0;
    for (size_t v = 0; v < p.size(); ++v) {
      double qv = proposal.empty() ? (int64_t)v == x : proposal[i][v];
      r[v] = std::max(0.0, p[v] - qv);
      sum += r[v];
    }
    if (sum <= 0) // p == q up to rounding: p itself is the residual's limit
      r = p, sum = 1;
    for (double &v : r)
      v /= sum;
    return {(int64_t)i, draw(r, rng)};
  }
  return {(int64_t)K, draw(target[K], rng)};
}

std::vector<int64_t> qcc::rt::lookupDrafts(std::span<const int64_t> history,
                                           std::span<const int64_t> reference,
                                           int64_t ngram, int64_t maxTokens) {
  int64_t H = (int64_t)history.size();
  for (int64_t n = std::min(ngram, H); n >= 1 && maxTokens > 0; --n) {
    std::span<const int64_t> key = history.subspan(H - n);
    // The latest match that has a token after it: in the history (ending
    // before the key itself), then in the reference.
    for (std::span<const int64_t> text : {history.first(H - 1), reference}) {
      for (int64_t at = (int64_t)text.size() - n; at >= 0; --at) {
        if (!std::equal(key.begin(), key.end(), text.begin() + at))
          continue;
        // In the history the continuation may run into the key: it is still
        // the text that followed (a repeating pattern continues).
        std::span<const int64_t> src = text.data() == history.data()
                                           ? history
                                           : text;
        int64_t from = at + n;
        int64_t count =
            std::min<int64_t>(maxTokens, (int64_t)src.size() - from);
        if (count > 0)
          return {src.begin() + from, src.begin() + from + count};
      }
    }
  }
  return {};
}

DraftModel::DraftModel(const std::string &path,
                       const KvCacheOptions &targetCache,
                       const std::vector<std::vector<int64_t>> &prompts,
                       int64_t maxNewTokens, const BackendOptions &backend,
                       std::ostream &log, FileAccess access)
    : artifact(Artifact::load(path, access)) {
  if (!artifact.kvCache())
    throw std::runtime_error("--draft: " + path + " has no KV cache "
                             "(compile it with --kv-cache=paged or contiguous)");
  const KvCacheConfig &cfg = *artifact.kvCache();
  KvCacheOptions opts = targetCache;
  int64_t round = cfg.roundingTokens();
  opts.maxTokens = (targetCache.maxTokens + round - 1) / round * round;
  opts.numBlocks = 0;
  for (const auto &p : prompts)
    opts.numBlocks += ((int64_t)p.size() + maxNewTokens + round - 1) / round;
  session = makeExecutor(artifact, backend, log);
  cache.emplace(cfg, session->cacheOptions(opts));
}

SpeculativeGenerator::SpeculativeGenerator(const Artifact &targetArtifact,
                                           Executor &targetSession,
                                           KvCache &targetCache,
                                           const Artifact *draftArtifact,
                                           Executor *draftSession,
                                           KvCache *draftCache)
    : target{&targetArtifact, &targetSession, &targetCache} {
  Generator check(targetArtifact, targetSession, targetCache);
  if (!draftArtifact)
    return;
  if (!draftSession || !draftCache)
    throw std::runtime_error("speculative decoding: the draft model needs a "
                             "session and a KV cache");
  Generator checkDraft(*draftArtifact, *draftSession, *draftCache);
  draft = Model{draftArtifact, draftSession, draftCache};
  int64_t vt = logitsOutput(targetArtifact.function("prefill")).shape.back(),
          vd = logitsOutput(draftArtifact->function("prefill")).shape.back();
  auto tt = targetArtifact.section("tokenizer"),
       td = draftArtifact->section("tokenizer");
  bool sameTokenizer = (!tt && !td) || (tt && td && *tt == *td);
  if (vt != vd || !sameTokenizer)
    throw std::runtime_error(
        "--draft: " + draftArtifact->path() + " does not share the target's " +
        (vt != vd ? "vocabulary (" + std::to_string(vd) + " tokens, the "
                        "target has " + std::to_string(vt) + ")"
                  : std::string("tokenizer")));
}

Tensor SpeculativeGenerator::extend(Model &m, int64_t seq,
                                    std::span<const int64_t> tokens) {
  const Function &fn =
      m.artifact->function(tokens.size() == 1 ? "decode" : "prefill");
  return cachedLogits(*m.session, fn, *m.cache, {seq}, {tokens});
}

Tensor SpeculativeGenerator::extendLast(Model &m, int64_t seq,
                                        std::span<const int64_t> tokens) {
  if (tokens.size() == 1) { // decode's skinny path
    Tensor l = extend(m, seq, tokens);
    return l.reshaped({l.dim(-1)});
  }
  Tensor l = cachedLastLogits(*m.session, m.artifact->function("prefill"),
                              prefillLast(*m.artifact), *m.cache, {seq},
                              {tokens});
  return l.reshaped({l.dim(-1)});
}

using Clock = std::chrono::steady_clock;

GenerateResult
SpeculativeGenerator::generate(const std::vector<std::vector<int64_t>> &prompts,
                               const GenerateOptions &o,
                               const SpeculativeOptions &spec,
                               SpeculativeStats *statsOut) {
  if (spec.draftTokens < 1)
    throw std::runtime_error("speculative decoding: draft tokens must be >= 1");
  if (!draft && spec.lookupNgram <= 0)
    throw std::runtime_error("speculative decoding needs a draft model or "
                             "prompt lookup");
  GenerateResult res;
  SpeculativeStats stats;
  res.tokens.assign(prompts.size(), {});
  Sampler dist(o.sampler); // probabilities() only: validates the options
  std::mt19937_64 rng(o.sampler.seed);

  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int64_t> &prompt = prompts[i];
    if (prompt.empty())
      throw std::runtime_error("generate: a prompt has no tokens");
    res.prefillTokens += (int64_t)prompt.size();
    if (o.maxNewTokens <= 0) {
      if (o.onFinish)
        o.onFinish(i);
      continue;
    }
    // The draft runs without the target's adapter: its proposals are only
    // proposals (the target's verification keeps the adapter's tokens).
    int64_t tseq = target.cache->addSequence(o.adapter), dseq = -1;
    try {
      if (draft)
        dseq = draft->cache->addSequence();
      std::vector<int64_t> history = prompt;
      std::vector<int64_t> &out = res.tokens[i];
      bool done = false;
      // Takes token `tok`; false once the sequence has ended.
      auto emit = [&](int64_t tok) {
        if (o.eosId >= 0 && tok == o.eosId) {
          done = true;
          return false;
        }
        out.push_back(tok);
        history.push_back(tok);
        if (o.onToken)
          o.onToken(i, tok);
        done = (int64_t)out.size() >= o.maxNewTokens ||
               (o.stopAfter && o.stopAfter(i));
        return !done;
      };
      auto probs = [&](const float *row, int64_t V,
                       std::span<const int64_t> recent) {
        return dist.probabilities(row, V, recent);
      };

      auto t0 = Clock::now();
      Tensor pl = extendLast(target, tseq, prompt);
      int64_t V = pl.dim(-1);
      emit(draw(probs(pl.data<float>(), V, history), rng));
      res.prefillSeconds += secondsSince(t0);

      auto t1 = Clock::now();
      while (!done) {
        // The target has cached every token but the last.
        int64_t base = (int64_t)history.size() - 1;
        int64_t remaining = o.maxNewTokens - (int64_t)out.size();
        int64_t K = std::min(spec.draftTokens, remaining - 1);
        std::vector<int64_t> drafts;
        std::vector<std::vector<double>> proposal;
        if (K > 0 && spec.lookupNgram > 0)
          drafts = lookupDrafts(history, spec.reference, spec.lookupNgram, K);
        if (K > 0 && drafts.empty() && draft) {
          // Catch the draft's cache up with the history, then draw K tokens
          // from it one call at a time.
          int64_t have = draft->cache->length(dseq);
          std::vector<int64_t> pending(history.begin() + have, history.end());
          std::vector<int64_t> seen = history;
          for (int64_t k = 0; k < K; ++k) {
            Tensor dl = extendLast(*draft, dseq, pending);
            std::vector<double> q = probs(dl.data<float>(), dl.dim(-1), seen);
            int64_t x = draw(q, rng);
            drafts.push_back(x);
            proposal.push_back(std::move(q));
            seen.push_back(x);
            pending = {x};
          }
        }
        // Verify: the last token and the drafts in one call.
        std::vector<int64_t> feed = {history.back()};
        feed.insert(feed.end(), drafts.begin(), drafts.end());
        Tensor tl = extend(target, tseq, feed);
        std::vector<std::vector<double>> rows;
        std::vector<int64_t> seen = history;
        for (size_t r = 0; r < feed.size(); ++r) {
          if (r > 0)
            seen.push_back(drafts[r - 1]);
          rows.push_back(probs(tl.data<float>() + r * V, V, seen));
        }
        Verdict v = verifyDrafts(drafts, rows, proposal, rng);
        ++stats.steps;
        stats.proposed += (int64_t)drafts.size();
        stats.accepted += v.accepted;
        stats.emitted += v.accepted + 1;
        // Keep the last token and the accepted drafts in the target's cache.
        target.cache->truncate(tseq, base + 1 + v.accepted);
        if (draft)
          draft->cache->truncate(
              dseq, std::min(draft->cache->length(dseq),
                             base + 1 + v.accepted));
        bool more = true;
        for (int64_t a = 0; a < v.accepted && more; ++a)
          more = emit(drafts[a]);
        if (more)
          emit(v.next);
      }
      res.decodeTokens += std::max<int64_t>(0, (int64_t)out.size() - 1);
      res.decodeSeconds += secondsSince(t1);
    } catch (...) {
      target.cache->release(tseq);
      if (dseq >= 0)
        draft->cache->release(dseq);
      throw;
    }
    target.cache->release(tseq);
    if (dseq >= 0)
      draft->cache->release(dseq);
    if (o.onFinish)
      o.onFinish(i);
  }
  if (statsOut)
    *statsOut = stats;
  return res;
}
