//===- Generator.cpp - batched generation with a KV cache -----------------===//
#include "runtime/generate/Generator.h"
#include "runtime/core/HalfFloat.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

using namespace qcc::rt;

const Port &qcc::rt::logitsOutput(const Function &fn) {
  for (const Port &p : fn.outputs)
    if (p.shape.size() == 3 && (p.dtype == DType::F32 || isHalfFloat(p.dtype)))
      return p;
  throw std::runtime_error("entry point " + fn.name + " has no [batch, seq, "
                           "vocab] float output to generate from");
}

std::map<std::string, Tensor> qcc::rt::sequenceInputs(const Function &fn,
                                                     const Tensor &ids) {
  const char *usage = "text generation needs a model whose first input is "
                      "int64 token ids [batch, seq] (others: attention_mask, "
                      "position_ids, past keys/values)";
  if (fn.inputs.empty() || fn.inputs[0].dtype != DType::I64 ||
      fn.inputs[0].shape.size() != 2)
    throw std::runtime_error(usage);
  int64_t batch = ids.dim(0), len = ids.dim(1);
  std::map<std::string, Tensor> inputs{{fn.inputs[0].name, ids}};
  for (size_t i = 1; i < fn.inputs.size(); ++i) {
    const Port &p = fn.inputs[i];
    bool mask = p.name == "attention_mask", pos = p.name == "position_ids";
    if ((mask || pos) && p.shape.size() == 2 &&
        (p.dtype == DType::I64 || p.dtype == DType::I32)) {
      Tensor t(p.dtype, {batch, len});
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t s = 0; s < len; ++s) {
          int64_t v = mask ? 1 : s;
          if (p.dtype == DType::I64)
            t.data<int64_t>()[b * len + s] = v;
          else
            t.data<int32_t>()[b * len + s] = (int32_t)v;
        }
      inputs[p.name] = t;
    } else if (p.shape.size() == 4 && p.shape[1] > 0 && p.shape[3] > 0) {
      inputs[p.name] = Tensor(p.dtype, {batch, p.shape[1], 0, p.shape[3]});
    } else {
      throw std::runtime_error(std::string(usage) + "; input '" + p.name +
                               "' is none of these");
    }
  }
  return inputs;
}

Generator::Generator(const Artifact &artifact, Executor &session,
                     KvCache &cache)
    : artifact(artifact), session(session), cache(cache) {
  for (const char *fn : {"prefill", "decode"}) {
    bool found = false;
    for (const Function &f : artifact.functions())
      found |= f.name == fn;
    if (!found)
      throw std::runtime_error(artifact.path() + ": no '" + fn +
                               "' entry point (compile with a KV cache)");
  }
}

using Clock = std::chrono::steady_clock;

GenerateResult
Generator::generate(const std::vector<std::vector<int64_t>> &prompts,
                    const GenerateOptions &o) {
  GenerateResult res;
  size_t N = prompts.size();
  res.tokens.assign(N, {});
  if (N == 0)
    return res;
  for (const auto &p : prompts)
    if (p.empty())
      throw std::runtime_error("generate: a prompt has no tokens");
  const Function &prefill = artifact.function("prefill");
  const Function *prefillAtLast = prefillLast(artifact);
  const Function &decode = artifact.function("decode");
  Sampler sampler(o.sampler);

  std::vector<int64_t> seqOf(N, -1);
  std::vector<bool> live(N, false);
  std::vector<int64_t> last(N, 0); // the token to feed next
  // Prompt + accepted tokens per sequence: the repetition penalty's window.
  std::vector<std::vector<int64_t>> history(prompts.begin(), prompts.end());
  auto finish = [&](size_t i) {
    live[i] = false;
    cache.release(seqOf[i]);
    if (o.onFinish)
      o.onFinish(i);
  };
  // Takes the sampled token of sequence i; returns whether it goes on.
  auto accept = [&](size_t i, int64_t tok) {
    if (o.eosId >= 0 && tok == o.eosId) {
      finish(i);
      return;
    }
    res.tokens[i].push_back(tok);
    history[i].push_back(tok);
    last[i] = tok;
    if (o.onToken)
      o.onToken(i, tok);
    if ((int64_t)res.tokens[i].size() >= o.maxNewTokens ||
        (o.stopAfter && o.stopAfter(i)))
      finish(i);
  };

  try {
    // Prefill: one call over every prompt, the logits of each one's last
    // token (prefill_last when the artifact has it).
    std::vector<std::span<const int64_t>> tokens;
    for (size_t i = 0; i < N; ++i) {
      seqOf[i] = cache.addSequence(o.adapter);
      live[i] = true;
      tokens.push_back(prompts[i]);
      res.prefillTokens += (int64_t)prompts[i].size();
    }
    if (o.maxNewTokens <= 0) {
      for (size_t i = 0; i < N; ++i)
        finish(i);
      return res;
    }
    auto t0 = Clock::now();
    Tensor logits = cachedLastLogits(session, prefill, prefillAtLast, cache, seqOf,
                                     tokens);
    int64_t V = logits.dim(-1);
    for (size_t i = 0; i < N; ++i)
      accept(i, sampler.sample(logits.data<float>() + (int64_t)i * V, V,
                               history[i]));
    res.prefillSeconds = secondsSince(t0);

    // Decode steps over the live sequences.
    auto t1 = Clock::now();
    while (true) {
      std::vector<size_t> rows;
      for (size_t i = 0; i < N; ++i)
        if (live[i])
          rows.push_back(i);
      if (rows.empty())
        break;
      int64_t B = (int64_t)rows.size();
      std::vector<int64_t> seqs;
      std::vector<std::span<const int64_t>> next;
      for (size_t i : rows) {
        seqs.push_back(seqOf[i]);
        next.push_back({&last[i], 1});
      }
      Tensor dl = cachedLogits(session, decode, cache, seqs, next);
      int64_t DV = dl.dim(-1);
      for (int64_t r = 0; r < B; ++r) {
        accept(rows[r], sampler.sample(dl.data<float>() + r * DV, DV,
                                       history[rows[r]]));
        ++res.decodeTokens;
      }
    }
    res.decodeSeconds = secondsSince(t1);
  } catch (...) {
    for (size_t i = 0; i < N; ++i)
      if (live[i])
        cache.release(seqOf[i]);
    throw;
  }
  return res;
}

