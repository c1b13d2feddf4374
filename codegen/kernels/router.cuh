//===- router.cuh - a mixture-of-experts router: softmax, top-k, renorm -----===//
//
// NVRTC include name "qcc/router.cuh". Semantics: the region form-kernels
// makes of a router (QccOps.td): p = softmax(logits) over the last axis,
// (gates, ids) = top_k(p, K) along it, and with Renormalize gates /=
// reduce_sum(gates) (Mixtral; Qwen-MoE's norm_topk_prob). logits [rows, E]
// f32; gates [rows, K] f32; ids [rows, K] int64.
//
// One warp per row; lane l holds experts l, l + 32, ... (PerLane of them, E
// <= 32 PerLane). The formulas are the CPU kernels' own: softmax subtracts
// the row's max, exponentiates in float (numerics::libmExp), sums in double
// and divides in double (a row of -inf becomes zeros); top_k orders by value
// (NaN first), then by lower index, and picks K in that order; the
// renormalization sums the K gates in double in pick order and divides in
// float. Only the library exp and the order of the double sum differ from
// the CPU's, so gates agree to an ulp or two and ids exactly (but at exact
// ties the rounding decides).
//
// Launch (RouterLaunch<Warps>): grid = ceil(rows / Warps), block = 32 Warps,
// dynamic smem = 0.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_ROUTER_CUH
#define QCC_KERNELS_ROUTER_CUH

#include "qcc/common.cuh"

namespace qcc {

template <int Warps> struct RouterLaunch {
  static constexpr int kBlockThreads = 32 * Warps;
  static constexpr int kDynamicSmemBytes = 0;
  QCC_HOST_DEVICE static constexpr long long gridX(long long rows) {
    return (rows + Warps - 1) / Warps;
  }
};

/// True if (va, ia) comes before (vb, ib) in top_k's order: larger value
/// first, NaN before any number, then the lower index.
QCC_DEVICE bool routerBefore(float va, int ia, float vb, int ib) {
  const bool na = va != va, nb = vb != vb;
  if (na != nb) return na;
  if (!na && va != vb) return va > vb;
  return ia < ib;
}

template <int Warps, int E, int K, int PerLane, bool Renormalize>
QCC_DEVICE void routerRow(const float *__restrict__ logits, float *__restrict__ gates,
                          long long *__restrict__ ids, long long rows) {
  static_assert(E >= 1 && E <= 32 * PerLane && K >= 1 && K <= E, "router sizes");
  const int lane = threadIdx.x & 31;
  const long long row = (long long)blockIdx.x * Warps + (threadIdx.x >> 5);
  if (row >= rows) return;
  const float *x = logits + row * E;
  float p[PerLane];
  float mx = negInf();
QCC_UNROLL
  for (int i = 0; i < PerLane; ++i) {
    const int e = lane + 32 * i;
    p[i] = e < E ? x[e] : negInf();
    mx = fmaxf(mx, p[i]);
  }
  mx = warpMax(mx);
  if (mx == negInf()) {
QCC_UNROLL
    for (int i = 0; i < PerLane; ++i) p[i] = 0.0f;
  } else {
    double sum = 0.0;
QCC_UNROLL
    for (int i = 0; i < PerLane; ++i) {
      const int e = lane + 32 * i;
      p[i] = e < E ? numerics::libmExp(p[i] - mx) : 0.0f;
      sum += p[i];
    }
QCC_UNROLL
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(kFullMask, sum, o);
QCC_UNROLL
    for (int i = 0; i < PerLane; ++i) p[i] = (float)((double)p[i] / sum);
  }
  bool taken[PerLane];
QCC_UNROLL
  for (int i = 0; i < PerLane; ++i) taken[i] = lane + 32 * i >= E;
  float picked[K];
  double total = 0.0;
QCC_UNROLL
  for (int j = 0; j < K; ++j) {
    // This lane's first candidate in top_k's order, then the warp's.
    float bv = 0.0f;
    int bi = -1;
QCC_UNROLL
    for (int i = 0; i < PerLane; ++i)
      if (!taken[i] && (bi < 0 || routerBefore(p[i], lane + 32 * i, bv, bi))) {
        bv = p[i];
        bi = lane + 32 * i;
      }
QCC_UNROLL
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(kFullMask, bv, o);
      const int oi = __shfl_xor_sync(kFullMask, bi, o);
      if (oi >= 0 && (bi < 0 || routerBefore(ov, oi, bv, bi))) {
        bv = ov;
        bi = oi;
      }
    }
QCC_UNROLL
    for (int i = 0; i < PerLane; ++i)
      if (lane + 32 * i == bi) taken[i] = true;
    picked[j] = bv;
    total += bv;
    if (lane == 0) ids[row * K + j] = bi;
  }
  if (lane == 0) {
QCC_UNROLL
    for (int j = 0; j < K; ++j)
      gates[row * K + j] = Renormalize ? numerics::fdiv(picked[j], (float)total) : picked[j];
  }
}

} // namespace qcc

#endif // QCC_KERNELS_ROUTER_CUH
