//===- Metrics.h - the server's counters, in Prometheus text ----*- C++ -*-===//
//
// What /metrics shows (the Prometheus text exposition format 0.0.4): request
// and token counters, the queue and batch gauges, KV cache use, and
// histograms of time to first token, inter-token latency and request
// latency. The engine updates them under its lock; the server renders a
// snapshot.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_SERVE_METRICS_H
#define QCC_SERVE_METRICS_H

#include <array>
#include <cstdint>
#include <string>

namespace qcc::serve {

/// A cumulative histogram over fixed bounds in seconds (Prometheus `le`).
struct Histogram {
  static constexpr std::array<double, 14> kBounds = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
      0.25,  0.5,    1.0,   2.5,  5.0,   10.0, 30.0};
  std::array<uint64_t, kBounds.size() + 1> counts{}; ///< last: +Inf only
  uint64_t count = 0;
  double sum = 0;
  void observe(double seconds);
};

struct Metrics {
  uint64_t requestsFinished[4] = {}; ///< by FinishReason
  uint64_t requestsRejected = 0;     ///< refused at submit (400/429/503)
  uint64_t promptTokens = 0, generatedTokens = 0;
  /// Decode calls and the rows they ran (their ratio: the mean batch).
  uint64_t decodeSteps = 0, decodeRows = 0;
  uint64_t prefillCalls = 0;
  /// Prompt tokens not computed: their blocks came from the prefix cache.
  uint64_t prefixCacheHitTokens = 0;
  /// Running requests sent back to the queue to free cache blocks.
  uint64_t preemptions = 0;
  Histogram timeToFirstToken, interTokenLatency, requestLatency;
};

struct MetricsSnapshot {
  Metrics totals;
  int64_t waiting = 0, running = 0;
  int64_t cacheUnitsInUse = 0, cacheUnits = 0;
  int64_t prefixCacheBlocks = 0; ///< published blocks, held or not
  bool paged = true;
};

/// The snapshot in Prometheus text (names prefixed `qcc_`).
std::string renderPrometheus(const MetricsSnapshot &snapshot,
                             const std::string &model);

} // namespace qcc::serve

#endif // QCC_SERVE_METRICS_H
