//===- CudaContext.h - one GPU through the dlopen'ed driver API -*- C++ -*-===//
//
// The thin layer the CUDA backend (GpuSession) runs on: device memory,
// modules (cubin or PTX images), kernel launches on one stream, and CUDA graph
// capture/replay. Every failure throws std::runtime_error with one line that
// says what was attempted and the driver's error name, e.g.
//   "CUDA: out of GPU memory allocating 2147483648 bytes (1073741824 free of
//    85899345920)"
//   "CUDA: kernel launch qcc_decode_k3 failed: CUDA_ERROR_INVALID_VALUE (1)"
//   "CUDA: loading module qcc_main_k0 (sm_90 cubin): CUDA_ERROR_NO_BINARY_FOR_GPU (209)"
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CUDACONTEXT_H
#define QCC_RUNTIME_CUDACONTEXT_H

#include "runtime/cuda/CudaDriver.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace qcc::rt {

using DevicePtr = unsigned long long; // CUdeviceptr

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

class CudaContext {
public:
  /// Makes the primary context of device `ordinal` current on this thread
  /// and creates one (non-blocking) stream.
  CudaContext(std::shared_ptr<CudaDriver> driver, int ordinal);
  ~CudaContext();
  CudaContext(const CudaContext &) = delete;
  CudaContext &operator=(const CudaContext &) = delete;

  const CudaDevice &device() const { return dev; }
  const CudaDriver &driver() const { return *drv; }

  /// Device memory. alloc(0) returns 0. Out of memory throws with the sizes.
  DevicePtr alloc(size_t bytes);
  void free(DevicePtr p);
  /// Bytes this context has allocated and not freed, and the most at any
  /// time (what qrun reports and the GPU benchmark tabulates; docs/MEMORY.md).
  size_t bytesInUse() const { return inUse; }
  size_t peakBytes() const { return peak; }
  /// Who frees device memory when it runs short (the CUDA backend's
  /// streamed weights, docs/MEMORY.md): called as evict(bytes, false)
  /// before an allocation would pass the budget set by setMemoryLimit (one
  /// that still does not fit is made anyway: one node's operands must be on
  /// the device), and as evict(bytes, true) when the device itself is out
  /// of memory, before alloc tries once more.
  using Evictor = std::function<void(size_t bytes, bool outOfMemory)>;
  void setEvictor(Evictor evict) { evictor = std::move(evict); }
  /// A budget for this context's allocations (0: none).
  void setMemoryLimit(size_t bytes) { limit = bytes; }
  size_t memoryLimit() const { return limit; }
  /// (free, total) bytes on the device.
  std::pair<size_t, size_t> memoryInfo() const;

  /// Host -> device and device -> host copies, ordered on the stream.
  /// upload returns once `src` may be reused; download once `dst` holds the
  /// data (it synchronizes the stream).
  void upload(DevicePtr dst, const void *src, size_t bytes);
  void download(void *dst, DevicePtr src, size_t bytes);
  /// Device -> device copy on the stream.
  void copy(DevicePtr dst, DevicePtr src, size_t bytes);

  /// Streamed weights (docs/MEMORY.md) are copied from page-locked host
  /// memory on a second stream, the copy stream, while the compute stream
  /// runs the kernels before the ones that read them; events order the two.
  using Event = CudaApi::CUevent;
  Event createEvent(); ///< without timing
  void destroyEvent(Event e);
  /// Records `e` on the compute stream, after the work queued on it so far.
  void recordEvent(Event e);
  /// The compute stream's later work waits for `e`.
  void streamWaits(Event e);
  /// The host waits for `e`.
  void hostWaits(Event e);
  /// Copies `bytes` from page-locked `src` to `dst` on the copy stream,
  /// after `after` (an event of the compute stream; null: at once), and
  /// records `done` there. Returns at once: `src` must stay until `done`.
  void uploadOnCopyStream(DevicePtr dst, const void *src, size_t bytes,
                          Event after, Event done);
  /// Host -> device on the compute stream from page-locked `src`; returns
  /// at once (`src` must stay until the stream gets past the copy).
  void uploadPinned(DevicePtr dst, const void *src, size_t bytes);
  /// Page-locked host memory, counted (pinnedBytes).
  void *allocPinned(size_t bytes);
  void freePinned(void *p);
  size_t pinnedBytes() const { return pinnedInUse; }
  /// Waits for both streams (before freeing what either may touch).
  void synchronizeAll(const std::string &what);
  void memsetZero(DevicePtr dst, size_t bytes);
  /// Device -> device copy of `height` rows of `widthBytes`, rows `srcPitch`
  /// and `dstPitch` bytes apart (a split along an axis, without a kernel).
  void copy2D(DevicePtr dst, size_t dstPitch, DevicePtr src, size_t srcPitch,
              size_t widthBytes, size_t height);

  /// Loads a cubin, or a NUL-terminated PTX image (JIT-compiled by the
  /// driver); `what` names it in errors ("qcc_main_k0 (sm_90 cubin)").
  using Module = CudaApi::CUmodule;
  using Function = CudaApi::CUfunction;
  Module loadModule(const void *image, const std::string &what);
  Function function(Module m, const std::string &entry);
  void unloadModule(Module m);
  /// Opts `f` into more than 48 KB of dynamic shared memory.
  void setMaxDynamicSharedMemory(Function f, int bytes,
                                 const std::string &entry);

  /// Launches on the stream; `args` as cuLaunchKernel takes them (an array
  /// of pointers to each parameter's value). A kernel that `waitsForPriorGrids`
  /// on entry (the emitted ones: codegen/kernels/common.cuh,
  /// wait_for_prior_grids) is launched with programmatic stream
  /// serialization where programmaticLaunch(): it may start before the one
  /// before it ends, its launch overlapping that kernel's tail.
  void launch(Function f, Dim3 grid, Dim3 block, unsigned sharedBytes,
              void **args, const std::string &entry,
              bool waitsForPriorGrids = false);
  /// Whether launches use programmatic stream serialization (sm_90+, a
  /// driver with cuLaunchKernelEx, QCC_CUDA_PDL not 0).
  bool programmaticLaunch() const { return programmatic; }
  /// Waits for the stream; a failed kernel surfaces here as an error.
  void synchronize(const std::string &what);

  /// CUDA graphs: capture the launches made between begin and end on the
  /// stream, then replay them.
  using Graph = CudaApi::CUgraphExec;
  void beginCapture();
  Graph endCapture();
  void replay(Graph g);
  void destroy(Graph g);

  /// Elapsed milliseconds between two points on the stream (events), for
  /// benchmarks: mark() returns an opaque event index.
  int mark();
  float elapsedMs(int from, int to);
  /// Destroys every mark's event (their indices become invalid).
  void clearMarks();

private:
  std::shared_ptr<CudaDriver> drv;
  CudaDevice dev;
  CudaApi::CUcontext ctx = nullptr;
  CudaApi::CUstream stream = nullptr;
  CudaApi::CUstream copyStream = nullptr; // created on first use
  CudaApi::CUstream copyStreamOnce();
  std::map<void *, size_t> pinnedSizes;
  size_t pinnedInUse = 0;
  std::vector<void *> events; // CUevent
  std::map<DevicePtr, size_t> sizes; // of the live allocations
  size_t inUse = 0, peak = 0, limit = 0;
  bool programmatic = false;
  Evictor evictor;
  [[noreturn]] void fail(const std::string &what, int result) const;
  void check(int result, const std::string &what) const {
    if (result != 0)
      fail(what, result);
  }
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_CUDACONTEXT_H
