//===- SyntheticWeightsTest.cpp - seeded stand-in weights -----------------===//
//
// runtime/core/SyntheticWeights: the generators reproduce a weight's scale, give
// only valid 2:4 metadata, depend on the seed alone. The loader's side is in
// ArtifactLoaderTest (SyntheticRecords*), the writer's in SparseLinearTest
// (SparseArtifact.SyntheticWeights) and test/tools/qcc-synthetic-weights.test.
//
//===----------------------------------------------------------------------===//
#include "format/Sparse24.h"
#include "runtime/core/HalfFloat.h"
#include "runtime/core/SyntheticWeights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

using namespace qcc;
using namespace qcc::rt;

namespace {

TEST(SyntheticWeights, NormalHasTheRecordedScale) {
  // 1M draws: the sample RMS's relative standard error is about
  // 1/sqrt(2n) = 0.07%; 1% leaves room, and a wrong scale factor (e.g. a
  // missing sqrt(3), 42%) cannot pass.
  const uint64_t n = 1 << 20;
  std::vector<float> f(n);
  synthetic::generate(synthetic::Dist::Normal, 0.02, 7, DType::F32, f.data(), n);
  double mean = 0;
  for (float v : f)
    mean += v;
  mean /= n;
  EXPECT_NEAR(mean, 0.0, 0.02 * 0.01);
  EXPECT_NEAR(synthetic::rms(DType::F32, f.data(), n), 0.02, 0.02 * 0.01);
  // Irwin-Hall of four: bounded at 2 sqrt(3) sigma.
  for (float v : f)
    ASSERT_LE(std::fabs(v), 0.02f * 3.4642f);

  std::vector<uint16_t> h(n);
  synthetic::generate(synthetic::Dist::Normal, 0.5, 7, DType::F16, h.data(), n);
  EXPECT_NEAR(synthetic::rms(DType::F16, h.data(), n), 0.5, 0.5 * 0.01);
  EXPECT_EQ(h[123], floatToHalf(f[123] * 25.0f)); // same draws, scaled

  // int8: rounded and saturated; RMS 40 is within the bounds (|v| <= 139
  // before saturation, so few clip).
  std::vector<int8_t> q(n);
  synthetic::generate(synthetic::Dist::Normal, 40.0, 7, DType::I8, q.data(), n);
  EXPECT_NEAR(synthetic::rms(DType::I8, q.data(), n), 40.0, 40.0 * 0.01);
  std::set<int> seen(q.begin(), q.end());
  EXPECT_EQ(*seen.begin(), -127);
  EXPECT_EQ(*seen.rbegin(), 127);
}

TEST(SyntheticWeights, MetadataIsValidAndCoversEveryPattern) {
  const uint64_t n = 4096;
  std::vector<uint32_t> meta(n);
  synthetic::generate(synthetic::Dist::Sparse24Meta, 0, 3, DType::I32,
                      meta.data(), n);
  std::set<uint32_t> nibbles;
  for (uint32_t w : meta)
    for (int i = 0; i < 8; ++i) {
      uint32_t nib = (w >> (4 * i)) & 0xF;
      ASSERT_TRUE(format::sparse24::validNibble(nib)) << std::hex << w;
      nibbles.insert(nib);
    }
  EXPECT_EQ(nibbles.size(), 6u);
}

TEST(SyntheticWeights, TheSeedAloneDecides) {
  // Chunks are seeded from (seed, chunk): a longer tensor starts with the
  // shorter one's values, and another seed gives other values.
  const uint64_t n = 3 * 65536 + 17;
  std::vector<float> a(n), b(2 * 65536), c(2 * 65536);
  synthetic::generate(synthetic::Dist::Normal, 1.0, 11, DType::F32, a.data(), n);
  synthetic::generate(synthetic::Dist::Normal, 1.0, 11, DType::F32, b.data(),
                      b.size());
  synthetic::generate(synthetic::Dist::Normal, 1.0, 12, DType::F32, c.data(),
                      c.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), b.size() * sizeof(float)), 0);
  int same = 0;
  for (size_t i = 0; i < c.size(); ++i)
    same += b[i] == c[i];
  EXPECT_LT(same, 100);
}

TEST(SyntheticWeights, RmsOfKnownValues) {
  const float f[4] = {3, -4, 0, 0};
  EXPECT_DOUBLE_EQ(synthetic::rms(DType::F32, f, 4), 2.5);
  const int8_t q[2] = {-6, 8};
  EXPECT_DOUBLE_EQ(synthetic::rms(DType::I8, q, 2), std::sqrt(50.0));
  EXPECT_FALSE(synthetic::fills(synthetic::Dist::Normal, DType::I32));
  EXPECT_FALSE(synthetic::fills(synthetic::Dist::Sparse24Meta, DType::F32));
}

} // namespace
