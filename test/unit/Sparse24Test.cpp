//===- Sparse24Test.cpp - the 2:4 compressed weight layout ------------------===//
//
// format/Sparse24.h against hand-written rows: the metadata nibbles, the
// order of kept values, groups with fewer than two nonzeros, and the refusals.
//
//===----------------------------------------------------------------------===//

#include "format/Sparse24.h"
#include "runtime/cpu/CpuKernels.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace sp = qcc::format::sparse24;

TEST(Sparse24, HandWrittenRow) {
  // One row, K = 32: group g keeps the pair below; groups 6 and 7 hold one
  // and no nonzero.
  std::vector<float> w(32, 0.0f);
  const int pairs[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
  for (int g = 0; g < 6; ++g) {
    w[4 * g + pairs[g][0]] = float(10 * g + 1);
    w[4 * g + pairs[g][1]] = float(10 * g + 2);
  }
  w[4 * 6 + 2] = 61.0f;
  std::vector<float> values(16);
  std::vector<int32_t> meta(1);
  ASSERT_FALSE(sp::compress(w.data(), 1, 32, sizeof(float), values.data(),
                            meta.data()));
  // Nibbles 0x4 0x8 0xC 0x9 0xD 0xE; group 6 keeps (0, 2) with the nonzero
  // at 2; group 7 keeps (0, 1).
  EXPECT_EQ((uint32_t)meta[0], 0x48ED9C84u);
  const float expected[16] = {1,  2,  11, 12, 21, 22, 31, 32,
                              41, 42, 51, 52, 0,  61, 0,  0};
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(values[i], expected[i]) << i;
  std::vector<float> back(32, -1.0f);
  sp::decompress(values.data(), meta.data(), 1, 32, sizeof(float), back.data());
  EXPECT_EQ(back, w);
}

TEST(Sparse24, RandomRoundTripInt8) {
  std::mt19937 rng(7);
  const int64_t n = 5, k = 96;
  std::vector<int8_t> w(n * k, 0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < k / 4; ++g)
      for (int keep = 0; keep < 2; ++keep)
        w[r * k + 4 * g + rng() % 4] = (int8_t)(rng() % 255 - 127);
  std::vector<int8_t> values(n * sp::valuesCols(k));
  std::vector<int32_t> meta(n * sp::metaCols(k));
  ASSERT_FALSE(sp::compress(w.data(), n, k, 1, values.data(), meta.data()));
  EXPECT_FALSE(sp::validateMeta(meta.data(), n, k));
  std::vector<int8_t> back(n * k);
  sp::decompress(values.data(), meta.data(), n, k, 1, back.data());
  EXPECT_EQ(back, w);
}

TEST(Sparse24, Refusals) {
  std::vector<float> w(32, 0.0f), values(16);
  std::vector<int32_t> meta(1);
  w[8] = w[9] = w[10] = 1.0f; // group 2 holds three nonzeros
  auto why = sp::compress(w.data(), 1, 32, sizeof(float), values.data(),
                          meta.data());
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, "row 0, group 2 (k 8..11) has 3 nonzeros; 2:4 keeps at most 2");
  why = sp::compress(w.data(), 1, 16, sizeof(float), values.data(), meta.data());
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("multiple of 32"), std::string::npos);
  int32_t bad = 0x44444455; // group 0: positions 1, 1
  why = sp::validateMeta(&bad, 1, 32);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("row 0, group 0"), std::string::npos);
}

TEST(Sparse24, CpuKernelDecompresses) {
  using namespace qcc::rt;
  Tensor values(DType::F32, {1, 16});
  Tensor meta(DType::I32, {1, 1});
  for (int i = 0; i < 16; ++i)
    values.data<float>()[i] = float(i + 1);
  meta.data<int32_t>()[0] = (int32_t)0xE4E4E4E4u; // (0,1), (2,3) alternating
  const nlohmann::json none = nlohmann::json::object();
  auto out = runCpuKernel(qcc::format::OpKind::Sparse24, Attrs(none),
                          {&values, &meta});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].shape(), (Shape{1, 32}));
  const float *d = out[0].data<float>();
  EXPECT_EQ(d[0], 1.0f);
  EXPECT_EQ(d[1], 2.0f);
  EXPECT_EQ(d[2], 0.0f);
  EXPECT_EQ(d[6], 3.0f);
  EXPECT_EQ(d[7], 4.0f);
  meta.data<int32_t>()[0] = 0x11111111; // positions 1, 0: refused
  EXPECT_THROW(runCpuKernel(qcc::format::OpKind::Sparse24, Attrs(none),
                            {&values, &meta}),
               std::exception);
}
