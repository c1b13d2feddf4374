//===- F32GemmTest.cpp - the packed float32 GEMM against double sums ------===//
//
// runtime/cpu/CpuF32Gemm.h: on odd shapes (N not a multiple of 16, M = 1, a
// tile's 12 rows and more, K over one slice) the packed kernel's sums agree
// with double-precision sums within float32's error bound, and every
// output block goes to the epilogue exactly once; the same for its bf16
// form (--cpu-precision=bf16) against the sums of the rounded values. Skipped (saying so) on
// CPUs without AVX-512F, where nothing is packed. (The session's use of it:
// F32LinearArtifactTest.cpp.)
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuF32Gemm.h"
#include "runtime/cpu/CpuKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

/// The packed GEMM (f32, or bf16 pairs) against double sums of the values
/// it multiplies (bf16: x and w rounded to bf16 first, floatToBf16), within
/// bound(): the products are exact in both, the sums float32's.
void checkPacked(bool bf16) {
  struct Case {
    int64_t M, N, K;
  };
  setCpuFloatPrecision(bf16 ? CpuFloatPrecision::Bf16 : CpuFloatPrecision::F32);
  auto rounded = [&](std::vector<float> v) {
    if (bf16)
      for (float &e : v) {
        uint32_t u = (uint32_t)floatToBf16(e) << 16;
        std::memcpy(&e, &u, 4);
      }
    return v;
  };
  std::mt19937 rng(5);
  // K over one slice: 1,024 floats or 512 bf16 pairs; odd K: a pair's
  // upper half padded.
  for (Case c : {Case{1, 1, 1}, Case{1, 17, 5}, Case{3, 100, 64},
                 Case{5, 33, 67}, Case{12, 32, 16}, Case{13, 31, 3},
                 Case{29, 70, 1100}, Case{64, 16, 2049}, Case{4, 48, 1537}}) {
    for (int threads : {1, 2}) {
      setCpuThreads(threads);
      std::vector<float> x = randomValues(c.M * c.K, rng),
                         w = randomValues(c.N * c.K, rng);
      std::optional<PackedF32Weight> p = packLinearWeight(w.data(), c.N, c.K);
      ASSERT_TRUE(p);
      EXPECT_EQ(p->bf16, bf16);
      EXPECT_EQ(p->bytes(),
                (c.N + 15) / 16 * 16 * (bf16 ? (c.K + 1) / 2 : c.K) * 4);
      std::vector<float> xr = rounded(x), wr = rounded(w);
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
            want += (double)xr[m * c.K + k] * wr[n * c.K + k];
          EXPECT_NEAR(C[m * ldc + n], want,
                      bound(xr.data() + m * c.K, wr.data() + n * c.K, c.K))
              << (bf16 ? "bf16 " : "f32 ") << c.M << "x" << c.N << "x" << c.K
              << " at " << m << "," << n;
          EXPECT_EQ(seen[m * c.N + n], 1);
        }
        for (int64_t n = c.N; n < ldc; ++n)
          EXPECT_EQ(C[m * ldc + n], -7.0f);
      }
    }
  }
  setCpuThreads(0);
  setCpuFloatPrecision(CpuFloatPrecision::F32);
}

TEST(F32Gemm, MatchesDoubleSums) {
  if (!cpuHasAvx512F())
    GTEST_SKIP() << "this CPU has no AVX-512F: nothing is packed";
  checkPacked(/*bf16=*/false);
}

// --cpu-precision=bf16: the sums of the bf16-rounded values, as tight as
// float32's (an f32 product of the unrounded values misses by ~2^-9 of a
// term, far outside the bound at small K).
TEST(F32Gemm, Bf16MatchesDoubleSumsOfRoundedValues) {
  if (!cpuHasAvx512Bf16())
    GTEST_SKIP() << "this CPU has no AVX512_BF16: --cpu-precision=bf16 is "
                    "refused and nothing is packed as bf16";
  checkPacked(/*bf16=*/true);
}

TEST(F32Gemm, FloatToBf16RoundsToNearestEven) {
  auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return floatToBf16(f);
  };
  EXPECT_EQ(bits(0x3f800000u), 0x3f80);     // 1
  EXPECT_EQ(bits(0x3f808000u), 0x3f80);     // 1 + 2^-8: a tie, to even
  EXPECT_EQ(bits(0x3f818000u), 0x3f82);     // 1 + 3 * 2^-8: a tie, to even
  EXPECT_EQ(bits(0x3f808001u), 0x3f81);     // just above the tie
  EXPECT_EQ(bits(0xbf80ffffu), 0xbf81);     // negative, rounds up in size
  EXPECT_EQ(bits(0x7f7fffffu), 0x7f80);     // the largest float: inf
  EXPECT_EQ(bits(0xff800000u), 0xff80);     // -inf
  uint16_t nan = bits(0x7f800001u);         // a NaN whose payload is low
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);               // still a NaN, not inf
}

} // namespace
