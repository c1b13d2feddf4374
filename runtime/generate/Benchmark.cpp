//===- Benchmark.cpp - timing forward passes and generation ---------------===//
#include "runtime/generate/Benchmark.h"
#include "runtime/generate/Generator.h"
#include "runtime/core/KvCache.h"
#include "runtime/core/Roofline.h"

#include "format/Checked.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>

using namespace qcc::rt;

void qcc::rt::requireBenchMemory(const std::string &label, int64_t rows,
                                 int64_t tokens, int64_t vocab) {
  namespace format = qcc::format;
  std::string what = label + " " + std::to_string(rows) + " x " +
                     std::to_string(tokens) + " tokens";
  std::optional<uint64_t> bytes = format::checkedBytes(
      std::vector<int64_t>{rows, tokens, vocab}, sizeof(float));
  if (!bytes || !format::checkedBytes(std::vector<int64_t>{rows, tokens}, 8))
    throw std::runtime_error(what + ": more than fit in 64 bits");
  format::requireMemory(*bytes, what + " (their logits)");
}

void qcc::rt::requireGenerateBenchMemory(const std::string &label,
                                         int64_t batch, int64_t context,
                                         int64_t steps, int64_t vocab) {
  std::optional<int64_t> total =
      qcc::format::checkedAdd<int64_t>(context, steps);
  if (!total || !qcc::format::checkedAdd<int64_t>(*total, 1))
    throw std::runtime_error(label + ": context + steps is beyond 64 bits");
  requireBenchMemory(label, batch, *total + 1, vocab);
}

std::vector<int64_t> qcc::rt::benchTokenIds(int64_t count, int64_t vocab) {
  uint64_t x = 88172645463325252ull; // xorshift: fixed, no <random> state
  std::vector<int64_t> ids(count);
  for (int64_t &id : ids) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    id = (int64_t)(x % (uint64_t)vocab);
  }
  return ids;
}

ForwardBench qcc::rt::benchForward(Executor &session, const Function &fn,
                                   int64_t batch, int64_t seq, int64_t vocab,
                                   int iterations) {
  requireBenchMemory("--bench", batch, seq, vocab);
  Tensor in(DType::I64, {batch, seq});
  std::vector<int64_t> ids = benchTokenIds(batch * seq, vocab);
  std::copy(ids.begin(), ids.end(), in.data<int64_t>());
  auto inputs = sequenceInputs(fn, in);
  session.run(fn.name, inputs); // warm-up
  ForwardBench r;
  r.batch = batch;
  r.seq = seq;
  for (int i = 0; i < iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    session.run(fn.name, inputs);
    r.seconds.push_back(secondsSince(t0));
  }
  std::sort(r.seconds.begin(), r.seconds.end());
  return r;
}

GenerateBench qcc::rt::benchGenerate(const Artifact &a, Executor &session,
                                     int64_t batch, int64_t context,
                                     int64_t steps, int64_t vocab,
                                     bool recompute, const std::string &label,
                                     int64_t adapter) {
  requireGenerateBenchMemory(label, batch, context, steps, vocab);
  std::vector<int64_t> stream = benchTokenIds(batch * context, vocab);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t b = 0; b < batch; ++b)
    prompts.emplace_back(stream.begin() + b * context,
                         stream.begin() + (b + 1) * context);
  GenerateBench r;
  r.recompute = recompute;
  if (recompute) {
    // Each step recomputes the whole sequence: [B, context + i].
    const Function &main = a.function("main");
    std::vector<std::vector<int64_t>> ids = prompts;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t step = 0; step < steps; ++step) {
      int64_t len = ids[0].size();
      Tensor in(DType::I64, {batch, len});
      for (int64_t b = 0; b < batch; ++b)
        std::copy(ids[b].begin(), ids[b].end(),
                  in.data<int64_t>() + b * len);
      KvBatch adapters; // no cache: the rows' adapter alone
      adapters.adapters.assign((size_t)batch, adapter);
      Tensor logits = logitsOf(session.run("main", sequenceInputs(main, in),
                                           adapter ? &adapters : nullptr),
                               main);
      for (int64_t b = 0; b < batch; ++b) {
        const float *row = logits.data<float>() + ((b + 1) * len - 1) * vocab;
        ids[b].push_back(std::max_element(row, row + vocab) - row);
      }
    }
    r.recomputeTokensPerSecond = batch * steps / secondsSince(t0);
    return r;
  }
  if (!a.kvCache())
    throw std::runtime_error("--bench-generate: the artifact has no KV cache "
                             "(compile it with --kv-cache=paged or "
                             "contiguous, or pass --no-cache)");
  const KvCacheConfig &cfg = *a.kvCache();
  // STEPS + 1 new tokens: the first from the prefill, then STEPS decode steps,
  // each writing the previous token's K/V; the last token is never fed back.
  int64_t need = context + steps;
  cfg.checkContext(need, label);
  KvCacheOptions copts;
  copts.maxSequences = batch;
  copts.maxTokens = (need + cfg.blockTokens - 1) / cfg.blockTokens *
                    cfg.blockTokens;
  copts.numBlocks = batch * ((need + cfg.blockTokens - 1) / cfg.blockTokens);
  KvCache cache(cfg, session.cacheOptions(copts));
  Generator gen(a, session, cache);
  GenerateOptions g;
  g.maxNewTokens = steps + 1; // the first comes from the prefill
  g.adapter = adapter;
  // The same generation once first, on the same cache (its sequences are
  // released at the end): the timed one then finds the weights uploaded,
  // the kernels loaded and, on the GPU, its decode graphs captured, as a
  // server's steady state does.
  gen.generate(prompts, g);
  session.clearProfile();
  r.result = gen.generate(prompts, g);
  r.layout = cfg.layout;
  r.cacheBytes = cache.bytes();
  return r;
}

