//===- CudaDriver.h - the CUDA driver API, loaded with dlopen ---*- C++ -*-===//
//
// Nothing links libcuda: every binary runs on machines without a GPU. The
// driver is opened at run time; when it is missing, or no device is present,
// `CudaDriver::load` says why in one line and the runtime uses the CPU
// backend.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CUDADRIVER_H
#define QCC_RUNTIME_CUDADRIVER_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace qcc::rt {

/// The subset of the driver API the runtime uses, with the driver's own ABI
/// (int result codes, opaque handles).
struct CudaApi {
  using CUresult = int;
  using CUdevice = int;
  using CUcontext = struct CUctx_st *;
  using CUmodule = struct CUmod_st *;
  using CUfunction = struct CUfunc_st *;
  using CUstream = struct CUstream_st *;
  using CUevent = struct CUevent_st *;
  using CUgraph = struct CUgraph_st *;
  using CUgraphExec = struct CUgraphExec_st *;
  using CUdeviceptr = unsigned long long;
  /// CUDA_MEMCPY2D (cuda.h's layout; memory types: 2 = device).
  struct Memcpy2D {
    size_t srcXInBytes, srcY;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
  };

  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDriverGetVersion)(int *);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  // Contexts and streams.
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuStreamCreate)(CUstream *, unsigned int);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned int);
  // Memory.
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  /// Page-locked host memory: copies from it run asynchronously.
  CUresult (*cuMemAllocHost)(void **, size_t);
  CUresult (*cuMemFreeHost)(void *);
  CUresult (*cuMemGetInfo)(size_t *, size_t *);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuMemcpy2DAsync)(const Memcpy2D *, CUstream);
  // Modules and launches.
  CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned int,
                                 int *, void **);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **, void **);
  /// CUlaunchAttribute and CUlaunchConfig (cuda.h's layout): an attribute
  /// is an 8-byte id slot and a 64-byte value union.
  struct LaunchAttribute {
    int id;
    char pad[4];
    union {
      char bytes[64];
      int programmaticStreamSerializationAllowed;
    } value;
  };
  static_assert(sizeof(LaunchAttribute) == 72, "cuda.h's CUlaunchAttribute");
  struct LaunchConfig {
    unsigned gridDimX, gridDimY, gridDimZ;
    unsigned blockDimX, blockDimY, blockDimZ;
    unsigned sharedMemBytes;
    CUstream hStream;
    LaunchAttribute *attrs;
    unsigned numAttrs;
  };
  /// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION.
  static constexpr int kLaunchAttrProgrammaticSerialization = 6;
  /// Optional (CUDA 12.0+): nullptr when the driver lacks it.
  CUresult (*cuLaunchKernelEx)(const LaunchConfig *, CUfunction, void **,
                               void **);
  // Graphs and events.
  CUresult (*cuStreamBeginCapture)(CUstream, int);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph,
                                          unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
  CUresult (*cuEventCreate)(CUevent *, unsigned int);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
};

struct CudaDevice {
  int ordinal = 0;
  std::string name;
  int major = 0, minor = 0; // compute capability
  size_t totalMemory = 0;
  std::string arch() const { // "sm_90"
    return "sm_" + std::to_string(major) + std::to_string(minor);
  }
};

class CudaDriver {
public:
  /// Opens libcuda and lists the devices; nullptr with `why` set when there
  /// is no driver or no device.
  static std::unique_ptr<CudaDriver> load(std::string &why);
  ~CudaDriver();

  int driverVersion() const { return version; }
  const std::vector<CudaDevice> &devices() const { return devs; }
  const CudaApi &api() const { return fns; }
  /// "CUDA_ERROR_...: description" for a result code.
  std::string errorString(int result) const;

private:
  CudaDriver() = default;
  void *handle = nullptr;
  CudaApi fns{};
  int version = 0;
  std::vector<CudaDevice> devs;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_CUDADRIVER_H
