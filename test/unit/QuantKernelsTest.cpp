//===- QuantKernelsTest.cpp - quantize, qlinear and the int8 KV cache -----===//
//
// docs/QUANTIZATION.md, sections 3 and 4. Integer results are compared bit
// for bit with naive int64 references; float epilogues with EXPECT_EQ (the
// reference applies the same float operations in the same order, and this
// file, like CpuQuantKernels.cpp, is compiled with -ffp-contract=off).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/CpuQuantKernels.h"
#include "runtime/core/KvCache.h"
#include "runtime/cpu/KvAttention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

using namespace qcc::rt;
using nlohmann::json;

namespace {

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const std::exception &e) {
    return e.what();
  }
  return "(no error)";
}

Tensor f32(Shape shape, const std::vector<float> &v) {
  Tensor t(DType::F32, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

std::vector<Tensor> quantize(const Tensor &x, const json &attrs) {
  return runCpuKernel(OpKind::Quantize, Attrs(attrs), {&x});
}

/// An independent reference for clamp(round_half_even(v), lo, hi):
/// std::nearbyint under FE_TONEAREST.
int refRound(float v, int lo, int hi) {
  EXPECT_EQ(std::fegetround(), FE_TONEAREST);
  return (int)std::clamp(std::nearbyint(v), (float)lo, (float)hi);
}

} // namespace

//===----------------------------------------------------------------------===//
// quantize
//===----------------------------------------------------------------------===//

TEST(Quantize, RoundHalfEvenAndClamp) {
  // Static scale 1: q = clamp(round_half_even(x), -127, 127).
  std::vector<float> x = {2.5f, 3.5f, -2.5f, -3.5f, 0.5f, -0.5f, 1.5f,
                          126.5f, 127.49f, 200.0f, -127.5f, -300.0f, 2.4999998f,
                          2.5000002f};
  std::vector<int> want = {2, 4, -2, -4, 0, 0, 2, 126, 127, 127, -127, -127,
                           2, 3};
  auto r = quantize(f32({(int64_t)x.size()}, x),
                    {{"granularity", "per_tensor"}, {"scale", 1.0}});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].dtype(), DType::I8);
  EXPECT_EQ(r[1].shape(), (Shape{1}));
  EXPECT_EQ(r[2].dtype(), DType::I32);
  EXPECT_EQ(r[1].data<float>()[0], 1.0f);
  EXPECT_EQ(r[2].data<int32_t>()[0], 0);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(r[0].data<int8_t>()[i], want[i]) << "x = " << x[i];
  // A static scale other than 1: x / 0.5 = 5 (exact) and 2.5 / 0.5 ... ties.
  auto h = quantize(f32({4}, {1.25f, 1.75f, -1.25f, 100.0f}),
                    {{"granularity", "per_tensor"}, {"scale", 0.5}});
  EXPECT_EQ(h[0].data<int8_t>()[0], 2);  // 2.5 -> 2
  EXPECT_EQ(h[0].data<int8_t>()[1], 4);  // 3.5 -> 4
  EXPECT_EQ(h[0].data<int8_t>()[2], -2); // -2.5 -> -2
  EXPECT_EQ(h[0].data<int8_t>()[3], 127);
  EXPECT_EQ(roundHalfEven(-0.5f), 0.0f);
  EXPECT_EQ(roundHalfEven(8388609.0f), 8388609.0f);
  EXPECT_EQ(roundClamp(std::numeric_limits<float>::quiet_NaN(), -127, 127), 0);
  EXPECT_EQ(roundClamp(std::numeric_limits<float>::infinity(), -127, 127), 127);
}

TEST(Quantize, PerTokenAndPerTensorDynamic) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  Shape shape = {2, 3, 17};
  std::vector<float> x(2 * 3 * 17);
  for (float &v : x)
    v = nd(rng);
  std::fill(x.begin() + 17, x.begin() + 34, 0.0f); // row 1 is all zeros
  Tensor t = f32(shape, x);

  auto tok = quantize(t, {{"granularity", "per_token"}});
  ASSERT_EQ(tok[1].shape(), (Shape{2, 3, 1}));
  ASSERT_EQ(tok[2].shape(), (Shape{2, 3, 1}));
  ASSERT_EQ(tok[0].shape(), shape);
  for (int64_t m = 0; m < 6; ++m) {
    float absmax = 0;
    for (int64_t k = 0; k < 17; ++k)
      absmax = std::max(absmax, std::fabs(x[m * 17 + k]));
    float s = m == 1 ? 1.0f : absmax / 127.0f;
    EXPECT_EQ(tok[1].data<float>()[m], s) << "row " << m;
    EXPECT_EQ(tok[2].data<int32_t>()[m], 0);
    bool hit127 = false;
    for (int64_t k = 0; k < 17; ++k) {
      int q = tok[0].data<int8_t>()[m * 17 + k];
      EXPECT_EQ(q, refRound(x[m * 17 + k] / s, -127, 127));
      hit127 |= std::abs(q) == 127;
      if (m == 1) {
        EXPECT_EQ(q, 0);
      }
    }
    EXPECT_EQ(hit127, m != 1) << "the row's absmax maps to +-127";
  }

  auto ten = quantize(t, {{"granularity", "per_tensor"}});
  ASSERT_EQ(ten[1].shape(), (Shape{1}));
  float absmax = 0;
  for (float v : x)
    absmax = std::max(absmax, std::fabs(v));
  float s = absmax / 127.0f;
  EXPECT_EQ(ten[1].data<float>()[0], s);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(ten[0].data<int8_t>()[i], refRound(x[i] / s, -127, 127));

  // All zeros: scale 1, per tensor and per token, symmetric and asymmetric.
  Tensor z(DType::F32, {2, 4});
  for (bool asym : {false, true})
    for (const char *g : {"per_token", "per_tensor"}) {
      json a = {{"granularity", g}};
      if (asym)
        a["asymmetric"] = true;
      auto r = quantize(z, a);
      for (int64_t i = 0; i < r[1].numel(); ++i) {
        EXPECT_EQ(r[1].data<float>()[i], 1.0f) << g << " asym " << asym;
        EXPECT_EQ(r[2].data<int32_t>()[i], asym ? -128 : 0);
      }
      for (int64_t i = 0; i < 8; ++i)
        EXPECT_EQ(r[0].data<int8_t>()[i], asym ? -128 : 0);
    }

  // Static per token: every row gets the attribute.
  auto st = quantize(t, {{"granularity", "per_token"}, {"scale", 0.25}});
  for (int64_t m = 0; m < 6; ++m)
    EXPECT_EQ(st[1].data<float>()[m], 0.25f);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(st[0].data<int8_t>()[i], refRound(x[i] / 0.25f, -127, 127));
}

