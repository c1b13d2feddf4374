//===- GpuSession.cpp - the CUDA backend ----------------------------------===//
#include "runtime/cuda/GpuSession.h"

#include "format/device/host_device.h"
#include "runtime/cpu/CpuKernels.h"
#include "runtime/core/HalfFloat.h"
#include "runtime/core/ShapeInference.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <stdexcept>

using namespace qcc::rt;
using nlohmann::json;

//===--- device memory pools ------------------------------------------------===//

namespace qcc::rt {
/// Size-bucketed free lists over CudaContext::alloc: steady-state steps
/// allocate nothing, and a sequence of gets and puts repeated on the same
/// pool hands out memory without new driver allocations (which graph
/// capture relies on).
class DevicePool {
public:
  explicit DevicePool(CudaContext &ctx) : ctx(ctx) {}
  ~DevicePool() {
    for (auto &[p, bytes] : all) {
      try {
        ctx.free(p);
      } catch (...) {
      }
    }
  }
  static size_t bucket(size_t bytes) {
    return std::max<size_t>(256, (bytes + 255) / 256 * 256);
  }
  DevicePtr get(size_t bytes) {
    size_t b = bucket(bytes);
    auto it = freeLists.find(b);
    if (it != freeLists.end() && !it->second.empty()) {
      DevicePtr p = it->second.back();
      it->second.pop_back();
      return p;
    }
    DevicePtr p = ctx.alloc(b);
    all.emplace_back(p, b);
    return p;
  }
  void put(DevicePtr p, size_t bytes) { freeLists[bucket(bytes)].push_back(p); }
  /// A new buffer, never one that another value used: a graph's host
  /// uploads (freed with the pool).
  DevicePtr fresh(size_t bytes) {
    size_t b = bucket(bytes);
    DevicePtr p = ctx.alloc(b);
    all.emplace_back(p, b);
    return p;
  }
  size_t held() const {
    size_t n = 0;
    for (auto &[p, b] : all)
      n += b;
    return n;
  }

private:
  CudaContext &ctx;
  std::map<size_t, std::vector<DevicePtr>> freeLists;
  std::vector<std::pair<DevicePtr, size_t>> all;
};
} // namespace qcc::rt

//===--- launch records -----------------------------------------------------===//

std::string qcc::rt::pickBinaryTarget(const KernelRecord &k,
                                      const CudaDevice &dev) {
  if (dev.major < 8)
    throw std::runtime_error("GPU " + dev.name + " is " + dev.arch() +
                             ", older than sm_80, the oldest architecture "
                             "qcc compiles kernels for");
  std::string cubin = dev.major == 8 ? "sm_80" : dev.major == 9 ? "sm_90" : "";
  if (!cubin.empty() && k.binaries.count(cubin))
    return cubin;
  if (k.binaries.count("ptx"))
    return "ptx";
  throw std::runtime_error("kernel " + k.function + "/" + k.region + " (" +
                           k.entry + ") has no binary for " + dev.arch() +
                           " and no PTX: recompile the artifact with qcc");
}

//===--- values and runs ----------------------------------------------------===//

struct GpuSession::Value {
  DType dtype = DType::F32;
  Shape shape;
  DevicePtr dev = 0;
  bool onDevice = false, ownsDevice = false;
  /// Uploaded from the host in a graph's run: its buffer is the one a
  /// replay uploads into, so no other value of the run may reuse it.
  bool pinned = false;
  Tensor host;
  bool onHost = false;
  size_t bytes() const { return (size_t)numElements(shape) * dtypeSize(dtype); }
};

struct GpuSession::Run {
  DevicePool *pool = nullptr;
  std::vector<Value> values;
  KvBatch *kv = nullptr;
  std::vector<int64_t> adapters; // per sequence, for qcc.lora (host nodes)
  /// The call's inputs by name (a split's op tail reads them: the GPU
  /// plan's copies may be gone after their last use there).
  const std::map<std::string, Tensor> *inputs = nullptr;
  bool capturing = false; // recording a graph: allocate, never copy
  bool pinUploads = false; // a graph's runs: see Value::pinned
  int64_t maxContext = 0, tableStride = 0, maxTokens = 0;
  DevicePtr cachedLens = 0, validLens = 0, table = 0, kvData = 0;
  DevicePtr kvValueScales = 0; // kivi: after the keys and values
  DevicePtr errorFlag = 0;
  /// While capturing: host values a kernel reads (allocated, not copied;
  /// the replay uploads them).
  std::map<int64_t, DevicePtr> *hostUploads = nullptr;
  /// A graph's first run: the host values it uploads mid-run (id -> bytes).
  std::map<int64_t, size_t> *uploadSizes = nullptr;
  /// Its capture: a buffer of their own for those values.
  const std::map<int64_t, DevicePtr> *uploadBuffers = nullptr;
  /// While capturing: every buffer a launch or device copy writes.
  std::set<DevicePtr> *written = nullptr;
  /// While capturing: the host nodes whose results are the same on every
  /// replay (shapes and what follows from them and constants alone), and
  /// where their results go.
  const std::vector<char> *staticNodes = nullptr;
  std::map<int64_t, Tensor> *staticResults = nullptr;
  std::vector<std::pair<DevicePtr, size_t>> scratch; // released at the end
  DevicePtr scratchAlloc(size_t bytes) {
    DevicePtr p = pool->get(bytes);
    scratch.emplace_back(p, bytes);
    return p;
  }
};

struct GpuSession::Graph {
  std::unique_ptr<DevicePool> pool;
  CudaContext::Graph exec = nullptr;
  std::map<int64_t, DevicePtr> inputs; // value id -> buffer
  /// The host prologue: the Placement::Host nodes that depend on the
  /// inputs' data (e.g. rotary cos/sin from the positions), in order, rerun
  /// before each replay; the results of the other host nodes (shape
  /// arithmetic: the same on every replay of this key); and the host values
  /// the graph reads, with the buffers they are uploaded into.
  std::vector<const Node *> prologue;
  std::map<int64_t, Tensor> staticResults;
  std::map<int64_t, DevicePtr> hostUploads;
  /// The buffers of those uploads: allocated for them alone, so that no
  /// value the graph computes before or after shares one (a replay uploads
  /// them all before it starts).
  std::map<int64_t, DevicePtr> uploadBuffers;
  DevicePtr cachedLens = 0, validLens = 0, table = 0, errorFlag = 0;
  std::vector<std::tuple<std::string, DevicePtr, DType, Shape>> outputs;
};

namespace {

bool containsOp(const std::vector<Node> &nodes, OpKind op) {
  for (const Node &n : nodes)
    if (n.kind == op || (n.body && containsOp(n.body->nodes, op)))
      return true;
  return false;
}

int64_t kernelIndex(const Node &n) {
  return n.body ? n.attrs.value("kernel", int64_t(-1)) : int64_t(-1);
}

/// How a node that runs on the host is reported ("split", "kernel:norm").
std::string hostLabel(const Node &n) {
  if (!n.body)
    return opKindName(n.kind);
  std::string label = "kernel:";
  label += n.attrs.value("kind", std::string("?"));
  return label;
}

} // namespace

