//===- sampling.cuh - argmax and top-k over logits rows ---------------------===//
//
// NVRTC include name "qcc/sampling.cuh". Logits [rows, vocab] (float or
// __half); one CTA per row (one sequence). Order: larger value first, equal
// values by lower index (so ties give the FIRST max, as std::max_element and
// the CPU sampler). NaN logits are treated as -inf (never preferred to a
// number); a row of only NaN / -inf gives index 0.
//
//   argmaxKernel<BlockThreads, T>: out_index[row] (int64), out_value[row]
//     (float, may be null). Launch (ArgmaxLaunch): grid = rows,
//     block = BlockThreads, dynamic smem = 0 (static 8 * BlockThreads / 32 B).
//   topkKernel<BlockThreads, MaxK, T>: the k (<= MaxK <= 64, k <= vocab)
//     largest (value, index) pairs of each row, sorted in that order, into
//     out_values[row * k + r] / out_indices[row * k + r]. Each thread keeps
//     its own sorted top-k list of its strided slice in shared memory
//     (insertion), then k rounds of a block arg-best over the list heads
//     merge them. Launch (TopkLaunch<BlockThreads, MaxK>): grid = rows,
//     block = BlockThreads, dynamic smem = BlockThreads * MaxK * 8 bytes
//     (<128, 64>: 65,536 B (opt-in above 48 KB); <64, 64>: 32,768 B;
//     <128, 32>: 32,768 B), static 8 * BlockThreads / 32 B.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_SAMPLING_CUH
#define QCC_KERNELS_SAMPLING_CUH

#include "qcc/common.cuh"

namespace qcc {

template <int BlockThreads> struct ArgmaxLaunch {
  static constexpr int kBlockThreads = BlockThreads;
  static constexpr int kDynamicSmemBytes = 0;
  __host__ __device__ static constexpr int gridX(int rows) { return rows; }
};
template <int BlockThreads, int MaxK> struct TopkLaunch {
  static_assert(MaxK >= 1 && MaxK <= 64, "MaxK in [1, 64]");
  static constexpr int kBlockThreads = BlockThreads;
  static constexpr int kDynamicSmemBytes = BlockThreads * MaxK * 8;
  __host__ __device__ static constexpr int gridX(int rows) { return rows; }
};

namespace detail {
// A candidate: value (NaN mapped to -inf) and index (-1: none).
struct Cand {
  float v;
  int i;
};
__device__ __forceinline__ bool better(float av, int ai, float bv, int bi) {
  if (bi < 0) return ai >= 0;
  if (ai < 0) return false;
  return av > bv || (av == bv && ai < bi);
}
__device__ __forceinline__ float sanitize(float v) {
  return v != v ? negInf() : v;
}
// Block-wide best (value, index); every thread gets the result.
template <int BlockThreads>
__device__ __forceinline__ Cand blockBest(Cand c, float *sv, int *si) {
  constexpr int kWarps = BlockThreads / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(kFullMask, c.v, o);
    int oi = __shfl_xor_sync(kFullMask, c.i, o);
    if (better(ov, oi, c.v, c.i)) { c.v = ov; c.i = oi; }
  }
  if (kWarps == 1) return c;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) { sv[warp] = c.v; si[warp] = c.i; }
  __syncthreads();
  Cand r;
  r.v = lane < kWarps ? sv[lane] : negInf();
  r.i = lane < kWarps ? si[lane] : -1;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(kFullMask, r.v, o);
    int oi = __shfl_xor_sync(kFullMask, r.i, o);
    if (better(ov, oi, r.v, r.i)) { r.v = ov; r.i = oi; }
  }
  return r;
}
} // namespace detail

template <int BlockThreads, typename T>
__global__ void __launch_bounds__(BlockThreads)
argmaxKernel(const T *__restrict__ logits, long long *__restrict__ out_index,
             float *__restrict__ out_value, int rows, int vocab) {
  __shared__ float sv[BlockThreads / 32];
  __shared__ int si[BlockThreads / 32];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const T *x = logits + (long long)row * vocab;
  detail::Cand c{negInf(), -1};
  for (int i = threadIdx.x; i < vocab; i += BlockThreads) {
    const float v = detail::sanitize(toFloat(x[i]));
    if (detail::better(v, i, c.v, c.i)) { c.v = v; c.i = i; }
  }
  c = detail::blockBest<BlockThreads>(c, sv, si);
  if (threadIdx.x == 0) {
    out_index[row] = c.i < 0 ? 0 : c.i;
    if (out_value != nullptr) out_value[row] = c.v;
  }
}

template <int BlockThreads, int MaxK, typename T>
__global__ void __launch_bounds__(BlockThreads)
topkKernel(const T *__restrict__ logits, float *__restrict__ out_values,
           long long *__restrict__ out_indices, int rows, int vocab, int k) {
  static_assert(MaxK >= 1 && MaxK <= 64, "MaxK in [1, 64]");
  extern __shared__ float qcc_topk_smem[];
  __shared__ float sv[BlockThreads / 32];
  __shared__ int si[BlockThreads / 32];
  const int row = blockIdx.x;
  if (row >= rows) return;
  if (k > MaxK) k = MaxK;
  if (k > vocab) k = vocab;
  // Thread-private sorted lists: values then indices.
  float *lv = qcc_topk_smem + threadIdx.x * MaxK;
  int *li = reinterpret_cast<int *>(qcc_topk_smem + BlockThreads * MaxK) +
            threadIdx.x * MaxK;
  int n = 0;
  const T *x = logits + (long long)row * vocab;
  for (int i = threadIdx.x; i < vocab; i += BlockThreads) {
    const float v = detail::sanitize(toFloat(x[i]));
    if (n == k && !detail::better(v, i, lv[n - 1], li[n - 1])) continue;
    int pos = n < k ? n++ : k - 1; // drop the last when full
    while (pos > 0 && detail::better(v, i, lv[pos - 1], li[pos - 1])) {
      lv[pos] = lv[pos - 1];
      li[pos] = li[pos - 1];
      --pos;
    }
    lv[pos] = v;
    li[pos] = i;
  }
  // k-way merge of the per-thread lists.
  int head = 0;
  for (int r = 0; r < k; ++r) {
    detail::Cand c{negInf(), -1};
    if (head < n) { c.v = lv[head]; c.i = li[head]; }
    const detail::Cand best = detail::blockBest<BlockThreads>(c, sv, si);
    if (c.i >= 0 && c.i == best.i) ++head; // indices are unique: one winner
    if (threadIdx.x == 0) {
      out_values[(long long)row * k + r] = best.v;
      out_indices[(long long)row * k + r] = best.i;
    }
  }
}

} // namespace qcc

#endif // QCC_KERNELS_SAMPLING_CUH