TEST(Quantize, Asymmetric) {
  json a = {{"granularity", "per_token"}, {"asymmetric", true}};
  // min -1, max 3: scale 4/255, zp = rhe(63.75) - 128 = -64.
  auto r = quantize(f32({1, 3}, {-1.0f, 3.0f, 0.0f}), a);
  float s = 4.0f / 255.0f;
  EXPECT_EQ(r[1].data<float>()[0], s);
  EXPECT_EQ(r[2].data<int32_t>()[0], refRound(1.0f / s, -1000, 1000) - 128);
  EXPECT_EQ(r[2].data<int32_t>()[0], -64);
  EXPECT_EQ(r[0].data<int8_t>()[0], -128);
  EXPECT_EQ(r[0].data<int8_t>()[1], 127);
  EXPECT_EQ(r[0].data<int8_t>()[2], -64); // zero maps to the zero point

  // Ties: max - min = 255 gives scale 1; zp = rhe(0.5) - 128 = -128;
  // x = 254.5 -> 254 - 128 = 126, x = 2.5 -> 2 - 128, x = 3.5 -> 4 - 128.
  r = quantize(f32({4}, {-0.5f, 254.5f, 2.5f, 3.5f}),
               {{"granularity", "per_tensor"}, {"asymmetric", true}});
  EXPECT_EQ(r[1].data<float>()[0], 1.0f);
  EXPECT_EQ(r[2].data<int32_t>()[0], -128);
  EXPECT_EQ(r[0].data<int8_t>()[0], -128);
  EXPECT_EQ(r[0].data<int8_t>()[1], 126);
  EXPECT_EQ(r[0].data<int8_t>()[2], -126);
  EXPECT_EQ(r[0].data<int8_t>()[3], -124);

  // Only positive values: min is 0, so zp = -128 and 0 stays exact.
  r = quantize(f32({3}, {0.5f, 2.0f, 1.0f}),
               {{"granularity", "per_tensor"}, {"asymmetric", true}});
  EXPECT_EQ(r[1].data<float>()[0], 2.0f / 255.0f);
  EXPECT_EQ(r[2].data<int32_t>()[0], -128);
  EXPECT_EQ(r[0].data<int8_t>()[1], 127);

  // Random rows against the formula.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> ud(-2.0f, 5.0f);
  std::vector<float> x(4 * 33);
  for (float &v : x)
    v = ud(rng);
  r = quantize(f32({4, 33}, x), a);
  for (int64_t m = 0; m < 4; ++m) {
    float mn = 0, mx = 0;
    for (int64_t k = 0; k < 33; ++k) {
      mn = std::min(mn, x[m * 33 + k]);
      mx = std::max(mx, x[m * 33 + k]);
    }
    float sc = (mx - mn) / 255.0f;
    int zp = refRound(-mn / sc, -1000, 1000) - 128;
    EXPECT_EQ(r[1].data<float>()[m], sc);
    EXPECT_EQ(r[2].data<int32_t>()[m], zp);
    for (int64_t k = 0; k < 33; ++k)
      EXPECT_EQ(r[0].data<int8_t>()[m * 33 + k],
                std::clamp(refRound(x[m * 33 + k] / sc, -1000, 1000) + zp,
                           -128, 127));
  }
}

