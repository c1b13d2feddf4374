//===- CudaContext.cpp - one GPU through the dlopen'ed driver API ---------===//
#include "runtime/cuda/CudaContext.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

using namespace qcc::rt;

namespace {
// Values from cuda.h (stable ABI).
constexpr unsigned kStreamNonBlocking = 1;      // CU_STREAM_NON_BLOCKING
constexpr int kCaptureModeThreadLocal = 1;      // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
constexpr int kAttrMaxDynamicSharedBytes = 8;   // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int kJitErrorLogBuffer = 5;           // CU_JIT_ERROR_LOG_BUFFER
constexpr int kJitErrorLogBufferSize = 6;       // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
constexpr int kErrorOutOfMemory = 2;            // CUDA_ERROR_OUT_OF_MEMORY
constexpr unsigned kEventDisableTiming = 2;     // CU_EVENT_DISABLE_TIMING
} // namespace

CudaContext::CudaContext(std::shared_ptr<CudaDriver> driver, int ordinal)
    : drv(std::move(driver)) {
  if (ordinal < 0 || ordinal >= (int)drv->devices().size())
    throw std::runtime_error("CUDA: no device " + std::to_string(ordinal));
  dev = drv->devices()[ordinal];
  const CudaApi &f = drv->api();
  check(f.cuDevicePrimaryCtxRetain(&ctx, dev.ordinal),
        "creating a context on " + dev.name);
  check(f.cuCtxSetCurrent(ctx), "making the context current");
  check(f.cuStreamCreate(&stream, kStreamNonBlocking), "creating a stream");
  // Programmatic dependent launch needs sm_90 and cuLaunchKernelEx; every
  // emitted kernel waits for the grids before it on entry
  // (qcc::wait_for_prior_grids), so launching it early is safe.
  // QCC_CUDA_PDL=0 launches in plain stream order (to measure the
  // difference, or to rule it out).
  const char *pdl = std::getenv("QCC_CUDA_PDL");
  programmatic = dev.major >= 9 && f.cuLaunchKernelEx &&
                 !(pdl && std::strcmp(pdl, "0") == 0);
}

CudaContext::~CudaContext() {
  const CudaApi &f = drv->api();
  for (void *e : events)
    f.cuEventDestroy(static_cast<CudaApi::CUevent>(e));
  if (copyStream)
    f.cuStreamDestroy(copyStream);
  if (stream)
    f.cuStreamDestroy(stream);
  for (auto &[p, bytes] : pinnedSizes)
    f.cuMemFreeHost(p);
  if (ctx)
    f.cuDevicePrimaryCtxRelease(dev.ordinal);
}

void CudaContext::fail(const std::string &what, int result) const {
  throw std::runtime_error("CUDA: " + what + ": " + drv->errorString(result));
}

DevicePtr CudaContext::alloc(size_t bytes) {
  if (bytes == 0)
    return 0;
  if (limit && evictor && inUse + bytes > limit)
    evictor(inUse + bytes - limit, false);
  DevicePtr p = 0;
  int r = drv->api().cuMemAlloc(&p, bytes);
  if (r == kErrorOutOfMemory && evictor) {
    evictor(bytes, true);
    r = drv->api().cuMemAlloc(&p, bytes);
  }
  if (r == kErrorOutOfMemory) {
    auto [free, total] = memoryInfo();
    throw std::runtime_error("CUDA: out of GPU memory allocating " +
                             std::to_string(bytes) + " bytes (" +
                             std::to_string(free) + " free of " +
                             std::to_string(total) + ")");
  }
  check(r, "allocating " + std::to_string(bytes) + " bytes");
  sizes[p] = bytes;
  inUse += bytes;
  peak = std::max(peak, inUse);
  return p;
}

void CudaContext::free(DevicePtr p) {
  if (!p)
    return;
  drv->api().cuMemFree(p); // freeing cannot usefully fail here
  if (auto it = sizes.find(p); it != sizes.end()) {
    inUse -= it->second;
    sizes.erase(it);
  }
}

std::pair<size_t, size_t> CudaContext::memoryInfo() const {
  size_t free = 0, total = 0;
  drv->api().cuMemGetInfo(&free, &total);
  return {free, total};
}

void CudaContext::upload(DevicePtr dst, const void *src, size_t bytes) {
  if (bytes == 0)
    return;
  // Pageable source: wait until the copy is done before the caller reuses it.
  check(drv->api().cuMemcpyHtoDAsync(dst, src, bytes, stream),
        "copying " + std::to_string(bytes) + " bytes to the GPU");
  synchronize("copy to the GPU");
}

