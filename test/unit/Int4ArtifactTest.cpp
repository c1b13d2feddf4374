//===- Int4ArtifactTest.cpp - W4A16 weights in artifacts ------------------===//
//
// An artifact with a qcc.weight_int4 of constants (act-order permutation
// included, symmetric and with offsets): the session runs the linear from
// the packed form (the weight_int4 node skipped) and agrees with the
// reference path, which dequantizes; the loader refuses a permutation that
// is not one, naming the file, function and node.
//
//===----------------------------------------------------------------------===//
#include "format/ArtifactFormat.h"
#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/Session.h"
#include "runtime/cpu/CpuInt8Gemm.h"
#include "runtime/cpu/CpuW4A8Kernels.h"
#include "runtime/core/HalfFloat.h"
#include "test/unit/ArtifactTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

using namespace qcc::rt;
using namespace qcc::artifacttest;

namespace {

/// x [2, 3, 64] f32; linear to N = 4 through weight_int4 with groups of 32,
/// every byte 0x2F (q = -1 at even k, 2 at odd k; with `offsets` u = 15 and
/// 2 and offsets -4 and 1), scales 0.5 and 0.25, and the reversing
/// permutation (stored column j is column 63 - j). `int8Input`: the linear
/// reads x quantized per token and read back (W4A8).
std::string int4Module(bool offsets = false, bool int8Input = false) {
  std::string perm;
  for (int j = 0; j < 64; ++j)
    perm += (j ? ", " : "") + std::to_string(63 - j);
  return R"mlir(
func.func @main(%x: tensor<2x3x64xf32>) -> tensor<2x3x4xf32> {
  %p = qcc.constant dense<47> : tensor<4x32xi8>
  %s = qcc.constant dense<[[0.5, 0.25], [0.5, 0.25], [0.5, 0.25], [0.5, 0.25]]> : tensor<4x2xf16>
  %r = qcc.constant dense<[)mlir" +
         perm + R"mlir(]> : tensor<64xi32>
)mlir" +
         (offsets ? R"mlir(
  %o = qcc.constant dense<[[-4.0, 1.0], [-4.0, 1.0], [-4.0, 1.0], [-4.0, 1.0]]> : tensor<4x2xf16>
  %w = qcc.weight_int4 %p, %s, %r offsets %o group_size 32 : (tensor<4x32xi8>, tensor<4x2xf16>, tensor<64xi32>, tensor<4x2xf16>) -> tensor<4x64xf32>
)mlir"
                  : R"mlir(
  %w = qcc.weight_int4 %p, %s, %r group_size 32 : (tensor<4x32xi8>, tensor<4x2xf16>, tensor<64xi32>) -> tensor<4x64xf32>
)mlir") + R"mlir(  %b = qcc.constant dense<0.5> : tensor<4xf32>
)mlir" + (int8Input ? R"mlir(  %xq, %xs, %xz = qcc.quantize %x {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<2x3x64xf32>) -> (tensor<2x3x64xf32>, tensor<2x3x1xf32>, tensor<2x3x1xi32>)
  %y = qcc.linear %xq, %w, %b : (tensor<2x3x64xf32>, tensor<4x64xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
)mlir" : R"mlir(  %y = qcc.linear %x, %w, %b : (tensor<2x3x64xf32>, tensor<4x64xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
)mlir") + R"mlir(
  return %y : tensor<2x3x4xf32>
}
)mlir";
}

/// int4Module's artifact.
Artifact int4Artifact(bool offsets, bool int8Input = false) {
  mlir::MLIRContext ctx;
  std::string text = int4Module(offsets, int8Input);
  auto module = parse(ctx, text.c_str());
  if (!module)
    throw std::runtime_error("int4Module does not parse");
  return Artifact::fromBytes(serialize(*module), "test");
}

TEST(Int4Artifact, SessionFastAndReference) {
  for (bool offsets : {false, true}) {
    Artifact a = int4Artifact(offsets);
    Tensor x(DType::F32, {2, 3, 64});
    std::mt19937 rng(2);
    std::normal_distribution<float> normal;
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = normal(rng);
    auto runs = runFastAndReference(
        a, "main", {{a.function("main").inputs.at(0).name, x}});
    EXPECT_EQ(runs[CpuKernelPath::Fast].ran, std::vector<std::string>{"linear"});
    EXPECT_EQ(runs[CpuKernelPath::Reference].ran,
              (std::vector<std::string>{"weight_int4", "linear"}));
    const Tensor &f = runs[CpuKernelPath::Fast].out.begin()->second,
                 &r = runs[CpuKernelPath::Reference].out.begin()->second;
    ASSERT_EQ(f.shape(), (Shape{2, 3, 4}));
    ASSERT_EQ(f.shape(), r.shape());
    for (int64_t m = 0; m < 6; ++m) {
      // Stored column j (weight column 63 - j): q = -1 (even j) or 2 (odd j)
      // times 0.5 (j < 32) or 0.25; with offsets u = 15 or 2, plus -4 or 1:
      // the exact sum in double.
      double want = 0.5;
      for (int j = 0; j < 64; ++j) {
        double s = j < 32 ? 0.5 : 0.25;
        double w = offsets ? (j % 2 ? 2.0 : 15.0) * s + (j < 32 ? -4.0 : 1.0)
                           : (j % 2 ? 2.0 : -1.0) * s;
        want += w * x.data<float>()[m * 64 + 63 - j];
      }
      for (int64_t n = 0; n < 4; ++n) {
        // f32 sums of 65 terms of magnitude up to 4: well within 1e-4.
        EXPECT_NEAR(f.data<float>()[m * 4 + n], want, 1e-4) << offsets;
        EXPECT_NEAR(r.data<float>()[m * 4 + n], want, 1e-4) << offsets;
      }
    }
  }
}

// The fast path's cost of the linear (qrun --profile's bytes and MBU)
// reads the packed form: 128 bytes of codes, 16 of f16 scales, 256 of
// permutation (and 16 of offsets) plus the 16-byte bias, not the dense f32
// [4, 64] weight (1,024 bytes).
TEST(Int4Artifact, ProfileCountsThePackedBytes) {
  for (bool offsets : {false, true}) {
    Artifact a = int4Artifact(offsets);
    ScopedCpuKernelPath fast(CpuKernelPath::Fast);
    Session session(a);
    std::vector<std::pair<std::string, double>> seen;
    session.setTracer([&](const Session::NodeRun &r) {
      seen.emplace_back(opKindName(r.node.kind), r.cost.weightBytes);
    });
    Tensor x(DType::F32, {2, 3, 64});
    session.run("main", {{a.function("main").inputs.at(0).name, x}});
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].first, "linear");
    EXPECT_EQ(seen[0].second, 128 + 16 + 256 + (offsets ? 16 : 0) + 16)
        << offsets;
  }
}

