//===- Int8GemmTest.cpp - the packed int8 GEMM against naive sums ---------===//
//
// runtime/cpu/CpuInt8Gemm.h: the packed VNNI kernel (where the CPU has it) and
// the portable one give the exact int32 sums of a naive int64 loop on odd shapes
// (K not a multiple of 4, N not of 16, M = 1 and 7, more rows than a tile)
// and extreme values; the packed qlinear equals the dense reference kernel
// bit for bit (this file, like the runtime, is built with
// -ffp-contract=off).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuInt8Gemm.h"
#include "runtime/cpu/CpuQuantKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace qcc::rt;

namespace {

const nlohmann::json kNoAttrs = nlohmann::json::object();

struct Shape3 {
  int64_t M, N, K;
};
// With more than 8 rows and K a multiple of 64 the AMX blocks run where the
// CPU has them (cpuHasAmxInt8): 32-row blocks with a row tail, an odd
// column block and a column tail.
const Shape3 kShapes[] = {{1, 1, 1},    {1, 17, 5},    {7, 33, 67},
                          {8, 16, 64},  {9, 50, 131},  {1, 48, 1024},
                          {13, 31, 3},  {17, 64, 260}, {9, 33, 192},
                          {32, 16, 64}, {40, 50, 128}, {100, 96, 640}};

/// Random int8 in [-128, 127] with, in the first rows, a row of 127s, one of
/// -127s, one of -128s and one of zeros.
std::vector<int8_t> values(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<int8_t> v(rows * cols);
  for (auto &x : v)
    x = (int8_t)d(rng);
  const int8_t fill[] = {127, -127, -128, 0};
  for (int64_t r = 0; r < rows && r < 4; ++r)
    std::fill(v.begin() + r * cols, v.begin() + (r + 1) * cols, fill[r]);
  return v;
}

std::vector<int32_t> naive(const std::vector<int8_t> &x,
                           const std::vector<int8_t> &w, Shape3 s) {
  std::vector<int32_t> c(s.M * s.N);
  for (int64_t m = 0; m < s.M; ++m)
    for (int64_t n = 0; n < s.N; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < s.K; ++k)
        acc += (int64_t)x[m * s.K + k] * w[n * s.K + k];
      c[m * s.N + n] = (int32_t)acc;
    }
  return c;
}

/// A float tensor's own copy (Tensor copies share their data).
Tensor copyOf(const Tensor &t) {
  Tensor c(DType::F32, t.shape());
  std::memcpy(c.data<float>(), t.data<float>(), t.numel() * sizeof(float));
  return c;
}

} // namespace

TEST(Int8Gemm, ExactOnOddShapes) {
  for (Shape3 s : kShapes) {
    std::vector<int8_t> x = values(s.M, s.K, 1), w = values(s.N, s.K, 2);
    // Extremes against extremes: put the weight's -128 row against x's.
    std::vector<int32_t> want = naive(x, w, s);
    for (bool packed : {true, false}) {
      if (packed && !cpuHasVnni())
        continue;
      PackedI8Weight p = packI8Weight(w.data(), s.N, s.K);
      std::vector<int32_t> got(s.M * s.N, 12345);
      i8Gemm(x.data(), s.M, w.data(), packed ? &p : nullptr, s.N, s.K,
             got.data());
      EXPECT_EQ(got, want) << (packed ? "packed" : "portable") << " M=" << s.M
                           << " N=" << s.N << " K=" << s.K;
    }
  }
}

