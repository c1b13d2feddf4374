//===- Executor.h - the backend interface -----------------------*- C++ -*-===//
//
// What generation, perplexity, benchmarks, speculative decoding, the server
// and the tools run an artifact through; each backend implements it
// (runtime/cpu/Session.h, runtime/cuda/GpuSession.h) and
// runtime/generate/Backend.h picks one.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CORE_EXECUTOR_H
#define QCC_RUNTIME_CORE_EXECUTOR_H

#include "runtime/core/KvCache.h"
#include "runtime/core/Roofline.h"
#include "runtime/core/Tensor.h"

#include <map>
#include <string>

namespace qcc::rt {

/// Runs entry points of an artifact: the CPU reference backend (Session) or
/// the CUDA backend (GpuSession). Generation and the tools use this.
class Executor {
public:
  virtual ~Executor() = default;
  /// Runs entry point `function` (see Session::run for the contract).
  virtual std::map<std::string, Tensor>
  run(const std::string &function, const std::map<std::string, Tensor> &inputs,
      KvBatch *kv = nullptr) = 0;
  /// A KV cache whose storage this executor can use (the CUDA backend keeps
  /// keys and values on the device).
  virtual KvCacheOptions cacheOptions(KvCacheOptions o) const = 0;

  /// Per-node timing for `qrun --profile` (off by default): time and cost
  /// per entry point and node kind, summed over runs.
  virtual void enableProfile(bool on) { profiling = on; }
  const NodeProfile &profile() const { return nodeProfile; }
  /// Forgets what was profiled so far (e.g. a benchmark's warm-up).
  void clearProfile() { nodeProfile = NodeProfile(); }
  /// Where the profile runs ("the CPU", the GPU's name) and the roofline its
  /// MBU and MFU are read against.
  virtual std::string profileDevice() const = 0;
  virtual const Peaks &profilePeaks() const = 0;

protected:
  bool profiling = false;
  NodeProfile nodeProfile;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_CORE_EXECUTOR_H
