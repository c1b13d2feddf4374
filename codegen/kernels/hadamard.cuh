//===- hadamard.cuh - online rotation of rows (qcc.hadamard) -------------===//
//
// NVRTC include name "qcc/hadamard.cuh". Semantics: QccOps.td `qcc.hadamard`,
// the matrix of format/Rotation.h: each row x of K = N * M values (N a power
// of two, M odd) becomes x Q, Q = diag(s) (H_N / sqrt(N) (x) C_M):
//   1. x_i *= s_i, s_i the sign of splitmix64's (i + 1)-th output from seed
//      (bit 63 set: -1), as Rotation's constructor draws them;
//   2. the Hadamard butterflies along p of the row read as X [N, M]
//      (i = p * M + q), unnormalized;
//   3. y[p, k] = sum_q X[p, q] C[k][q] / sqrt(N), C the orthonormal DCT-II
//      (C[k][q] = a_k cos(pi (q + 1/2) k / M), a_0 = sqrt(1 / M), else
//      sqrt(2 / M)), its table computed per CTA in double.
// In f32 (the CPU kernel rotates in double): within about K 2^-24 of the
// row's magnitude of the CPU's result.
//
//   extern "C" __global__ void __launch_bounds__(256)
//   qcc_k3(const float *in, float *out, int rows) {
//     qcc::hadamard_rows<256, 512, 3, 0ull>(in, out, rows);
//   }
//
// Launch: one CTA per row (rows strided by gridDim.x), blockDim = Threads (a
// multiple of 32, <= 1024), no dynamic shared memory; static shared memory
// (K + M * M) floats: the emitter keeps K <= kHadamardMaxWidth and M <=
// kHadamardMaxOdd (48 KiB at most).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_HADAMARD_CUH
#define QCC_KERNELS_HADAMARD_CUH

#include "qcc/common.cuh"

namespace qcc {

/// The widest row and the largest odd factor the template takes (the shared
/// row and DCT table fit 48 KiB); wider rotations run on the host.
constexpr int kHadamardMaxWidth = 8192;
constexpr int kHadamardMaxOdd = 63;

/// The sign of index i under `seed` (format/Rotation.h's splitmix64 draw).
QCC_DEVICE float hadamardSign(unsigned long long seed, int i) {
  unsigned long long z =
      seed + (unsigned long long)(i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z = z ^ (z >> 31);
  return (z >> 63) ? -1.0f : 1.0f;
}

template <int Threads, int N, int M, unsigned long long Seed>
QCC_DEVICE void hadamard_rows(const float *in, float *out, int rows) {
  static_assert(Threads % 32 == 0 && Threads <= 1024, "");
  static_assert((N & (N - 1)) == 0 && M % 2 == 1, "K = N * M, N a power of two, M odd");
  static_assert(N * M <= kHadamardMaxWidth && M <= kHadamardMaxOdd, "");
  constexpr int K = N * M;
  __shared__ float row[K];
  __shared__ float dct[M * M]; // dct[q * M + k] = C[k][q]
  for (int i = threadIdx.x; i < M * M; i += Threads) {
    int q = i / M, k = i % M;
    double a = k == 0 ? 1.0 / M : 2.0 / M;
    dct[i] = (float)(sqrt(a) * cos(3.14159265358979323846 * (q + 0.5) * k / M));
  }
  const float norm = (float)(1.0 / sqrt((double)N));
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *x = in + (int64_t)r * K;
    __syncthreads(); // the previous row is written out
    for (int i = threadIdx.x; i < K; i += Threads)
      row[i] = x[i] * hadamardSign(Seed, i);
    __syncthreads();
    for (int h = 1; h < N; h *= 2) {
      for (int t = threadIdx.x; t < K / 2; t += Threads) {
        int q = t % M, pair = t / M; // pair in [0, N / 2)
        int j = (pair / h) * 2 * h + pair % h;
        float a = row[j * M + q], b = row[(j + h) * M + q];
        row[j * M + q] = a + b;
        row[(j + h) * M + q] = a - b;
      }
      __syncthreads();
    }
    float *y = out + (int64_t)r * K;
    for (int i = threadIdx.x; i < K; i += Threads) {
      int p = i / M, k = i % M;
      float acc = 0.0f;
      for (int q = 0; q < M; ++q)
        acc += row[p * M + q] * dct[q * M + k];
      y[i] = acc * norm;
    }
  }
}

} // namespace qcc

#endif // QCC_KERNELS_HADAMARD_CUH