void CudaContext::download(void *dst, DevicePtr src, size_t bytes) {
  if (bytes == 0)
    return;
  check(drv->api().cuMemcpyDtoHAsync(dst, src, bytes, stream),
        "copying " + std::to_string(bytes) + " bytes from the GPU");
  synchronize("copy from the GPU");
}

void CudaContext::copy(DevicePtr dst, DevicePtr src, size_t bytes) {
  if (bytes)
    check(drv->api().cuMemcpyDtoDAsync(dst, src, bytes, stream),
          "copying " + std::to_string(bytes) + " bytes on the GPU");
}

CudaApi::CUstream CudaContext::copyStreamOnce() {
  if (!copyStream)
    check(drv->api().cuStreamCreate(&copyStream, kStreamNonBlocking),
          "creating the copy stream");
  return copyStream;
}

CudaContext::Event CudaContext::createEvent() {
  Event e = nullptr;
  check(drv->api().cuEventCreate(&e, kEventDisableTiming), "creating an event");
  return e;
}

void CudaContext::destroyEvent(Event e) {
  if (e)
    drv->api().cuEventDestroy(e);
}

void CudaContext::recordEvent(Event e) {
  check(drv->api().cuEventRecord(e, stream), "recording an event");
}

void CudaContext::streamWaits(Event e) {
  check(drv->api().cuStreamWaitEvent(stream, e, 0),
        "ordering the compute stream after a copy");
}

void CudaContext::hostWaits(Event e) {
  check(drv->api().cuEventSynchronize(e), "waiting for an event");
}

void CudaContext::uploadOnCopyStream(DevicePtr dst, const void *src,
                                     size_t bytes, Event after, Event done) {
  CudaApi::CUstream s = copyStreamOnce();
  if (after)
    check(drv->api().cuStreamWaitEvent(s, after, 0),
          "ordering the copy stream after the compute stream");
  check(drv->api().cuMemcpyHtoDAsync(dst, src, bytes, s),
        "copying " + std::to_string(bytes) + " bytes to the GPU (copy stream)");
  check(drv->api().cuEventRecord(done, s), "recording an event");
}

void CudaContext::uploadPinned(DevicePtr dst, const void *src, size_t bytes) {
  if (bytes)
    check(drv->api().cuMemcpyHtoDAsync(dst, src, bytes, stream),
          "copying " + std::to_string(bytes) + " bytes to the GPU");
}

void *CudaContext::allocPinned(size_t bytes) {
  void *p = nullptr;
  check(drv->api().cuMemAllocHost(&p, bytes),
        "allocating " + std::to_string(bytes) + " bytes of page-locked host "
        "memory");
  pinnedSizes[p] = bytes;
  pinnedInUse += bytes;
  return p;
}

void CudaContext::freePinned(void *p) {
  auto it = pinnedSizes.find(p);
  if (it == pinnedSizes.end())
    return;
  drv->api().cuMemFreeHost(p); // freeing cannot usefully fail here
  pinnedInUse -= it->second;
  pinnedSizes.erase(it);
}

void CudaContext::synchronizeAll(const std::string &what) {
  synchronize(what);
  if (copyStream)
    check(drv->api().cuStreamSynchronize(copyStream), what + " (copy stream)");
}

void CudaContext::copy2D(DevicePtr dst, size_t dstPitch, DevicePtr src,
                         size_t srcPitch, size_t widthBytes, size_t height) {
  if (widthBytes == 0 || height == 0)
    return;
  CudaApi::Memcpy2D c{};
  c.srcMemoryType = 2; // CU_MEMORYTYPE_DEVICE
  c.srcDevice = src;
  c.srcPitch = srcPitch;
  c.dstMemoryType = 2;
  c.dstDevice = dst;
  c.dstPitch = dstPitch;
  c.WidthInBytes = widthBytes;
  c.Height = height;
  check(drv->api().cuMemcpy2DAsync(&c, stream),
        "strided copy of " + std::to_string(height) + " rows of " +
            std::to_string(widthBytes) + " bytes on the GPU");
}

void CudaContext::memsetZero(DevicePtr dst, size_t bytes) {
  if (bytes)
    check(drv->api().cuMemsetD8Async(dst, 0, bytes, stream),
          "clearing " + std::to_string(bytes) + " bytes");
}