TEST(Int8Gemm, LargestDepth) {
  // K = 65535 (qlinear's bound) with every product 128 * 128 or -128 * 127:
  // the extremes of the int32 sum; K = 65472 (a multiple of 64) on 33 rows:
  // the same on the AMX blocks.
  for (const Shape3 s : {Shape3{2, 3, 65535}, Shape3{33, 3, 65472}}) {
    std::vector<int8_t> x(s.M * s.K, -128), w(s.N * s.K, -128);
    std::fill(w.begin() + s.K, w.begin() + 2 * s.K, 127);
    std::vector<int32_t> want = naive(x, w, s);
    for (bool packed : {true, false}) {
      if (packed && !cpuHasVnni())
        continue;
      PackedI8Weight p = packI8Weight(w.data(), s.N, s.K);
      std::vector<int32_t> got(s.M * s.N);
      i8Gemm(x.data(), s.M, w.data(), packed ? &p : nullptr, s.N, s.K,
             got.data());
      EXPECT_EQ(got, want) << (packed ? "packed" : "portable") << " M=" << s.M;
    }
  }
}

TEST(Int8Gemm, ReportsWhetherAmxRuns) {
  if (!cpuHasAmxInt8())
    GTEST_SKIP() << "no AMX-INT8 here (or not granted): the blocks of "
                    "ExactOnOddShapes ran on VNNI";
  EXPECT_TRUE(cpuHasVnni()); // every AMX CPU has it; the packing needs it
}

TEST(Int8Gemm, PackedQLinearMatchesReference) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> f(0.001f, 0.1f);
  for (Shape3 s : kShapes) {
    for (bool perToken : {true, false}) {
      Tensor x(DType::I8, {s.M, s.K}), w(DType::I8, {s.N, s.K});
      std::vector<int8_t> xv = values(s.M, s.K, 4), wv = values(s.N, s.K, 5);
      std::memcpy(x.data<int8_t>(), xv.data(), xv.size());
      std::memcpy(w.data<int8_t>(), wv.data(), wv.size());
      int64_t rows = perToken ? s.M : 1;
      Tensor xs(DType::F32, perToken ? Shape{s.M, 1} : Shape{1}),
          xz(DType::I32, perToken ? Shape{s.M, 1} : Shape{1}),
          ws(DType::F32, {s.N}), wsum(DType::I32, {s.N}), bias(DType::F32, {s.N});
      for (int64_t m = 0; m < rows; ++m) {
        xs.data<float>()[m] = f(rng);
        xz.data<int32_t>()[m] = (int32_t)(m % 5) - 2;
      }
      for (int64_t n = 0; n < s.N; ++n) {
        ws.data<float>()[n] = f(rng);
        bias.data<float>()[n] = f(rng) - 0.05f;
        int32_t sum = 0;
        for (int64_t k = 0; k < s.K; ++k)
          sum += wv[n * s.K + k];
        wsum.data<int32_t>()[n] = sum;
      }
      Operands ops = {&x, &xs, &xz, &w, &ws, &wsum, &bias};
      Tensor want =
          runCpuKernel(OpKind::QLinear, Attrs(nlohmann::json::object()), ops)[0];
      std::optional<PackedI8Weight> p =
          packForPath(wv.data(), s.N, s.K, CpuKernelPath::Fast);
      EXPECT_EQ(p.has_value(), cpuHasVnni());
      EXPECT_FALSE(
          packForPath(wv.data(), s.N, s.K, CpuKernelPath::Portable));
      const PackedI8Weight *packedOrNot[] = {p ? &*p : nullptr, nullptr};
      for (const PackedI8Weight *packed : packedOrNot) {
        Tensor got = fastQLinearKernel(Attrs(kNoAttrs), ops, packed)[0];
        ASSERT_EQ(got.shape(), want.shape());
        EXPECT_EQ(0, std::memcmp(got.data<float>(), want.data<float>(),
                                 want.numel() * sizeof(float)))
            << (packed ? "packed" : "portable") << " M=" << s.M
            << " N=" << s.N << " K=" << s.K << " perToken=" << perToken;
        // The session's fusions (qlinear -> gelu / silu / add / mul): bit
        // for bit the fast path's separate op after the qlinear.
        Tensor other = copyOf(want);
        for (int64_t i = 0; i < want.numel(); ++i)
          other.data<float>()[i] = f(rng) - 0.05f;
        using Act = LinearEpilogue::Activation;
        const struct {
          const char *op;
          LinearEpilogue epi;
        } fusions[] = {{"gelu", {Act::Gelu, nullptr, nullptr}},
                       {"silu", {Act::Silu, nullptr, nullptr}},
                       {"add", {Act::None, &other, nullptr}},
                       {"mul", {Act::None, nullptr, &other}}};
        for (const auto &fusion : fusions) {
          Operands next = {&want};
          if (fusion.epi.activation == Act::None)
            next.push_back(&other);
          Tensor separate =
              runCpuKernel(qcc::format::parseOpKind(fusion.op).value(),
                           Attrs(kNoAttrs), next)[0];
          Tensor fused =
              fastQLinearKernel(Attrs(kNoAttrs), ops, packed, fusion.epi)[0];
          EXPECT_EQ(0, std::memcmp(fused.data<float>(), separate.data<float>(),
                                   want.numel() * sizeof(float)))
              << fusion.op << " " << (packed ? "packed" : "portable")
              << " M=" << s.M;
        }
      }
    }
  }
}