nlohmann::json qcc::rt::writeProfile(const Executor &e, const std::string &plan,
                                     double decodeSeconds, std::ostream &os) {
  const Peaks &peak = e.profilePeaks();
  auto rows = e.profile().rows();
  std::map<std::string, double> fnSeconds;
  std::map<std::string, Cost> fnCost;
  for (const auto &r : rows) {
    fnSeconds[r.function] += r.seconds;
    fnCost[r.function] += r.cost;
  }
  char line[256];
  bool onCpu = dynamic_cast<const Session *>(&e) != nullptr;
  os << "profile (" << (plan == "kernels" || !onCpu ? "GPU plan" : "op plan")
     << " on " << e.profileDevice() << "; peaks "
     << (onCpu ? "measured here" : peak.source) << ": "
     << peak.bandwidth / 1e9 << " GB/s, f32 " << peak.f32 / 1e9
     << " GFLOP/s";
  if (!onCpu)
    os << ", f16 " << peak.f16 / 1e9 << " GFLOP/s";
  os << ", i8 " << peak.i8 / 1e9 << " GOP/s)\n";
  std::snprintf(line, sizeof line, "  %-8s %-14s %6s %9s %6s %9s %9s %6s %6s\n",
                "function", "kind", "calls", "ms", "time%", "GB/s", "GFLOP/s",
                "MBU%", "MFU%");
  os << line;
  nlohmann::json j = {{"schema", "qrun-profile/1"},
                      {"plan", onCpu ? plan : "kernels"},
                      {"device", e.profileDevice()},
                      {"peaks",
                       {{"bandwidth", peak.bandwidth},
                        {"f32", peak.f32},
                        {"f16", peak.f16},
                        {"i8", peak.i8}}},
                      {"rows", nlohmann::json::array()}};
  auto emit = [&](const std::string &fn, const std::string &kind,
                  int64_t calls, double secs, const Cost &c) {
    double bw = secs > 0 ? c.bytes() / secs : 0;
    double fl = secs > 0 ? c.flops / secs : 0;
    double computePeak = peak.compute(c.precision);
    double mbu = peak.bandwidth > 0 ? bw / peak.bandwidth : 0,
           mfu = computePeak > 0 ? fl / computePeak : 0;
    std::string n = calls > 0 ? std::to_string(calls) : "";
    std::snprintf(line, sizeof line,
                  "  %-8s %-14s %6s %9.3f %6.1f %9.3f %9.3f %6.1f %6.1f\n",
                  fn.c_str(), kind.c_str(), n.c_str(), secs * 1e3,
                  fnSeconds[fn] > 0 ? 100 * secs / fnSeconds[fn] : 0.0,
                  bw / 1e9, fl / 1e9, 100 * mbu, 100 * mfu);
    os << line;
    j["rows"].push_back({{"function", fn},
                         {"kind", kind},
                         {"calls", calls},
                         {"seconds", secs},
                         {"precision", precisionName(c.precision)},
                         {"flops", c.flops},
                         {"bytes", c.bytes()},
                         {"intensity", c.intensity()},
                         {"bytes_per_second", bw},
                         {"flops_per_second", fl},
                         {"mbu", mbu},
                         {"mfu", mfu}});
  };
  for (const auto &r : rows)
    emit(r.function, r.kind, r.calls, r.seconds, r.cost);
  for (const auto &[fn, secs] : fnSeconds)
    emit(fn, "(all nodes)", 0, secs, fnCost[fn]);
  if (decodeSeconds > 0 && fnCost.count("decode")) {
    double mbu = peak.bandwidth > 0 ? fnCost["decode"].bytes() /
                                          decodeSeconds / peak.bandwidth
                                    : 0;
    os << "decode step MBU (all bytes of the decode steps over their wall "
          "time): "
       << 100 * mbu << "%\n";
    j["decode_mbu"] = mbu;
  }
  return j;
}