GpuSession::GpuSession(const Artifact &artifact,
                       std::shared_ptr<CudaContext> context)
    : artifact(artifact), cpu(artifact), ctx(std::move(context)),
      pool(std::make_unique<DevicePool>(*ctx)), loadedModules{ctx.get(), {}} {
  // Weights make room when memory runs short (setMemoryLimit, or a device
  // that is out of memory): the session then streams them.
  ctx->setEvictor([this](size_t bytes, bool outOfMemory) {
    evictWeights(bytes, outOfMemory);
  });
  // A faulting kernel otherwise surfaces at the next synchronization, named
  // after whatever waited; this names the kernel itself (debugging).
  const char *sync = std::getenv("QCC_CUDA_SYNC");
  syncEachLaunch = sync && std::string(sync) == "1";
  // Decode eagerly, e.g. to tell a graph problem from a kernel problem.
  const char *graphsEnv = std::getenv("QCC_CUDA_GRAPHS");
  useGraphs = !(graphsEnv && std::string(graphsEnv) == "0");
  bool any = false;
  std::map<std::string, CudaContext::Module> modules; // by target + offset
  for (const Function &fnOps : artifact.functions()) {
    const Function *fn = artifact.gpuFunction(fnOps.name);
    if (!fn)
      continue;
    any = true;
    for (const Node &n : fn->nodes) {
      int64_t k = kernelIndex(n);
      const KernelRecord *rec = k >= 0 ? &artifact.kernels()[k] : nullptr;
      bool compiled = rec && rec->unsupported.empty();
      // The cache lives on the device: its attention cannot fall back,
      // unless a layer split puts it on the CPU with the host's cache
      // (placements() throws this otherwise).
      if (!compiled && (n.kind == OpKind::KvAttention ||
                        (n.body &&
                         containsOp(n.body->nodes, OpKind::KvAttention))))
        deviceOnlyAttention[&n] =
            "entry point " + fn->name + ": attention region '" + n.name +
            "' has no CUDA kernel (" +
            (rec ? rec->unsupported : std::string("not compiled")) +
            "), and the KV cache lives on the GPU";
      if (!compiled || loaded.count(k))
        continue;
      std::string target = pickBinaryTarget(*rec, ctx->device());
      auto bin = artifact.kernelBinary(*rec, target);
      std::string key =
          target + "@" + std::to_string(rec->binaries.at(target).first);
      auto m = modules.find(key);
      if (m == modules.end()) {
        std::string image(*bin);
        if (target == "ptx")
          image.push_back('\0'); // the driver reads PTX as a C string
        m = modules
                .emplace(key, ctx->loadModule(image.data(),
                                              rec->entry + " (" + target + ")"))
                .first;
        loadedModules.list.push_back(m->second);
      }
      Loaded l;
      for (const format::LaunchStep &step : rec->launch.steps) {
        CudaContext::Function f = ctx->function(m->second, step.entry);
        if (step.dynamicSmem > 48 * 1024)
          ctx->setMaxDynamicSharedMemory(f, (int)step.dynamicSmem, step.entry);
        l.steps.push_back(f);
      }
      loaded[k] = std::move(l);
    }
  }
  if (!any)
    throw std::runtime_error(artifact.path() +
                             ": no GPU plan (compiled with --no-cuda, or "
                             "without a CUDA toolkit)");
}

GpuSession::~GpuSession() {
  ctx->setEvictor({}); // it reads this session
  ctx->setMemoryLimit(0);
  try {
    // Nothing queued may still touch what is freed below.
    ctx->synchronizeAll("closing the CUDA session");
  } catch (...) {
  }
  for (auto &[key, g] : graphs)
    if (g->exec)
      ctx->destroy(g->exec);
  for (auto &[key, w] : constants)
    ctx->free(w.ptr);
  constants.clear(); // their events go back to spareEvents
  for (auto &[key, host] : hostCopies)
    ctx->freePinned(host);
  for (CudaContext::Event e : allEvents)
    ctx->destroyEvent(e);
  for (auto &[cache, p] : kvPools)
    ctx->free(p.first);
  if (kScales)
    ctx->free(kScales);
  if (vScales)
    ctx->free(vScales);
}

size_t GpuSession::devicePeakBytes() const { return ctx->peakBytes(); }

void GpuSession::setMemoryLimit(size_t bytes) {
  ctx->setMemoryLimit(bytes);
  placementsOf.clear(); // offloading() changed (set before the first run)
}

void GpuSession::dropGraphs() {
  if (!useGraphs && graphs.empty())
    return;
  useGraphs = false;
  // No graph runs now: replays allocate nothing, and a graph being
  // captured is not in `graphs` yet (its first run, which allocates, then
  // sees useGraphs false and captures nothing).
  ctx->synchronize("dropping CUDA graphs");
  for (auto &[key, g] : graphs)
    if (g->exec)
      ctx->destroy(g->exec);
  graphs.clear();
}

void GpuSession::evictWeights(size_t bytes, bool outOfMemory) {
  if (outOfMemory) {
    streamingAfterOutOfMemory = true;
    dropGraphs();
  }
  std::vector<std::pair<uint64_t, ConstantKey>> order;
  for (const auto &[key, c] : constants)
    if (!pinned.count(key))
      order.push_back({lastRead[key], key});
  if (order.empty())
    return;
  // Under a limit decode runs in graphs until a weight first leaves: a
  // graph holds its weights' addresses.
  dropGraphs();
  // Most recently read first: a step reads the weights in the same order
  // every time, and for such a cycle evicting the least recently read one
  // (the next to be read) would upload every weight every step; this keeps
  // the weights read first resident and streams the rest through.
  std::sort(order.rbegin(), order.rend());
  // Kernels queued before may still read them, and a copy on the copy
  // stream may still write one.
  ctx->synchronizeAll("freeing streamed weights");
  size_t freed = 0;
  for (const auto &[when, key] : order) {
    if (freed >= bytes)
      break;
    auto it = constants.find(key);
    freed += it->second.bytes;
    ctx->free(it->second.ptr);
    constants.erase(it);
    lastRead.erase(key);
    evictedOnce.insert(key);
    ++counters.weightEvictions;
  }
}

size_t GpuSession::deviceWeightBytes() const {
  size_t total = 0;
  for (const auto &[id, w] : constants)
    total += w.bytes;
  return total;
}

GpuSession::SharedEvent GpuSession::takeEvent() {
  CudaContext::Event e;
  if (!spareEvents.empty()) {
    e = spareEvents.back();
    spareEvents.pop_back();
  } else {
    e = ctx->createEvent();
    allEvents.push_back(e);
  }
  // Re-recording an event is safe once no one holds it: a stream's wait
  // takes the event's state when it is enqueued.
  return SharedEvent(e, [this](CudaContext::Event ev) {
    spareEvents.push_back(ev);
  });
}

namespace {
size_t deviceBytesOf(const Tensor &t, bool asF16) {
  return asF16 ? (size_t)t.numel() * sizeof(uint16_t) : t.bytes();
}
} // namespace

// A transformer's blocks repeat their shapes: the most recently read
// unpinned weight of `bytes` is the one read a block ago, whose buffer the
// next block's copy of its shape can take.
std::map<GpuSession::ConstantKey, GpuSession::DeviceWeight>::iterator
GpuSession::sameSizeVictim(size_t bytes) {
  auto victim = constants.end();
  uint64_t when = 0;
  for (auto it = constants.begin(); it != constants.end(); ++it) {
    if (it->second.bytes != bytes || pinned.count(it->first))
      continue;
    auto r = lastRead.find(it->first);
    uint64_t t = r == lastRead.end() ? 0 : r->second;
    if (victim == constants.end() || t > when) {
      victim = it;
      when = t;
    }
  }
  return victim;
}

GpuSession::DeviceWeight &GpuSession::streamIn(const ConstantKey &key,
                                               const Tensor &t) {
  const bool asF16 = std::get<2>(key);
  const size_t bytes = deviceBytesOf(t, asF16);
  void *&host = hostCopies[key];
  if (!host) {
    // Built once, as the device holds it; the mapped pages go.
    host = ctx->allocPinned(bytes);
    std::memcpy(host, asF16 ? convertFloat(t, DType::F16).raw() : t.raw(),
                bytes);
    artifact.release(t.raw(), t.bytes());
  }
  DeviceWeight w;
  w.bytes = bytes;
  SharedEvent after; // the old weight's last read, before the copy over it
  const size_t limit = ctx->memoryLimit();
  if (limit && ctx->bytesInUse() + bytes > limit) {
    // The buffer of an unpinned weight of the same size: no free (which
    // waits for the whole device), the copy waits for that weight's last
    // read on the device instead.
    auto victim = sameSizeVictim(bytes);
    if (victim != constants.end()) {
      // A copy into it that no kernel waited for is earlier on the copy
      // stream, so ordered before this one.
      w.ptr = victim->second.ptr;
      after = victim->second.read;
      evictedOnce.insert(victim->first);
      lastRead.erase(victim->first);
      constants.erase(victim);
      ++counters.weightEvictions;
    }
  }
  if (!w.ptr)
    w.ptr = ctx->alloc(bytes);
  w.copied = takeEvent();
  ctx->uploadOnCopyStream(w.ptr, host, bytes, after.get(), w.copied.get());
  ++counters.weightUploads;
  ++counters.weightCopyStreamUploads;
  counters.weightUploadBytes += bytes;
  return constants[key] = std::move(w);
}

