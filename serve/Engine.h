//===- Engine.h - continuous batching over the KV cache ---------*- C++ -*-===//
//
// The serving engine: requests arrive at any time (submit, from any thread)
// and join or leave the running batch at step boundaries. One loop thread
// runs the steps; a step is
//
//   1. drop cancelled requests (their blocks go back to the pool);
//   2. admit waiting requests in arrival order while a sequence slot and
//      the blocks for prompt + max_tokens are free (reserved up front, so a
//      running request never runs out of cache mid-stream);
//   3. one `decode` call over every request that is generating ([B, 1]);
//   4. one `prefill` call over at most `prefillChunk` prompt tokens of the
//      requests still reading their prompts (a long prompt takes several
//      steps), so running streams keep their inter-token latency while a
//      prompt is read; a request whose prompt is complete samples its first
//      token from that call's logits.
//
// With prefix caching, a request starts from the longest run of full cache
// blocks another request already computed for the same leading tokens (at
// least one prompt token is always computed, for the logits), and publishes
// its own full blocks, prompt and generated, as they fill.
//
// Each request has its own sampler (its seed) and its own text stream (stop
// strings), so what it generates depends on its prompt and parameters only:
// the CPU kernels reduce each row in a fixed order whatever the batch
// (docs/SERVING.md, "Batch invariance" says what is checked).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_SERVE_ENGINE_H
#define QCC_SERVE_ENGINE_H

#include "runtime/core/Artifact.h"
#include "runtime/core/KvCache.h"
#include "runtime/generate/Sampler.h"
#include "runtime/cpu/Session.h"
#include "runtime/text/TextStream.h"
#include "runtime/text/Tokenizer.h"
#include "serve/Metrics.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace qcc::serve {

/// A request refused at the door, with the HTTP status that says why (400:
/// it can never run here; 429: the queue is full; 503: shutting down).
struct RequestError : std::runtime_error {
  RequestError(int status, const std::string &message)
      : std::runtime_error(message), status(status) {}
  int status;
};

enum class FinishReason { Stop, Length, Cancelled, Error };
/// "stop", "length", "cancelled", "error" (OpenAI's finish_reason for the
/// first two).
const char *finishReasonName(FinishReason reason);

struct RequestParams {
  std::vector<int64_t> prompt; ///< token ids, not empty
  int64_t maxNewTokens = 16;   ///< >= 1
  int64_t adapter = 0;         ///< runtime LoRA adapter (0: none)
  rt::SamplerOptions sampler;
  std::vector<int64_t> stopIds;       ///< tokens that end the request (EOS, end of turn)
  std::vector<std::string> stopTexts; ///< OpenAI's `stop` strings
};

/// One request as its consumer (an HTTP handler) sees it. Thread-safe.
class Request {
public:
  struct Update {
    std::string text;  ///< final text since the last take()
    int64_t tokens = 0; ///< tokens generated so far
    bool finished = false;
    FinishReason reason = FinishReason::Stop;
    std::string error; ///< reason Error: what failed
  };
  /// Waits until there is text or the request finished, at most `timeout`,
  /// and takes the text produced since the last call.
  Update take(std::chrono::milliseconds timeout);
  /// Waits for the end and returns all the text not yet taken.
  Update wait();
  /// Ends the request at the next step boundary (a client went away).
  void cancel() { cancelled = true; }
  int64_t promptTokens() const { return (int64_t)params.prompt.size(); }
  /// Prompt tokens whose keys and values came from the prefix cache.
  int64_t cachedPromptTokens() const { return cachedTokens; }

  Request(RequestParams params, const rt::Tokenizer &tokenizer);

private:
  friend class Engine;
  // Engine side, on the loop thread.
  void emit(const std::string &text);
  void finish(FinishReason reason, std::string error = {});

  const RequestParams params;
  std::atomic<bool> cancelled{false};
  std::atomic<int64_t> cachedTokens{0};
  std::chrono::steady_clock::time_point arrived, lastToken;

  // Loop-thread state.
  rt::Sampler sampler;
  rt::TextStream stream;
  std::vector<int64_t> history; ///< prompt + generated (the penalty's window)
  /// The tokens to place in the cache before decoding: the prompt; after a
  /// preemption, the prompt and every generated token but `next`.
  std::vector<int64_t> context;
  /// Preempted after generating: once `context` is back in the cache,
  /// decoding goes on from `next` (nothing is sampled again).
  bool resumed = false;
  int64_t seq = -1;             ///< cache sequence once admitted
  int64_t prefilled = 0;        ///< context tokens in the cache
  int64_t generated = 0;
  int64_t next = -1;            ///< the token to feed to the next decode