TEST(Quantize, Errors) {
  Tensor x(DType::F32, {2, 2});
  EXPECT_NE(errorOf([&] { quantize(x, {{"granularity", "per_row"}}); })
                .find("granularity 'per_row'"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              quantize(x, {{"granularity", "per_tensor"}, {"scale", 0.0}});
            }).find("finite and positive"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              quantize(x, {{"granularity", "per_tensor"},
                           {"scale", 1.0},
                           {"asymmetric", true}});
            }).find("symmetric only"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// qlinear
//===----------------------------------------------------------------------===//

namespace {

struct QLinearCase {
  int64_t M, N, K;
  bool perToken, bias;
};

/// Runs qlinear on random (and edge) data and compares with a naive int64
/// reference: the accumulators must fit int32 and the results must be
/// identical floats.
void checkQLinear(const QLinearCase &c, unsigned seed, bool unitScales) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> xd(-128, 127), wd(-127, 127),
      zd(-128, 127), pick(0, 5);
  std::uniform_real_distribution<float> sd(1e-4f, 0.05f), bd(-3.0f, 3.0f);
  Tensor x(DType::I8, {c.M, c.K}), w(DType::I8, {c.N, c.K});
  Shape sshape = c.perToken ? Shape{c.M, 1} : Shape{1};
  Tensor xs(DType::F32, sshape), xz(DType::I32, sshape);
  Tensor ws(DType::F32, {c.N}), wsum(DType::I32, {c.N}), b(DType::F32, {c.N});
  // A third of the elements are the edge values -128 / -127 / 127.
  auto edge = [&](int v, bool isX) {
    switch (pick(rng)) {
    case 0: return isX ? -128 : -127;
    case 1: return 127;
    default: return v;
    }
  };
  int8_t *X = x.data<int8_t>(), *W = w.data<int8_t>();
  for (int64_t i = 0; i < x.numel(); ++i)
    X[i] = (int8_t)edge(xd(rng), true);
  for (int64_t i = 0; i < w.numel(); ++i)
    W[i] = (int8_t)edge(wd(rng), false);
  if (seed % 2 == 0) { // extremes everywhere: the largest |acc|
    for (int64_t i = 0; i < x.numel(); ++i)
      X[i] = -128;
    for (int64_t i = 0; i < w.numel(); ++i)
      W[i] = (i / c.K) % 2 ? 127 : -127;
  }
  for (int64_t i = 0; i < xs.numel(); ++i) {
    xs.data<float>()[i] = unitScales ? 1.0f : sd(rng);
    xz.data<int32_t>()[i] = unitScales ? 0 : zd(rng);
  }
  for (int64_t n = 0; n < c.N; ++n) {
    ws.data<float>()[n] = unitScales ? 1.0f : sd(rng);
    int32_t s = 0;
    for (int64_t k = 0; k < c.K; ++k)
      s += W[n * c.K + k];
    wsum.data<int32_t>()[n] = s;
    b.data<float>()[n] = bd(rng);
  }
  Operands ops = {&x, &xs, &xz, &w, &ws, &wsum};
  if (c.bias)
    ops.push_back(&b);
  auto r = runCpuKernel(OpKind::QLinear, Attrs(json::object()), ops);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[0].shape(), (Shape{c.M, c.N}));
  const float *Y = r[0].data<float>();
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < c.K; ++k)
        acc += (int64_t)X[m * c.K + k] * (int64_t)W[n * c.K + k];
      ASSERT_LE(std::llabs(acc), (int64_t)std::numeric_limits<int32_t>::max());
      int64_t sm = c.perToken ? m : 0;
      int64_t corr = acc - (int64_t)xz.data<int32_t>()[sm] *
                               (int64_t)wsum.data<int32_t>()[n];
      ASSERT_LE(std::llabs(corr), (int64_t)std::numeric_limits<int32_t>::max());
      float sc = xs.data<float>()[sm] * ws.data<float>()[n];
      float want = (float)corr * sc;
      if (c.bias)
        want = want + b.data<float>()[n];
      EXPECT_EQ(Y[m * c.N + n], want)
          << "M " << c.M << " N " << c.N << " K " << c.K << " seed " << seed
          << " at [" << m << ", " << n << "]";
      if (unitScales && !c.bias && std::llabs(acc) < (1 << 24)) {
        EXPECT_EQ((int64_t)Y[m * c.N + n], acc) << "exact accumulator";
      }
    }
}

} // namespace

TEST(QLinear, AccumulatorsAreExact) {
  // Unit scales, zero points 0, no bias: the result is float(acc), exact for
  // |acc| < 2^24 (K <= 1000 always), so this reads the int32 accumulators.
  for (int64_t K : {1, 3, 64, 1000})
    for (unsigned seed : {1u, 2u})
      checkQLinear({5, 7, K, true, false}, seed, true);
}

TEST(QLinear, EpilogueBitExact) {
  for (int64_t K : {1, 3, 1000, 4096})
    for (bool perToken : {true, false})
      for (bool bias : {true, false})
        for (unsigned seed : {1u, 2u, 3u})
          checkQLinear({K == 4096 ? 3 : 6, 9, K, perToken, bias}, seed, false);
  // Large enough to take the OpenMP path.
  checkQLinear({64, 96, 256, true, true}, 7, false);
}