const std::vector<std::pair<int64_t, bool>> &
GpuSession::weightsRead(const Node &node) {
  auto it = weightsOfNode.find(&node);
  if (it != weightsOfNode.end())
    return it->second;
  std::vector<std::pair<int64_t, bool>> weights;
  int64_t k = kernelIndex(node);
  if (k >= 0)
    for (const format::LaunchStep &step : artifact.kernels()[k].launch.steps)
      for (const format::Param &p : step.params) {
        if (p.kind != format::ParamKind::Operand &&
            p.kind != format::ParamKind::OperandF16)
          continue;
        int64_t id = node.inputs[p.tensor.index];
        std::pair<int64_t, bool> w{id,
                                   p.kind == format::ParamKind::OperandF16};
        if (id >= 0 && artifact.constant(id) &&
            std::find(weights.begin(), weights.end(), w) == weights.end())
          weights.push_back(w);
      }
  return weightsOfNode[&node] = std::move(weights);
}

void GpuSession::prefetchWeights(const Node &next) {
  const size_t limit = ctx->memoryLimit();
  for (auto [id, asF16] : weightsRead(next)) {
    const Tensor *t = artifact.constant(id);
    ConstantKey key{t->raw(), t->bytes(), asF16};
    if (constants.count(key) || !evictedOnce.count(key))
      continue;
    const size_t bytes = deviceBytesOf(*t, asF16);
    if (limit && ctx->bytesInUse() + bytes > limit) {
      // Only into a buffer an unpinned weight of its size leaves: the
      // limit holds, and no free waits for the device.
      if (sameSizeVictim(bytes) == constants.end())
        continue; // the node uploads it when it runs
    } else if (!limit && ctx->memoryInfo().first < bytes + (bytes >> 2)) {
      continue; // after an out-of-memory: only where the device has room
    }
    pinned.insert(key);
    prefetched.insert(key);
    streamIn(key, *t);
    ++counters.weightPrefetches;
  }
}

DevicePtr GpuSession::constantOnDevice(int64_t id, bool asF16) {
  const Tensor *t = artifact.constant(id);
  ConstantKey key{t->raw(), t->bytes(), asF16};
  lastRead[key] = ++readClock;
  pinned.insert(key); // until the next node
  readByNode.push_back(key);
  auto it = constants.find(key);
  if (it != constants.end()) {
    if (it->second.copied) { // prefetched: the kernel waits for the copy
      ctx->streamWaits(it->second.copied.get());
      it->second.copied.reset();
    }
    return it->second.ptr;
  }
  if (streaming() && evictedOnce.count(key)) {
    DeviceWeight &w = streamIn(key, *t);
    ctx->streamWaits(w.copied.get());
    w.copied.reset();
    return w.ptr;
  }
  Tensor half = asF16 ? convertFloat(*t, DType::F16) : Tensor();
  const Tensor &form = asF16 ? half : *t;
  const size_t bytes = form.bytes();
  DevicePtr p = ctx->alloc(bytes);
  ctx->upload(p, form.raw(), bytes);
  constants[key] = DeviceWeight{p, bytes, nullptr, nullptr};
  ++counters.weightUploads;
  counters.weightUploadBytes += bytes;
  // On the device now: a mapped artifact's pages of it leave host memory (a
  // host node that reads the constant later gets them back from the page
  // cache).
  artifact.release(t->raw(), t->bytes());
  return p;
}

DevicePtr GpuSession::deviceOf(int64_t id, Run &r) {
  if (artifact.constant(id))
    return constantOnDevice(id);
  Value &v = r.values[id];
  if (v.onDevice)
    return v.dev;
  if (!v.onHost)
    throw std::runtime_error("value " + std::to_string(id) +
                             " is read before it is computed");
  auto own = r.uploadBuffers ? r.uploadBuffers->find(id)
                             : std::map<int64_t, DevicePtr>::const_iterator();
  if (r.uploadBuffers && own != r.uploadBuffers->end()) {
    v.dev = own->second; // the graph's, not the pool's
    v.ownsDevice = false;
  } else {
    v.dev = r.pool->get(v.bytes());
    v.ownsDevice = true;
    if (r.uploadSizes)
      (*r.uploadSizes)[id] = v.bytes();
  }
  v.onDevice = true;
  v.pinned = r.pinUploads;
  if (!r.capturing)
    ctx->upload(v.dev, v.host.raw(), v.bytes());
  else if (r.hostUploads)
    (*r.hostUploads)[id] = v.dev;
  return v.dev;
}

Tensor GpuSession::hostOf(int64_t id, Run &r) {
  if (const Tensor *c = artifact.constant(id))
    return *c;
  Value &v = r.values[id];
  if (!v.onHost) {
    if (!v.onDevice)
      throw std::runtime_error("value " + std::to_string(id) +
                               " is read before it is computed");
    v.host = Tensor(v.dtype, v.shape);
    ctx->download(v.host.data<char>(), v.dev, v.bytes());
    v.onHost = true;
  }
  return v.host;
}

// Rounded up so that a kivi cache's V row scales, which follow them, are
// aligned.
size_t GpuSession::kvDataBytes(const KvCache &cache) const {
  size_t bytes = cache.storageElements(deviceKvLayers(cache)) *
                 cache.config().elementBytes();
  return (bytes + 255) / 256 * 256;
}

DevicePtr GpuSession::kvStorage(KvCache &cache) {
  size_t bytes = kvDataBytes(cache) +
                 cache.valueScaleElements(deviceKvLayers(cache)) * sizeof(float);
  auto it = kvPools.find(&cache);
  if (it != kvPools.end()) {
    if (it->second.second == bytes)
      return it->second.first;
    // Another cache at the address of one that is gone.
    ctx->free(it->second.first);
    kvPools.erase(it);
  }
  // None with --gpu-layers 0: no kernel reads it (cuMemAlloc refuses 0).
  DevicePtr p = bytes ? ctx->alloc(bytes) : DevicePtr(0);
  if (p)
    ctx->memsetZero(p, bytes);
  kvPools[&cache] = {p, bytes};
  counters.kvDeviceBytes = bytes;
  counters.kvHostBytes = cache.hostBytes();
  if (cache.config().isScaled() && !kScales) {
    // Keys per channel (kv_cache.cuh); values per head unless kivi.
    const std::vector<float> &k = cache.config().kChannelScales;
    std::vector<float> v;
    for (const auto &row : cache.config().vScales)
      v.insert(v.end(), row.begin(), row.end());
    kScales = ctx->alloc(k.size() * sizeof(float));
    ctx->upload(kScales, k.data(), k.size() * sizeof(float));
    if (!v.empty()) {
      vScales = ctx->alloc(v.size() * sizeof(float));
      ctx->upload(vScales, v.data(), v.size() * sizeof(float));
    }
  }
  return p;
}

void GpuSession::kvArrays(KvBatch *kv, Run &r, std::vector<int32_t> &cached,
                          std::vector<int32_t> &valid,
                          std::vector<int32_t> &table) {
  KvCache &cache = *kv->cache;
  int64_t B = (int64_t)kv->seqs.size();
  cached.assign(B, 0);
  valid.assign(B, 0);
  r.maxContext = 0;
  for (int64_t b = 0; b < B; ++b) {
    cached[b] = (int32_t)cache.length(kv->seqs[b]);
    valid[b] = (int32_t)kv->valid[b];
    r.maxContext = std::max<int64_t>(r.maxContext, cached[b] + valid[b]);
  }
  r.kvData = kvStorage(cache);
  r.kvValueScales =
      cache.valueScaleElements() > 0 ? r.kvData + kvDataBytes(cache) : 0;
  // A fixed table stride (every block) keeps captured graphs valid as
  // sequences grow.
  table.clear();
  if (cache.paged()) {
    r.tableStride = cache.numBlocks();
    table.assign(B * r.tableStride, 0);
    for (int64_t b = 0; b < B; ++b) {
      const auto &blocks = cache.blockTable(kv->seqs[b]);
      for (size_t i = 0; i < blocks.size(); ++i)
        table[b * r.tableStride + i] = (int32_t)blocks[i];
    }
  } else {
    r.maxTokens = cache.unitTokenCount();
    for (int64_t b = 0; b < B; ++b)
      table.push_back((int32_t)cache.slotOf(kv->seqs[b]));
  }
}

void GpuSession::prepareKv(KvBatch *kv, Run &r) {
  r.kv = kv;
  if (!kv)
    return;
  std::vector<int32_t> cached, valid, table;
  kvArrays(kv, r, cached, valid, table);
  r.cachedLens = r.scratchAlloc(cached.size() * sizeof(int32_t));
  r.validLens = r.scratchAlloc(valid.size() * sizeof(int32_t));
  r.table = r.scratchAlloc(table.size() * sizeof(int32_t));
  if (!r.capturing) {
    ctx->upload(r.cachedLens, cached.data(), cached.size() * sizeof(int32_t));
    ctx->upload(r.validLens, valid.data(), valid.size() * sizeof(int32_t));
    ctx->upload(r.table, table.data(), table.size() * sizeof(int32_t));
  }
}