TEST(Int8Gemm, PackedQLinearChecksOperands) {
  std::vector<int8_t> wv(4 * 8, 1);
  PackedI8Weight p = packI8Weight(wv.data(), 4, 8);
  Tensor x(DType::I8, {2, 7}), xs(DType::F32, {1}), xz(DType::I32, {1}),
      ws(DType::F32, {4}), wsum(DType::I32, {4});
  Tensor w(DType::I8, {4, 8});
  Operands ops = {&x, &xs, &xz, &w, &ws, &wsum};
  try {
    fastQLinearKernel(Attrs(kNoAttrs), ops, &p);
    FAIL() << "no error";
  } catch (const std::exception &e) {
    EXPECT_NE(std::string(e.what()).find("do not match"), std::string::npos)
        << e.what();
  }
}

/// A qlinear with float outlier columns (the LLM.int8()-style fallback) from
/// float x [M, K] and w [N, K]: quantize (the columns read as 0), the int8
/// weight with the columns zeroed, the float slice [N, columns].
struct MixedCase {
  Shape3 s;
  std::vector<int64_t> cols;
  Tensor x, w, ws, wsum, wo, bias;
  std::vector<Tensor> q; // xq, xs, xz
  nlohmann::json attrs;

  MixedCase(Shape3 s, std::vector<int64_t> cols, uint32_t seed)
      : s(s), cols(cols), x(DType::F32, {s.M, s.K}), w(DType::I8, {s.N, s.K}),
        ws(DType::F32, {s.N}), wsum(DType::I32, {s.N}),
        wo(DType::F32, {s.N, (int64_t)cols.size()}), bias(DType::F32, {s.N}) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = u(rng);
    // The outlier columns are 100x the rest (massive activations).
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t c : cols)
        x.data<float>()[m * s.K + c] *= 100.0f;
    std::vector<int8_t> wv = values(s.N, s.K, seed + 1);
    for (int64_t n = 0; n < s.N; ++n) {
      int32_t sum = 0;
      for (int64_t c : cols)
        wv[n * s.K + c] = 0;
      for (int64_t k = 0; k < s.K; ++k)
        sum += wv[n * s.K + k];
      wsum.data<int32_t>()[n] = sum;
      ws.data<float>()[n] = 0.001f * (1 + n % 7);
      bias.data<float>()[n] = u(rng);
      for (size_t j = 0; j < cols.size(); ++j)
        wo.data<float>()[n * cols.size() + j] = u(rng);
    }
    std::memcpy(w.data<int8_t>(), wv.data(), wv.size());
    attrs = {{"granularity", "per_token"}, {"outlier_columns", cols}};
    q = runCpuKernel(OpKind::Quantize, Attrs(attrs), {&x});
  }

  Operands ops(bool withBias) {
    Operands o = {&q[0], &q[1], &q[2], &w, &ws, &wsum};
    if (withBias)
      o.push_back(&bias);
    o.push_back(&x);
    o.push_back(&wo);
    return o;
  }

  /// The definition (QccOps.td, qcc.qlinear) written out: exact int sum,
  /// (dequantize + f) + bias, f summed in f32 from 0 in ascending j.
  std::vector<float> naive(bool withBias) const {
    namespace num = qcc::numerics;
    std::vector<float> y(s.M * s.N);
    const int8_t *X = q[0].data<int8_t>(), *W = w.data<int8_t>();
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t n = 0; n < s.N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < s.K; ++k)
          acc += (int64_t)X[m * s.K + k] * W[n * s.K + k];
        float f = 0.0f;
        for (size_t j = 0; j < cols.size(); ++j)
          f = num::fadd(f, num::fmul(x.data<float>()[m * s.K + cols[j]],
                                     wo.data<float>()[n * cols.size() + j]));
        float v = num::dequantize((int32_t)acc, q[2].data<int32_t>()[m],
                                  wsum.data<int32_t>()[n],
                                  q[1].data<float>()[m], ws.data<float>()[n]);
        v = num::fadd(v, f);
        y[m * s.N + n] = withBias ? num::fadd(v, bias.data<float>()[n]) : v;
      }
    return y;
  }
};

