//===- Backend.cpp - choosing the CPU or CUDA backend ---------------------===//
#include "runtime/generate/Backend.h"

#include "runtime/cpu/CpuSparseKernels.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/GpuSession.h"

#include <algorithm>
#include <map>
#include <ostream>

namespace qcc::rt {

std::unique_ptr<Executor> makeExecutor(const Artifact &a,
                                       const BackendOptions &o,
                                       std::ostream &log) {
  bool kernels = o.plan == Session::Plan::Kernels;
  auto cpu = [&](const std::string &why) {
    if (!o.quiet)
      log << "[" << o.tool << "] CPU backend: " << why << "\n";
    bool sparse24 = false;
    for (const Function &f : a.functions())
      for (const Node &n : f.nodes)
        sparse24 |= n.kind == OpKind::Sparse24;
    if (!o.quiet && sparse24 && sparseRunsDense())
      log << "[" << o.tool << "] 2:4 weights expanded to the dense layout "
          << "once: this CPU's dense int8/f32 GEMMs are faster than the "
          << "sparse kernels (QCC_CPU_SPARSE=sparse keeps them; "
          << "docs/SPARSITY.md)\n";
    auto s = std::make_unique<Session>(a);
    s->setPlan(o.plan);
    return s;
  };
  if (o.backend == Backend::Cpu)
    return cpu("--backend=cpu" +
               std::string(kernels ? " (GPU plan, op by op)" : ""));
  std::string why;
  std::shared_ptr<CudaDriver> driver = CudaDriver::load(why);
  if (driver) {
    try {
      auto ctx = std::make_shared<CudaContext>(driver, 0);
      auto g = std::make_unique<GpuSession>(a, ctx);
      g->setCheck(o.checkGpu);
      g->setMemoryLimit(o.gpuMemoryLimit);
      bool splits = o.gpuLayersAuto || o.gpuLayers >= 0;
      if (splits)
        g->setGpuLayers(o.gpuLayersAuto ? g->layersThatFit(o.kvCacheBytes)
                                        : o.gpuLayers);
      g->checkPlacements();
      const CudaDevice &d = ctx->device();
      if (!o.quiet)
        log << "[" << o.tool << "] CUDA backend: " << d.name << " (" << d.arch() << "); "
            << (splits ? describeSplit(g->layerSplit()) +
                             (o.gpuLayersAuto ? " (--gpu-layers auto: "
                                                "what fits in free memory)"
                                              : "") +
                             "; "
                       : "")
            << g->planSummary() << "\n";
      return g;
    } catch (const std::exception &e) {
      why = e.what();
    }
  }
  if (o.backend == Backend::Cuda)
    throw std::runtime_error("--backend=cuda: " + why);
  return cpu(why);
}

std::string parseGpuLayers(const std::string &spec, BackendOptions &o) {
  if (spec == "auto") {
    o.gpuLayersAuto = true;
    return "";
  }
  const int64_t most = int64_t(1) << 20;
  int64_t n = 0;
  bool digits = !spec.empty() && spec.size() <= 7 &&
                std::all_of(spec.begin(), spec.end(),
                            [](char c) { return c >= '0' && c <= '9'; });
  for (char c : digits ? spec : std::string())
    n = n * 10 + (c - '0');
  if (!digits || n > most)
    return "'" + spec + "' is not auto or a count of layers (0.." +
           std::to_string(most) + ")";
  o.gpuLayers = n;
  return "";
}

std::string describeSplit(const LayerSplit &split) {
  int64_t n = split.gpuLayers, all = split.modelLayers;
  std::string of = " of " + std::to_string(all);
  if (!split.splits())
    return "all " + std::to_string(all) + " layers on the GPU";
  if (n == 0)
    return "no layer on the GPU: all " + std::to_string(all) +
           " and what follows on the CPU";
  return "layers 0-" + std::to_string(n - 1) + of + " on the GPU, " +
         std::to_string(n) + "-" + std::to_string(all - 1) +
         " and what follows on the CPU";
}

void reportGpu(Executor &e, bool quiet, std::ostream &log, std::ostream &out) {
  auto *g = dynamic_cast<GpuSession *>(&e);
  if (!g)
    return;
  const auto &s = g->stats();
  if (!quiet) {
    log << "[qrun] CUDA: " << s.runs << " runs, " << s.kernelLaunches
        << " kernel launches, " << s.graphCaptures << " graphs captured, "
        << s.graphReplays << " replayed, " << s.hostNodes
        << " nodes on the host";
    for (const auto &[op, n] : s.hostOps)
      log << " " << op << " x" << n;
    if (s.cpuLayerNodes)
      log << ", " << s.cpuLayerNodes << " after the layer split on the CPU";
    log << "\n";
    log << "[qrun] CUDA memory: peak " << g->devicePeakBytes()
        << " bytes on the device, weights " << g->deviceWeightBytes()
        << " bytes";
    if (g->streamedAfterOutOfMemory())
      log << "; the GPU ran out of memory: weights streamed since, "
          << s.weightUploads << " weight uploads (" << s.weightUploadBytes
          << " bytes), " << s.weightEvictions << " evictions";
    else if (g->memoryLimit())
      log << "; limit " << g->memoryLimit() << " bytes: " << s.weightUploads
          << " weight uploads (" << s.weightUploadBytes << " bytes), "
          << s.weightEvictions << " evictions"
          << (g->devicePeakBytes() > g->memoryLimit()
                  ? " (over the limit: the activations, the KV cache and "
                    "one node's weights alone need more)"
                  : "");
    log << "\n";
    if (s.weightCopyStreamUploads)
      log << "[qrun] CUDA streaming: " << s.weightCopyStreamUploads
          << " weight copies on the copy stream from "
          << g->hostPinnedBytes() << " bytes of page-locked host memory, "
          << s.weightPrefetches
          << " of them while the kernels before their node ran\n";
    const LayerSplit &split = g->layerSplit();
    if (split.splits() && s.kvDeviceBytes + s.kvHostBytes > 0) {
      int64_t n = split.gpuLayers, all = split.modelLayers;
      log << "[qrun] KV cache split: " << s.kvDeviceBytes
          << " bytes on the device";
      if (n > 0)
        log << " (layers 0-" << n - 1 << ")";
      log << ", " << s.kvHostBytes << " on the host (layers " << n << "-"
          << all - 1 << ")\n";
    }
  }
  if (g->checks().empty())
    return;
  // Per kind: the worst region (test/e2e/check_gpu.py states the tolerances).
  std::map<std::string, GpuSession::RegionCheck> worst;
  for (const auto &c : g->checks()) {
    auto &w = worst[c.kind];
    double rel = c.maxAbsError / std::max(1.0, c.maxAbsReference);
    double wrel = w.maxAbsError / std::max(1.0, w.maxAbsReference);
    if (w.kind.empty() || rel > wrel || c.mismatchedInts > w.mismatchedInts)
      w = c;
  }
  for (const auto &[kind, c] : worst)
    out << "check " << kind << ": worst region " << c.function << "/"
        << c.region << " max abs error " << c.maxAbsError << " (max |cpu| "
        << c.maxAbsReference << "), integer elements off by 1: "
        << c.offByOneInts << " of " << c.intElements
        << ", off by more: " << c.mismatchedInts << "\n";
}

void listDevices(std::ostream &out) {
  std::string why;
  auto driver = CudaDriver::load(why);
  if (!driver) {
    out << why << "\n";
    return;
  }
  out << "CUDA driver " << driver->driverVersion() << "\n";
  for (const CudaDevice &d : driver->devices())
    out << d.ordinal << ": " << d.name << ", " << d.arch() << ", "
        << d.totalMemory / (1 << 20) << " MiB\n";
}

} // namespace qcc::rt