  // Shared with the consumer.
  std::mutex mu;
  std::condition_variable cv;
  std::string pending;
  int64_t tokenCount = 0;
  bool done = false;
  FinishReason reason = FinishReason::Stop;
  std::string errorText;
};

struct EngineOptions {
  int64_t maxSequences = 16; ///< requests in the running batch
  /// Tokens of prompt + max_tokens one request may take (0: the model's
  /// max_positions, else 2048).
  int64_t maxContext = 0;
  /// Paged cache blocks (0: maxSequences requests of maxContext tokens).
  int64_t kvBlocks = 0;
  int64_t prefillChunk = 256; ///< prompt tokens per prefill call
  int64_t maxQueue = 256;     ///< waiting requests; more are refused (429)
  /// Share the cache blocks of prompt prefixes seen before (paged caches;
  /// KvCache::matchPrefix).
  bool prefixCache = true;
};

class Engine {
public:
  /// `artifact` needs prefill, decode and a KV cache (throws one line
  /// otherwise). The loop thread starts here.
  Engine(const rt::Artifact &artifact, rt::Executor &executor,
         const rt::Tokenizer &tokenizer, const EngineOptions &options);
  /// Stops the loop; requests still open finish as Cancelled.
  ~Engine();
  /// Throws one line when `artifact` cannot be served (no prefill and
  /// decode over a KV cache); tools call it before loading anything else.
  static void checkServable(const rt::Artifact &artifact);
  /// The KV cache an engine of `options` makes (options' checks, one line
  /// each; a maxContext of 0 becomes the model's), before the executor is
  /// made: qserve --gpu-layers auto keeps room for it.
  static rt::KvCacheOptions cacheOptions(const rt::Artifact &artifact,
                                         EngineOptions &options);
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

  /// Queues a request. Throws RequestError when it can never run (prompt +
  /// max_tokens beyond maxContext, or beyond the cache), when the queue is
  /// full or when the engine is stopping.
  std::shared_ptr<Request> submit(RequestParams params);

  int64_t maxContext() const { return opts.maxContext; }
  /// The counters, gauges and histograms /metrics shows.
  MetricsSnapshot metrics() const;

private:
  void loop();
  void step(std::vector<std::shared_ptr<Request>> &running);
  void admit(std::vector<std::shared_ptr<Request>> &running);
  void decodeStep(std::vector<std::shared_ptr<Request>> &running);
  void prefillStep(std::vector<std::shared_ptr<Request>> &running);
  /// Paged caches: preempts the latest admitted requests until the blocks
  /// this step's decode and prefill rows take are free (vLLM's recompute
  /// preemption: the request goes back to the head of the queue, its cache
  /// released, and recomputes its context when admitted again).
  void makeRoom(std::vector<std::shared_ptr<Request>> &running);
  /// The prefill rows of this step: (request, tokens) within --prefill-chunk.
  std::vector<std::pair<Request *, int64_t>>
  prefillRows(const std::vector<std::shared_ptr<Request>> &running) const;
  /// Takes sampled token `id` of `r`; returns false once r has finished.
  bool accept(Request &r, int64_t id);
  void retire(Request &r, FinishReason reason, std::string error = {});
  int64_t unitsFor(int64_t tokens) const;
  /// Admitted and past its context: the decode step advances it.
  static bool decoding(const Request &r);
  /// Paged: blocks the decoding requests' next tokens take.
  int64_t decodeBlocks(const std::vector<std::shared_ptr<Request>> &running) const;
  /// Paged: blocks `r`'s sequence must take to hold `tokens` more.
  int64_t blocksToAdd(const Request &r, int64_t tokens) const;

  rt::Executor &executor;
  const rt::Tokenizer &tokenizer;
  EngineOptions opts;
  const rt::Function &prefill, &decode; ///< the artifact's entry points
  const rt::Function *prefillLast; ///< prefill_last, if the artifact has it
  std::unique_ptr<rt::KvCache> cache;

  mutable std::mutex mu; ///< guards waiting, stopping, metrics_
  std::condition_variable wake;
  std::deque<std::shared_ptr<Request>> waiting;
  bool stopping = false;
  Metrics metrics_;
  std::atomic<int64_t> running_{0}, unitsInUse{0}, prefixBlocks{0};
  std::thread thread;
};

} // namespace qcc::serve

#endif // QCC_SERVE_ENGINE_H