TEST(Int8Gemm, QuantizeReadsOutlierColumnsAsZero) {
  MixedCase c({3, 4, 37}, {0, 17, 36}, 7);
  namespace num = qcc::numerics;
  for (int64_t m = 0; m < c.s.M; ++m) {
    float mx = 0.0f;
    for (int64_t k = 0; k < c.s.K; ++k)
      if (k != 0 && k != 17 && k != 36)
        mx = std::max(mx, std::fabs(c.x.data<float>()[m * c.s.K + k]));
    // The scale comes from the other columns only (the outliers are 100x).
    EXPECT_EQ(c.q[1].data<float>()[m], num::symmetricScale(mx));
    for (int64_t k = 0; k < c.s.K; ++k) {
      bool outlier = k == 0 || k == 17 || k == 36;
      EXPECT_EQ(c.q[0].data<int8_t>()[m * c.s.K + k],
                outlier ? 0
                        : num::quantizeSymmetric(
                              c.x.data<float>()[m * c.s.K + k], mx / 127.0f))
          << "m=" << m << " k=" << k;
    }
  }
}

TEST(Int8Gemm, MixedGemmIsExactAgainstNaive) {
  // Odd shapes; one column, a few, the first and the last.
  const std::pair<Shape3, std::vector<int64_t>> cases[] = {
      {{1, 1, 1}, {0}},           {{1, 17, 5}, {4}},
      {{7, 33, 67}, {0, 3, 66}},  {{9, 50, 131}, {1, 2, 64, 100, 130}},
      {{13, 31, 3}, {1}},         {{17, 64, 260}, {7, 255}}};
  uint32_t seed = 11;
  for (const auto &[s, cols] : cases)
    for (bool withBias : {true, false}) {
      MixedCase c(s, cols, seed++);
      Operands ops = c.ops(withBias);
      std::vector<float> want = c.naive(withBias);
      Tensor ref = runCpuKernel(OpKind::QLinear, Attrs(c.attrs), ops)[0];
      ASSERT_EQ(ref.numel(), (int64_t)want.size());
      EXPECT_EQ(0, std::memcmp(ref.data<float>(), want.data(),
                               want.size() * sizeof(float)))
          << "reference M=" << s.M << " N=" << s.N << " K=" << s.K;
      std::vector<int8_t> wv(c.w.data<int8_t>(),
                             c.w.data<int8_t>() + c.w.numel());
      std::optional<PackedI8Weight> p =
          packForPath(wv.data(), s.N, s.K, CpuKernelPath::Fast);
      const PackedI8Weight *packedOrNot[] = {p ? &*p : nullptr, nullptr};
      for (const PackedI8Weight *packed : packedOrNot) {
        Tensor got = fastQLinearKernel(Attrs(c.attrs), ops, packed)[0];
        EXPECT_EQ(0, std::memcmp(got.data<float>(), want.data(),
                                 want.size() * sizeof(float)))
            << (packed ? "packed" : "portable") << " M=" << s.M
            << " N=" << s.N << " K=" << s.K << " bias=" << withBias;
      }
    }
}