CudaContext::Module CudaContext::loadModule(const void *image,
                                            const std::string &what) {
  std::vector<char> log(8192, '\0');
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSize};
  void *values[] = {log.data(), reinterpret_cast<void *>(log.size())};
  Module m = nullptr;
  int r = drv->api().cuModuleLoadDataEx(&m, image, 2, options, values);
  if (r != 0) {
    std::string jit(log.data());
    fail("loading module " + what + (jit.empty() ? "" : " (JIT log: " + jit +
                                                             ")"),
         r);
  }
  return m;
}

void CudaContext::unloadModule(Module m) {
  if (m)
    drv->api().cuModuleUnload(m); // at teardown: nothing useful to do on error
}

CudaContext::Function CudaContext::function(Module m,
                                            const std::string &entry) {
  Function f = nullptr;
  check(drv->api().cuModuleGetFunction(&f, m, entry.c_str()),
        "finding kernel " + entry);
  return f;
}

void CudaContext::setMaxDynamicSharedMemory(Function f, int bytes,
                                            const std::string &entry) {
  if (bytes <= 48 * 1024)
    return;
  check(drv->api().cuFuncSetAttribute(f, kAttrMaxDynamicSharedBytes, bytes),
        "kernel " + entry + ": allowing " + std::to_string(bytes) +
            " bytes of dynamic shared memory on " + dev.arch());
}

void CudaContext::launch(Function f, Dim3 grid, Dim3 block,
                         unsigned sharedBytes, void **args,
                         const std::string &entry, bool waitsForPriorGrids) {
  int r;
  if (programmatic && waitsForPriorGrids) {
    CudaApi::LaunchAttribute attr;
    std::memset(&attr, 0, sizeof attr);
    attr.id = CudaApi::kLaunchAttrProgrammaticSerialization;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CudaApi::LaunchConfig config{grid.x,      grid.y, grid.z, block.x,
                                 block.y,     block.z, sharedBytes, stream,
                                 &attr,       1};
    r = drv->api().cuLaunchKernelEx(&config, f, args, nullptr);
  } else {
    r = drv->api().cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y,
                                  block.z, sharedBytes, stream, args, nullptr);
  }
  check(r,
        "kernel launch " + entry + " (grid " + std::to_string(grid.x) + "x" +
            std::to_string(grid.y) + "x" + std::to_string(grid.z) +
            ", block " + std::to_string(block.x) + ", " +
            std::to_string(sharedBytes) + " B shared)");
}

void CudaContext::synchronize(const std::string &what) {
  check(drv->api().cuStreamSynchronize(stream), what);
}

void CudaContext::beginCapture() {
  check(drv->api().cuStreamBeginCapture(stream, kCaptureModeThreadLocal),
        "starting a CUDA graph capture");
}

CudaContext::Graph CudaContext::endCapture() {
  CudaApi::CUgraph graph = nullptr;
  check(drv->api().cuStreamEndCapture(stream, &graph),
        "ending a CUDA graph capture");
  CudaApi::CUgraphExec exec = nullptr;
  int r = drv->api().cuGraphInstantiateWithFlags(&exec, graph, 0);
  drv->api().cuGraphDestroy(graph);
  check(r, "instantiating a CUDA graph");
  return exec;
}

void CudaContext::replay(Graph g) {
  check(drv->api().cuGraphLaunch(g, stream), "replaying a CUDA graph");
}

void CudaContext::destroy(Graph g) {
  if (g)
    drv->api().cuGraphExecDestroy(g);
}

int CudaContext::mark() {
  CudaApi::CUevent e = nullptr;
  check(drv->api().cuEventCreate(&e, 0), "creating an event");
  events.push_back(e);
  check(drv->api().cuEventRecord(e, stream), "recording an event");
  return (int)events.size() - 1;
}

float CudaContext::elapsedMs(int from, int to) {
  auto a = static_cast<CudaApi::CUevent>(events.at(from));
  auto b = static_cast<CudaApi::CUevent>(events.at(to));
  check(drv->api().cuEventSynchronize(b), "waiting for an event");
  float ms = 0;
  check(drv->api().cuEventElapsedTime(&ms, a, b), "timing events");
  return ms;
}

void CudaContext::clearMarks() {
  for (void *e : events)
    drv->api().cuEventDestroy(static_cast<CudaApi::CUevent>(e));
  events.clear();
}
