//===- common.cuh - host stand-in for codegen/kernels/common.cuh ---------===//
//
// For tests that run a device template on the host (CudaEmulation.h): a
// template that includes "qcc/common.cuh" finds this file first (this
// folder is on the test's include path) and gets the CUDA built-ins it uses
// as host code: threadIdx / blockIdx / gridDim per host thread, __shared__
// as a static (one CTA runs at a time), __syncthreads as a barrier over the
// CTA's threads, atomicMax on an int. Nothing else of common.cuh: a template
// that needs more does not compile here (add it, with care).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_TEST_CUDA_EMULATION_COMMON_CUH
#define QCC_TEST_CUDA_EMULATION_COMMON_CUH

#include <atomic>
#include <barrier>

#include "format/device/numerics.h"

namespace qcc::emu {
struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local Dim3 threadIndex, blockIndex;
inline Dim3 gridSize, blockSize;
inline std::barrier<> *ctaBarrier = nullptr;
} // namespace qcc::emu

#define threadIdx (::qcc::emu::threadIndex)
#define blockIdx (::qcc::emu::blockIndex)
#define gridDim (::qcc::emu::gridSize)
#define blockDim (::qcc::emu::blockSize)
#define __shared__ static
#define QCC_DEVICE inline

inline void __syncthreads() { qcc::emu::ctaBarrier->arrive_and_wait(); }

inline int atomicMax(int *address, int value) {
  std::atomic_ref<int> a(*address);
  int old = a.load();
  while (old < value && !a.compare_exchange_weak(old, value)) {
  }
  return old;
}

#endif // QCC_TEST_CUDA_EMULATION_COMMON_CUH
