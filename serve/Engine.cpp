//===- Engine.cpp - continuous batching over the KV cache -----------------===//
#include "serve/Engine.h"

#include "runtime/generate/Generator.h"
#include "runtime/core/HalfFloat.h"

#include <algorithm>

using namespace qcc::serve;
using namespace qcc::rt;
using Clock = std::chrono::steady_clock;

const char *qcc::serve::finishReasonName(FinishReason r) {
  switch (r) {
  case FinishReason::Stop:
    return "stop";
  case FinishReason::Length:
    return "length";
  case FinishReason::Cancelled:
    return "cancelled";
  case FinishReason::Error:
    return "error";
  }
  return "error";
}

//===----------------------------------------------------------------------===//
// Request
//===----------------------------------------------------------------------===//

Request::Request(RequestParams p, const Tokenizer &tokenizer)
    : params(std::move(p)), sampler(params.sampler),
      stream(tokenizer, params.prompt, params.stopTexts),
      history(params.prompt), context(params.prompt) {}

Request::Update Request::take(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait_for(lock, timeout, [&] { return done || !pending.empty(); });
  Update u{std::move(pending), tokenCount, done, reason, errorText};
  pending.clear();
  return u;
}

Request::Update Request::wait() {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  Update u{std::move(pending), tokenCount, done, reason, errorText};
  pending.clear();
  return u;
}

void Request::emit(const std::string &text) {
  std::lock_guard<std::mutex> lock(mu);
  pending += text;
  tokenCount = generated;
  cv.notify_all();
}

void Request::finish(FinishReason r, std::string error) {
  std::lock_guard<std::mutex> lock(mu);
  tokenCount = generated;
  done = true;
  reason = r;
  errorText = std::move(error);
  cv.notify_all();
}

//===----------------------------------------------------------------------===//
// Engine
//===----------------------------------------------------------------------===//

Engine::Engine(const Artifact &a, Executor &e, const Tokenizer &t,
               const EngineOptions &o)
    : executor(e), tokenizer(t), opts(o),
      prefill((checkServable(a), a.function("prefill"))),
      decode(a.function("decode")), prefillLast(rt::prefillLast(a)) {
  KvCacheOptions copts = cacheOptions(a, opts); // fills maxContext
  cache = std::make_unique<KvCache>(*a.kvCache(), executor.cacheOptions(copts));
  thread = std::thread([this] { loop(); });
}

KvCacheOptions Engine::cacheOptions(const Artifact &a, EngineOptions &opts) {
  const KvCacheConfig &cfg = *a.kvCache();
  if (opts.maxSequences < 1)
    throw std::runtime_error("--max-sequences must be at least 1");
  if (opts.prefillChunk < 1)
    throw std::runtime_error("--prefill-chunk must be at least 1");
  if (opts.maxQueue < 0)
    throw std::runtime_error("--max-queue must not be negative");
  if (opts.maxContext < 0 || opts.kvBlocks < 0)
    throw std::runtime_error("--max-context and --kv-blocks must not be negative");
  if (opts.maxContext == 0)
    opts.maxContext = cfg.maxPositions > 0 ? cfg.maxPositions : 2048;
  cfg.checkContext(opts.maxContext, "--max-context");

  KvCacheOptions copts;
  copts.maxSequences = opts.maxSequences;
  int64_t round = cfg.roundingTokens();
  copts.maxTokens = (opts.maxContext + round - 1) / round * round;
  int64_t perRequest = (opts.maxContext + cfg.blockTokens - 1) / cfg.blockTokens;
  if (opts.kvBlocks == 0 &&
      perRequest > std::numeric_limits<int64_t>::max() / opts.maxSequences)
    throw std::runtime_error("--max-sequences x --max-context overflows");
  copts.numBlocks = opts.kvBlocks > 0 ? opts.kvBlocks
                                      : perRequest * opts.maxSequences;
  KvCache::checkCapacity(cfg, copts);
  return copts;
}

void Engine::checkServable(const Artifact &a) {
  if (!generatesWithCache(a, /*noCache=*/false))
    throw std::runtime_error(
        a.path() + ": serving needs the prefill and decode entry points over a "
                   "KV cache (compile the decoder without --kv-cache=none)");
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  wake.notify_all();
  if (thread.joinable())
    thread.join();
}

