//===- host_device.h - QCC_HOST_DEVICE for headers shared with the host --===//
//
// __host__ __device__ where CUDA compiles, nothing elsewhere: the plain C++
// headers shared with the device (format/device/numerics.h, the
// codegen/kernels/*_config.h) are compiled by NVRTC (as "qcc/<file>") and by
// the host compiler (as "format/device/<file>", "codegen/kernels/<file>").
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_DEVICE_HOST_DEVICE_H
#define QCC_FORMAT_DEVICE_HOST_DEVICE_H

// QCC_UNROLL: `#pragma unroll` for the CUDA compilers; the host compiler
// does not know the pragma (-Wunknown-pragmas) and unrolls by itself.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define QCC_HOST_DEVICE __host__ __device__
#define QCC_UNROLL _Pragma("unroll")
#else
#define QCC_HOST_DEVICE
#define QCC_UNROLL
#endif

namespace qcc {
/// What a kernel that saw bad input writes to the runtime's error flag
/// (atomicMax: the larger code wins); the runtime names it after the call.
enum : int {
  kDeviceErrorTokenId = 1,  ///< embedding: a token id outside the vocabulary
  kDeviceErrorExpertId = 2, ///< moe: an expert id outside [0, experts)
};
} // namespace qcc

#endif // QCC_FORMAT_DEVICE_HOST_DEVICE_H
