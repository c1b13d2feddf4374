//===- moe.cuh - mixture-of-experts MLPs over the routed tokens only -------===//
//
// NVRTC include name "qcc/moe.cuh". Semantics: QccOps.td `qcc.moe`: for each
// token t < T and route j < k with expert e = expert_ids[t, j],
//   h     = act(x_t . gate[e]^T) * (x_t . up[e]^T)   (no gate: act(x_t . up[e]^T))
//   out_t = sum_j gates[t, j] * (h . down[e]^T)
// x [T, H], expert_ids [T, k] int64, gates [T, k], up / gate [E, I, H],
// down [E, H, I], out [T, H]; all float.
//
// Four launches (MoeLaunch<TileN, TileR, TileK, Threads>, moe_config.h):
//   1. moeRoutes: one CTA of kRouteThreads. Counting sort of the T * k routes
//      (route r = t * k + j) by expert, each expert's in increasing r:
//      offsets[e] .. offsets[e + 1] index list[]. An id outside [0, E) is
//      in no list and sets *error_flag to kDeviceErrorExpertId.
//   2. moeGroupedGemm (up): grid (ceil(I / TileN), E, ceil(T k / TileR)); CTA
//      (f, e, c) computes features [f TileN, +TileN) of routes
//      list[offsets[e] + c TileR, +TileR) of expert e (a CTA past the
//      expert's routes returns at once: only routed experts' weights are
//      read, once per TileR routes): h[r, :] above, into the workspace h
//      [T k, I].
//   3. moeGroupedGemm (down): the same over h's rows and down: y [T k, H],
//      y[r] = h[r] . down[e]^T.
//   4. moeCombine: out[t, n] = sum_j gates[t, j] * y[t k + j, n], j in
//      increasing order (a route with a bad id adds nothing).
// Each GEMM step stages TileR rows of A and TileN rows of W (K-slices of
// TileK floats, zero-filled past the edges) in shared memory; thread i
// accumulates route i % TileR against features i / TileR + m (Threads /
// TileR) in float, in increasing K (SIMT; the CPU kernel sums in another
// order, so they agree to rounding).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_MOE_CUH
#define QCC_KERNELS_MOE_CUH

#include "qcc/common.cuh"
#include "qcc/moe_config.h"