void GpuSession::launchKernel(const Node &node, const KernelRecord &k,
                              const Loaded &l, Run &r) {
  using format::ParamKind;
  using format::RuntimeValue;
  std::vector<Shape> shapes;
  for (int64_t id : node.inputs)
    shapes.push_back(id < 0 ? Shape()
                     : artifact.constant(id) ? artifact.constant(id)->shape()
                                             : r.values[id].shape);
  std::vector<Shape> resultShapes = inferShapes(node, shapes);
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    Value &v = r.values[node.outputs[i]];
    v = Value();
    v.dtype = artifact.valueType(node.outputs[i]).first;
    v.shape = resultShapes[i];
    v.dev = r.pool->get(v.bytes());
    v.onDevice = v.ownsDevice = true;
  }
  // Indices were checked against the node when the artifact was loaded.
  format::ExprEvaluator eval(
      k.launch, {[&](format::TensorRef t) -> const Shape & {
                   return t.side == format::TensorRef::Side::Operand
                              ? shapes[t.index]
                              : resultShapes[t.index];
                 },
                 [&](format::RuntimeSize s) -> int64_t {
                   switch (s) {
                   case format::RuntimeSize::MaxContextLen:
                     return r.maxContext;
                   }
                   return 0;
                 }});

  // Workspace is shared by a node's steps (split writes it, combine reads)
  // and goes back to the pool after them: later work on the one stream is
  // ordered after these launches.
  std::vector<std::pair<DevicePtr, size_t>> workspace;
  struct GiveBack {
    DevicePool *pool;
    std::vector<std::pair<DevicePtr, size_t>> &held;
    ~GiveBack() {
      for (auto &[p, bytes] : held)
        pool->put(p, bytes);
    }
  } giveBack{r.pool, workspace};
  for (const format::NamedExpr &w : k.launch.workspace) {
    size_t n = (size_t)eval(w.value);
    workspace.emplace_back(r.pool->get(n), n);
  }
  for (size_t s = 0; s < k.launch.steps.size(); ++s) {
    const format::LaunchStep &step = k.launch.steps[s];
    if (step.when && eval(*step.when) == 0)
      continue;
    int64_t gx = eval(step.grid[0]), gy = eval(step.grid[1]),
            gz = eval(step.grid[2]);
    if (gx <= 0 || gy <= 0 || gz <= 0)
      continue; // nothing to do (an empty batch)
    Dim3 grid{(unsigned)gx, (unsigned)gy, (unsigned)gz};
    Dim3 block{step.block[0], step.block[1], step.block[2]};

    // Each parameter gets 8 bytes; cuLaunchKernel reads as many as the
    // kernel's parameter type has.
    std::vector<uint64_t> slots(step.params.size(), 0);
    std::vector<void *> args(step.params.size());
    for (size_t i = 0; i < step.params.size(); ++i) {
      const format::Param &p = step.params[i];
      void *slot = &slots[i];
      args[i] = slot;
      auto put = [&](auto x) { std::memcpy(slot, &x, sizeof x); };
      auto kv = [&](auto x) {
        if (!r.kv)
          throw std::runtime_error("kernel " + k.region + " needs a KV cache");
        put(x);
      };
      switch (p.kind) {
      case ParamKind::Operand: {
        int64_t id = node.inputs[p.tensor.index];
        put(id < 0 ? DevicePtr(0) : deviceOf(id, r));
        break;
      }
      case ParamKind::OperandF16: // an f32 constant (checked at load)
        put(constantOnDevice(node.inputs[p.tensor.index], /*asF16=*/true));
        break;
      case ParamKind::Result:
        put(r.values[node.outputs[p.tensor.index]].dev);
        if (r.written)
          r.written->insert(r.values[node.outputs[p.tensor.index]].dev);
        break;
      case ParamKind::Int32:
        put((int32_t)eval(p.expr));
        break;
      case ParamKind::Int64:
        put((int64_t)eval(p.expr));
        break;
      case ParamKind::Float32:
        put(p.number);
        break;
      case ParamKind::Null:
        put(DevicePtr(0));
        break;
      case ParamKind::Workspace:
        put(workspace[p.workspace].first);
        if (r.written)
          r.written->insert(workspace[p.workspace].first);
        break;
      case ParamKind::Runtime:
        switch (p.runtime) {
        case RuntimeValue::KvPool:
        case RuntimeValue::KvData:
          kv(r.kvData);
          break;
        case RuntimeValue::KvBlockTable:
        case RuntimeValue::KvSlotOfRow:
          kv(r.table);
          break;
        case RuntimeValue::KvKScales:
          kv(kScales);
          break;
        case RuntimeValue::KvVScales:
          kv(vScales);
          break;
        case RuntimeValue::KvVTokenScales:
          kv(r.kvValueScales);
          break;
        case RuntimeValue::KvMaxBlocksPerSeq:
          kv((int32_t)r.tableStride);
          break;
        case RuntimeValue::KvMaxTokens:
          kv((int32_t)r.maxTokens);
          break;
        case RuntimeValue::KvLayers:
          kv((int32_t)deviceKvLayers(*r.kv->cache));
          break;
        case RuntimeValue::CachedLens:
          put(r.cachedLens);
          break;
        case RuntimeValue::ValidLens:
          put(r.validLens);
          break;
        case RuntimeValue::ErrorFlag:
          put(r.errorFlag);
          break;
        }
        break;
      }
    }
    ctx->launch(l.steps.at(s), grid, block, step.dynamicSmem, args.data(),
                step.entry, step.waitsForPriorGrids);
    if (syncEachLaunch && !r.capturing)
      ctx->synchronize("kernel " + step.entry + " (region " + node.name + ")");
    if (!r.capturing)
      ++counters.kernelLaunches; // a replay's launches are counted as one
  }
}

/// gather_nd with batch_dims 1 and one index per row ([B, 1, 1]): what
/// prefill_last gathers (docs/KV_CACHE.md).
static bool gathersRows(const Node &node) {
  return node.kind == OpKind::GatherNd && node.inputs.size() == 2 &&
         node.inputs[0] >= 0 && node.inputs[1] >= 0 &&
         node.attrs.value("batch_dims", int64_t(0)) == 1;
}

bool GpuSession::onDevice(const Node &node, const Run &r) const {
  if (node.inputs.empty() || node.inputs[0] < 0 ||
      artifact.constant(node.inputs[0]))
    return false;
  const Value &v = r.values[node.inputs[0]];
  if (node.kind == OpKind::Split)
    return v.onDevice || r.capturing;
  // The indices are read on the host: not inside a graph, whose replays
  // would keep this run's.
  return gathersRows(node) && v.onDevice && !r.capturing &&
         r.values[node.inputs[1]].onHost;
}

void GpuSession::gatherRowsOnDevice(const Node &node, Run &r) {
  const Value &x = r.values[node.inputs[0]];
  const Tensor &idx = r.values[node.inputs[1]].host;
  int64_t rank = (int64_t)x.shape.size();
  if (rank < 2 || idx.dtype() != DType::I64 || idx.rank() != 3 ||
      idx.dim(0) != x.shape[0] || idx.dim(1) != 1 || idx.dim(2) != 1)
    throw std::runtime_error("node '" + node.name + "' (gather_nd): indices " +
                             shapeString(idx.shape()) + " do not pick one of " +
                             shapeString(x.shape) + "'s rows per batch");
  int64_t B = x.shape[0], S = x.shape[1], inner = 1;
  for (int64_t d = 2; d < rank; ++d)
    inner *= x.shape[d];
  size_t row = (size_t)inner * dtypeSize(x.dtype);
  Value &out = r.values[node.outputs[0]];
  out = Value();
  out.dtype = x.dtype;
  out.shape = x.shape;
  out.shape[1] = 1;
  out.dev = r.pool->get(out.bytes());
  out.onDevice = out.ownsDevice = true;
  if (r.written)
    r.written->insert(out.dev);
  for (int64_t b = 0; b < B; ++b) {
    int64_t i = idx.data<int64_t>()[b];
    if (i < -S || i >= S) // ONNX GatherND: negative indices count back
      throw std::runtime_error("node '" + node.name + "' (gather_nd): index " +
                               std::to_string(i) + " outside [" +
                               std::to_string(-S) + ", " + std::to_string(S) +
                               ")");
    i += i < 0 ? S : 0;
    ctx->copy(out.dev + b * row, x.dev + (size_t)(b * S + i) * row, row);
  }
}

