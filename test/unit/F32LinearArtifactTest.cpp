//===- F32LinearArtifactTest.cpp - float linears from packed weights ------===//
//
// A session runs an artifact's float32 linears (plain, + add and + gelu,
// which the fast path fuses, and two linears sharing a weight) from the
// weights packed at load (runtime/cpu/CpuF32Gemm.h, on CPUs with AVX-512F) and
// agrees with the reference path, at 1 row (decode) and 13.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/Session.h"
#include "test/unit/ArtifactTestUtil.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>

using namespace qcc::rt;
using namespace qcc::artifacttest;

TEST(F32Gemm, SessionLinearsFastAndReference) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  auto randomValues = [&](int64_t n, std::mt19937 &g) {
    std::vector<float> v(n);
    for (float &x : v)
      x = normal(g);
    return v;
  };
  for (int64_t M : {1, 13}) {
    auto dense = [&](int64_t rows, int64_t cols) {
      std::ostringstream s;
      s.precision(9);
      s << "dense<[";
      std::vector<float> v = randomValues(rows * cols, rng);
      for (int64_t r = 0; r < rows; ++r) {
        s << (r ? ", [" : "[");
        for (int64_t c = 0; c < cols; ++c)
          s << (c ? ", " : "") << v[r * cols + c];
        s << "]";
      }
      s << "]>";
      return s.str();
    };
    std::string m = std::to_string(M);
    std::string X = "tensor<" + m + "x40xf32>", Y = "tensor<" + m + "x20xf32>",
                W = "tensor<20x40xf32>";
    std::string text =
        "func.func @main(%x: " + X + " {qcc.name = \"x\"}, %r: " + Y +
        " {qcc.name = \"r\"}) -> (" + Y + " {qcc.name = \"y1\"}, " + Y +
        " {qcc.name = \"y2\"}, " + Y + " {qcc.name = \"y3\"}) {\n" +
        "  %w1 = qcc.constant " + dense(20, 40) + " : " + W +
        "\n  %w2 = qcc.constant " + dense(20, 40) + " : " + W +
        "\n  %b = qcc.constant dense<0.5> : tensor<20xf32>\n"
        "  %l1 = qcc.linear %x, %w1, %b : (" + X + ", " + W +
        ", tensor<20xf32>) -> " + Y + "\n  %y1 = qcc.add %l1, %r : (" + Y +
        ", " + Y + ") -> " + Y + "\n  %l2 = qcc.linear %x, %w2 : (" + X +
        ", " + W + ") -> " + Y + "\n  %y2 = qcc.gelu %l2 : " + Y +
        "\n  %y3 = qcc.linear %x, %w1, %b : (" + X + ", " + W +
        ", tensor<20xf32>) -> " + Y + "\n  return %y1, %y2, %y3 : " + Y +
        ", " + Y + ", " + Y + "\n}\n";
    mlir::MLIRContext ctx;
    auto module = parse(ctx, text.c_str());
    ASSERT_TRUE(module) << text;
    Artifact a = Artifact::fromBytes(serialize(*module), "test");
    Tensor x(DType::F32, {M, 40}), r(DType::F32, {M, 20});
    std::vector<float> xv = randomValues(M * 40, rng),
                       rv = randomValues(M * 20, rng);
    std::copy(xv.begin(), xv.end(), x.data<float>());
    std::copy(rv.begin(), rv.end(), r.data<float>());
    // Without a tracer: the fast path fuses linear + add and linear + gelu
    // only when nothing watches each node.
    std::map<CpuKernelPath, std::map<std::string, Tensor>> runs;
    {
      PathGuard guard;
      for (CpuKernelPath path :
           {CpuKernelPath::Fast, CpuKernelPath::Reference}) {
        setCpuKernelPath(path);
        Session s(a);
        runs[path] = s.run("main", {{"x", x}, {"r", r}});
      }
    }
    const auto &fast = runs[CpuKernelPath::Fast],
               &ref = runs[CpuKernelPath::Reference];
    ASSERT_EQ(fast.size(), 3u);
    for (const auto &[name, f] : fast) {
      const Tensor &e = ref.at(name);
      ASSERT_EQ(f.shape(), e.shape());
      // Sums of 40 products of N(0,1) values (|sum| of |products| < 200):
      // float32 roundings in another order, 41 * 2^-23 * 200 < 1e-3; gelu's
      // rational erf is within 2e-7 of erf.
      for (int64_t i = 0; i < f.numel(); ++i)
        EXPECT_NEAR(f.data<float>()[i], e.data<float>()[i], 1e-3)
            << name << " M=" << M << " at " << i;
    }
  }
}