int64_t Engine::unitsFor(int64_t tokens) const {
  if (!cache->paged())
    return 1;
  int64_t bt = cache->unitTokenCount();
  return (tokens + bt - 1) / bt;
}

std::shared_ptr<Request> Engine::submit(RequestParams p) {
  auto refuse = [&](int status, const std::string &message) {
    std::lock_guard<std::mutex> lock(mu);
    ++metrics_.requestsRejected;
    return RequestError(status, message);
  };
  if (p.prompt.empty())
    throw refuse(400, "the prompt has no tokens");
  if (p.maxNewTokens < 1)
    throw refuse(400, "max_tokens must be at least 1");
  int64_t vocab = tokenizer.vocabSize();
  for (int64_t id : p.prompt)
    if (id < 0 || id >= vocab)
      throw refuse(400, "prompt token " + std::to_string(id) +
                            " is outside the vocabulary [0, " +
                            std::to_string(vocab) + ")");
  int64_t prompt = (int64_t)p.prompt.size();
  if (p.maxNewTokens > opts.maxContext || prompt > opts.maxContext - p.maxNewTokens)
    throw refuse(400, "the prompt (" + std::to_string(prompt) +
                          " tokens) plus max_tokens (" +
                          std::to_string(p.maxNewTokens) +
                          ") exceeds the context of " +
                          std::to_string(opts.maxContext) + " tokens");
  int64_t need = prompt + p.maxNewTokens;
  if (cache->paged() && unitsFor(need) > cache->numBlocks())
    throw refuse(400, "the prompt plus max_tokens needs " +
                          std::to_string(unitsFor(need)) +
                          " KV cache blocks; the cache has " +
                          std::to_string(cache->numBlocks()));
  auto r = std::make_shared<Request>(std::move(p), tokenizer);
  r->arrived = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (stopping) {
      ++metrics_.requestsRejected;
      throw RequestError(503, "the server is shutting down");
    }
    if ((int64_t)waiting.size() >= opts.maxQueue) {
      ++metrics_.requestsRejected;
      throw RequestError(429, "the queue is full (" +
                                  std::to_string(waiting.size()) +
                                  " requests waiting); retry later");
    }
    waiting.push_back(r);
  }
  wake.notify_one();
  return r;
}

MetricsSnapshot Engine::metrics() const {
  MetricsSnapshot s;
  std::lock_guard<std::mutex> lock(mu);
  s.totals = metrics_;
  s.waiting = (int64_t)waiting.size();
  s.running = running_;
  s.cacheUnitsInUse = unitsInUse;
  s.paged = cache->paged();
  s.prefixCacheBlocks = prefixBlocks;
  s.cacheUnits = cache->paged() ? cache->numBlocks() : cache->maxSequences();
  return s;
}

void Engine::loop() {
  std::vector<std::shared_ptr<Request>> running;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu);
      wake.wait(lock, [&] {
        return stopping || !waiting.empty() || !running.empty();
      });
      if (stopping)
        break;
    }
    step(running);
  }
  for (auto &r : running)
    retire(*r, FinishReason::Cancelled);
  std::deque<std::shared_ptr<Request>> left;
  {
    std::lock_guard<std::mutex> lock(mu);
    left.swap(waiting);
  }
  for (auto &r : left)
    retire(*r, FinishReason::Cancelled);
}

void Engine::retire(Request &r, FinishReason reason, std::string error) {
  if (r.seq >= 0) {
    cache->release(r.seq);
    r.seq = -1;
  }
  if (reason == FinishReason::Stop || reason == FinishReason::Length)
    r.emit(r.stream.finish());
  {
    std::lock_guard<std::mutex> lock(mu);
    ++metrics_.requestsFinished[(int)reason];
    metrics_.requestLatency.observe(
        std::chrono::duration<double>(Clock::now() - r.arrived).count());
  }
  r.finish(reason, std::move(error));
}

