//===- quantize_static.cuh - per-tensor static int8 quantize ----------------===//
//
// NVRTC include name "qcc/quantize_static.cuh". docs/QUANTIZATION.md section 3,
// `qcc.quantize {granularity = "per_tensor", scale = S}` (O3): the scale is the
// calibration attribute (finite, > 0), q = clamp(rhe(x / S), -127, 127)
// (numerics::quantizeSymmetric, the CPU's own), zp = 0.
// Dynamic per-token / per-tensor quantization is qcc/quantize.cuh
// (quantize_rows).
//
// Launch (QuantizeStaticLaunch<BlockThreads, ElemsPerThread>):
//   grid = ceil(n / (BlockThreads * ElemsPerThread)), block = BlockThreads,
//   dynamic smem = 0. scale_out[0] / zero_point_out[0] (if non-null) are
//   written by thread 0 of CTA 0. InT: float or __half.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_QUANTIZE_STATIC_CUH
#define QCC_KERNELS_QUANTIZE_STATIC_CUH

#include "qcc/common.cuh"

namespace qcc {

template <int BlockThreads, int ElemsPerThread> struct QuantizeStaticLaunch {
  static constexpr int kBlockThreads = BlockThreads;
  static constexpr int kDynamicSmemBytes = 0;
  __host__ __device__ static constexpr long long gridX(long long n) {
    return (n + (long long)BlockThreads * ElemsPerThread - 1) /
           ((long long)BlockThreads * ElemsPerThread);
  }
};

template <int BlockThreads, int ElemsPerThread, typename InT>
__device__ __forceinline__ void
quantizePerTensorStaticBody(const InT *__restrict__ in, signed char *__restrict__ q,
                            long long n, float scale, float *__restrict__ scale_out,
                            int *__restrict__ zero_point_out) {
  const long long base =
      (long long)blockIdx.x * BlockThreads * ElemsPerThread + threadIdx.x;
#pragma unroll
  for (int e = 0; e < ElemsPerThread; ++e) {
    const long long i = base + (long long)e * BlockThreads;
    if (i < n) q[i] = numerics::quantizeSymmetric(toFloat(in[i]), scale);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    if (scale_out != nullptr) scale_out[0] = scale;
    if (zero_point_out != nullptr) zero_point_out[0] = 0;
  }
}

template <int BlockThreads, int ElemsPerThread, typename InT>
__global__ void __launch_bounds__(BlockThreads)
quantizePerTensorStatic(const InT *__restrict__ in, signed char *__restrict__ q,
                        long long n, float scale, float *__restrict__ scale_out,
                        int *__restrict__ zero_point_out) {
  quantizePerTensorStaticBody<BlockThreads, ElemsPerThread, InT>(in, q, n, scale,
                                                                 scale_out, zero_point_out);
}

} // namespace qcc

#endif // QCC_KERNELS_QUANTIZE_STATIC_CUH