TEST(QLinear, ShapesAndRank3) {
  Tensor x(DType::I8, {2, 3, 4}), w(DType::I8, {5, 4});
  Tensor xs(DType::F32, {2, 3, 1}), xz(DType::I32, {2, 3, 1});
  Tensor ws(DType::F32, {5}), wsum(DType::I32, {5});
  for (int64_t i = 0; i < 24; ++i)
    x.data<int8_t>()[i] = (int8_t)(i - 12);
  for (int64_t i = 0; i < 20; ++i)
    w.data<int8_t>()[i] = (int8_t)(3 * i - 30);
  for (int64_t i = 0; i < 6; ++i)
    xs.data<float>()[i] = 0.5f;
  for (int64_t i = 0; i < 5; ++i)
    ws.data<float>()[i] = 2.0f;
  auto r = runCpuKernel(OpKind::QLinear, Attrs(json::object()),
                        {&x, &xs, &xz, &w, &ws, &wsum});
  ASSERT_EQ(r[0].shape(), (Shape{2, 3, 5}));
  int64_t acc = 0;
  for (int64_t k = 0; k < 4; ++k)
    acc += (int64_t)x.data<int8_t>()[4 * 4 + k] * w.data<int8_t>()[2 * 4 + k];
  EXPECT_EQ(r[0].data<float>()[4 * 5 + 2], (float)acc);

  Tensor bad(DType::F32, {2, 1});
  EXPECT_NE(errorOf([&] {
              runCpuKernel(OpKind::QLinear, Attrs(json::object()),
                           {&x, &bad, &xz, &w, &ws, &wsum});
            }).find("per token"),
            std::string::npos);
  Tensor w2(DType::I8, {5, 3});
  EXPECT_NE(errorOf([&] {
              runCpuKernel(OpKind::QLinear, Attrs(json::object()),
                           {&x, &xs, &xz, &w2, &ws, &wsum});
            }).find("do not match"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// FP8 W8A8 (E4M3)
//===----------------------------------------------------------------------===//

// An FP8 quantize: scale = absmax / 448 per token, each value e4m3(x /
// scale) with the code rules of numerics.h (NumericsTest checks them against
// ml_dtypes bit for bit); the row's abs-max lands on 448 exactly (code
// 0x7e), and values below the smallest subnormal's half flush to 0.
TEST(QuantizeFp8, PerTokenScalesAndCodes) {
  Tensor x = f32({2, 3}, {448.0f, -224.0f, 1.0f, 0.0f, 0.0f, 0.0f});
  auto r = quantize(x, {{"granularity", "per_token"}, {"to", "f8e4m3"}});
  ASSERT_EQ(r[0].dtype(), DType::F8E4M3);
  EXPECT_EQ(r[1].data<float>()[0], 1.0f);
  EXPECT_EQ(r[1].data<float>()[1], 1.0f); // an all-zero row: scale 1
  const auto *q = r[0].data<uint8_t>();
  EXPECT_EQ(q[0], 0x7e);        // 448
  EXPECT_EQ(q[1], 0x80 | 0x76); // -224 = -(8 + 6) 2^(14 - 10)
  EXPECT_EQ(q[2], 0x38);        // 1 = 8 2^(7 - 10)
  EXPECT_EQ(q[3], 0x00);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(r[2].data<int32_t>()[i], 0);
  // Asymmetric FP8 and an unknown target are refused.
  EXPECT_NE(errorOf([&] {
              quantize(x, {{"granularity", "per_token"}, {"to", "f8e4m3"},
                           {"asymmetric", true}});
            }).find("symmetric only"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              quantize(x, {{"granularity", "per_token"}, {"to", "i4"}});
            }).find("only i8, f8e4m3 and f32"),
            std::string::npos);
}

// A quantize to f32 (QDQ, W4A8's input) gives each value's int8 code read
// back, (q - zp) * scale rounded once, with the scales and zero points of
// the int8 quantize; on both CPU paths, per token and per tensor,
// symmetric and asymmetric.
TEST(QuantizeDequantize, ValuesAreTheCodesReadBack) {
  Tensor x = f32({2, 4}, {0.3f, -1.7f, 2.54f, 0.01f, -3.0f, 0.0f, 1e-3f, 7.9f});
  for (const char *gran : {"per_token", "per_tensor"})
    for (bool asymmetric : {false, true})
      for (CpuKernelPath path : {CpuKernelPath::Fast, CpuKernelPath::Reference}) {
        ScopedCpuKernelPath scope(path);
        json attrs = {{"granularity", gran}, {"asymmetric", asymmetric}};
        auto codes = quantize(x, attrs);
        attrs["to"] = "f32";
        auto qdq = quantize(x, attrs);
        ASSERT_EQ(qdq[0].dtype(), DType::F32);
        ASSERT_EQ(qdq[0].shape(), x.shape());
        const bool perToken = std::string(gran) == "per_token";
        for (int64_t i = 0; i < 8; ++i) {
          int64_t row = perToken ? i / 4 : 0;
          float s = codes[1].data<float>()[row];
          int32_t zp = codes[2].data<int32_t>()[row];
          EXPECT_EQ(qdq[1].data<float>()[row], s);
          EXPECT_EQ(qdq[2].data<int32_t>()[row], zp);
          float want = (float)((int32_t)codes[0].data<int8_t>()[i] - zp) * s;
          EXPECT_EQ(qdq[0].data<float>()[i], want)
              << gran << " asymmetric " << asymmetric << " i " << i;
        }
      }
}

// An FP8 qlinear: the E4M3 products (exact in f32) summed in f32, times
// xs * ws[n], plus bias; against a double-precision sum of the decoded
// codes: the reference sums in ascending k, the fast path in its own order
// (M <= 8: the GEMV that decodes 16 codes in registers, with a K % 16 tail;
// M = 12: the float GEMM), both within K * 2^-24 of the largest partial sum
// (f32 rounding of each add); the reference path matches the element rule
// exactly.
class QLinearFp8 : public ::testing::TestWithParam<int64_t> {};
INSTANTIATE_TEST_SUITE_P(Rows, QLinearFp8, ::testing::Values(1, 5, 12));
TEST_P(QLinearFp8, SumsDecodedProducts) {
  std::mt19937 rng(3);
  const int64_t M = GetParam(), N = 7, K = 300;
  Tensor x(DType::F8E4M3, {M, K}), w(DType::F8E4M3, {N, K});
  Tensor xs(DType::F32, {M, 1});
  for (int64_t m = 0; m < M; ++m)
    xs.data<float>()[m] = 0.25f * (float)(1 + m % 6);
  Tensor xz(DType::I32, {M, 1}), wsum(DType::I32, {N});
  Tensor ws(DType::F32, {N}), b(DType::F32, {N});
  std::uniform_int_distribution<int> code(0, 255);
  auto finite = [&] { // any code but the two NaNs
    int c;
    do
      c = code(rng);
    while ((c & 0x7f) == 0x7f);
    return (uint8_t)c;
  };
  for (int64_t i = 0; i < M * K; ++i)
    x.data<uint8_t>()[i] = finite();
  for (int64_t i = 0; i < N * K; ++i)
    w.data<uint8_t>()[i] = finite();
  for (int64_t n = 0; n < N; ++n) {
    ws.data<float>()[n] = 0.125f * (float)(n + 1);
    b.data<float>()[n] = (float)n - 3.0f;
  }
  Operands ops = {&x, &xs, &xz, &w, &ws, &wsum, &b};
  Tensor fast = runCpuKernel(OpKind::QLinear, Attrs(json::object()), ops)[0];
  Tensor ref;
  {
    ScopedCpuKernelPath reference(CpuKernelPath::Reference);
    ref = runCpuKernel(OpKind::QLinear, Attrs(json::object()), ops)[0];
  }
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double exact = 0, bound = 0;
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        double p = (double)qcc::numerics::e4m3ToFloat(x.data<uint8_t>()[m * K + k]) *
                   qcc::numerics::e4m3ToFloat(w.data<uint8_t>()[n * K + k]);
        exact += p;
        bound += std::fabs(p);
        acc = acc + (float)p; // the reference's order
      }
      float scale = xs.data<float>()[m] * ws.data<float>()[n];
      float want = acc * scale + b.data<float>()[n];
      EXPECT_EQ(ref.data<float>()[m * N + n], want) << m << ", " << n;
      double tol = (double)K * std::ldexp(bound, -24) * scale + 1e-6;
      EXPECT_NEAR(fast.data<float>()[m * N + n],
                  exact * scale + b.data<float>()[n], tol)
          << m << ", " << n;
    }
  // An FP8 input with an int8 weight is refused.
  Tensor wi(DType::I8, {N, K});
  EXPECT_NE(errorOf([&] {
              runCpuKernel(OpKind::QLinear, Attrs(json::object()),
                           {&x, &xs, &xz, &wi, &ws, &wsum});
            }).find("must have one type"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// int8 KV cache
//===----------------------------------------------------------------------===//

namespace {
json i8Config(const json &ks, const json &vs) {
  return {{"layout", "paged"}, {"block_tokens", 4}, {"layers", 2},
          {"kv_heads", 2},     {"head_dim", 8},     {"dtype", "i8"},
          {"k_scales", ks},    {"v_scales", vs}};
}
} // namespace

TEST(KvCacheI8, Config) {
  json s = {{0.1, 0.2}, {0.3, 0.4}};
  KvCacheConfig c = KvCacheConfig::fromJson(i8Config(s, s));
  EXPECT_TRUE(c.isInt8());
  EXPECT_EQ(c.kScales[1][0], 0.3f);
  KvCacheOptions o;
  o.maxSequences = 2;
  o.numBlocks = 3;
  KvCache cache(c, o);
  EXPECT_EQ(cache.bytesPerToken(), 2u * 2 * 2 * 8);
  EXPECT_EQ(cache.bytes(), 3u * 2 * 2 * 2 * 4 * 8); // a quarter of f32's
  int64_t seq = cache.addSequence();
  cache.reserve(seq, 1);
  EXPECT_NE(errorOf([&] { cache.key(seq, 0, 0, 0); }).find("not f32"),
            std::string::npos);
  EXPECT_NO_THROW(cache.keyI8(seq, 0, 0, 0));

  json noK = i8Config(s, s);
  noK.erase("k_scales");
  EXPECT_NE(errorOf([&] { KvCacheConfig::fromJson(noK); })
                .find("dtype i8 needs \"k_scales\""),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              KvCacheConfig::fromJson(i8Config({{0.1, 0.2}}, s));
            }).find("must be [2][2] floats"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              KvCacheConfig::fromJson(i8Config(s, {{0.1, 0.2}, {0.3, -1}}));
            }).find("positive finite"),
            std::string::npos);
  json f = i8Config(s, s);
  f["dtype"] = "f32";
  EXPECT_NE(errorOf([&] { KvCacheConfig::fromJson(f); })
                .find("only valid with dtype i8"),
            std::string::npos);
}