// W4A8: with its input a quantize to f32 (per token), the fast path on a
// VNNI CPU runs the linear as int8 x int4 codes (CpuW4A8Kernels.h): the
// session's result is w4a8LinearKernel's bit for bit, on the values and
// scales the quantize gives.
TEST(Int4Artifact, W4A8RunsTheCodeKernel) {
  if (!cpuHasVnni())
    GTEST_SKIP() << "no AVX-512 VNNI: the W4A16 kernel reads the values";
  for (bool offsets : {false, true}) {
    Artifact a = int4Artifact(offsets, /*int8Input=*/true);
    Tensor x(DType::F32, {2, 3, 64});
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = normal(rng);
    ScopedCpuKernelPath fast(CpuKernelPath::Fast);
    Session session(a);
    Tensor y = session.run("main", {{a.function("main").inputs.at(0).name, x}})
                   .begin()->second;
    // The same weight as the module's constants, and the quantize's results.
    Tensor packed(DType::I8, {4, 32}), scales(DType::F16, {4, 2}),
        perm(DType::I32, {64}), offs(DType::F16, {4, 2}), bias(DType::F32, {4});
    for (int64_t i = 0; i < 128; ++i)
      packed.data<int8_t>()[i] = 47;
    for (int64_t i = 0; i < 8; ++i) {
      scales.data<uint16_t>()[i] = floatToHalf(i % 2 ? 0.25f : 0.5f);
      offs.data<uint16_t>()[i] = floatToHalf(i % 2 ? 1.0f : -4.0f);
    }
    for (int32_t j = 0; j < 64; ++j)
      perm.data<int32_t>()[j] = 63 - j;
    for (int64_t n = 0; n < 4; ++n)
      bias.data<float>()[n] = 0.5f;
    std::vector<Tensor> q = runCpuKernel(
        qcc::format::OpKind::Quantize,
        Attrs(nlohmann::json{{"granularity", "per_token"}, {"to", "f32"}}), {&x});
    PackedW4A8Weight w = packW4A8Weight(
        int4Weight(packed, scales, &perm, offsets ? &offs : nullptr, 32));
    Tensor want = w4a8LinearKernel({&q[0], nullptr, &bias}, w, q[1])[0];
    ASSERT_EQ(y.shape(), want.shape());
    for (int64_t i = 0; i < y.numel(); ++i)
      ASSERT_EQ(y.data<float>()[i], want.data<float>()[i]) << offsets << " " << i;
  }
}

TEST(Int4Artifact, LoaderRefusesABadPermutation) {
  mlir::MLIRContext ctx;
  std::string text = int4Module();
  auto module = parse(ctx, text.c_str());
  ASSERT_TRUE(module);
  auto bytes = serialize(*module);
  Artifact a = Artifact::fromBytes(bytes, "good.qpkg");
  const Node &w = nodeOf(a.function("main"), OpKind::WeightInt4);
  const Tensor *perm = a.constant(w.inputs[2]);
  ASSERT_TRUE(perm);
  // perm[5] := perm[6]: column 57 twice, column 58 never.
  size_t at = (const char *)perm->raw() - bytes->data();
  std::memcpy(bytes->data() + at + 5 * 4, bytes->data() + at + 6 * 4, 4);
  qcc::format::sealCrc(*bytes);
  try {
    Artifact::fromBytes(bytes, "bad.qpkg");
    ADD_FAILURE() << "a bad permutation loaded";
  } catch (const std::runtime_error &e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("bad.qpkg: function 'main', node '", 0), 0u) << m;
    EXPECT_NE(m.find("(weight_int4): permutation names column 57 twice"),
              std::string::npos)
        << m;
  }
}

} // namespace
