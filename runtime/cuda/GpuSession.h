//===- GpuSession.h - the CUDA backend --------------------------*- C++ -*-===//
//
// Runs an artifact's GPU plan ("gpu_functions": the entry points after
// form-kernels) on one GPU:
//   - every compiled kernel region is launched from its launch record
//     (codegen/Emitter.h): symbols and grid expressions are evaluated from the
//     operands' shapes and the KV batch, parameters marshalled in order;
//   - result shapes come from inferShapes() (the CPU session checks those
//     rules against real shapes whenever it runs a GPU plan);
//   - split runs on the device as strided copies (cuMemcpy2D); other
//     nodes without a kernel (glue ops such as reshape or gather, regions the
//     emitter could not handle) run on the host with the CPU backend's
//     kernels, their operands downloaded and results uploaded on demand, and
//     are counted (stats()) so that qrun can say how much ran on the GPU;
//     kv_attention can only run in a compiled kernel (the cache lives on the
//     device) before a split's cut, which checkPlacements() checks;
//   - the KV cache's keys and values live in device memory in the layout of
//     docs/KV_CACHE.md; the host KvCache keeps the bookkeeping (sequences,
//     lengths, block tables), uploaded before each call;
//   - device memory comes from size-bucketed pools, one per captured graph
//     and one shared by eager runs, so steady-state steps allocate nothing;
//   - decode steps whose nodes are all kernels are captured once per shape
//     key (batch, sequence length, split count) in a CUDA graph and replayed;
//   - with a layer split (setGpuLayers), the op plan's nodes after its cut
//     run on the CPU backend with a host cache for their layers
//     (runtime/core/LayerSplit.h, OpTail);
//   - under a memory limit (setMemoryLimit) or after an out-of-memory,
//     weights are streamed: copied from page-locked host memory on a second
//     stream while the kernels before their node run, ordered by events;
//     off-loading, embedding rows are looked up on the host.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_GPUSESSION_H
#define QCC_RUNTIME_GPUSESSION_H

#include "runtime/core/LayerSplit.h"
#include "runtime/cuda/CudaContext.h"
#include "runtime/cpu/Session.h"

#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace qcc::rt {

class DevicePool;

/// Picks the binary of a kernel record for a device: the cubin of the same
/// major architecture (sm_80 runs on sm_8x, sm_90 on sm_90), else the PTX
/// (JIT-compiled by the driver for newer GPUs). Throws when the device is
/// older than sm_80 or the record has nothing usable.
std::string pickBinaryTarget(const KernelRecord &k, const CudaDevice &dev);

class GpuSession : public Executor {
public:
  /// Loads the modules of every kernel the GPU plan uses. Throws when the
  /// artifact has no GPU plan, when a kv_attention would have to run outside
  /// a compiled kernel, or when a kernel has no binary for the device.
  GpuSession(const Artifact &artifact, std::shared_ptr<CudaContext> ctx);
  ~GpuSession() override;

  std::map<std::string, Tensor> run(const std::string &function,
                                    const std::map<std::string, Tensor> &inputs,
                                    KvBatch *kv = nullptr) override;
  /// The keys and values live on the device; with a layer split, those of
  /// the layers after it on the host too (docs/MEMORY.md).
  KvCacheOptions cacheOptions(KvCacheOptions o) const override {
    o.hostStorage = split.splits();
    o.hostFirstLayer = split.splits() ? split.gpuLayers : 0;
    return o;
  }

  /// Splits the model by layers (qrun --gpu-layers, llama.cpp's -ngl;
  /// runtime/core/LayerSplit.h): the first `layers` blocks run on the GPU,
  /// the rest and what follows them (the final norm, the LM head) on the
  /// CPU backend, reading their weights packed in host memory and their
  /// layers' keys and values from the host cache, so those weights never
  /// go to the device. At or above the model's layers: no split. Call
  /// before the KV cache is made (cacheOptions). Throws when the artifact
  /// has no layers to split (no kv_attention).
  void setGpuLayers(int64_t layers);
  /// The most blocks whose weights (as stored: f32 weights that the device
  /// holds in f16 count double) fit in the device's free memory now, less
  /// `reservedBytes` (the KV cache) and a tenth kept for activations and
  /// workspace; the model's layers when all of it fits (qrun --gpu-layers
  /// auto). Throws as setGpuLayers.
  int64_t layersThatFit(uint64_t reservedBytes) const;
  /// The split (LayerSplit::splits() false: none).
  const LayerSplit &layerSplit() const { return split; }
  /// Throws, in one line, when an attention region without a CUDA kernel
  /// would run on the GPU side (its cache is on the device); after a
  /// layer split's cut it runs on the CPU. Call after setGpuLayers; the
  /// first run checks it too.
  void checkPlacements() const;