bool Engine::accept(Request &r, int64_t id) {
  auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (r.generated == 0)
      metrics_.timeToFirstToken.observe(
          std::chrono::duration<double>(now - r.arrived).count());
    else
      metrics_.interTokenLatency.observe(
          std::chrono::duration<double>(now - r.lastToken).count());
    ++metrics_.generatedTokens;
  }
  r.lastToken = now;
  const auto &stops = r.params.stopIds;
  if (std::find(stops.begin(), stops.end(), id) != stops.end()) {
    retire(r, FinishReason::Stop);
    return false;
  }
  ++r.generated;
  r.history.push_back(id);
  r.next = id;
  r.emit(r.stream.push(id));
  if (r.stream.stopped()) {
    retire(r, FinishReason::Stop);
    return false;
  }
  if (r.generated >= r.params.maxNewTokens) {
    retire(r, FinishReason::Length);
    return false;
  }
  return true;
}

void Engine::admit(std::vector<std::shared_ptr<Request>> &running) {
  std::vector<std::shared_ptr<Request>> cancelled;
  // Paged: the blocks the running requests' next decode takes stay free for
  // them, so an admission does not preempt a running request at once.
  int64_t decodeNeed = cache->paged() ? decodeBlocks(running) : 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = waiting.begin(); it != waiting.end();)
      if ((*it)->cancelled) {
        cancelled.push_back(*it);
        it = waiting.erase(it);
      } else {
        ++it;
      }
    // In arrival order: a request that does not fit yet waits at the head,
    // so a long one is not starved by short ones behind it.
    while (!waiting.empty() &&
           (int64_t)running.size() < opts.maxSequences) {
      Request &r = *waiting.front();
      // Paged: blocks for the context and the next token (more as it
      // generates, preempting the latest admitted when blocks run out:
      // makeRoom); contiguous: the slot holds the whole request.
      const int64_t contextTokens = (int64_t)r.context.size();
      int64_t need = cache->paged() ? contextTokens + 1
                                    : r.promptTokens() + r.params.maxNewTokens;
      KvCache::PrefixMatch match;
      if (opts.prefixCache)
        match = cache->matchPrefix(r.context, contextTokens - 1,
                                   r.params.adapter);
      // Shared blocks no sequence holds now stop being free.
      if (cache->paged() &&
          cache->freeBlocks() - match.unheld - decodeNeed <
              unitsFor(need) - (int64_t)match.blocks.size())
        break;
      r.seq = cache->addSequence(r.params.adapter);
      if (!match.blocks.empty())
        cache->attachPrefix(r.seq, match);
      cache->reserve(r.seq, need);
      r.prefilled = match.tokens;
      if (!r.resumed && r.generated == 0)
        r.cachedTokens = match.tokens; // usage: the prompt's cached tokens
      metrics_.prefixCacheHitTokens += (uint64_t)match.tokens;
      running.push_back(waiting.front());
      waiting.pop_front();
    }
  }
  for (auto &r : cancelled)
    retire(*r, FinishReason::Cancelled);
}

bool Engine::decoding(const Request &r) {
  return r.seq >= 0 && r.prefilled == (int64_t)r.context.size();
}

int64_t Engine::decodeBlocks(
    const std::vector<std::shared_ptr<Request>> &running) const {
  int64_t need = 0;
  for (auto &r : running)
    if (decoding(*r))
      need += blocksToAdd(*r, 1);
  return need;
}

int64_t Engine::blocksToAdd(const Request &r, int64_t tokens) const {
  int64_t held = (int64_t)cache->blockTable(r.seq).size();
  return std::max<int64_t>(0, unitsFor(cache->length(r.seq) + tokens) - held);
}

std::vector<std::pair<Request *, int64_t>> Engine::prefillRows(
    const std::vector<std::shared_ptr<Request>> &running) const {
  std::vector<std::pair<Request *, int64_t>> rows;
  int64_t budget = opts.prefillChunk;
  for (auto &r : running) {
    if (budget == 0)
      break;
    int64_t left = (int64_t)r->context.size() - r->prefilled;
    if (r->seq < 0 || left == 0)
      continue;
    int64_t n = std::min(left, budget);
    budget -= n;
    rows.emplace_back(r.get(), n);
  }
  return rows;
}