// The same prefill + decode calls against an f32 cache and an i8 cache.
//
// Tolerance. With scales = absmax / 127 over everything written (so nothing
// clamps), each dequantized element is off by at most s / 2. For one query
// row (head h, kv head g, n cached positions) with logits l_j and
// l'_j = l_j + delta_j, |delta_j| = scale * |sum_d q_d e_jd|
// <= Delta = scale * (s_k / 2) * sum_d |q_d|. Softmax then gives
// p'_j / p_j in [e^-2Delta, e^2Delta], so sum_j |p'_j - p_j| <= e^2Delta - 1,
// and
//   |o' - o| = |sum_j p'_j (v'_j - v_j) + sum_j (p'_j - p_j) v_j|
//           <= s_v / 2 + max_j |v_j| (e^2Delta - 1)
// plus float rounding of the two computations (1e-5 * (1 + max|v|), far above
// the ~D * n * 2^-24 relative error of the sums).
TEST(KvCacheI8, AttentionWithinQuantizationBound) {
  const int64_t L = 2, Hkv = 2, H = 4, D = 8, T = 9; // 9 tokens: 3 blocks
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> Kall(L * T * Hkv * D), Vall(L * T * Hkv * D),
      Qall(L * T * H * D);
  for (auto *v : {&Kall, &Vall, &Qall})
    for (float &e : *v)
      e = nd(rng);
  json ks = json::array(), vs = json::array();
  std::vector<std::vector<float>> kS(L, std::vector<float>(Hkv)), vS = kS;
  for (int64_t l = 0; l < L; ++l) {
    ks.push_back(json::array());
    vs.push_back(json::array());
    for (int64_t g = 0; g < Hkv; ++g) {
      float km = 0, vm = 0;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d) {
          size_t i = ((l * T + t) * Hkv + g) * D + d;
          km = std::max(km, std::fabs(Kall[i]));
          vm = std::max(vm, std::fabs(Vall[i]));
        }
      kS[l][g] = km / 127.0f;
      vS[l][g] = vm / 127.0f;
      ks[l].push_back(kS[l][g]);
      vs[l].push_back(vS[l][g]);
    }
  }
  KvCacheOptions o;
  o.numBlocks = 4;
  json fcfg = i8Config(ks, vs);
  fcfg["dtype"] = "f32";
  fcfg.erase("k_scales");
  fcfg.erase("v_scales");
  KvCache f(KvCacheConfig::fromJson(fcfg), o),
      q(KvCacheConfig::fromJson(i8Config(ks, vs)), o);
  int64_t sf = f.addSequence(), sq = q.addSequence();
  float attnScale = 1.0f / std::sqrt((float)D);
  double worst = 0; // largest error / bound
  float maxErr = 0;
  // Prefill 5 tokens, then decode 4 one at a time.
  for (auto [t0, n] : {std::pair<int64_t, int64_t>{0, 5}, {5, 1}, {6, 1},
                       {7, 1}, {8, 1}}) {
    f.reserve(sf, t0 + n);
    q.reserve(sq, t0 + n);
    for (int64_t l = 0; l < L; ++l) {
      Tensor Qt(DType::F32, {1, n, H * D}), Kt(DType::F32, {1, n, Hkv * D}),
          Vt(DType::F32, {1, n, Hkv * D});
      std::copy_n(&Qall[(l * T + t0) * H * D], n * H * D, Qt.data<float>());
      std::copy_n(&Kall[(l * T + t0) * Hkv * D], n * Hkv * D, Kt.data<float>());
      std::copy_n(&Vall[(l * T + t0) * Hkv * D], n * Hkv * D, Vt.data<float>());
      json attrs = {{"layer", l}, {"num_heads", H}, {"num_kv_heads", Hkv},
                    {"scale", attnScale}};
      KvBatch bf{&f, {sf}, {n}}, bq{&q, {sq}, {n}};
      Tensor of = kvAttention(Attrs(attrs), {&Qt, &Kt, &Vt}, bf);
      Tensor oq = kvAttention(Attrs(attrs), {&Qt, &Kt, &Vt}, bq);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < H; ++h) {
          int64_t g = h / (H / Hkv), pos = t0 + t;
          float qabs = 0, vmax = 0;
          for (int64_t d = 0; d < D; ++d)
            qabs += std::fabs(Qt.data<float>()[(t * H + h) * D + d]);
          for (int64_t j = 0; j <= pos; ++j)
            for (int64_t d = 0; d < D; ++d)
              vmax = std::max(
                  vmax, std::fabs(Vall[((l * T + j) * Hkv + g) * D + d]));
          double delta = attnScale * (kS[l][g] / 2) * qabs;
          double bound = vS[l][g] / 2 + vmax * std::expm1(2 * delta) +
                         1e-5 * (1 + vmax);
          for (int64_t d = 0; d < D; ++d) {
            size_t i = (size_t)((t * H + h) * D + d);
            float err = std::fabs(of.data<float>()[i] - oq.data<float>()[i]);
            EXPECT_LE(err, bound) << "layer " << l << " pos " << pos
                                  << " head " << h << " d " << d;
            maxErr = std::max(maxErr, err);
            worst = std::max(worst, err / bound);
          }
        }
    }
    f.advance(sf, n);
    q.advance(sq, n);
  }
  EXPECT_GT(maxErr, 0.0f) << "the i8 cache should differ from f32";
  std::printf("[ i8 KV ] max |o_i8 - o_f32| = %g, at most %.3f of the bound\n",
              maxErr, worst);

  // The stored bytes are exactly clamp(round_half_even(x / s), -127, 127).
  for (int64_t l = 0; l < L; ++l)
    for (int64_t g = 0; g < Hkv; ++g)
      for (int64_t t = 0; t < T; ++t) {
        const int8_t *kc = q.keyI8(sq, l, g, t), *vc = q.valueI8(sq, l, g, t);
        for (int64_t d = 0; d < D; ++d) {
          size_t i = ((l * T + t) * Hkv + g) * D + d;
          EXPECT_EQ(kc[d], refRound(Kall[i] / kS[l][g], -127, 127));
          EXPECT_EQ(vc[d], refRound(Vall[i] / vS[l][g], -127, 127));
        }
      }
}