  /// Check mode (GPU tests): after each kernel launch, download its results
  /// and compare them with the region run on the CPU backend from the same
  /// (downloaded) operands. Regions with kv_attention are compared end to
  /// end instead (their cache is on the device).
  struct RegionCheck {
    std::string function, region;
    std::string kind; ///< the region's, "+gelu" / "+silu" for such GEMMs
    double maxAbsError = 0, maxAbsReference = 0;
    int64_t mismatchedInts = 0; ///< integer elements differing by more than 1
    int64_t offByOneInts = 0;   ///< integer elements differing by exactly 1
    int64_t intElements = 0;    ///< integer elements compared
  };
  void setCheck(bool on) { checking = on; }
  const std::vector<RegionCheck> &checks() const { return regionChecks; }

  struct Stats {
    int64_t kernelLaunches = 0, hostNodes = 0, runs = 0;
    /// Nodes after a layer split's cut, run on the CPU (not in hostNodes).
    int64_t cpuLayerNodes = 0;
    /// Under a memory limit: weights uploaded (again) and evicted.
    int64_t weightUploads = 0, weightEvictions = 0;
    uint64_t weightUploadBytes = 0;
    /// Of those uploads: copied from page-locked host memory on the copy
    /// stream, and of these, started before the node that reads them (while
    /// the kernels before it ran).
    int64_t weightCopyStreamUploads = 0, weightPrefetches = 0;
    int64_t graphCaptures = 0, graphReplays = 0;
    /// The last KV cache's keys and values (kivi: with the V row scales)
    /// on the device and, a layer split's, on the host.
    uint64_t kvDeviceBytes = 0, kvHostBytes = 0;
    std::map<std::string, int64_t> hostOps; ///< op (or kernel kind) -> count
  };
  const Stats &stats() const { return counters; }
  /// Device memory: the most this session's context has held at once, and
  /// the bytes of the weights on the device now (docs/MEMORY.md).
  size_t devicePeakBytes() const;
  size_t deviceWeightBytes() const;
  /// Page-locked host copies of the streamed weights.
  size_t hostPinnedBytes() const { return ctx->pinnedBytes(); }
  /// Streams weights under a device memory budget (qrun --gpu-memory-limit;
  /// 0: none): an allocation that would pass it first frees weights that
  /// the node being launched does not read, the most recently read first
  /// (a step reads them in the same order each time: the first ones stay
  /// resident, the rest stream through), and a weight is uploaded again
  /// when next needed. The budget holds unless the activations, the KV
  /// cache and one node's weights alone pass it. Decode runs in CUDA graphs
  /// until the first eviction and eagerly from then on (a graph holds its
  /// weights' addresses).
  void setMemoryLimit(size_t bytes);
  size_t memoryLimit() const { return ctx->memoryLimit(); }
  /// Whether the device ran out of memory and the session has streamed
  /// weights since (without a limit: a model larger than the GPU's free
  /// memory still runs).
  bool streamedAfterOutOfMemory() const { return streamingAfterOutOfMemory; }
  /// "main: 40 of 43 nodes on the GPU (on the host: gather x1 ...)" per
  /// entry point of the GPU plan.
  std::string planSummary() const;

  /// Profiling times every node between two events on the stream (so a
  /// profiled run waits for the GPU at its end) and runs decode eagerly, not
  /// from a CUDA graph: per-launch events cannot be read inside a replay.
  std::string profileDevice() const override;
  const Peaks &profilePeaks() const override;

private:
  struct Value;
  struct Run;
  struct Graph;
  struct Loaded {
    std::vector<CudaContext::Function> steps; // per launch step
  };

