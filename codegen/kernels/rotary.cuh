//===- rotary.cuh - rotate-half rotary position embedding -------------------===//
//
// NVRTC include name "qcc/rotary.cuh". Semantics: QccOps.td `qcc.rotary`.
// input [B, S, H * D]; only the first R = rope.rotary_dim values of each head
// rotate (R even, <= D; R <= 0 means R = D), the other D - R pass through.
// cos / sin [S, R] (batch_stride = 0) or [B, S, R] (batch_stride = S * R);
// with x the values of one head at (b, s) and half = R / 2:
//   out[d]        = x[d] * cos[d] - x[d + half] * sin[d]                (d < half)
//   out[d + half] = x[d + half] * cos[d + half] + x[d] * sin[d + half]
//   out[d]        = x[d]                                                (d >= R)
// (= x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x[half:], x[:half])).
// One thread computes a (d, d + half) pair, so out may alias in (in place).
//
// Launch (RotaryLaunch<BlockThreads>): grid = B * S (one CTA per token row),
// block = BlockThreads, dynamic smem = 0; the CTA loops over the H * R / 2 pairs
// (and copies the H * (D - R) passed values unless out aliases in).
//
// ropeElement() is the per-element form used by the attention kernels to
// rotate q and k on the fly.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_ROTARY_CUH
#define QCC_KERNELS_ROTARY_CUH

#include "qcc/common.cuh"

namespace qcc {

template <typename RopeT> struct RopeTables {
  const RopeT *cos;             // [S, R] or [B, S, R]
  const RopeT *sin;
  long long batch_stride;       // 0 for [S, R], S * R for [B, S, R]
  int rotary_dim;               // R; <= 0 (e.g. left zero) means the whole head
};

// Rotated value of element d of one head. `head` points at the head's
// HeadDim values (any element type), (b, s) select the table row; elements at
// or past rt.rotary_dim pass through.
template <int HeadDim, typename T, typename RopeT>
__device__ __forceinline__ float ropeElement(const T *head, int d,
                                             const RopeTables<RopeT> &rt, int b,
                                             int s) {
  const int rd = rt.rotary_dim > 0 ? rt.rotary_dim : HeadDim;
  const float x = toFloat(head[d]);
  if (d >= rd)
    return x;
  const int half = rd / 2;
  const long long row = (long long)b * rt.batch_stride + (long long)s * rd;
  const float c = toFloat(rt.cos[row + d]);
  const float sn = toFloat(rt.sin[row + d]);
  const float r = d < half ? -toFloat(head[d + half])
                           : toFloat(head[d - half]);
  return x * c + r * sn;
}

template <int BlockThreads> struct RotaryLaunch {
  static constexpr int kBlockThreads = BlockThreads;
  static constexpr int kDynamicSmemBytes = 0;
  __host__ __device__ static constexpr int gridX(int batch, int seq) { return batch * seq; }
};

// head_dim is a runtime value here (even); any number of heads.
template <int BlockThreads, typename T, typename RopeT>
__global__ void __launch_bounds__(BlockThreads)
rotaryKernel(const T *in, T *out, RopeTables<RopeT> rt, int seq, int num_heads,
             int head_dim) {
  const int row = blockIdx.x; // b * seq + s
  const int b = row / seq, s = row % seq;
  const int rd = rt.rotary_dim > 0 ? rt.rotary_dim : head_dim;
  const int half = rd / 2, pass = head_dim - rd;
  const long long base = (long long)row * num_heads * head_dim;
  const long long trow = (long long)b * rt.batch_stride + (long long)s * rd;
  if (out != in)
    for (int i = threadIdx.x; i < num_heads * pass; i += BlockThreads) {
      const long long o = base + (long long)(i / pass) * head_dim + rd + i % pass;
      out[o] = in[o];
    }
  for (int i = threadIdx.x; i < num_heads * half; i += BlockThreads) {
    const int h = i / half, d = i % half;
    const long long o = base + (long long)h * head_dim + d;
    const float x1 = toFloat(in[o]), x2 = toFloat(in[o + half]);
    const float c1 = toFloat(rt.cos[trow + d]), s1 = toFloat(rt.sin[trow + d]);
    const float c2 = toFloat(rt.cos[trow + d + half]), s2 = toFloat(rt.sin[trow + d + half]);
    out[o] = fromFloat<T>(x1 * c1 - x2 * s1);
    out[o + half] = fromFloat<T>(x2 * c2 + x1 * s2);
  }
}

} // namespace qcc

#endif // QCC_KERNELS_ROTARY_CUH