TEST(KvCacheI8, ClampsOutOfRange) {
  json s = {{0.01, 0.01}, {0.01, 0.01}};
  KvCacheOptions o;
  o.numBlocks = 1;
  KvCache c(KvCacheConfig::fromJson(i8Config(s, s)), o);
  int64_t seq = c.addSequence();
  c.reserve(seq, 1);
  Tensor qt(DType::F32, {1, 1, 16}), kt(DType::F32, {1, 1, 16}),
      vt(DType::F32, {1, 1, 16});
  for (int64_t i = 0; i < 16; ++i) {
    kt.data<float>()[i] = i % 2 ? 5.0f : -5.0f; // 500 steps: clamps
    vt.data<float>()[i] = 0.025f;                 // 2.5 steps: ties to 2
  }
  KvBatch b{&c, {seq}, {1}};
  Tensor out = kvAttention(Attrs({{"layer", 1}, {"num_heads", 2},
                                  {"num_kv_heads", 2}, {"scale", 1.0}}),
                           {&qt, &kt, &vt}, b);
  EXPECT_EQ(c.keyI8(seq, 1, 0, 0)[0], -127);
  EXPECT_EQ(c.keyI8(seq, 1, 0, 0)[1], 127);
  EXPECT_EQ(c.valueI8(seq, 1, 1, 0)[3], 2);
  // One position: p = 1, so the output is the dequantized value 2 * 0.01.
  EXPECT_EQ(out.data<float>()[3], 2.0f * 0.01f);
}