void GpuSession::splitOnDevice(const Node &node, Run &r) {
  const Value &x = r.values[node.inputs[0]];
  int64_t rank = (int64_t)x.shape.size();
  int64_t axis = node.attrs.at("axis").get<int64_t>();
  if (axis < 0)
    axis += rank;
  std::vector<int64_t> sizes = node.attrs.at("sizes").get<std::vector<int64_t>>();
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s;
  if (axis < 0 || axis >= rank || total != x.shape[axis] ||
      sizes.size() != node.outputs.size())
    throw std::runtime_error("node '" + node.name + "' (split): sizes do not "
                             "fit shape " + shapeString(x.shape));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= x.shape[d];
  size_t es = dtypeSize(x.dtype), rowIn = (size_t)(total * inner) * es;
  size_t at = 0;
  DevicePtr src = x.dev;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Value &out = r.values[node.outputs[i]];
    out = Value();
    out.dtype = x.dtype;
    out.shape = x.shape;
    out.shape[axis] = sizes[i];
    out.dev = r.pool->get(out.bytes());
    out.onDevice = out.ownsDevice = true;
    if (r.written)
      r.written->insert(out.dev);
    size_t chunk = (size_t)(sizes[i] * inner) * es;
    ctx->copy2D(out.dev, chunk, src + at, rowIn, chunk, (size_t)outer);
    at += chunk;
  }
}

const std::vector<GpuSession::Placement> &
GpuSession::placements(const Function &fn) const {
  // Fixed once the constructor has loaded the kernels: computed once per
  // entry point, not on every call.
  if (auto it = placementsOf.find(&fn); it != placementsOf.end())
    return it->second;
  std::vector<bool> hostKnown(artifact.numValues(), false);
  for (const Port &p : fn.inputs)
    hostKnown[p.value] = true;
  auto known = [&](int64_t id) {
    return id < 0 || artifact.constant(id) || hostKnown[id];
  };
  std::vector<Placement> out;
  for (const Node &n : fn.nodes) {
    bool allKnown = std::all_of(n.inputs.begin(), n.inputs.end(), known);
    Placement p;
    // An elementwise region of host-known values (e.g. positions times the
    // rotary frequencies) stays with the host nodes around it: a handful of
    // elements, and no download in between. Off-loading, the embedding rows
    // are looked up on the host, as llama.cpp keeps its token embeddings on
    // the CPU: the table (SmolLM2's is 45% of its W8A8 weights) is read a
    // row per token.
    if (allKnown && offloading() && looksUpEmbeddings(n))
      p = Placement::Host;
    else if (loaded.count(kernelIndex(n)) &&
        !(allKnown && artifact.kernels()[kernelIndex(n)].kind ==
                          format::KernelKind::Elementwise))
      p = Placement::Kernel;
    else if (n.kind == OpKind::Split ||
             (gathersRows(n) && !known(n.inputs[0]) && known(n.inputs[1])))
      p = Placement::Split;
    else if (n.kind == OpKind::Shape)
      p = Placement::Host;
    else if (n.kind == OpKind::Reshape && n.inputs.size() == 2 &&
             !known(n.inputs[0]) && known(n.inputs[1]))
      p = Placement::View;
    else
      p = allKnown ? Placement::Host : Placement::Blocking;
    if (split.splits() && out.size() >= split.cut.at(&fn) &&
        p != Placement::Host)
      p = Placement::Cpu;
    if (p == Placement::Host)
      for (int64_t id : n.outputs)
        hostKnown[id] = true;
    if (auto d = deviceOnlyAttention.find(&n);
        d != deviceOnlyAttention.end() && p != Placement::Cpu)
      throw std::runtime_error(d->second);
    out.push_back(p);
  }
  return placementsOf[&fn] = std::move(out);
}

void GpuSession::checkPlacements() const {
  for (const Function *fn : gpuFunctions())
    placements(*fn);
}

std::vector<const Function *> GpuSession::gpuFunctions() const {
  std::vector<const Function *> fns;
  for (const Function &f : artifact.functions())
    if (const Function *fn = artifact.gpuFunction(f.name))
      fns.push_back(fn);
  return fns;
}

bool GpuSession::looksUpEmbeddings(const Node &n) const {
  int64_t k = kernelIndex(n);
  return k >= 0 && artifact.kernels()[k].kind == format::KernelKind::Embedding;
}

