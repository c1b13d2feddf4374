//===- Benchmark.h - timing forward passes and generation ------*- C++ -*-===//
//
// qrun --bench, --bench-generate and --profile. Token ids come from a fixed
// xorshift stream, so every run times the same inputs.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_BENCHMARK_H
#define QCC_RUNTIME_BENCHMARK_H

#include "runtime/generate/Generator.h"
#include "runtime/cpu/Session.h"

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace qcc::rt {

/// Refuses (std::runtime_error, one line) a benchmark whose sizes, from
/// flags, overflow or exceed physical memory: `rows` x `tokens` ids, each
/// with a row of `vocab` f32 logits. benchForward checks it; tools call it
/// first to refuse before anything else happens.
void requireBenchMemory(const std::string &label, int64_t rows,
                        int64_t tokens, int64_t vocab);
/// The same for benchGenerate's batch, context + steps + 1 tokens.
void requireGenerateBenchMemory(const std::string &label, int64_t batch,
                                int64_t context, int64_t steps, int64_t vocab);

/// The first `count` ids of the fixed stream, each in [0, vocab).
std::vector<int64_t> benchTokenIds(int64_t count, int64_t vocab);

/// Forward passes of a full-sequence entry point over [batch, seq] ids.
struct ForwardBench {
  int64_t batch = 0, seq = 0;
  std::vector<double> seconds; ///< per timed run, sorted
  double median() const { return seconds[seconds.size() / 2]; }
  double tokensPerSecond() const { return batch * seq / median(); }
};
/// One warm-up run, then `iterations` (> 0) timed ones. `vocab`: the static
/// vocabulary size (> 0).
ForwardBench benchForward(Executor &executor, const Function &fn,
                          int64_t batch, int64_t seq, int64_t vocab,
                          int iterations);

/// Generation: `batch` prompts of `context` ids, then `steps` new tokens
/// each (greedy).
struct GenerateBench {
  bool recompute = false;
  /// Recompute (no KV cache): `main` over the whole sequence every step.
  double recomputeTokensPerSecond = 0;
  /// Through the KV cache: prefill, then a decode per step.
  GenerateResult result;
  std::string layout; ///< the cache layout
  size_t cacheBytes = 0;
};
/// With `recompute`, through `main`; else through prefill and decode and the
/// artifact's KV cache ("kv_cache"; `label` names the request when the model
/// has too few positions). Every sequence runs with runtime LoRA adapter
/// `adapter` (0: none).
GenerateBench benchGenerate(const Artifact &artifact, Executor &executor,
                            int64_t batch, int64_t context, int64_t steps,
                            int64_t vocab, bool recompute,
                            const std::string &label, int64_t adapter = 0);

/// The profile an executor gathered (Executor::enableProfile): per entry
/// point and node kind (a kernel region's kind with the GPU plan, else the
/// op), achieved time, bandwidth and FLOP/s, as MBU and MFU against its
/// roofline (Executor::profilePeaks: this CPU's measured peaks, a GPU's
/// datasheet; runtime/core/Roofline.h); with `decodeSeconds` > 0, the whole
/// decode step's MBU. Prints the table to `os` and returns it as JSON
/// ("qrun-profile/1"). `plan` is the CPU session's, "ops" or "kernels" (the
/// CUDA backend always runs the GPU plan).
nlohmann::json writeProfile(const Executor &executor, const std::string &plan,
                            double decodeSeconds, std::ostream &os);

} // namespace qcc::rt

#endif // QCC_RUNTIME_BENCHMARK_H
