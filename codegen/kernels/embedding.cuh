//===- embedding.cuh - embedding gather by int64 ids ------------------------===//
//
// NVRTC include name "qcc/embedding.cuh". Semantics: QccOps.td
// `qcc.embedding`: out[i, e] = table[ids[i], e], table [V, E], ids [N] int64
// (the flattened id tensor). An id outside [0, V) produces a zero row and
// sets *error_flag to kDeviceErrorTokenId (atomicMax, host_device.h); the host zeroes the device int before
// the launch and reports "token id out of range" when it reads back 1.
// TableT / OutT: float or __half (f16 -> f32 is exact; f32 -> f16 rounds).
//
// Launch (EmbeddingLaunch<BlockThreads>): grid = N (one CTA per id),
// block = BlockThreads, dynamic smem = 0.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_EMBEDDING_CUH
#define QCC_KERNELS_EMBEDDING_CUH

#include "qcc/common.cuh"

namespace qcc {

template <int BlockThreads> struct EmbeddingLaunch {
  static constexpr int kBlockThreads = BlockThreads;
  static constexpr int kDynamicSmemBytes = 0;
  __host__ __device__ static constexpr int gridX(int num_ids) { return num_ids; }
};

template <int BlockThreads, typename TableT, typename OutT>
__device__ __forceinline__ void embeddingRow(const TableT *__restrict__ table,
                                             const long long *__restrict__ ids,
                                             OutT *__restrict__ out, int *error_flag,
                                             long long vocab, int dim, int num_ids) {
  const int i = blockIdx.x;
  if (i >= num_ids) return;
  const long long id = ids[i];
  OutT *o = out + (long long)i * dim;
  if (id < 0 || id >= vocab) {
    for (int e = threadIdx.x; e < dim; e += BlockThreads) o[e] = fromFloat<OutT>(0.0f);
    if (threadIdx.x == 0 && error_flag != nullptr) atomicMax(error_flag, kDeviceErrorTokenId);
    return;
  }
  const TableT *r = table + id * dim;
  for (int e = threadIdx.x; e < dim; e += BlockThreads)
    o[e] = fromFloat<OutT>(toFloat(r[e]));
}

template <int BlockThreads, typename TableT, typename OutT>
__global__ void __launch_bounds__(BlockThreads)
embeddingKernel(const TableT *__restrict__ table, const long long *__restrict__ ids,
                OutT *__restrict__ out, int *error_flag, long long vocab, int dim,
                int num_ids) {
  embeddingRow<BlockThreads>(table, ids, out, error_flag, vocab, dim, num_ids);
}

} // namespace qcc

#endif // QCC_KERNELS_EMBEDDING_CUH
