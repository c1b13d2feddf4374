//===- common.cuh - host stand-in for codegen/kernels/common.cuh ---------===//
//
// For tests that run a device template on the host (CudaEmulation.h): a
// template that includes "qcc/common.cuh" finds this file first (this
// folder is on the test's include path) and gets the CUDA built-ins it uses
// as host code: threadIdx / blockIdx / gridDim per host thread, __shared__
// as a static (one CTA runs at a time), __syncthreads as a barrier over the
// CTA's threads, atomicMax on an int, negInf, __shfl_xor_sync and warpMax
// (router.cuh). Nothing else of common.cuh: a template that needs more does
// not compile here (add it, with care).
//
// __shfl_xor_sync exchanges through a slot per thread between two CTA-wide
// barriers: right for templates whose warps all shuffle in step, or have
// returned (a returned thread leaves the barrier; router.cuh's warps run the
// same loops).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_TEST_CUDA_EMULATION_COMMON_CUH
#define QCC_TEST_CUDA_EMULATION_COMMON_CUH

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "format/device/numerics.h"

namespace qcc::emu {
struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local Dim3 threadIndex, blockIndex;
inline Dim3 gridSize, blockSize;
inline std::barrier<> *ctaBarrier = nullptr;
inline uint64_t shuffleSlots[1024];
} // namespace qcc::emu

#define threadIdx (::qcc::emu::threadIndex)
#define blockIdx (::qcc::emu::blockIndex)
#define gridDim (::qcc::emu::gridSize)
#define blockDim (::qcc::emu::blockSize)
#define __shared__ static
#define QCC_DEVICE inline

inline void __syncthreads() { qcc::emu::ctaBarrier->arrive_and_wait(); }

template <typename T> T __shfl_xor_sync(unsigned, T v, int laneMask) {
  static_assert(sizeof(T) <= 8, "one slot per thread");
  const unsigned t = qcc::emu::threadIndex.x;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  qcc::emu::shuffleSlots[t] = bits;
  qcc::emu::ctaBarrier->arrive_and_wait();
  bits = qcc::emu::shuffleSlots[t ^ (unsigned)laneMask];
  qcc::emu::ctaBarrier->arrive_and_wait();
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

namespace qcc {
constexpr unsigned kFullMask = 0xffffffffu;
QCC_DEVICE float negInf() { return -std::numeric_limits<float>::infinity(); }
QCC_DEVICE float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
} // namespace qcc

inline int atomicMax(int *address, int value) {
  std::atomic_ref<int> a(*address);
  int old = a.load();
  while (old < value && !a.compare_exchange_weak(old, value)) {
  }
  return old;
}

#endif // QCC_TEST_CUDA_EMULATION_COMMON_CUH