Tensor qcc::rt::logitsOf(const std::map<std::string, Tensor> &outputs,
                         const Function &fn) {
  return convertFloat(outputs.at(logitsOutput(fn).name), DType::F32);
}

Tensor qcc::rt::sequenceLogits(Executor &executor, const Function &fn,
                               const std::vector<int64_t> &ids,
                               int64_t adapter) {
  Tensor in(DType::I64, {1, (int64_t)ids.size()});
  std::copy(ids.begin(), ids.end(), in.data<int64_t>());
  KvBatch adapters; // no cache: the adapter alone
  adapters.adapters = {adapter};
  return logitsOf(executor.run(fn.name, sequenceInputs(fn, in),
                               adapter ? &adapters : nullptr),
                  fn);
}

/// The ids and positions inputs of a cache entry point (cachedLogits) and
/// the KV batch to run it with.
static std::map<std::string, Tensor>
cacheInputs(const Function &fn, KvCache &cache, const std::vector<int64_t> &seqs,
            const std::vector<std::span<const int64_t>> &tokens,
            KvBatch &batch) {
  int64_t rows = (int64_t)seqs.size(), width = 0;
  for (const auto &t : tokens)
    width = std::max<int64_t>(width, (int64_t)t.size());
  Tensor ids(DType::I64, {rows, width}), pos(DType::I64, {rows, width});
  batch = KvBatch{&cache, seqs, {}};
  for (int64_t r = 0; r < rows; ++r) {
    int64_t cached = cache.length(seqs[r]);
    for (int64_t t = 0; t < width; ++t) {
      bool real = t < (int64_t)tokens[r].size();
      ids.data<int64_t>()[r * width + t] = real ? tokens[r][t] : 0;
      pos.data<int64_t>()[r * width + t] = real ? cached + t : 0;
    }
    batch.valid.push_back((int64_t)tokens[r].size());
    batch.adapters.push_back(cache.adapter(seqs[r]));
  }
  return {{fn.inputs[0].name, ids}, {fn.inputs[1].name, pos}};
}

Tensor qcc::rt::cachedLogits(Executor &executor, const Function &fn,
                             KvCache &cache, const std::vector<int64_t> &seqs,
                             const std::vector<std::span<const int64_t>> &tokens) {
  KvBatch batch;
  auto inputs = cacheInputs(fn, cache, seqs, tokens, batch);
  return logitsOf(executor.run(fn.name, inputs, &batch), fn);
}