TEST(Int8Gemm, MixedGemmChecksOperands) {
  MixedCase c({2, 3, 8}, {2}, 5);
  auto error = [&](nlohmann::json attrs, Operands ops) {
    try {
      runCpuKernel(OpKind::QLinear, Attrs(attrs), ops);
      return std::string("no error");
    } catch (const std::exception &e) {
      return std::string(e.what());
    }
  };
  auto has = [](const std::string &msg, const char *text) {
    return msg.find(text) != std::string::npos;
  };
  EXPECT_TRUE(has(error({{"outlier_columns", {8}}}, c.ops(true)),
                  "outlier column 8 is outside [0, 8)"));
  EXPECT_TRUE(has(error({{"outlier_columns", {3, 2}}}, c.ops(true)),
                  "ascending and distinct"));
  EXPECT_TRUE(has(error({{"outlier_columns", {2, 3}}}, c.ops(true)),
                  "outlier_weight [3, 1] must be [3, 2]"));
  Operands noFloat = {&c.q[0], &c.q[1], &c.q[2], &c.w, &c.ws, &c.wsum};
  EXPECT_TRUE(has(error(c.attrs, noFloat), "qlinear takes 8 or 9 operands"));
  // Without the attribute the float operands are not taken for a bias.
  EXPECT_TRUE(has(error(kNoAttrs, c.ops(true)), "qlinear takes 6 or 7"));
  Tensor small(DType::F32, {2, 7});
  Operands wrongInput = c.ops(false);
  wrongInput[6] = &small;
  EXPECT_TRUE(has(error(c.attrs, wrongInput),
                  "outlier_input [2, 7] must have the input's shape"));
}

TEST(Int8Gemm, MixedGemmKeepsMassiveActivations) {
  // What the fallback is for: with a column 100x the others, per-token int8
  // gives the other columns a step 100x coarser; keeping the column in
  // float restores them. Relative output error against the float product
  // of the same weights, mixed vs all-int8 (column 9 quantized too).
  namespace num = qcc::numerics;
  MixedCase c({4, 16, 256}, {9}, 21);
  const int64_t M = c.s.M, N = c.s.N, K = c.s.K;
  std::vector<float> mixed = c.naive(false);
  std::vector<double> wf(N * K); // the float weight both approximate
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      wf[n * K + k] = k == 9 ? c.wo.data<float>()[n]
                             : c.w.data<int8_t>()[n * K + k] *
                                   (double)c.ws.data<float>()[n];
  auto fq = [](const float *v, int64_t n, std::vector<double> &out) {
    float mx = 0.0f;
    for (int64_t i = 0; i < n; ++i)
      mx = std::max(mx, std::fabs(v[i]));
    float scale = num::symmetricScale(mx);
    for (int64_t i = 0; i < n; ++i)
      out.push_back(num::quantizeSymmetric(v[i], scale) * (double)scale);
  };
  std::vector<double> xq, wq;
  for (int64_t m = 0; m < M; ++m)
    fq(c.x.data<float>() + m * K, K, xq);
  for (int64_t n = 0; n < N; ++n) {
    std::vector<float> row(wf.begin() + n * K, wf.begin() + (n + 1) * K);
    fq(row.data(), K, wq);
  }
  double errMixed = 0, errInt8 = 0, norm = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double y = 0, y8 = 0;
      for (int64_t k = 0; k < K; ++k) {
        y += (double)c.x.data<float>()[m * K + k] * wf[n * K + k];
        y8 += xq[m * K + k] * wq[n * K + k];
      }
      errMixed += std::pow(mixed[m * N + n] - y, 2);
      errInt8 += std::pow(y8 - y, 2);
      norm += y * y;
    }
  // The other columns' step shrinks about 100x, so the squared error of
  // their part far more; the bound asks for 10x, loose enough for any seed
  // (both sides share the weight quantization error).
  EXPECT_LT(errMixed * 10, errInt8) << errMixed / norm << " vs "
                                    << errInt8 / norm;
}

