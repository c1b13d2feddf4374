//===- Session.h - running an artifact's entry points -----------*- C++ -*-===//
#ifndef QCC_RUNTIME_SESSION_H
#define QCC_RUNTIME_SESSION_H

#include "runtime/Artifact.h"
#include "runtime/KvCache.h"

#include <functional>
#include <map>
#include <tuple>

namespace qcc::rt {

/// Runs an entry point of a loaded artifact on the CPU reference backend.
class Session {
public:
  explicit Session(const Artifact &artifact) : artifact(artifact) {}

  /// Checks `inputs` against the entry point's ports (names, dtypes, ranks,
  /// static sizes, and consistent sizes for equal dynamic dimension names),
  /// runs every node in order and returns the outputs by name. Errors throw
  /// std::runtime_error naming the input or the node.
  ///
  /// With `kv` (entry points with `kv_attention` nodes: prefill, decode),
  /// first reserves room for each row's valid tokens (so that capacity
  /// errors come before any computation), runs `kv_attention` nodes against
  /// the cache and finally advances each row's sequence by its valid count.
  std::map<std::string, Tensor> run(const std::string &function,
                                    const std::map<std::string, Tensor> &inputs,
                                    KvBatch *kv = nullptr);

  /// Called after each node runs with the node, its operands and its
  /// results (before any value is freed), e.g. to collect calibration
  /// statistics. An empty function (the default) turns it off at the cost of
  /// one test per node.
  using Observer = std::function<void(const Node &, const Operands &inputs,
                                      const std::vector<Tensor> &outputs)>;
  void setObserver(Observer fn) { observer = std::move(fn); }

  /// Accumulates the time spent in each op kind across runs, when enabled.
  void enableProfile(bool on) { profiling = on; }
  /// (op, seconds, calls) sorted by time, most first.
  std::vector<std::tuple<std::string, double, int64_t>> profile() const;

private:
  const Artifact &artifact;
  bool profiling = false;
  Observer observer;
  std::map<std::string, std::pair<double, int64_t>> opTimes;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_SESSION_H