int64_t GpuSession::layersThatFit(uint64_t reservedBytes) const {
  std::vector<const Function *> fns = gpuFunctions();
  uint64_t free = ctx->memoryInfo().first;
  uint64_t budget = free - free / 10;
  budget = budget > reservedBytes ? budget - reservedBytes : 0;
  int64_t layers = splitByLayers(artifact, fns, 0).modelLayers;
  // Bytes grow with the layers: the most that fit, by bisection.
  int64_t lo = 0, hi = layers; // lo fits or is 0
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    // A split looks the embedding rows up on the host (placements); with
    // every block on the device there is no split, and the table goes too.
    std::function<bool(const Node &)> onHost;
    if (mid < layers)
      onHost = [&](const Node &n) { return looksUpEmbeddings(n); };
    if (weightBytesBefore(artifact, splitByLayers(artifact, fns, mid),
                          onHost) <= budget)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

void GpuSession::setGpuLayers(int64_t layers) {
  std::vector<const Function *> fns = gpuFunctions();
  split = splitByLayers(artifact, fns, layers);
  placementsOf.clear();
  graphs.clear(); // none yet: set before the first run
  kvLayersOnDevice = -1;
  opTails.clear();
  if (!split.splits())
    return;
  // The device's cache holds the first layers only where every attention
  // kernel is told how many it holds.
  bool runtimeLayers = true;
  for (auto &[index, l] : loaded) {
    const KernelRecord &k = artifact.kernels()[index];
    bool readsCache = false, readsLayers = false;
    for (const format::LaunchStep &step : k.launch.steps)
      for (const format::Param &p : step.params)
        if (p.kind == format::ParamKind::Runtime) {
          readsCache |= p.runtime == format::RuntimeValue::KvPool ||
                        p.runtime == format::RuntimeValue::KvData;
          readsLayers |= p.runtime == format::RuntimeValue::KvLayers;
        }
    runtimeLayers &= !readsCache || readsLayers;
  }
  if (runtimeLayers)
    kvLayersOnDevice = split.gpuLayers;
  // The CPU half runs the op plan's nodes after its cut where the plans
  // carry the same values across (LayerSplit.h, OpTail), else the GPU
  // plan's; either reads its weights packed for the CPU's GEMMs, as the CPU
  // backend does (the mapped bytes are released as they are packed).
  std::vector<const Function *> ops;
  for (const Function *fn : fns)
    ops.push_back(&artifact.function(fn->name));
  LayerSplit opSplit = splitByLayers(artifact, ops, layers);
  opTails.clear();
  for (size_t f = 0; f < fns.size(); ++f) {
    std::optional<OpTail> tail =
        opTailOf(artifact, *fns[f], split.cut.at(fns[f]), *ops[f],
                 opSplit.cut.at(ops[f]));
    if (tail) {
      cpu.prepareNodes(*ops[f], tail->cut);
      opTails[fns[f]] = std::move(*tail);
      continue;
    }
    for (size_t i = split.cut.at(fns[f]); i < fns[f]->nodes.size(); ++i)
      cpu.packForHost(fns[f]->nodes[i]);
  }
}

void GpuSession::runOpTail(const Function &fn, const OpTail &tail, Run &r) {
  const Function &ops = *tail.ops;
  std::vector<Tensor> values(artifact.numValues());
  auto portNamed = [](const std::vector<Port> &ports, const std::string &n) {
    for (const Port &p : ports)
      if (p.name == n)
        return &p;
    return static_cast<const Port *>(nullptr);
  };
  for (const Port &p : ops.inputs)
    if (auto in = r.inputs->find(p.name); in != r.inputs->end())
      values[p.value] = in->second;
  for (auto [gpuValue, opValue] : tail.carried)
    values[opValue] = hostOf(gpuValue, r); // the residual stream, downloaded
  KvBatch adapters; // no cache: the call's LoRA adapters only
  adapters.adapters = r.adapters;
  cpu.runNodes(ops, tail.prologue, values, &adapters, tail.cut);
  std::vector<size_t> rest;
  for (size_t i = tail.cut; i < ops.nodes.size(); ++i)
    rest.push_back(i);
  cpu.runNodes(ops, rest, values, r.kv ? r.kv : &adapters, tail.cut);
  for (const Port &p : ops.outputs) {
    const Port *g = portNamed(fn.outputs, p.name);
    if (!g)
      throw std::runtime_error("entry point " + fn.name + ": output '" +
                               p.name + "' of the op plan is not the GPU "
                               "plan's");
    const Tensor *c = artifact.constant(p.value);
    Value &v = r.values[g->value];
    v = Value();
    v.host = c ? *c : values[p.value];
    v.dtype = v.host.dtype();
    v.shape = v.host.shape();
    v.onHost = true;
  }
  counters.cpuLayerNodes += (int64_t)(ops.nodes.size() - tail.cut);
}

/// A tensor of this dtype and shape over no data, for the CPU kernels that
/// read only an operand's shape (shape, reshape).
static Tensor shapeOnly(DType dtype, const Shape &shape) {
  static const char none[1] = {0};
  return Tensor::view(dtype, shape, none);
}

void GpuSession::viewOnDevice(const Node &node, Run &r, bool operandLivesOn) {
  Value &x = r.values[node.inputs[0]];
  // The reshape's rule (0 keeps a dim, -1 is inferred) from the operand's
  // shape alone.
  Operands ops = {nullptr, nullptr};
  Tensor xv = shapeOnly(x.dtype, x.shape);
  Tensor shape = hostOf(node.inputs[1], r);
  ops[0] = &xv;
  ops[1] = &shape;
  Shape out = cpu.runOne(node, ops).at(0).shape();
  Value &y = r.values[node.outputs[0]];
  Value base = x; // x may be y's slot's neighbour; copy before assigning
  y = Value();
  y.dtype = base.dtype;
  y.shape = std::move(out);
  y.onDevice = true;
  if (operandLivesOn) {
    // Both stay live: a copy, so that each buffer has one owner.
    y.dev = r.pool->get(y.bytes());
    y.ownsDevice = true;
    if (r.written)
      r.written->insert(y.dev);
    ctx->copy2D(y.dev, y.bytes(), base.dev, y.bytes(), y.bytes(), 1);
  } else {
    // The operand ends here: the view takes its buffer over.
    y.dev = base.dev;
    y.ownsDevice = base.ownsDevice;
    r.values[node.inputs[0]].ownsDevice = false;
  }
}

void GpuSession::shapeOnHost(const Node &node, Run &r) {
  const Value &x = r.values[node.inputs[0]];
  Tensor xv = shapeOnly(x.dtype, x.shape);
  Operands ops = {&xv};
  std::vector<Tensor> out = cpu.runOne(node, ops);
  Value &y = r.values[node.outputs[0]];
  y = Value();
  y.dtype = out[0].dtype();
  y.shape = out[0].shape();
  y.host = out[0];
  y.onHost = true;
}

std::vector<Tensor> GpuSession::runOnCpu(const Node &node, Run &r,
                                         bool withCache) {
  std::vector<Tensor> in;
  for (int64_t id : node.inputs)
    in.push_back(id < 0 ? Tensor() : hostOf(id, r));
  Operands ops;
  for (size_t i = 0; i < in.size(); ++i)
    ops.push_back(node.inputs[i] < 0 ? nullptr : &in[i]);
  if (withCache && r.kv)
    return cpu.runOne(node, ops, r.kv);
  KvBatch adapters; // no cache: the call's LoRA adapters only
  adapters.adapters = r.adapters;
  return cpu.runOne(node, ops, &adapters);
}

void GpuSession::runOnHost(const Node &node, Run &r, bool afterSplit) {
  std::vector<Tensor> out = runOnCpu(node, r, afterSplit);
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    Value &v = r.values[node.outputs[i]];
    v = Value();
    v.dtype = out[i].dtype();
    v.shape = out[i].shape();
    v.host = out[i];
    v.onHost = true;
  }
  if (afterSplit) {
    ++counters.cpuLayerNodes;
    return;
  }
  ++counters.hostNodes;
  ++counters.hostOps[hostLabel(node)];
}

void GpuSession::checkRegion(const Node &node, Run &r,
                             const std::string &function) {
  if (containsOp(node.body->nodes, OpKind::KvAttention))
    return; // its cache is on the device: checked end to end
  ctx->synchronize("kernel " + node.name);
  std::vector<Tensor> gpu;
  for (int64_t id : node.outputs)
    gpu.push_back(hostOf(id, r));
  // The same region on the CPU, from the same (downloaded) operands.
  std::vector<Tensor> reference = runOnCpu(node, r);
  // GEMMs with a transcendental activation are reported apart: the rest of
  // an int8 GEMM's epilogue is exact arithmetic in the same order.
  format::KernelKind k = artifact.kernels()[kernelIndex(node)].kind;
  std::string kind = format::spelling(k);
  for (const Node &inner : node.body->nodes)
    if (format::isGemm(k) && (inner.kind == OpKind::Gelu || inner.kind == OpKind::Silu))
      kind += std::string("+") + opKindName(inner.kind);
  RegionCheck c{function, node.name, kind};
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const Tensor &cpu = reference[i];
    const Tensor &g = gpu[i];
    if (cpu.shape() != g.shape() || cpu.dtype() != g.dtype())
      throw std::runtime_error("check: kernel " + node.name +
                               " result shapes differ");
    for (int64_t e = 0; e < cpu.numel(); ++e) {
      if (cpu.dtype() == DType::F32) {
        double a = cpu.data<float>()[e], b = g.data<float>()[e];
        c.maxAbsReference = std::max(c.maxAbsReference, std::fabs(a));
        double d = std::fabs(a - b);
        if (std::isnan(d))
          d = INFINITY;
        c.maxAbsError = std::max(c.maxAbsError, d);
      } else {
        int64_t a, b;
        if (cpu.dtype() == DType::I8) {
          a = cpu.data<int8_t>()[e];
          b = g.data<int8_t>()[e];
        } else if (cpu.dtype() == DType::I32) {
          a = cpu.data<int32_t>()[e];
          b = g.data<int32_t>()[e];
        } else {
          continue;
        }
        ++c.intElements;
        int64_t d = std::llabs(a - b);
        c.mismatchedInts += d > 1;
        c.offByOneInts += d == 1;
      }
    }
  }
  regionChecks.push_back(c);
}