TEST(Int8Gemm, VectorQuantizeMatchesScalar) {
  // Per-token symmetric quantize on the fast path (AVX-512 where the CPU has
  // it) against the reference path's scalar rule: rows of odd lengths with
  // ties, NaN, infinities, huge and tiny values; dynamic and static scales.
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (int64_t K : {1, 15, 16, 17, 33, 100}) {
    for (int variant = 0; variant < 4; ++variant) {
      Tensor x(DType::F32, {3, K});
      float *X = x.data<float>();
      for (int64_t i = 0; i < x.numel(); ++i)
        X[i] = u(rng);
      // Row 0: ties at scale 1 (absmax 127); row 1: specials; row 2 random.
      X[0] = 127.0f;
      for (int64_t k = 1; k < K; ++k)
        X[k] = (float)(k % 9) - 4.5f;
      const float specials[] = {nan, -0.0f, 1e30f, -1e-30f, 0.5f, -2.5f};
      for (int64_t k = 0; k < K; ++k)
        X[K + k] = specials[k % 6];
      if (variant == 1)
        X[K] = inf;
      if (variant == 3)
        std::fill(X, X + K, 0.0f); // a zero row: scale 1
      nlohmann::json attrs = {{"granularity", "per_token"}};
      if (variant == 2)
        attrs["scale"] = 0.02;
      std::vector<Tensor> got[2];
      const CpuKernelPath before = cpuKernelPath();
      int i = 0;
      for (CpuKernelPath path : {CpuKernelPath::Reference, CpuKernelPath::Fast}) {
        setCpuKernelPath(path);
        got[i++] = runCpuKernel(OpKind::Quantize, Attrs(attrs), {&x});
      }
      setCpuKernelPath(before);
      for (int r = 0; r < 2; ++r)
        EXPECT_EQ(0, std::memcmp(got[0][r].raw(), got[1][r].raw(),
                                 got[0][r].bytes()))
            << "K=" << K << " variant " << variant << " result " << r;
    }
  }
}

TEST(Int8Gemm, KvRowQuantizeMatchesScalar) {
  // The int8 KV cache's row rule (quantizeSymmetricRow: AVX-512 on the fast
  // path) against numerics' scalar quantizeSymmetric, bit for bit: per-channel
  // scales (keys) and one scale (values), rows of odd lengths (the masked
  // tail) with ties, NaN, infinities, huge and tiny values.
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  const float specials[] = {nan, -0.0f, 1e30f, -1e-30f, 0.5f, -2.5f, inf,
                            -inf, 126.5f, -127.5f, 1.5f};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f), s(0.005f, 0.05f);
  const CpuKernelPath before = cpuKernelPath();
  setCpuKernelPath(CpuKernelPath::Fast);
  for (int64_t n : {1, 15, 16, 17, 64, 80, 100}) {
    std::vector<float> x(n), scales(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = i % 3 == 0 ? specials[i % 11] : u(rng);
      scales[i] = i % 4 == 0 ? 1.0f : s(rng); // scale 1: the ties stay ties
    }
    for (bool perChannel : {true, false}) {
      std::vector<int8_t> got(n);
      quantizeSymmetricRow(x.data(), n, perChannel ? scales.data() : nullptr,
                           0.02f, got.data());
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(got[i], quantizeSymmetric(x[i], perChannel ? scales[i]
                                                             : 0.02f))
            << "n=" << n << " i=" << i << " x=" << x[i]
            << (perChannel ? " per channel" : " one scale");
    }
  }
  setCpuKernelPath(before);
}
