//===- quantize.cuh - dynamic int8 quantization of rows (qcc.quantize) ---===//
//
// docs/QUANTIZATION.md section 3, bit for bit with the CPU reference (both
// use numerics.h):
//   symmetric:  scale = absmax / 127 (1 if 0), q = clamp(rhe(x / scale), -127, 127), zp = 0
//   asymmetric: mn = min(0, min x), mx = max(0, max x), scale = (mx - mn) / 255
//               (1 if 0), zp = rhe(-mn / scale) - 128,
//               q = clamp(rhe(x / scale) + zp, -128, 127) (NaN: rhe(...) = 0)
// max/min are order independent (NaN ignored as the CPU's comparisons do), so
// the block reduction gives the CPU's scale exactly.
//
// One CTA per row (rows strided by gridDim.x): per_token quantization is
// M rows of K; per_tensor dynamic quantization is one row of M * K (one CTA).
// This is also the "requantize" half of a GEMM whose next consumer needs a
// per-row dynamic scale: the GEMM stores f32 (StoreF32), this kernel follows.
//
//   extern "C" __global__ void __launch_bounds__(256)
//   qcc_k9(const float *x, qcc::int8_t *q, float *s, qcc::int32_t *z, int M, int K) {
//     qcc::quantize_rows<256, false>(x, q, s, z, M, K);
//   }
//
// Launch: blockDim = (Threads), Threads a multiple of 32 (<= 1024), gridDim =
// (min(M, any limit)), no dynamic shared memory. z may be nullptr (symmetric).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_QUANTIZE_CUH
#define QCC_KERNELS_QUANTIZE_CUH

#include "qcc/common.cuh"

namespace qcc {

/// Block-wide max (Max) or min of v; every thread gets the result.
template <int Threads, bool Max> QCC_DEVICE float block_minmax(float v) {
  static_assert(Threads % 32 == 0 && Threads <= 1024, "");
  __shared__ float qcc_quant_red[32];
  v = Max ? warpMax(v) : warpMin(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads(); // previous use of qcc_quant_red is finished
  if (lane == 0)
    qcc_quant_red[warp] = v;
  __syncthreads();
  v = qcc_quant_red[0];
#pragma unroll 1
  for (int w = 1; w < Threads / 32; ++w)
    v = Max ? fmaxf(v, qcc_quant_red[w]) : fminf(v, qcc_quant_red[w]);
  return v;
}

/// Skip (OutlierColumns<c...>): the columns of each row read as 0 (the
/// LLM.int8()-style fallback); none by default.
template <int Threads, bool Asymmetric, class Skip = OutlierColumns<>, class T>
QCC_DEVICE void quantize_rows(const T *X, int8_t *Q, float *S, int32_t *Z,
                              int M, int K) {
  auto at = [](const T *x, int k) {
    return Skip::kCount > 0 && Skip::contains(k) ? 0.0f : toFloat(x[k]);
  };
  for (int m = blockIdx.x; m < M; m += gridDim.x) {
    const T *x = X + static_cast<int64_t>(m) * K;
    int8_t *q = Q + static_cast<int64_t>(m) * K;
    if (!Asymmetric) {
      float amax = 0.0f;
      for (int k = threadIdx.x; k < K; k += Threads)
        amax = fmaxf(amax, fabsf(at(x, k)));
      amax = block_minmax<Threads, true>(amax);
      const float scale = numerics::symmetricScale(amax);
      for (int k = threadIdx.x; k < K; k += Threads)
        q[k] = numerics::quantizeSymmetric(at(x, k), scale);
      if (threadIdx.x == 0) {
        S[m] = scale;
        if (Z)
          Z[m] = 0;
      }
    } else {
      float mn = 0.0f, mx = 0.0f;
      for (int k = threadIdx.x; k < K; k += Threads) {
        float v = at(x, k);
        mn = fminf(mn, v);
        mx = fmaxf(mx, v);
      }
      mn = block_minmax<Threads, false>(mn);
      mx = block_minmax<Threads, true>(mx);
      const float scale = numerics::asymmetricScale(mn, mx);
      const int32_t zp = numerics::asymmetricZeroPoint(mn, scale);
      for (int k = threadIdx.x; k < K; k += Threads)
        q[k] = numerics::quantizeAsymmetric(at(x, k), scale, zp);
      if (threadIdx.x == 0) {
        S[m] = scale;
        if (Z)
          Z[m] = zp;
      }
    }
  }
}

} // namespace qcc

#endif // QCC_KERNELS_QUANTIZE_CUH
