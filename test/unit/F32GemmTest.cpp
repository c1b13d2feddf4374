//===- F32GemmTest.cpp - the packed float32 GEMM against double sums ------===//
//
// runtime/cpu/CpuF32Gemm.h: on odd shapes (N not a multiple of 16, M = 1, a
// tile's 12 rows and more, K over one slice) the packed kernel's sums agree
// with double-precision sums within float32's error bound, and every
// output block goes to the epilogue exactly once. Skipped (saying so) on
// CPUs without AVX-512F, where nothing is packed. (The session's use of it:
// F32LinearArtifactTest.cpp.)
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuF32Gemm.h"
#include "runtime/cpu/CpuKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace qcc::rt;

namespace {

std::vector<float> randomValues(int64_t n, std::mt19937 &rng) {
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

/// Each sum of K float products, with FMA, is within K * 2^-23 of the sum
/// of |products| (K roundings of at most one float ulp, u = 2^-24, each on
/// a partial sum bounded by that total; the slice's pass through C adds one
/// more): the textbook gamma_K bound, with a factor 2 of margin.
double bound(const float *x, const float *w, int64_t K) {
  double abs = 0;
  for (int64_t k = 0; k < K; ++k)
    abs += std::fabs((double)x[k] * w[k]);
  return (K + 1) * std::ldexp(1.0, -23) * abs + 1e-30;
}

TEST(F32Gemm, MatchesDoubleSums) {
  if (!cpuHasAvx512F())
    GTEST_SKIP() << "this CPU has no AVX-512F: nothing is packed";
  struct Case {
    int64_t M, N, K;
  };
  std::mt19937 rng(5);
  for (Case c : {Case{1, 1, 1}, Case{1, 17, 5}, Case{3, 100, 64},
                 Case{5, 33, 67}, Case{12, 32, 16}, Case{13, 31, 3},
                 Case{29, 70, 1100}, Case{64, 16, 2049}}) {
    for (int threads : {1, 2}) {
      setCpuThreads(threads);
      std::vector<float> x = randomValues(c.M * c.K, rng),
                         w = randomValues(c.N * c.K, rng);
      std::optional<PackedF32Weight> p = packF32Weight(w.data(), c.N, c.K);
      ASSERT_TRUE(p);
      EXPECT_EQ(p->bytes(), (c.N + 15) / 16 * 16 * c.K * 4);
      // C has a wider row (ldc) than N: the kernel writes only its columns.
      const int64_t ldc = c.N + 3;
      std::vector<float> C(c.M * ldc, -7.0f);
      std::vector<int> seen(c.M * c.N, 0);
      f32GemmThen(x.data(), c.K, c.M, *p, C.data(), ldc,
                  [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
                    for (int64_t m = m0; m < m1; ++m)
                      for (int64_t n = n0; n < n1; ++n)
                        ++seen[m * c.N + n];
                  });
      for (int64_t m = 0; m < c.M; ++m) {
        for (int64_t n = 0; n < c.N; ++n) {
          double want = 0;
          for (int64_t k = 0; k < c.K; ++k)
            want += (double)x[m * c.K + k] * w[n * c.K + k];
          EXPECT_NEAR(C[m * ldc + n], want,
                      bound(x.data() + m * c.K, w.data() + n * c.K, c.K))
              << c.M << "x" << c.N << "x" << c.K << " at " << m << "," << n;
          EXPECT_EQ(seen[m * c.N + n], 1);
        }
        for (int64_t n = c.N; n < ldc; ++n)
          EXPECT_EQ(C[m * ldc + n], -7.0f);
      }
    }
  }
  setCpuThreads(0);
}

} // namespace
