//===- CudaDriver.cpp - the CUDA driver API, loaded with dlopen -----------===//
#include "runtime/cuda/CudaDriver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

using namespace qcc::rt;

namespace {
// CUdevice_attribute values from cuda.h (stable across driver versions).
constexpr int kComputeCapabilityMajor = 75;
constexpr int kComputeCapabilityMinor = 76;
} // namespace

std::unique_ptr<CudaDriver> CudaDriver::load(std::string &why) {
  // QCC_CUDA_DRIVER overrides the library (tests point it at a missing file).
  const char *name = std::getenv("QCC_CUDA_DRIVER");
  if (!name)
    name = "libcuda.so.1";
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    why = std::string("no CUDA driver (") + name + " not found)";
    return nullptr;
  }
  std::unique_ptr<CudaDriver> d(new CudaDriver());
  d->handle = h;
  CudaApi &f = d->fns;
  // The versioned names are what the driver exports for the unversioned
  // macros of cuda.h (CUDA 12/13).
  struct Symbol {
    void **fn;
    const char *name;
  };
#define QCC_SYM(field, name) {reinterpret_cast<void **>(&f.field), name}
  const Symbol symbols[] = {
      QCC_SYM(cuInit, "cuInit"),
      QCC_SYM(cuDriverGetVersion, "cuDriverGetVersion"),
      QCC_SYM(cuDeviceGetCount, "cuDeviceGetCount"),
      QCC_SYM(cuDeviceGet, "cuDeviceGet"),
      QCC_SYM(cuDeviceGetName, "cuDeviceGetName"),
      QCC_SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
      QCC_SYM(cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
      QCC_SYM(cuGetErrorString, "cuGetErrorString"),
      QCC_SYM(cuGetErrorName, "cuGetErrorName"),
      QCC_SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
      QCC_SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
      QCC_SYM(cuCtxSetCurrent, "cuCtxSetCurrent"),
      QCC_SYM(cuStreamCreate, "cuStreamCreate"),
      QCC_SYM(cuStreamDestroy, "cuStreamDestroy_v2"),
      QCC_SYM(cuStreamSynchronize, "cuStreamSynchronize"),
      QCC_SYM(cuStreamWaitEvent, "cuStreamWaitEvent"),
      QCC_SYM(cuMemAlloc, "cuMemAlloc_v2"),
      QCC_SYM(cuMemFree, "cuMemFree_v2"),
      QCC_SYM(cuMemAllocHost, "cuMemAllocHost_v2"),
      QCC_SYM(cuMemFreeHost, "cuMemFreeHost"),
      QCC_SYM(cuMemGetInfo, "cuMemGetInfo_v2"),
      QCC_SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
      QCC_SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
      QCC_SYM(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
      QCC_SYM(cuMemsetD8Async, "cuMemsetD8Async"),
      QCC_SYM(cuMemcpy2DAsync, "cuMemcpy2DAsync_v2"),
      QCC_SYM(cuModuleLoadDataEx, "cuModuleLoadDataEx"),
      QCC_SYM(cuModuleUnload, "cuModuleUnload"),
      QCC_SYM(cuModuleGetFunction, "cuModuleGetFunction"),
      QCC_SYM(cuFuncSetAttribute, "cuFuncSetAttribute"),
      QCC_SYM(cuLaunchKernel, "cuLaunchKernel"),
      QCC_SYM(cuStreamBeginCapture, "cuStreamBeginCapture_v2"),
      QCC_SYM(cuStreamEndCapture, "cuStreamEndCapture"),
      QCC_SYM(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
      QCC_SYM(cuGraphLaunch, "cuGraphLaunch"),
      QCC_SYM(cuGraphExecDestroy, "cuGraphExecDestroy"),
      QCC_SYM(cuGraphDestroy, "cuGraphDestroy"),
      QCC_SYM(cuEventCreate, "cuEventCreate"),
      QCC_SYM(cuEventRecord, "cuEventRecord"),
      QCC_SYM(cuEventSynchronize, "cuEventSynchronize"),
      QCC_SYM(cuEventElapsedTime, "cuEventElapsedTime_v2"),
      QCC_SYM(cuEventDestroy, "cuEventDestroy_v2"),
  };
#undef QCC_SYM
  for (const Symbol &s : symbols) {
    *s.fn = dlsym(h, s.name);
    // Drivers before CUDA 12.x export only the unversioned event timer.
    if (!*s.fn && std::string(s.name) == "cuEventElapsedTime_v2")
      *s.fn = dlsym(h, "cuEventElapsedTime");
    if (!*s.fn) {
      why = std::string("the CUDA driver ") + name + " lacks " + s.name;
      return nullptr;
    }
  }
  // Optional entry points: the runtime works without them.
  f.cuLaunchKernelEx = reinterpret_cast<decltype(f.cuLaunchKernelEx)>(
      dlsym(h, "cuLaunchKernelEx"));
  if (int r = f.cuInit(0)) {
    why = "the CUDA driver failed to initialize: " + d->errorString(r);
    return nullptr;
  }
  f.cuDriverGetVersion(&d->version);
  int count = 0;
  if (f.cuDeviceGetCount(&count) || count == 0) {
    why = "the CUDA driver found no GPU";
    return nullptr;
  }
  for (int i = 0; i < count; ++i) {
    CudaDevice dev;
    int handle = 0;
    f.cuDeviceGet(&handle, i);
    char buf[256] = {};
    f.cuDeviceGetName(buf, sizeof buf, handle);
    dev.ordinal = i;
    dev.name = buf;
    f.cuDeviceGetAttribute(&dev.major, kComputeCapabilityMajor, handle);
    f.cuDeviceGetAttribute(&dev.minor, kComputeCapabilityMinor, handle);
    f.cuDeviceTotalMem(&dev.totalMemory, handle);
    d->devs.push_back(dev);
  }
  return d;
}

CudaDriver::~CudaDriver() {
  if (handle)
    dlclose(handle);
}

std::string CudaDriver::errorString(int result) const {
  const char *n = nullptr, *s = nullptr;
  std::string out = "CUDA error";
  if (fns.cuGetErrorName && fns.cuGetErrorName(result, &n) == 0 && n)
    out = n;
  out += " (" + std::to_string(result) + ")";
  if (fns.cuGetErrorString && fns.cuGetErrorString(result, &s) == 0 && s)
    out += std::string(": ") + s;
  return out;
}
