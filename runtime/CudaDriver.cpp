//===- CudaDriver.cpp - the CUDA driver API, loaded with dlopen -----------===//
#include "runtime/CudaDriver.h"

#include <dlfcn.h>

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
  auto sym = [&](auto &fn, const char *symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
        dlsym(h, symbol));
    return fn != nullptr;
  };
  CudaApi &f = d->fns;
  const char *missing = nullptr;
  if (!sym(f.cuInit, "cuInit"))
    missing = "cuInit";
  else if (!sym(f.cuDriverGetVersion, "cuDriverGetVersion"))
    missing = "cuDriverGetVersion";
  else if (!sym(f.cuDeviceGetCount, "cuDeviceGetCount"))
    missing = "cuDeviceGetCount";
  else if (!sym(f.cuDeviceGet, "cuDeviceGet"))
    missing = "cuDeviceGet";
  else if (!sym(f.cuDeviceGetName, "cuDeviceGetName"))
    missing = "cuDeviceGetName";
  else if (!sym(f.cuDeviceGetAttribute, "cuDeviceGetAttribute"))
    missing = "cuDeviceGetAttribute";
  else if (!sym(f.cuDeviceTotalMem, "cuDeviceTotalMem_v2"))
    missing = "cuDeviceTotalMem_v2";
  else if (!sym(f.cuGetErrorString, "cuGetErrorString"))
    missing = "cuGetErrorString";
  if (missing) {
    why = std::string("the CUDA driver ") + name + " lacks " + missing;
    return nullptr;
  }
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
  const char *s = nullptr;
  if (fns.cuGetErrorString && fns.cuGetErrorString(result, &s) == 0 && s)
    return std::string(s) + " (" + std::to_string(result) + ")";
  return "CUDA error " + std::to_string(result);
}
