//===- gemv_w4.cuh - W4A16: f16 activations x packed int4 weights --------===//
//
//   acc[m, n] = sum_j A[m, j] * w[n, j]                   f32 accumulation
//   w[n, j] = q[n, j] * s[n, j / G], or with offsets u[n, j] * s[n, j / G] +
//   o[n, j / G]
//   A: f16 activations [M, K] row-major in the weight's stored column order
//      (act-order: the caller passes x[:, perm]); B: the packed int4 weight
//      [N, K/2] bytes (format/Int4.h: low nibble = even k; two's complement
//      q, or unsigned u with offsets); S: f16 scales [N, K/G]; O: f16
//      offsets [N, K/G] (the asymmetric form) or null (symmetric). The int4
//      are dequantized in registers (qcc/int4.h) and never stored; the
//      epilogue chain takes the f32 accumulator, e.g.
//      qcc::Chain<qcc::AddBias<>, qcc::StoreF16>.
//
// Each warp computes ColsPerWarp output channels for MaxM rows of A; a lane
// reads 16 bytes (32 stored columns) of a weight row per step, their scale
// and 32 f16 of each row of A. Decode (M <= MaxM) launches one row of
// blocks; prefill tiles M over gridDim.y (weights re-read per tile from L2;
// CUDA cores, no tensor cores: a first version).
//
// Launch: blockDim = (32 * Warps), gridDim = (ceil(N / (Warps *
// ColsPerWarp)), ceil(M / MaxM)), no dynamic shared memory. Requirements:
// A, B 16-byte aligned, K % 32 == 0, G % 32 == 0 (a lane's 32 columns share
// one scale), G | K; M, N arbitrary.
//
//   typedef qcc::GemvW4Config<4, 4, 2> Cfg;   // MaxM, Warps, ColsPerWarp
//   qcc::gemv_w4<Cfg>(x, w, s, o_or_nullptr, M, N, K, G, epi);
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_GEMV_W4_CUH
#define QCC_KERNELS_GEMV_W4_CUH

#include "qcc/gemm_core.cuh"
#include "qcc/gemm_f16.cuh" // cast_f32_to_f16: f32 activations run as f16
#include "qcc/int4.h"

namespace qcc {

/// An epilogue seen from a tile of rows starting at `m0` (prefill's M tiles).
template <class Epilogue> struct RowOffset {
  static constexpr bool kIntInput = Epilogue::kIntInput;
  const Epilogue &epi;
  int m0;
  template <class V> QCC_DEVICE void visit(V v, int m, int n) const {
    epi.visit(v, m0 + m, n);
  }
};

template <int MaxM, int Warps, int ColsPerWarp, class Epilogue>
QCC_DEVICE void gemv_w4(const __half *A, const int8_t *B, const __half *S,
                        const __half *O, int M, int N, int K, int G,
                        Epilogue epi) {
  static_assert(!Epilogue::kIntInput,
                "gemv_w4: the epilogue takes the f32 accumulator");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n0 = (blockIdx.x * Warps + warp) * ColsPerWarp;
  const int m0 = blockIdx.y * MaxM;
  const int rows = M - m0 < MaxM ? M - m0 : MaxM;
  const int KB = K / 2, groups = K / G;
  const char *gB = reinterpret_cast<const char *>(B);

  float acc[ColsPerWarp][MaxM];
#pragma unroll
  for (int c = 0; c < ColsPerWarp; ++c)
#pragma unroll
    for (int m = 0; m < MaxM; ++m)
      acc[c][m] = 0.f;

  // Lane step: 16 bytes of packed weight = 32 stored columns from k0.
  for (int kb = lane * 16; kb < KB; kb += 32 * 16) {
    const int k0 = kb * 2;
    int4 w[ColsPerWarp];
    float s[ColsPerWarp], o[ColsPerWarp];
#pragma unroll
    for (int c = 0; c < ColsPerWarp; ++c) {
      const bool in = n0 + c < N;
      const int64_t g = static_cast<int64_t>(n0 + c) * groups + k0 / G;
      w[c] =
          in ? detail::ld_stream_16(gB + static_cast<int64_t>(n0 + c) * KB + kb)
             : make_int4(0, 0, 0, 0);
      s[c] = in ? __half2float(S[g]) : 0.f;
      o[c] = in && O ? __half2float(O[g]) : 0.f;
    }
#pragma unroll
    for (int m = 0; m < MaxM; ++m)
      if (m < rows) {
        const __half *a = A + static_cast<int64_t>(m0 + m) * K + k0;
        float x[32];
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          int4 h = __ldg(reinterpret_cast<const int4 *>(a + 8 * v));
          const __half2 *h2 = reinterpret_cast<const __half2 *>(&h);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float2 f = __half22float2(h2[e]);
            x[8 * v + 2 * e] = f.x;
            x[8 * v + 2 * e + 1] = f.y;
          }
        }
#pragma unroll
        for (int c = 0; c < ColsPerWarp; ++c) {
          const unsigned words[4] = {(unsigned)w[c].x, (unsigned)w[c].y,
                                     (unsigned)w[c].z, (unsigned)w[c].w};
#pragma unroll
          for (int v = 0; v < 4; ++v) {
            float q[nibbles::kPerWord];
            if (O) // uniform over the grid
              nibbles::dequant8Offset(words[v], s[c], o[c], q);
            else
              nibbles::dequant8(words[v], s[c], q);
#pragma unroll
            for (int i = 0; i < nibbles::kPerWord; ++i)
              acc[c][m] = fmaf(x[8 * v + i], q[i], acc[c][m]);
          }
        }
      }
  }
  gemv_reduce_visit<ColsPerWarp, MaxM>(acc, lane, rows, N, n0,
                                       RowOffset<Epilogue>{epi, m0});
}

/// `Cfg` (a GemvW4Config) over x, the packed weight, its scales and its
/// offsets (null: symmetric).
template <class Cfg, class Epilogue>
QCC_DEVICE void gemv_w4(const __half *A, const int8_t *B, const __half *S,
                        const __half *O, int M, int N, int K, int G,
                        Epilogue epi) {
  gemv_w4<Cfg::kMaxM, Cfg::kWarps, Cfg::kColsPerWarp>(A, B, S, O, M, N, K, G,
                                                      epi);
}

} // namespace qcc

#endif // QCC_KERNELS_GEMV_W4_CUH