  void execute(const Function &fn, Run &r);
  void launchKernel(const Node &node, const KernelRecord &k, const Loaded &l,
                    Run &r);
  void runOnHost(const Node &node, Run &r, bool afterSplit = false);
  /// `node` on the CPU backend from its operands' host copies; `withCache`:
  /// its kv_attention reads and appends to the host cache (a layer split's).
  std::vector<Tensor> runOnCpu(const Node &node, Run &r,
                               bool withCache = false);
  /// Glue ops the device does without a kernel, on a value already on the
  /// device: split (strided copies), and prefill_last's gather of one
  /// position per row (gather_nd, batch_dims 1, host-known indices: a copy
  /// per row, not a download of every position).
  bool onDevice(const Node &node, const Run &r) const;
  void splitOnDevice(const Node &node, Run &r);
  void gatherRowsOnDevice(const Node &node, Run &r);
  /// Where each node of a GPU plan runs, from the plan alone.
  enum class Placement : uint8_t {
    Kernel, ///< a loaded kernel
    Split,  ///< split or row-gather glue on the device (copies)
    View,   ///< reshape of device data by a host-known shape: a view
    Host,   ///< on the host from host-known values only: function inputs,
            ///< constants, other Host nodes, and shapes (a Shape node needs
            ///< its operand's shape, not its data)
    Blocking, ///< on the host from device data: a download mid-run
    Cpu,      ///< after a layer split's cut: on the CPU backend (with the
              ///< host cache), from values downloaded once at the cut
  };
  const std::vector<Placement> &placements(const Function &fn) const;
  /// Off-loading (a layer split or a memory limit): embedding rows are
  /// looked up on the host, so the table never goes to the device.
  bool offloading() const { return split.splits() || ctx->memoryLimit() != 0; }
  /// A split's CPU half from the op plan, per GPU plan entry point where the
  /// two plans' cuts carry the same values (else its GPU plan nodes after
  /// the cut run on the CPU one by one).
  std::map<const Function *, OpTail> opTails;
  void runOpTail(const Function &fn, const OpTail &tail, Run &r);
  bool looksUpEmbeddings(const Node &n) const;
  /// The entry points that have a GPU plan, their GPU plans.
  std::vector<const Function *> gpuFunctions() const;
  mutable std::map<const Function *, std::vector<Placement>> placementsOf;
  /// Attention regions without a CUDA kernel, and the error for each when
  /// it is not after a split's cut.
  std::map<const Node *, std::string> deviceOnlyAttention;
  /// Reshape of a device value by a host shape (Placement::View): the same
  /// buffer under the new shape, or a copy when the operand lives on.
  void viewOnDevice(const Node &node, Run &r, bool operandLivesOn);
  /// A Shape node from its operand's recorded shape (no download).
  void shapeOnHost(const Node &node, Run &r);
  void checkRegion(const Node &node, Run &r, const std::string &function);
  DevicePtr deviceOf(int64_t id, Run &r);
  Tensor hostOf(int64_t id, Run &r);
  /// A weight on the device (asF16: converted from f32, for f16 GEMMs);
  /// uploaded once.
  DevicePtr constantOnDevice(int64_t id, bool asF16 = false);
  void prepareKv(KvBatch *kv, Run &r);
  void kvArrays(KvBatch *kv, Run &r, std::vector<int32_t> &cached,
                std::vector<int32_t> &valid, std::vector<int32_t> &table);
  DevicePtr kvStorage(KvCache &cache);
  /// Bytes of a cache's keys and values on the device (kivi: its V row
  /// scales follow them).
  size_t kvDataBytes(const KvCache &cache) const;
  /// Layers the device's cache holds: all, or a split's first ones where
  /// every attention kernel takes them at run time (kv_cache.layers;
  /// artifacts from before it hold all).
  int64_t deviceKvLayers(const KvCache &cache) const {
    return kvLayersOnDevice >= 0 ? kvLayersOnDevice : cache.config().layers;
  }
  int64_t kvLayersOnDevice = -1;
  bool graphable(const Function &fn) const;