void Engine::makeRoom(std::vector<std::shared_ptr<Request>> &running) {
  if (!cache->paged())
    return;
  for (;;) {
    int64_t need = decodeBlocks(running);
    for (auto [r, n] : prefillRows(running))
      need += blocksToAdd(*r, n);
    if (need <= cache->freeBlocks())
      return;
    // The latest admitted request goes back to the head of the queue. The
    // first one never does: submit() refuses what the cache cannot hold
    // alone, so it fits once the others are gone.
    auto victim = std::find_if(running.rbegin(), running.rend(),
                               [](const auto &r) { return r->seq >= 0; });
    if (victim == running.rend() ||
        std::count_if(running.begin(), running.end(),
                      [](const auto &r) { return r->seq >= 0; }) == 1)
      return;
    Request &r = **victim;
    if (decoding(r)) {
      // Decoding: its cache holds the context and every generated token but
      // `next`; it recomputes them and goes on from `next`.
      r.context.assign(r.history.begin(), r.history.end() - 1);
      r.resumed = true;
    }
    cache->release(r.seq);
    r.seq = -1;
    r.prefilled = 0;
    std::lock_guard<std::mutex> lock(mu);
    waiting.push_front(*victim);
    ++metrics_.preemptions;
  }
}

void Engine::step(std::vector<std::shared_ptr<Request>> &running) {
  auto drop = [&] {
    running.erase(std::remove_if(running.begin(), running.end(),
                                 [](const auto &r) { return r->seq < 0; }),
                  running.end());
  };
  for (auto &r : running)
    if (r->cancelled)
      retire(*r, FinishReason::Cancelled);
  drop();
  admit(running);
  makeRoom(running);
  drop(); // the preempted wait at the head of the queue
  try {
    decodeStep(running);
    drop();
    prefillStep(running);
  } catch (const std::exception &e) {
    // A failed call fails the requests in it; the server goes on.
    for (auto &r : running)
      if (r->seq >= 0)
        retire(*r, FinishReason::Error, e.what());
  }
  drop();
  running_ = (int64_t)running.size();
  unitsInUse = cache->paged() ? cache->numBlocks() - cache->freeBlocks()
                              : cache->liveSequences();
  prefixBlocks = cache->publishedBlocks();
}

void Engine::decodeStep(std::vector<std::shared_ptr<Request>> &running) {
  std::vector<Request *> rows;
  for (auto &r : running)
    if (decoding(*r))
      rows.push_back(r.get());
  if (rows.empty())
    return;
  int64_t B = (int64_t)rows.size();
  std::vector<int64_t> seqs;
  std::vector<std::span<const int64_t>> tokens;
  for (Request *r : rows) {
    seqs.push_back(r->seq);
    tokens.push_back({&r->next, 1});
  }
  Tensor logits = cachedLogits(executor, decode, *cache, seqs, tokens);
  int64_t V = logits.dim(-1);
  {
    std::lock_guard<std::mutex> lock(mu);
    ++metrics_.decodeSteps;
    metrics_.decodeRows += (uint64_t)B;
  }
  for (int64_t b = 0; b < B; ++b) {
    Request &r = *rows[b];
    if (accept(r, r.sampler.sample(logits.data<float>() + b * V, V, r.history)) &&
        opts.prefixCache)
      cache->publishPrefix(r.seq, r.history);
  }
}

void Engine::prefillStep(std::vector<std::shared_ptr<Request>> &running) {
  std::vector<std::pair<Request *, int64_t>> rows = prefillRows(running);
  if (rows.empty())
    return;
  std::vector<int64_t> seqs;
  std::vector<std::span<const int64_t>> tokens;
  for (auto [r, n] : rows) {
    seqs.push_back(r->seq);
    tokens.push_back(std::span<const int64_t>(r->context).subspan(r->prefilled, n));
  }
  // The logits of each row's last token of this chunk; only the rows that
  // finish their prompt sample from them.
  Tensor logits =
      cachedLastLogits(executor, prefill, prefillLast, *cache, seqs, tokens);
  int64_t V = logits.dim(-1);
  {
    std::lock_guard<std::mutex> lock(mu);
    ++metrics_.prefillCalls;
    for (auto [r, n] : rows)
      metrics_.promptTokens += (uint64_t)n;
  }
  for (size_t b = 0; b < rows.size(); ++b) {
    Request &r = *rows[b].first;
    r.prefilled += rows[b].second;
    if (opts.prefixCache)
      cache->publishPrefix(r.seq, r.context);
    if (r.prefilled < (int64_t)r.context.size())
      continue;
    if (r.resumed) { // recomputed after a preemption: decode goes on
      r.resumed = false;
      continue;
    }
    accept(r, r.sampler.sample(logits.data<float>() + (int64_t)b * V, V,
                               r.history));
  }
}
