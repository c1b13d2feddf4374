//===- kutil.cuh - small device helpers shared by the row/attention kernels -===//
//
// NVRTC include name "qcc/kutil.cuh". No standard library: what is needed is
// defined here, in namespace qcc::kutil (kept apart from common.cuh's names).
//
//   - float conversions for float / __half / signed char element types
//   - warp and block reductions (sum, max) with shuffles
//   - the symmetric int8 element rule of docs/QUANTIZATION.md:
//       q = clamp(round_half_even(x / scale), -127, 127)   (NaN -> 0)
//     computed with __fdiv_rn and __float2int_rn so it equals the CPU's
//     qcc::rt::quantizeSymmetric bit for bit.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_KUTIL_CUH
#define QCC_KERNELS_KUTIL_CUH

#include <cuda_fp16.h>

namespace qcc {
namespace kutil {

typedef long long i64;

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__host__ __device__ constexpr int ceilDiv(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int imin(int a, int b) { return a < b ? a : b; }
__host__ __device__ constexpr int imax(int a, int b) { return a > b ? a : b; }

template <typename A, typename B> struct IsSame { static constexpr bool value = false; };
template <typename A> struct IsSame<A, A> { static constexpr bool value = true; };

// ---- element conversions --------------------------------------------------
__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ float toFloat(signed char v) { return (float)v; }

template <typename T> struct FromFloat;
template <> struct FromFloat<float> {
  static __device__ __forceinline__ float cvt(float v) { return v; }
};
template <> struct FromFloat<__half> {
  static __device__ __forceinline__ __half cvt(float v) { return __float2half_rn(v); }
};
template <typename T> __device__ __forceinline__ T fromFloat(float v) {
  return FromFloat<T>::cvt(v);
}

// ---- int8 symmetric rule ---------------------------------------------------
// __float2int_rn rounds half to even, gives 0 for NaN and saturates, so the
// clamp afterwards matches clamp(round_half_even(v), -127, 127).
__device__ __forceinline__ int roundClampI(float v, int lo, int hi) {
  int r = __float2int_rn(v);
  return r < lo ? lo : (r > hi ? hi : r);
}
__device__ __forceinline__ signed char quantizeSymmetric(float x, float scale) {
  return (signed char)roundClampI(__fdiv_rn(x, scale), -127, 127);
}
// scale = absmax / 127 (1 when absmax is 0), as the CPU computes it.
__device__ __forceinline__ float symmetricScale(float absmax) {
  float s = __fdiv_rn(absmax, 127.0f);
  return s == 0.0f ? 1.0f : s;
}

// ---- reductions ------------------------------------------------------------
__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
__device__ __forceinline__ float warpMin(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fminf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

enum class ReduceOp { Sum, Max, Min };

template <ReduceOp Op> __device__ __forceinline__ float warpReduce(float v) {
  if (Op == ReduceOp::Sum) return warpSum(v);
  if (Op == ReduceOp::Max) return warpMax(v);
  return warpMin(v);
}

// Block-wide reduction; every thread gets the result. `scratch` holds at least
// BlockThreads / 32 floats of shared memory. Contains two __syncthreads, so it
// can be called repeatedly with the same scratch.
template <int BlockThreads, ReduceOp Op>
__device__ __forceinline__ float blockReduce(float v, float *scratch) {
  static_assert(BlockThreads % kWarpSize == 0 && BlockThreads <= 1024,
                "BlockThreads must be a multiple of 32, at most 1024");
  constexpr int kWarps = BlockThreads / kWarpSize;
  v = warpReduce<Op>(v);
  if (kWarps == 1) return v;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  __syncthreads(); // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float identity = Op == ReduceOp::Sum ? 0.0f
                   : (Op == ReduceOp::Max ? __int_as_float(0xff800000)
                                          : __int_as_float(0x7f800000));
  float r = lane < kWarps ? scratch[lane] : identity;
  return warpReduce<Op>(r);
}

__device__ __forceinline__ float negInf() { return __int_as_float(0xff800000); }

} // namespace kutil
} // namespace qcc

#endif // QCC_KERNELS_KUTIL_CUH