void GpuSession::execute(const Function &fn, Run &r) {
  std::vector<size_t> lastUse = lastUses(fn, r.values.size());
  const std::vector<Placement> &where = placements(fn);
  // Profiling: each node's cost now, its time from events after the run.
  struct Timed {
    const Node *node;
    Cost cost;
    int from, to;
  };
  std::vector<Timed> timed;
  KvState kvState;
  if (profiling && r.kv) {
    for (size_t b = 0; b < r.kv->seqs.size(); ++b)
      kvState.cached.push_back(r.kv->cache->length(r.kv->seqs[b]));
    kvState.valid = r.kv->valid;
    kvState.elementBytes = (double)r.kv->cache->config().elementBytes();
    kvState.rowScaleBytes =
        r.kv->cache->config().valueScalePerToken() ? sizeof(float) : 0;
  }
  auto shapesOf = [&](const std::vector<int64_t> &ids) {
    std::vector<Shape> shapes;
    for (int64_t id : ids)
      shapes.push_back(id < 0                    ? Shape()
                       : artifact.constant(id) ? artifact.constant(id)->shape()
                                               : r.values[id].shape);
    return shapes;
  };
  auto tail = split.splits() ? opTails.find(&fn) : opTails.end();
  for (size_t i = 0; i < fn.nodes.size(); ++i) {
    const Node &node = fn.nodes[i];
    if (tail != opTails.end() && i == split.cut.at(&fn)) {
      runOpTail(fn, tail->second, r); // the rest, on the CPU
      break;
    }
    // The weights this node reads pin themselves; those prefetched for the
    // next kernel node stay pinned until it runs.
    pinned = prefetched;
    readByNode.clear();
    int from = profiling ? ctx->mark() : -1;
    std::vector<Shape> operandShapes;
    if (profiling)
      operandShapes = shapesOf(node.inputs);
    int64_t k = kernelIndex(node);
    auto l = k >= 0 && where[i] == Placement::Kernel ? loaded.find(k)
                                                     : loaded.end();
    if (l != loaded.end()) {
      try {
        launchKernel(node, artifact.kernels()[k], l->second, r);
        if (checking)
          checkRegion(node, r, fn.name);
      } catch (const std::exception &e) {
        throw std::runtime_error("kernel region '" + node.name + "' (" +
                                 node.attrs.value("kind", "") +
                                 "): " + e.what());
      }
    } else if (where[i] != Placement::Cpu && onDevice(node, r)) {
      if (node.kind == OpKind::Split)
        splitOnDevice(node, r);
      else
        gatherRowsOnDevice(node, r);
    } else if (where[i] == Placement::View &&
               r.values[node.inputs[0]].onDevice) {
      viewOnDevice(node, r, lastUse[node.inputs[0]] != i);
    } else if (node.kind == OpKind::Shape && !artifact.constant(node.inputs[0])) {
      shapeOnHost(node, r);
    } else {
      if (r.capturing && where[i] != Placement::Host)
        throw std::runtime_error("node '" + node.name +
                                 "' cannot be captured in a CUDA graph");
      runOnHost(node, r, where[i] == Placement::Cpu);
    }
    if (streaming()) {
      // A weight's buffer may be copied over (the next weight of its size)
      // once the kernels that read it are done: an event after them.
      if (!readByNode.empty()) {
        SharedEvent read = takeEvent();
        ctx->recordEvent(read.get());
        for (const ConstantKey &key : readByNode)
          if (auto w = constants.find(key); w != constants.end())
            w->second.read = read;
      }
      // The next kernel node's streamed weights are copied on the copy
      // stream while this node's kernels run.
      if (l != loaded.end()) {
        prefetched.clear();
        for (size_t j = i + 1; j < fn.nodes.size(); ++j)
          if (where[j] == Placement::Kernel &&
              loaded.count(kernelIndex(fn.nodes[j]))) {
            prefetchWeights(fn.nodes[j]);
            break;
          }
      }
    }
    if (r.staticNodes && (*r.staticNodes)[i])
      for (int64_t id : node.outputs)
        (*r.staticResults)[id] = r.values[id].host;
    if (profiling)
      timed.push_back({&node,
                       nodeCost(artifact, node, operandShapes,
                                shapesOf(node.outputs),
                                r.kv ? &kvState : nullptr),
                       from, ctx->mark()});
    for (int64_t id : node.inputs)
      if (id >= 0 && lastUse[id] == i && !artifact.constant(id) &&
          !r.values[id].pinned) {
        Value &v = r.values[id];
        if (v.ownsDevice)
          r.pool->put(v.dev, v.bytes());
        v = Value();
      }
  }
  for (const Timed &t : timed)
    nodeProfile.add(fn.name, profileKind(*t.node), ctx->elapsedMs(t.from, t.to) / 1e3,
                    t.cost);
  if (profiling)
    ctx->clearMarks();
}

std::string GpuSession::profileDevice() const { return ctx->device().name; }

const Peaks &GpuSession::profilePeaks() const {
  // A known GPU's datasheet; any other: a 256 MiB device-to-device copy
  // (read + write), the best of three.
  auto measureCopy = [&] {
    const size_t bytes = size_t(256) << 20;
    DevicePtr a = ctx->alloc(bytes), b = ctx->alloc(bytes);
    ctx->memsetZero(a, bytes);
    float best = 0;
    for (int rep = 0; rep < 3; ++rep) {
      int m0 = ctx->mark();
      ctx->copy2D(b, bytes, a, bytes, bytes, 1);
      float ms = ctx->elapsedMs(m0, ctx->mark());
      if (ms > 0 && (best == 0 || ms < best))
        best = ms;
    }
    ctx->clearMarks();
    ctx->free(a);
    ctx->free(b);
    return best > 0 ? 2.0 * bytes / (best / 1e3) : 0.0;
  };
  if (!peaks)
    peaks = std::make_unique<Peaks>(
        gpuPeaksFor(ctx->device().name, measureCopy));
  return *peaks;
}

bool GpuSession::graphable(const Function &fn) const {
  if (fn.name != "decode")
    return false;
  // Host nodes from host-known values become a prologue rerun before each
  // replay (e.g. rotary cos/sin from the positions, shape arithmetic); a
  // node that needs device data on the host cannot be replayed.
  for (Placement p : placements(fn))
    if (p == Placement::Blocking || p == Placement::Cpu)
      return false;
  return true;
}