namespace qcc {

/// qcc.moe's activations, as the CPU kernel applies them.
enum class MoeActivation { Silu, Gelu, GeluTanh, Relu };

template <MoeActivation Act> QCC_DEVICE float moeActivate(float x) {
  switch (Act) {
  case MoeActivation::Silu: return numerics::silu(x);
  case MoeActivation::Gelu: return numerics::geluErf(x);
  case MoeActivation::GeluTanh: return numerics::geluTanh(x);
  case MoeActivation::Relu: return numerics::relu(x);
  }
  return x;
}

template <typename Cfg>
QCC_DEVICE void moeRoutes(const long long *__restrict__ expert_ids, int routes, int experts,
                          int *__restrict__ offsets, int *__restrict__ list,
                          int *error_flag) {
  const int tid = threadIdx.x;
  // Counts of the experts this thread owns (e = tid, tid + Threads, ...).
  for (int e = tid; e < experts; e += Cfg::kRouteThreads) {
    int n = 0;
    for (int r = 0; r < routes; ++r) n += expert_ids[r] == e;
    offsets[e + 1] = n;
  }
  if (tid == 0) {
    for (int r = 0; r < routes; ++r)
      if ((expert_ids[r] < 0 || expert_ids[r] >= experts) && error_flag != nullptr)
        atomicMax(error_flag, kDeviceErrorExpertId);
  }
  __syncthreads();
  if (tid == 0) { // prefix sums (E is at most a few hundred)
    offsets[0] = 0;
    for (int e = 0; e < experts; ++e) offsets[e + 1] += offsets[e];
  }
  __syncthreads();
  for (int e = tid; e < experts; e += Cfg::kRouteThreads) {
    int at = offsets[e];
    for (int r = 0; r < routes; ++r)
      if (expert_ids[r] == e) list[at++] = r;
  }
}

/// Step 2 (Gated / Act; A = x, a route's row its token's: ARowOfToken) and
/// step 3 (A = h, a route's own row): out[r, n] for the CTA's tile.
/// W (and G) [E, N, K].
template <typename Cfg, bool Gated, MoeActivation Act, bool ARowOfToken, bool Activate>
QCC_DEVICE void moeGroupedGemm(const float *__restrict__ a, const float *__restrict__ w,
                               const float *__restrict__ g, const int *__restrict__ offsets,
                               const int *__restrict__ list, int k, int N, int K,
                               float *__restrict__ out) {
  constexpr int TN = Cfg::kTileN, TR = Cfg::kTileR, TK = Cfg::kTileK, S = Cfg::kStride;
  constexpr int Threads = Cfg::kBlockThreads, RowStride = Cfg::kRowStride;
  constexpr int Rows = Cfg::kRowsPerThread;
  __shared__ float As[TR * S];
  __shared__ float Ws[TN * S];
  __shared__ float Gs[Gated ? TN * S : 1];
  const int e = blockIdx.y;
  const int begin = offsets[e], count = offsets[e + 1] - begin;
  const int r0 = blockIdx.z * TR;
  if (r0 >= count) return; // CTA-uniform: the expert has fewer routes
  const int n0 = blockIdx.x * TN;
  const int tid = threadIdx.x, rr = tid % TR, nn = tid / TR;
  const float *we = w + (long long)e * N * K;
  const float *ge = Gated ? g + (long long)e * N * K : nullptr;
  float acc[Rows], accG[Rows];
  QCC_UNROLL
  for (int i = 0; i < Rows; ++i) acc[i] = accG[i] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TK) {
    for (int i = tid; i < TR * TK; i += Threads) {
      const int r = i / TK, kk = i % TK;
      float v = 0.0f;
      if (r0 + r < count && k0 + kk < K) {
        const int route = list[begin + r0 + r];
        const long long row = ARowOfToken ? route / k : route;
        v = a[row * K + k0 + kk];
      }
      As[r * S + kk] = v;
    }
    for (int i = tid; i < TN * TK; i += Threads) {
      const int n = i / TK, kk = i % TK;
      const bool in = n0 + n < N && k0 + kk < K;
      const long long at = (long long)(n0 + n) * K + k0 + kk;
      Ws[n * S + kk] = in ? we[at] : 0.0f;
      if (Gated) Gs[n * S + kk] = in ? ge[at] : 0.0f;
    }
    __syncthreads();
    for (int kk = 0; kk < TK; ++kk) {
      const float x = As[rr * S + kk];
      QCC_UNROLL
      for (int i = 0; i < Rows; ++i) {
        acc[i] += x * Ws[(nn + i * RowStride) * S + kk];
        if (Gated) accG[i] += x * Gs[(nn + i * RowStride) * S + kk];
      }
    }
    __syncthreads();
  }
  if (r0 + rr >= count) return;
  const int route = list[begin + r0 + rr];
  QCC_UNROLL
  for (int i = 0; i < Rows; ++i) {
    const int n = n0 + nn + i * RowStride;
    if (n >= N) continue;
    float v = acc[i];
    if (Activate) v = Gated ? numerics::fmul(moeActivate<Act>(accG[i]), v) : moeActivate<Act>(v);
    out[(long long)route * N + n] = v;
  }
}

template <typename Cfg>
QCC_DEVICE void moeCombine(const float *__restrict__ y, const float *__restrict__ gates,
                           const long long *__restrict__ expert_ids, int experts, int tokens,
                           int k, int H, float *__restrict__ out) {
  const long long i = (long long)blockIdx.x * Cfg::kCombineThreads + threadIdx.x;
  if (i >= (long long)tokens * H) return;
  const long long t = i / H, n = i % H;
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) {
    const long long r = t * k + j;
    if (expert_ids[r] < 0 || expert_ids[r] >= experts) continue;
    sum += gates[r] * y[r * H + n];
  }
  out[i] = sum;
}

} // namespace qcc

#endif // QCC_KERNELS_MOE_CUH