//===----------------------------------------------------------------------===//
// FP8 KV cache
//===----------------------------------------------------------------------===//

namespace {
/// One head's kv_attention of token 0 of `seq` (an empty sequence) on
/// `path`: a single cached position, so the softmax weight is exactly 1 and
/// the output is the value as the cache reads it back.
Tensor attendOnePosition(KvCache &cache, int64_t seq, const Tensor &q,
                         const Tensor &k, const Tensor &v,
                         CpuKernelPath path) {
  setCpuKernelPath(path);
  KvBatch b{&cache, {seq}, {1}};
  Tensor out = kvAttention(Attrs({{"layer", 0}, {"num_heads", 1},
                                  {"num_kv_heads", 1}, {"scale", 1.0}}),
                           {&q, &k, &v}, b);
  setCpuKernelPath(CpuKernelPath::Fast);
  return out;
}
} // namespace

TEST(KvCacheFp8, Config) {
  json s = {{0.1, 0.2}, {0.3, 0.4}};
  json cfg = i8Config(s, s);
  cfg["dtype"] = "fp8";
  KvCacheConfig c = KvCacheConfig::fromJson(cfg);
  EXPECT_TRUE(c.isFp8());
  EXPECT_FALSE(c.isInt8());
  EXPECT_EQ(c.elementBytes(), 1u);
  KvCacheOptions o;
  o.numBlocks = 3;
  KvCache cache(c, o);
  EXPECT_EQ(cache.bytes(), 3u * 2 * 2 * 2 * 4 * 8); // a quarter of f32's
  int64_t seq = cache.addSequence();
  cache.reserve(seq, 1);
  EXPECT_NE(errorOf([&] { cache.keyI8(seq, 0, 0, 0); }).find("holds fp8, not i8"),
            std::string::npos);
  EXPECT_NO_THROW(cache.element<uint8_t>(seq, 0, 0, 0, 0));
  json kivi = cfg;
  kivi["scales"] = "kivi";
  EXPECT_NE(errorOf([&] { KvCacheConfig::fromJson(kivi); })
                .find("fp8 has per-head scales only"),
            std::string::npos);
  json noV = cfg;
  noV.erase("v_scales");
  EXPECT_NE(errorOf([&] { KvCacheConfig::fromJson(noV); })
                .find("dtype fp8 needs \"v_scales\""),
            std::string::npos);
}