std::map<std::string, Tensor>
GpuSession::run(const std::string &name,
                const std::map<std::string, Tensor> &inputs, KvBatch *kv) {
  const Function *fn = artifact.gpuFunction(name);
  if (!fn)
    throw std::runtime_error(artifact.path() + ": no GPU plan for entry point '" +
                             name + "'");
  checkInputs(*fn, inputs);
  // A batch without a cache carries only the rows' LoRA adapters.
  std::vector<int64_t> adapters = kv ? kv->adapters : std::vector<int64_t>();
  if (kv && !kv->cache)
    kv = nullptr;
  if (kv) {
    if (kv->seqs.size() != kv->valid.size())
      throw std::runtime_error("entry point " + name + ": malformed KV batch");
    for (size_t b = 0; b < kv->seqs.size(); ++b)
      kv->cache->reserve(kv->seqs[b],
                         kv->cache->length(kv->seqs[b]) + kv->valid[b]);
  } else if (containsOp(fn->nodes, OpKind::KvAttention)) {
    throw std::runtime_error("entry point " + name + " needs a KV cache");
  }
  ++counters.runs;

  auto setInputs = [&](Run &r) {
    for (const Port &p : fn->inputs) {
      auto it = inputs.find(p.name);
      Value &v = r.values[p.value];
      v.dtype = p.dtype;
      v.shape = it->second.shape();
      v.host = it->second;
      v.onHost = true;
      deviceOf(p.value, r); // uploaded up front: same allocation order always
    }
  };
  // Every buffer of a run back to its pool.
  auto release = [](Run &r) {
    for (auto &v : r.values)
      if (v.ownsDevice)
        r.pool->put(v.dev, v.bytes());
    for (auto &[p, bytes] : r.scratch)
      r.pool->put(p, bytes);
  };
  // The embedding kernels' flag, then the cache moves past this call.
  auto conclude = [&](DevicePtr errorFlag, bool advance) {
    int32_t flag = 0;
    ctx->download(&flag, errorFlag, sizeof flag);
    if (flag == qcc::kDeviceErrorExpertId)
      throw std::runtime_error("entry point " + name +
                               ": a mixture-of-experts expert id is outside "
                               "[0, experts)");
    if (flag)
      throw std::runtime_error("entry point " + name +
                               ": a token id is outside the vocabulary");
    if (kv && advance)
      for (size_t b = 0; b < kv->seqs.size(); ++b)
        kv->cache->advance(kv->seqs[b], kv->valid[b]);
  };
  auto finish = [&](Run &r, bool advance) {
    std::map<std::string, Tensor> out;
    for (const Port &p : fn->outputs)
      out[p.name] = hostOf(p.value, r);
    release(r);
    conclude(r.errorFlag, advance);
    return out;
  };
  auto begin = [&](Run &r, DevicePool *p, bool capturing) {
    r.pool = p;
    r.capturing = capturing;
    r.pinUploads = p != pool.get(); // a graph's pool: its first run and capture
    r.values.assign(artifact.numValues(), Value());
    r.adapters = adapters;
    r.inputs = &inputs;
    r.errorFlag = r.scratchAlloc(sizeof(int32_t));
    prepareKv(kv, r);
    setInputs(r);
    ctx->memsetZero(r.errorFlag, sizeof(int32_t));
  };

  if (!(useGraphs && !checking && !profiling && kv && graphable(*fn))) {
    Run r;
    begin(r, pool.get(), false);
    execute(*fn, r);
    return finish(r, true);
  }

  // Graph key: the input shapes and every runtime-dependent launch size.
  int64_t maxContext = 0;
  for (size_t b = 0; b < kv->seqs.size(); ++b)
    maxContext = std::max<int64_t>(
        maxContext, kv->cache->length(kv->seqs[b]) + kv->valid[b]);
  std::string key = name;
  for (const Port &p : fn->inputs) {
    key += '|';
    key += shapeString(inputs.at(p.name).shape());
  }
  std::set<int64_t> seen;
  for (const Node &n : fn->nodes) {
    int64_t k = kernelIndex(n);
    if (k < 0 || !seen.insert(k).second)
      continue; // glue (split) has no launch sizes
    const format::LaunchRecord &launch = artifact.kernels()[k].launch;
    format::ExprEvaluator eval(
        launch, {[&](format::TensorRef) -> const Shape & {
                   throw std::runtime_error("a runtime launch size depends "
                                            "on a shape");
                 },
                 [&](format::RuntimeSize s) -> int64_t {
                   switch (s) {
                   case format::RuntimeSize::MaxContextLen:
                     return maxContext;
                   }
                   return 0;
                 }});
    for (const format::NamedExpr &sym : launch.symbols)
      if (format::readsRuntime(sym.value, launch))
        key += "|" + sym.name + "=" + std::to_string(eval(sym.value));
  }

  auto it = graphs.find(key);
  if (it == graphs.end()) {
    // First step of this shape: run it for real on the graph's own pool,
    // then record the same sequence (it allocates nothing new: the pool's
    // free lists hold every buffer the first pass used).
    auto g = std::make_unique<Graph>();
    g->pool = std::make_unique<DevicePool>(*ctx);
    Run r;
    std::map<int64_t, size_t> uploadSizes;
    begin(r, g->pool.get(), false);
    r.uploadSizes = &uploadSizes; // after the inputs' uploads
    execute(*fn, r);
    auto out = finish(r, false); // the capture must see this step's state
    if (!useGraphs) {
      // The device ran out of memory during this run: weights are streamed
      // from now on, and a graph would hold their addresses. No capture.
      for (size_t b = 0; b < kv->seqs.size(); ++b)
        kv->cache->advance(kv->seqs[b], kv->valid[b]);
      return out;
    }
    // The host values uploaded mid-run get buffers of their own: taken from
    // the pool they could be one that a kernel writes earlier in the graph
    // (the pool reuses a value's buffer after its last use), and the replay
    // uploads them before the graph starts. New ones, so that the pool still
    // holds every buffer the first run used and the capture allocates none.
    for (auto &[id, bytes] : uploadSizes)
      g->uploadBuffers[id] = g->pool->fresh(bytes);
    Run c;
    begin(c, g->pool.get(), true);
    c.uploadBuffers = &g->uploadBuffers;
    for (const Port &p : fn->inputs)
      g->inputs[p.value] = c.values[p.value].dev;
    g->cachedLens = c.cachedLens;
    g->validLens = c.validLens;
    g->table = c.table;
    g->errorFlag = c.errorFlag;
    // The host nodes that read the inputs' data, directly or through each
    // other, rerun on every replay; the rest (shape arithmetic) are kept.
    const std::vector<Placement> &where = placements(*fn);
    std::vector<char> dynamic(artifact.numValues(), 0), isStatic;
    for (const Port &p : fn->inputs)
      dynamic[p.value] = 1;
    for (size_t i = 0; i < fn->nodes.size(); ++i) {
      const Node &n = fn->nodes[i];
      bool dyn = where[i] == Placement::Host && n.kind != OpKind::Shape &&
                 std::any_of(n.inputs.begin(), n.inputs.end(),
                             [&](int64_t id) { return id >= 0 && dynamic[id]; });
      isStatic.push_back(where[i] == Placement::Host && !dyn);
      if (dyn) {
        g->prologue.push_back(&n);
        for (int64_t id : n.outputs)
          dynamic[id] = 1;
      }
    }
    std::set<DevicePtr> written;
    c.written = &written;
    c.hostUploads = &g->hostUploads;
    c.staticNodes = &isStatic;
    c.staticResults = &g->staticResults;
    ctx->beginCapture();
    try {
      ctx->memsetZero(c.errorFlag, sizeof(int32_t));
      execute(*fn, c);
    } catch (...) {
      ctx->endCapture();
      throw;
    }
    g->exec = ctx->endCapture();
    // A replay uploads inputs and host values before it starts: no two of
    // them may share a buffer (Value::pinned).
    std::set<DevicePtr> uploaded;
    for (auto &[id, dev] : g->inputs)
      if (!uploaded.insert(dev).second)
        throw std::runtime_error("graph capture: two inputs share a buffer");
    for (auto &[id, dev] : g->hostUploads)
      if (!uploaded.insert(dev).second)
        throw std::runtime_error("graph capture: host value " +
                                 std::to_string(id) +
                                 " shares a buffer with another upload");
    // ... nor may the graph write one of them: it would overwrite what the
    // replay uploaded before a later kernel reads it.
    for (DevicePtr dev : uploaded)
      if (written.count(dev))
        throw std::runtime_error("graph capture: a kernel writes a buffer "
                                 "that the replay uploads into");
    for (const Port &p : fn->outputs) {
      const Value &v = c.values[p.value];
      g->outputs.emplace_back(p.name, v.dev, v.dtype, v.shape);
    }
    release(c);
    for (size_t b = 0; b < kv->seqs.size(); ++b)
      kv->cache->advance(kv->seqs[b], kv->valid[b]);
    ++counters.graphCaptures;
    graphs[key] = std::move(g);
    return out;
  }

  // Replay: new inputs and cache state into the graph's buffers.
  Graph &g = *it->second;
  for (const Port &p : fn->inputs) {
    const Tensor &t = inputs.at(p.name);
    ctx->upload(g.inputs.at(p.value), t.raw(), t.bytes());
  }
  // The host prologue from the new inputs, and what the graph reads of it.
  if (!g.hostUploads.empty()) {
    std::map<int64_t, Tensor> host = g.staticResults;
    for (const Port &p : fn->inputs)
      host[p.value] = inputs.at(p.name);
    for (const Node *n : g.prologue) {
      Operands ops;
      for (int64_t id : n->inputs)
        ops.push_back(id < 0 ? nullptr
                      : artifact.constant(id) ? artifact.constant(id)
                                              : &host.at(id));
      std::vector<Tensor> out = cpu.runOne(*n, ops);
      for (size_t i = 0; i < n->outputs.size(); ++i)
        host[n->outputs[i]] = std::move(out[i]);
      ++counters.hostNodes;
      ++counters.hostOps[hostLabel(*n)];
    }
    for (auto &[id, dev] : g.hostUploads) {
      const Tensor &t = host.at(id);
      ctx->upload(dev, t.raw(), t.bytes());
    }
  }
  Run r;
  std::vector<int32_t> cached, valid, table;
  kvArrays(kv, r, cached, valid, table);
  ctx->upload(g.cachedLens, cached.data(), cached.size() * sizeof(int32_t));
  ctx->upload(g.validLens, valid.data(), valid.size() * sizeof(int32_t));
  ctx->upload(g.table, table.data(), table.size() * sizeof(int32_t));
  ctx->replay(g.exec);
  ++counters.graphReplays;
  std::map<std::string, Tensor> out;
  for (auto &[port, ptr, dtype, shape] : g.outputs) {
    Tensor t(dtype, shape);
    ctx->download(t.data<char>(), ptr, t.bytes());
    out[port] = std::move(t);
  }
  conclude(g.errorFlag, true);
  return out;
}

std::string GpuSession::planSummary() const {
  std::string out;
  for (const Function &f : artifact.functions()) {
    const Function *fn = artifact.gpuFunction(f.name);
    if (!fn)
      continue;
    int64_t onGpu = 0, afterSplit = 0;
    std::map<std::string, int64_t> host;
    const std::vector<Placement> &where = placements(*fn);
    for (size_t i = 0; i < fn->nodes.size(); ++i) {
      if (where[i] == Placement::Kernel || where[i] == Placement::Split ||
          where[i] == Placement::View)
        ++onGpu;
      else if (where[i] == Placement::Cpu)
        ++afterSplit;
      else
        ++host[hostLabel(fn->nodes[i])];
    }
    out += (out.empty() ? "" : "; ") + fn->name + ": " +
           std::to_string(onGpu) + " of " + std::to_string(fn->nodes.size()) +
           " nodes on the GPU";
    if (auto t = opTails.find(fn); afterSplit && t != opTails.end())
      out += ", " + std::to_string(afterSplit) +
             " after the split on the CPU as the op plan's " +
             std::to_string(t->second.ops->nodes.size() - t->second.cut);
    else if (afterSplit)
      out += ", " + std::to_string(afterSplit) + " after the split on the CPU";
    if (!host.empty()) {
      out += " (on the host:";
      for (auto &[op, n] : host)
        out += " " + op + " x" + std::to_string(n);
      out += ")";
    }
  }
  return out;
}
