//===- Backend.h - choosing the CPU or CUDA backend -------------*- C++ -*-===//
//
// What qrun's --backend, --plan and --check-gpu mean: the CUDA backend when a
// GPU, its driver and the artifact's kernels are there (auto), else the CPU
// reference backend, with one line saying which and why; and what the CUDA
// backend reports after running (launch counts, the --check-gpu table).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_BACKEND_H
#define QCC_RUNTIME_BACKEND_H

#include "runtime/core/LayerSplit.h"
#include "runtime/cpu/Session.h"

#include <iosfwd>
#include <memory>
#include <string>

namespace qcc::rt {

enum class Backend {
  Auto, // CUDA when it can run, else the CPU (the line says why)
  Cpu,
  Cuda, // an error when it cannot run
};

struct BackendOptions {
  Backend backend = Backend::Auto;
  Session::Plan plan = Session::Plan::Ops; // the CPU backend's node list
  bool checkGpu = false; // CUDA: compare each kernel region with the CPU
  bool quiet = false;    // no backend line
  std::string tool = "qrun"; // the backend line's prefix: [qrun] ...
  /// CUDA: the device memory the session may use (0: all); weights that do
  /// not fit are streamed (GpuSession::setMemoryLimit).
  size_t gpuMemoryLimit = 0;
  /// CUDA: the blocks on the GPU, the rest on the CPU (-1: all on the GPU;
  /// GpuSession::setGpuLayers); gpuLayersAuto: as many as fit in the free
  /// device memory beside the KV cache's kvCacheBytes
  /// (GpuSession::layersThatFit).
  int64_t gpuLayers = -1;
  bool gpuLayersAuto = false;
  uint64_t kvCacheBytes = 0;
};

/// --gpu-layers: N (0..2^20) or auto into `o`; "" or why `spec` is neither.
std::string parseGpuLayers(const std::string &spec, BackendOptions &o);

/// How a layer split places the model ("layers 0-3 of 30 on the GPU, 4-29
/// and what follows on the CPU").
std::string describeSplit(const LayerSplit &split);

/// The executor `options` ask for, writing "[qrun] CPU backend: WHY" or
/// "[qrun] CUDA backend: DEVICE (ARCH); PLAN" to `log` (unless quiet).
/// Backend::Cuda throws "--backend=cuda: WHY" when CUDA cannot run.
std::unique_ptr<Executor> makeExecutor(const Artifact &artifact,
                                       const BackendOptions &options,
                                       std::ostream &log);

/// After a run on the CUDA backend (nothing for another executor): the launch
/// statistics on `log` (unless `quiet`) and, with --check-gpu, the worst
/// region per kernel kind on `out`.
void reportGpu(Executor &executor, bool quiet, std::ostream &log,
               std::ostream &out);

/// The CUDA driver's version and devices, or why there is none (qrun
/// --devices).
void listDevices(std::ostream &out);

} // namespace qcc::rt

#endif // QCC_RUNTIME_BACKEND_H