// Every E4M3 code through the cache and back, on each kernel path: one
// cached position, so the softmax weight is exactly 1 and the output is the
// value as the cache reads it, which must be qcc::numerics::dequantizeE4M3 of
// the code (exact; NaN for 0x7f and 0xff). The values appended are the
// codes' own values times the scale, so the stored codes are the codes
// themselves (quantizeE4M3 round-trips them); 2 * 448 s saturates to 448.
TEST(KvCacheFp8, EveryCodeRoundTrips) {
  const int64_t D = 256;
  const float vs = 0.375f, ks = 0.5f;
  json cfg = {{"layout", "paged"}, {"block_tokens", 4}, {"layers", 1},
              {"kv_heads", 1},     {"head_dim", D},     {"dtype", "fp8"},
              {"k_scales", {{ks}}}, {"v_scales", {{vs}}}};
  for (CpuKernelPath path : {CpuKernelPath::Reference, CpuKernelPath::Portable,
                             CpuKernelPath::Fast}) {
    KvCache cache(KvCacheConfig::fromJson(cfg), {1, 0, 1});
    int64_t seq = cache.addSequence();
    cache.reserve(seq, 1);
    Tensor q(DType::F32, {1, 1, D}), k(DType::F32, {1, 1, D}),
        v(DType::F32, {1, 1, D});
    for (int64_t d = 0; d < D; ++d) {
      q.data<float>()[d] = 0.01f;
      k.data<float>()[d] = d == 3 ? 2 * 448 * ks : 0.25f; // code 3: saturates
      v.data<float>()[d] = qcc::numerics::e4m3ToFloat((unsigned char)d) * vs;
    }
    Tensor out = attendOnePosition(cache, seq, q, k, v, path);
    const uint8_t *kc = cache.element<uint8_t>(seq, 0, 0, 0, 0),
                  *vc = cache.element<uint8_t>(seq, 0, 1, 0, 0);
    EXPECT_EQ(kc[3], 0x7e); // 448
    EXPECT_EQ(kc[4], qcc::numerics::floatToE4M3(0.5f));
    for (int64_t d = 0; d < D; ++d) {
      bool nan = (d & 0x7f) == 0x7f;
      EXPECT_EQ(vc[d], nan ? (d & 0x80) | 0x7f : d) << d;
      float want = qcc::numerics::dequantizeE4M3((unsigned char)d, vs),
            got = out.data<float>()[d];
      if (nan)
        EXPECT_TRUE(std::isnan(got)) << "code " << d;
      else
        EXPECT_EQ(got, want) << "code " << d << " path " << int(path);
    }
  }
}

// An f16 cache stores format::floatToHalf of each element (nearest even;
// beyond 65504 infinity) and reads back its exact widening, on every path:
// one cached position makes the output the value as the cache reads it.
TEST(KvCacheF16, ElementsRoundTrip) {
  const int64_t D = 64;
  json cfg = {{"layout", "contiguous"}, {"layers", 1}, {"kv_heads", 1},
              {"head_dim", D},          {"dtype", "f16"}};
  KvCacheConfig c = KvCacheConfig::fromJson(cfg);
  EXPECT_EQ(c.elementBytes(), 2u);
  json scaled = cfg;
  scaled["k_scales"] = {{1.0}};
  EXPECT_NE(errorOf([&] { KvCacheConfig::fromJson(scaled); })
                .find("only valid with dtype i8 or fp8"),
            std::string::npos);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> values(D);
  for (float &x : values)
    x = nd(rng);
  values[1] = 1e-6f;     // an f16 subnormal
  values[2] = 65519.0f;  // rounds down to 65504
  values[3] = -7e4f;     // beyond: -infinity
  values[4] = 1.0f + 0x1p-11f; // a tie: to even (1)
  for (CpuKernelPath path : {CpuKernelPath::Reference, CpuKernelPath::Portable,
                             CpuKernelPath::Fast}) {
    KvCache cache(c, {1, 4, 0});
    int64_t seq = cache.addSequence();
    cache.reserve(seq, 1);
    Tensor q(DType::F32, {1, 1, D}), k(DType::F32, {1, 1, D}),
        v(DType::F32, {1, 1, D});
    for (int64_t d = 0; d < D; ++d) {
      q.data<float>()[d] = 0.01f;
      k.data<float>()[d] = values[(size_t)(D - 1 - d)] * 1e-3f; // finite
      v.data<float>()[d] = values[(size_t)d];
    }
    Tensor out = attendOnePosition(cache, seq, q, k, v, path);
    const uint16_t *kc = cache.element<uint16_t>(seq, 0, 0, 0, 0),
                   *vc = cache.element<uint16_t>(seq, 0, 1, 0, 0);
    for (int64_t d = 0; d < D; ++d) {
      EXPECT_EQ(kc[d],
                qcc::format::floatToHalf(values[(size_t)(D - 1 - d)] * 1e-3f));
      EXPECT_EQ(vc[d], qcc::format::floatToHalf(values[(size_t)d]));
      EXPECT_EQ(out.data<float>()[d], qcc::format::halfToFloat(vc[d]))
          << "d " << d << " path " << int(path);
    }
    EXPECT_EQ(out.data<float>()[2], 65504.0f);
    EXPECT_EQ(out.data<float>()[3], -std::numeric_limits<float>::infinity());
    EXPECT_EQ(out.data<float>()[4], 1.0f);
  }
}