  const Artifact &artifact;
  Session cpu; // host fallback, check mode, the layers after a split
  LayerSplit split;
  std::shared_ptr<CudaContext> ctx;
  std::unique_ptr<DevicePool> pool; // eager runs
  std::map<int64_t, Loaded> loaded; // kernel index -> functions
  /// Unloaded when the session goes, also when its constructor throws.
  struct Modules {
    CudaContext *ctx;
    std::vector<CudaContext::Module> list;
    ~Modules() {
      for (CudaContext::Module m : list)
        ctx->unloadModule(m);
    }
  } loadedModules;
  /// Uploaded constants by their bytes in the artifact and whether the copy
  /// is the f16 one of f32 weights: the entry points share weights under
  /// other value ids (keyed by id, each entry point a generation ran had
  /// its own copy of every weight on the device).
  using ConstantKey = std::tuple<const void *, size_t, bool>;
  /// An event shared by the weights one kernel node read (recorded after
  /// it), back in `spareEvents` when the last holder lets go.
  using SharedEvent = std::shared_ptr<std::remove_pointer_t<CudaContext::Event>>;
  struct DeviceWeight {
    DevicePtr ptr = 0;
    size_t bytes = 0;
    /// Streaming: the copy on the copy stream the compute stream has not
    /// yet waited for (null: none), and the compute stream's point after
    /// the last kernel that read the weight (null: not read while streaming).
    SharedEvent copied, read;
  };
  std::map<ConstantKey, DeviceWeight> constants;
  /// Under a memory limit: when each weight was last read (a counter), and
  /// the weights of the node being launched and of the next kernel node
  /// (prefetched), which stay.
  std::map<ConstantKey, uint64_t> lastRead;
  std::set<ConstantKey> pinned, prefetched;
  uint64_t readClock = 0;
  /// Streaming (from the first eviction: under a memory limit, or after
  /// the device ran out of memory): weights evicted once are streamed, from page-locked host
  /// copies (as the device holds them: f16 where converted), on the copy
  /// stream; the weights the node being launched read (for its event).
  bool streaming() const { return !evictedOnce.empty(); }
  /// Decode eagerly from now on, the captured graphs gone (they hold the
  /// addresses of weights about to leave).
  void dropGraphs();
  std::set<ConstantKey> evictedOnce;
  std::map<ConstantKey, void *> hostCopies;
  std::vector<ConstantKey> readByNode;
  std::vector<CudaContext::Event> spareEvents, allEvents;
  SharedEvent takeEvent();
  /// A streamed weight onto the device on the copy stream (its `copied` set,
  /// not waited for); into the buffer of an unpinned weight of the same size
  /// when the limit is reached (after that weight's last read), else into a
  /// new allocation.
  DeviceWeight &streamIn(const ConstantKey &key, const Tensor &t);
  /// The most recently read unpinned weight of `bytes` on the device, or
  /// constants.end().
  std::map<ConstantKey, DeviceWeight>::iterator sameSizeVictim(size_t bytes);
  /// Starts the copies of the streamed weights node `next` reads that are
  /// not on the device, where the limit leaves room for them beside the
  /// weights in use.
  void prefetchWeights(const Node &next);
  std::map<const Node *, std::vector<std::pair<int64_t, bool>>> weightsOfNode;
  const std::vector<std::pair<int64_t, bool>> &weightsRead(const Node &node);
  /// Frees unpinned weights, most recently read first, until `bytes` are
  /// freed or none is left. The first time the device runs out of memory
  /// (`outOfMemory`), the session starts streaming: captured graphs go
  /// (they hold weights' addresses, and their buffers) and decode runs
  /// eagerly from then on.
  void evictWeights(size_t bytes, bool outOfMemory);
  bool streamingAfterOutOfMemory = false;
  std::map<const KvCache *, std::pair<DevicePtr, size_t>> kvPools;
  DevicePtr kScales = 0, vScales = 0;
  std::map<std::string, std::unique_ptr<Graph>> graphs;
  bool useGraphs = true, checking = false;
  bool syncEachLaunch = false; // QCC_CUDA_SYNC=1 (useGraphs: QCC_CUDA_GRAPHS=0)
  std::vector<RegionCheck> regionChecks;
  Stats counters;
  mutable std::unique_ptr<Peaks> peaks; // profilePeaks(), on first use
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_GPUSESSION_H
