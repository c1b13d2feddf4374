//===- Sparsify24Test.cpp - 2:4 pruning methods ---------------------------===//
//
// passes/Sparsify24Methods.h on calibration-like data: SparseGPT's
// reconstruction error ||(W - W_s) X^T||^2 is below Wanda's and magnitude's
// when input channels are correlated, and every method's result is exactly
// 2:4 (at most two nonzeros per group of four, compressible by
// format/Sparse24.h).
//
//===----------------------------------------------------------------------===//
#include "format/Sparse24.h"
#include "passes/Sparsify24Methods.h"
#include "test/unit/ObsTestData.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace qcc::sparsify24;
using namespace qcc::obstest;

namespace {

void expectTwoFour(const std::vector<double> &p, int64_t n, int64_t k,
                   const char *method) {
  for (int64_t i = 0; i < n * k; i += 4) {
    int nonzero = 0;
    for (int t = 0; t < 4; ++t)
      nonzero += p[i + t] != 0.0;
    ASSERT_LE(nonzero, 2) << method << ": row " << i / k << " group "
                          << (i % k) / 4;
  }
  std::vector<float> f(p.begin(), p.end());
  std::vector<float> values((size_t)(n * qcc::format::sparse24::valuesCols(k)));
  std::vector<int32_t> meta((size_t)(n * qcc::format::sparse24::metaCols(k)));
  EXPECT_FALSE(qcc::format::sparse24::compress(f.data(), n, k, sizeof(float),
                                               values.data(), meta.data()))
      << method;
}

TEST(Sparsify24, SparseGptBeatsWandaAndMagnitudeOnCorrelatedInputs) {
  std::mt19937 rng(15);
  const int64_t n = 24, k = 64, t = 512;
  std::vector<double> x = correlatedInputs(t, k, rng);
  std::vector<double> h = gram(x, t, k);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<double> w((size_t)(n * k));
  for (double &v : w)
    v = g(rng);
  std::vector<double> norms((size_t)k);
  for (int64_t j = 0; j < k; ++j)
    norms[j] = std::sqrt(h[j * k + j]);

  auto magnitude = pruneMagnitude(w, n, k);
  auto wanda = pruneWanda(w, n, k, norms);
  InverseHessian hinv;
  ASSERT_FALSE(factorInverseHessian(h, k, 0.01, hinv));
  // Blocks smaller than k exercise the lazy batch updates across blocks.
  auto sparsegpt = pruneSparseGpt(w, n, k, hinv, /*blockSize=*/16);
  auto oneBlock = pruneSparseGpt(w, n, k, hinv, /*blockSize=*/64);

  expectTwoFour(magnitude, n, k, "magnitude");
  expectTwoFour(wanda, n, k, "wanda");
  expectTwoFour(sparsegpt, n, k, "sparsegpt");
  double em = reconstructionError(w, magnitude, h, n, k);
  double ew = reconstructionError(w, wanda, h, n, k);
  double es = reconstructionError(w, sparsegpt, h, n, k);
  EXPECT_LT(es, ew) << "sparsegpt " << es << ", wanda " << ew;
  EXPECT_LT(es, em) << "sparsegpt " << es << ", magnitude " << em;
  EXPECT_LT(ew, em) << "wanda " << ew << ", magnitude " << em;
  // Lazy batching reorders the same updates: the result does not depend
  // on the block size beyond rounding.
  for (size_t i = 0; i < w.size(); ++i)
    EXPECT_NEAR(sparsegpt[i], oneBlock[i], 1e-9) << i;
}

TEST(Sparsify24, SparseGptFoldsAPrunedWeightIntoItsCorrelatedChannel) {
  // test/passes/sparsify-2-4.mlir's case: H = I with H_01 = H_10 = 0.95.
  const int64_t k = 32;
  std::vector<double> h((size_t)(k * k), 0.0);
  for (int64_t j = 0; j < k; ++j)
    h[j * k + j] = 1.0;
  h[1] = h[k] = 0.95;
  std::vector<double> w((size_t)k, 0.0);
  w[0] = 2.0, w[1] = 2.5, w[2] = 1.0, w[3] = 1.2;
  InverseHessian hinv;
  ASSERT_FALSE(factorInverseHessian(h, k, 0.01, hinv));
  auto p = pruneSparseGpt(w, 1, k, hinv);
  EXPECT_EQ(p[0], 0.0);
  EXPECT_NEAR(p[1], 2.5 + 2.0 * 0.95 / 1.01, 1e-12);
  EXPECT_EQ(p[2], 0.0);
  EXPECT_EQ(p[3], 1.2);
  for (int64_t j = 4; j < k; ++j)
    EXPECT_EQ(p[j], 0.0) << j;
}

TEST(Sparsify24, DeadChannelsArePrunedAndSingularHessiansFactor) {
  // Channel 5 never fires (H row and column zero); channels 0 and 4 are
  // identical (H singular without dampening).
  const int64_t k = 32, t = 64;
  std::mt19937 rng(3);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<double> x((size_t)(t * k));
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t j = 0; j < k; ++j)
      x[r * k + j] = g(rng);
    x[r * k + 4] = x[r * k + 0];
    x[r * k + 5] = 0.0;
  }
  std::vector<double> h = gram(x, t, k);
  InverseHessian hinv;
  ASSERT_FALSE(factorInverseHessian(h, k, 0.01, hinv));
  EXPECT_TRUE(hinv.dead[5]);
  std::vector<double> w((size_t)(2 * k), 1.0);
  auto p = pruneSparseGpt(w, 2, k, hinv);
  expectTwoFour(p, 2, k, "sparsegpt");
  EXPECT_EQ(p[5], 0.0);
  EXPECT_EQ(p[k + 5], 0.0);
}

TEST(Sparsify24, TiesKeepTheLowerPositions) {
  std::vector<double> w = {1, 1, 1, 1, -3, 2, 2, 0};
  auto p = pruneMagnitude(w, 1, 8);
  EXPECT_EQ(p, (std::vector<double>{1, 1, 0, 0, -3, 2, 0, 0}));
  auto q = pruneWanda(w, 1, 8, {1, 1, 1, 1, 1, 1, 2, 1});
  EXPECT_EQ(q, (std::vector<double>{1, 1, 0, 0, -3, 0, 2, 0}));
}

} // namespace