Tensor qcc::rt::cachedLastLogits(
    Executor &executor, const Function &prefill, const Function *last,
    KvCache &cache, const std::vector<int64_t> &seqs,
    const std::vector<std::span<const int64_t>> &tokens) {
  int64_t rows = (int64_t)seqs.size();
  for (const auto &t : tokens)
    if (t.empty())
      throw std::runtime_error("prefill: a row has no tokens");
  if (last) {
    KvBatch batch;
    auto inputs = cacheInputs(*last, cache, seqs, tokens, batch);
    Tensor index(DType::I64, {rows, 1});
    for (int64_t r = 0; r < rows; ++r)
      index.data<int64_t>()[r] = (int64_t)tokens[r].size() - 1;
    inputs[last->inputs[2].name] = index;
    Tensor logits = logitsOf(executor.run(last->name, inputs, &batch), *last);
    if (logits.dim(0) != rows || logits.dim(1) != 1)
      throw std::runtime_error("prefill_last returned logits " +
                               shapeString(logits.shape()) + " for " +
                               std::to_string(rows) + " rows");
    return logits.reshaped({rows, logits.dim(-1)});
  }
  Tensor all = cachedLogits(executor, prefill, cache, seqs, tokens);
  int64_t S = all.dim(1), V = all.dim(-1);
  Tensor out = Tensor::uninitialized(DType::F32, {rows, V});
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(all.data<float>() + (r * S + (int64_t)tokens[r].size() - 1) * V,
                V, out.data<float>() + r * V);
  return out;
}

const Function *qcc::rt::prefillLast(const Artifact &artifact) {
  for (const Function &f : artifact.functions())
    if (f.name == "prefill_last") {
      if (f.inputs.size() != 3 || f.inputs[2].dtype != DType::I64 ||
          f.inputs[2].shape.size() != 2 || f.inputs[2].shape[1] != 1)
        throw std::runtime_error(artifact.path() +
                                 ": entry point prefill_last does not take "
                                 "input_ids, positions and last i64 [B, 1]");
      return &f;
    }
  return nullptr;
}

bool qcc::rt::hasFunction(const Artifact &a, const std::string &name) {
  for (const Function &f : a.functions())
    if (f.name == name)
      return true;
  return false;
}

GenerateResult qcc::rt::generateByRecompute(
    Executor &session, const Function &fn,
    const std::vector<std::vector<int64_t>> &prompts,
    const GenerateOptions &o, int64_t context) {
  Sampler sampler(o.sampler);
  GenerateResult res;
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int64_t> ids = prompts[i];
    std::vector<int64_t> &generated = res.tokens.emplace_back();
    for (int64_t step = 0; step < o.maxNewTokens; ++step) {
      std::vector<int64_t> window(
          ids.end() - std::min<size_t>(ids.size(), context), ids.end());
      Tensor logits = sequenceLogits(session, fn, window, o.adapter);
      int64_t vocab = logits.dim(-1);
      const float *last = logits.data<float>() + (window.size() - 1) * vocab;
      int64_t next = sampler.sample(last, vocab, ids);
      if (next == o.eosId)
        break;
      if (o.onToken)
        o.onToken(i, next);
      ids.push_back(next);
      generated.push_back(next);
      ++res.decodeTokens;
      if (o.stopAfter && o.stopAfter(i))
        break;
    }
    if (o.onFinish)
      o.onFinish(i);
  }
  res.decodeSeconds = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  return res;
}

KvCacheOptions qcc::rt::generationCacheOptions(
    const KvCacheConfig &cfg, const std::vector<std::vector<int64_t>> &prompts,
    int64_t maxNewTokens, int64_t kvBlocks, int64_t maxTokens) {
  KvCacheOptions copts;
  copts.maxSequences = (int64_t)prompts.size();
  int64_t longest = 0, blocks = 0;
  for (const auto &p : prompts) {
    int64_t need = (int64_t)p.size() + maxNewTokens;
    longest = std::max(longest, need);
    blocks += (need + cfg.blockTokens - 1) / cfg.blockTokens;
  }
  cfg.checkContext(longest, "the longest prompt plus --max-new-tokens");
  copts.numBlocks = kvBlocks > 0 ? kvBlocks : blocks;
  int64_t round = cfg.roundingTokens();
  copts.maxTokens =
      maxTokens > 0 ? maxTokens : (longest + round - 1) / round * round;
  return copts;
}

bool qcc::rt::generatesWithCache(const Artifact &a, bool noCache) {
  return !noCache && hasFunction(a, "prefill") && hasFunction(a, "decode") &&
         a.kvCache();
}

GenerateResult
qcc::rt::generateText(const Artifact &a, Executor &executor,
                      const std::vector<std::vector<int64_t>> &prompts,
                      const GenerateOptions &options,
                      const GenerationMode &mode, size_t *cacheBytes) {
  if (cacheBytes)
    *cacheBytes = 0;
  if (!generatesWithCache(a, mode.noCache))
    return generateByRecompute(executor, a.function(mode.function), prompts,
                               options, mode.context);
  const KvCacheConfig &cfg = *a.kvCache();
  KvCacheOptions copts = generationCacheOptions(
      cfg, prompts, options.maxNewTokens, mode.kvBlocks, mode.maxTokens);
  KvCache::checkCapacity(cfg, copts);
  KvCache cache(cfg, executor.cacheOptions(copts));
  if (cacheBytes)
    *cacheBytes = cache.bytes();
  Generator gen(a, executor, cache);
  return gen.generate(prompts, options);
}
