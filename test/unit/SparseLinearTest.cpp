//===- SparseLinearTest.cpp - 2:4 sparse linears on the CPU --------------===//
//
// runtime/cpu/CpuSparseKernels.h against the reference (decompress, then the
// dense linear / qlinear) at edge shapes: int8 bit for bit, float within the
// bound the header states. The artifact loader's metadata check. End to end:
// the demo model with its linears pruned 2:4 by magnitude (a test-only
// pruner; the sparsify-2-4 pass is the compiler's), float and W8A8, run both
// ways; every 2:4 group of the compiled artifact is checked valid. The
// roofline counts of a small sparse linear against hand computation.
//
//===----------------------------------------------------------------------===//
#include "compiler/ArtifactWriter.h"
#include "compiler/Pipeline.h"
#include "report/RooflineReport.h"
#include "dialects/QccConstants.h"
#include "dialects/QccDialect.h"
#include "dialects/QccOps.h"
#include "format/Sparse24.h"
#include "runtime/cpu/CpuInt8Gemm.h"
#include "runtime/cpu/CpuQuantKernels.h"
#include "runtime/cpu/CpuSparseKernels.h"
#include "runtime/core/HalfFloat.h"
#include "runtime/core/SyntheticWeights.h"
#include "runtime/cpu/Session.h"
#include "test/unit/ArtifactTestUtil.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

using namespace qcc::rt;
using namespace qcc::artifacttest;
using nlohmann::json;
namespace sp = qcc::format::sparse24;

namespace {

/// Restores the sparse path when a test ends.
/// A random [n, k] weight of `t` with at most two nonzeros per group of four
/// (some groups one or none), compressed.
struct SparseWeight {
  Tensor dense, values, meta;
};
SparseWeight randomSparse(std::mt19937 &rng, DType t, int64_t n, int64_t k) {
  SparseWeight w{Tensor(t, {n, k}), Tensor(t, {n, k / 2}),
                 Tensor(DType::I32, {n, k / 32})};
  std::normal_distribution<float> normal;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < k / 4; ++g) {
      int keep = rng() % 8 == 0 ? (int)(rng() % 2) : 2;
      for (int j = 0; j < keep; ++j) {
        int64_t i = r * k + 4 * g + rng() % 4;
        float v = normal(rng);
        switch (t) {
        case DType::F32:
          w.dense.data<float>()[i] = v;
          break;
        case DType::F16:
          w.dense.data<uint16_t>()[i] = floatToHalf(v);
          break;
        case DType::BF16:
          w.dense.data<uint16_t>()[i] = floatToBF16(v);
          break;
        case DType::I8:
          w.dense.data<int8_t>()[i] = (int8_t)(rng() % 255 - 127);
          break;
        default:
          ADD_FAILURE();
        }
      }
    }
  EXPECT_FALSE(sp::compress(w.dense.raw(), n, k, dtypeSize(t),
                            w.values.data<std::byte>(),
                            w.meta.data<int32_t>()));
  return w;
}

Tensor randomF32(std::mt19937 &rng, Shape s) {
  Tensor t(DType::F32, std::move(s));
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = normal(rng);
  return t;
}

Tensor randomI8(std::mt19937 &rng, Shape s) {
  Tensor t(DType::I8, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<int8_t>()[i] = (int8_t)(rng() % 256 - 128);
  return t;
}

/// The reference: the node as the session runs it op by op.
Tensor runRef(OpKind op, const Operands &ops) {
  return computeInF32(op, ops, {DType::F32}, [&](const Operands &o) {
    return runCpuKernel(op, Attrs(json::object()), o);
  })[0];
}

const std::vector<Shape> kInputs = {{1}, {3}, {2, 3}}; // leading dims of x

} // namespace

TEST(SparseLinear, FloatWithinTheStatedBound) {
  std::mt19937 rng(1);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int64_t k : {32, 96, 256})
      for (int64_t n : {1, 5, 64})
        for (const Shape &lead : kInputs)
          for (bool withBias : {false, true}) {
            SparseWeight w = randomSparse(rng, t, n, k);
            Shape xs = lead;
            xs.push_back(k);
            Tensor x = randomF32(rng, xs), b = randomF32(rng, {n});
            const Tensor *bias = withBias ? &b : nullptr;
            Tensor ref = runRef(OpKind::Linear, {&x, &w.dense, bias});
            Tensor got = sparseLinearKernel(
                {&x, nullptr, bias},
                sparseWeight(w.values, w.meta, /*checkMeta=*/true))[0];
            ASSERT_EQ(got.shape(), ref.shape());
            // 2 gamma(K/2 + 1) sum |w x| (+ |bias|): CpuSparseKernels.h.
            Tensor wide = convertFloat(w.dense, DType::F32);
            double u = std::ldexp(1.0, -24), terms = (double)k / 2 + 1;
            double gamma = terms * u / (1 - terms * u);
            int64_t M = x.numel() / k;
            for (int64_t m = 0; m < M; ++m)
              for (int64_t c = 0; c < n; ++c) {
                double mag = withBias ? std::fabs(b.data<float>()[c]) : 0;
                for (int64_t i = 0; i < k; ++i)
                  mag += std::fabs((double)wide.data<float>()[c * k + i] *
                                   x.data<float>()[m * k + i]);
                double diff = std::fabs((double)got.data<float>()[m * n + c] -
                                        ref.data<float>()[m * n + c]);
                ASSERT_LE(diff, 2 * gamma * mag)
                    << dtypeName(t) << " k " << k << " n " << n << " m " << m;
              }
          }
}

TEST(SparseLinear, Int8BitExact) {
  PathGuard guard;
  std::mt19937 rng(2);
  for (CpuKernelPath path : {CpuKernelPath::Fast, CpuKernelPath::Portable})
    for (int64_t k : {32, 96, 256})
      for (int64_t n : {1, 5, 64})
        for (const Shape &lead : kInputs)
          for (int variant = 0; variant < 3; ++variant) {
            // 0: per token, zero points, bias; 1: per tensor; 2: no bias.
            SparseWeight w = randomSparse(rng, DType::I8, n, k);
            Shape xs = lead, rows = lead;
            xs.push_back(k);
            rows.push_back(1);
            bool perToken = variant != 1;
            Tensor x = randomI8(rng, xs);
            Tensor scale(DType::F32, perToken ? rows : Shape{1}),
                zero(DType::I32, perToken ? rows : Shape{1});
            for (int64_t i = 0; i < scale.numel(); ++i) {
              scale.data<float>()[i] = 0.01f + 0.001f * (float)(rng() % 100);
              zero.data<int32_t>()[i] =
                  variant == 0 ? (int32_t)(rng() % 9) - 4 : 0;
            }
            Tensor ws = randomF32(rng, {n}), wsum(DType::I32, {n}),
                   b = randomF32(rng, {n});
            for (int64_t r = 0; r < n; ++r)
              for (int64_t i = 0; i < k; ++i)
                wsum.data<int32_t>()[r] += w.dense.data<int8_t>()[r * k + i];
            const Tensor *bias = variant == 2 ? nullptr : &b;
            Tensor ref = runRef(OpKind::QLinear, {&x, &scale, &zero, &w.dense,
                                                  &ws, &wsum, bias});
            setCpuKernelPath(path);
            Tensor got = sparseQLinearKernel(
                {&x, &scale, &zero, nullptr, &ws, &wsum, bias},
                sparseWeight(w.values, w.meta, true))[0];
            ASSERT_EQ(got.shape(), ref.shape());
            ASSERT_EQ(std::memcmp(got.raw(), ref.raw(), got.bytes()), 0)
                << "k " << k << " n " << n << " variant " << variant
                << (path == CpuKernelPath::Portable ? " (portable)" : "");
          }
}

// Large enough to thread (M N K > kQLinearParallelWork): still bit for bit.
TEST(SparseLinear, Int8ThreadedBitExact) {
  std::mt19937 rng(3);
  const int64_t M = 8, N = 512, K = 512;
  ASSERT_GT(M * N * K, kQLinearParallelWork);
  SparseWeight w = randomSparse(rng, DType::I8, N, K);
  Tensor x = randomI8(rng, {M, K}), scale(DType::F32, {1}),
         zero(DType::I32, {1}), ws = randomF32(rng, {N}), wsum(DType::I32, {N});
  scale.data<float>()[0] = 0.02f;
  Tensor ref =
      runRef(OpKind::QLinear, {&x, &scale, &zero, &w.dense, &ws, &wsum});
  Tensor got = sparseQLinearKernel({&x, &scale, &zero, nullptr, &ws, &wsum},
                                   sparseWeight(w.values, w.meta, true))[0];
  EXPECT_EQ(std::memcmp(got.raw(), ref.raw(), got.bytes()), 0);
}

TEST(SparseLinear, Refusals) {
  Tensor values(DType::F32, {4, 16}), meta(DType::I32, {4, 1});
  Tensor badMeta(DType::I32, {4, 2}), wrongK(DType::F32, {4, 8});
  EXPECT_THROW(sparseWeight(values, badMeta, false), std::runtime_error);
  EXPECT_THROW(sparseWeight(wrongK, meta, false), std::runtime_error);
  // All-zero metadata names position 0 twice.
  try {
    sparseWeight(values, meta, true);
    ADD_FAILURE() << "invalid metadata accepted";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("row 0, group 0"), std::string::npos)
        << e.what();
  }
  Tensor x(DType::F32, {2, 16});
  for (int64_t i = 0; i < meta.numel(); ++i)
    meta.data<int32_t>()[i] = 0x44444444;
  EXPECT_THROW(sparseLinearKernel({&x}, sparseWeight(values, meta, true)),
               std::runtime_error);
}

//===----------------------------------------------------------------------===//
// Artifacts
//===----------------------------------------------------------------------===//

namespace {

// x [2, 3, 64] f32; linear to N = 4 through sparse_2_4 (every group keeps
// positions 0 and 1: 0x44444444 = 1145324612).
const char *kSparseModule = R"mlir(
func.func @main(%x: tensor<2x3x64xf32>) -> tensor<2x3x4xf32> {
  %v = qcc.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]]> : tensor<4x32xf32>
  %m = qcc.constant dense<1145324612> : tensor<4x2xi32>
  %w = qcc.sparse_2_4 %v, %m : (tensor<4x32xf32>, tensor<4x2xi32>)
       -> tensor<4x64xf32>
  %b = qcc.constant dense<0.5> : tensor<4xf32>
  %y = qcc.linear %x, %w, %b : (tensor<2x3x64xf32>, tensor<4x64xf32>,
       tensor<4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}
)mlir";


} // namespace

// The loader checks a sparse_2_4's constant metadata once, and names the
// file, the function, the node and the group.
TEST(SparseArtifact, LoaderRefusesInvalidMetadata) {
  mlir::MLIRContext ctx;
  auto module = parse(ctx, kSparseModule);
  ASSERT_TRUE(module);
  auto bytes = serialize(*module);
  Artifact a = Artifact::fromBytes(bytes, "good.qpkg");
  const Node &s = nodeOf(a.function("main"), OpKind::Sparse24);
  // Group 9 (word 1, nibble 1) of row 2 names positions 3 and 1.
  const Tensor *meta = a.constant(s.inputs[1]);
  size_t at = (const char *)meta->raw() - bytes->data() + (2 * 2 + 1) * 4;
  int32_t word = 0x44444444 ^ 0x40 ^ 0x70; // nibble 1: 0x4 -> 0x7
  std::memcpy(bytes->data() + at, &word, 4);
  qcc::format::sealCrc(*bytes); // anyone can recompute the CRC
  try {
    Artifact::fromBytes(bytes, "bad.qpkg");
    ADD_FAILURE() << "invalid metadata loaded";
  } catch (const std::runtime_error &e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("bad.qpkg: function 'main', node '", 0), 0u) << m;
    EXPECT_NE(m.find("(sparse_2_4): invalid metadata: row 2, group 9"),
              std::string::npos)
        << m;
  }
}

// qcc --synthetic-weights (runtime/core/SyntheticWeights.h): a 2:4 weight's
// values and metadata of 64 KiB or more become records; the loader expands
// them into valid metadata (its check of every group passes) and values of
// the weight's RMS; the small bias stays real.
TEST(SparseArtifact, SyntheticWeights) {
  mlir::MLIRContext ctx;
  auto module = parse(ctx, R"mlir(
func.func @main(%x: tensor<1x2048xf32>) -> tensor<1x512xf32> {
  %v = qcc.constant dense<0.5> : tensor<512x1024xf32>
  %m = qcc.constant dense<1145324612> : tensor<512x64xi32>
  %w = qcc.sparse_2_4 %v, %m : (tensor<512x1024xf32>, tensor<512x64xi32>)
       -> tensor<512x2048xf32>
  %b = qcc.constant dense<0.25> : tensor<512xf32>
  %y = qcc.linear %x, %w, %b : (tensor<1x2048xf32>, tensor<512x2048xf32>,
       tensor<512xf32>) -> tensor<1x512xf32>
  return %y : tensor<1x512xf32>
}
)mlir");
  ASSERT_TRUE(module);
  qcc::ArtifactOptions o;
  o.syntheticWeights = true;
  auto bytes = serialize(*module, o);
  EXPECT_LT(bytes->size(), 64u << 10); // no weight data travels
  Artifact a = Artifact::fromBytes(bytes, "synthetic.qpkg");
  EXPECT_EQ(a.syntheticBytes(), 512u * 1024 * 4 + 512 * 64 * 4);
  const Node &s = nodeOf(a.function("main"), OpKind::Sparse24);
  const Tensor *values = a.constant(s.inputs[0]);
  const Tensor *meta = a.constant(s.inputs[1]);
  ASSERT_TRUE(values && meta);
  // The RMS of 512K draws is within 1% of the splat's 0.5 (standard error
  // 0.1%).
  EXPECT_NEAR(qcc::rt::synthetic::rms(DType::F32, values->raw(),
                                      values->numel()),
              0.5, 0.005);
  int kept01 = 0;
  for (int64_t i = 0; i < meta->numel(); ++i)
    kept01 += meta->data<int32_t>()[i] == 0x44444444;
  EXPECT_LT(kept01, 10); // random patterns, not the compiled ones
  const Node &lin = nodeOf(a.function("main"), OpKind::Linear);
  const Tensor *bias = a.constant(lin.inputs[2]);
  ASSERT_TRUE(bias);
  EXPECT_EQ(bias->data<float>()[7], 0.25f);
}

/// Restores the 2:4 mode a test sets (runtime/cpu/CpuSparseKernels.h).
struct SparseModeGuard {
  SparseMode saved = sparseMode();
  ~SparseModeGuard() { setSparseMode(saved); }
};

/// kSparseModule's main on a random [2, 3, 64] input with the fast and the
/// reference path: the fast result within summation order of the
/// reference's; the linear's cost on each path.
std::map<CpuKernelPath, Cost> runSparseModule(const Artifact &a) {
  std::mt19937 rng(4);
  std::map<CpuKernelPath, Cost> linearCost;
  auto runs = runFastAndReference(
      a, "main",
      {{a.function("main").inputs.at(0).name, randomF32(rng, {2, 3, 64})}},
      [&](CpuKernelPath p, const Session::NodeRun &r) {
        if (r.node.kind == OpKind::Linear)
          linearCost[p] = r.cost;
      });
  EXPECT_EQ(runs[CpuKernelPath::Fast].ran, std::vector<std::string>{"linear"});
  EXPECT_EQ(runs[CpuKernelPath::Reference].ran,
            (std::vector<std::string>{"sparse_2_4", "linear"}));
  const Tensor &f = runs[CpuKernelPath::Fast].out.begin()->second,
               &r = runs[CpuKernelPath::Reference].out.begin()->second;
  EXPECT_EQ(f.shape(), r.shape());
  for (int64_t i = 0; i < f.numel() && f.shape() == r.shape(); ++i)
    EXPECT_NEAR(f.data<float>()[i], r.data<float>()[i],
                1e-5 * (1 + std::fabs(r.data<float>()[i])));
  return linearCost;
}

// With the sparse kernels (SparseMode::Sparse; the rule on CPUs without
// VNNI), the session skips the sparse_2_4 node, runs the linear from the
// compressed weight and costs it as such; the reference path decompresses.
TEST(SparseArtifact, SessionFastAndReference) {
  SparseModeGuard guard;
  setSparseMode(SparseMode::Sparse); // the sparse kernel and its cost
  mlir::MLIRContext ctx;
  auto module = parse(ctx, kSparseModule);
  ASSERT_TRUE(module);
  Artifact a = Artifact::fromBytes(serialize(*module), "test");
  std::map<CpuKernelPath, Cost> linearCost = runSparseModule(a);
  // M = 6, N = 4, K = 64: M N K multiply-adds of the kept values; values
  // 4 x 32 f32 + metadata 4 x 2 i32 + bias 4 f32 = 512 + 32 + 16 bytes of
  // weights; x 6 x 64 f32 read, y 6 x 4 f32 written.
  const Cost &c = linearCost[CpuKernelPath::Fast];
  EXPECT_EQ(c.flops, 6.0 * 4 * 64);
  EXPECT_EQ(c.weightBytes, 512.0 + 32 + 16);
  EXPECT_EQ(c.activationBytes, 6.0 * 64 * 4 + 6 * 4 * 4);
  // The same counts from the function's own view (qcc --report's section),
  // and the dense alternative: 2 M N K, the 4 x 64 f32 weight.
  std::map<size_t, CompressedWeight> sparse =
      compressedWeights(a, a.function("main"));
  ASSERT_EQ(sparse.size(), 1u);
  const Node &linear = a.function("main").nodes.at(sparse.begin()->first);
  SparseLinearCost both =
      sparseLinearCost(a, linear, sparse.begin()->second, 6);
  EXPECT_EQ(both.sparse.flops, c.flops);
  EXPECT_EQ(both.sparse.weightBytes, c.weightBytes);
  EXPECT_EQ(both.sparse.activationBytes, c.activationBytes);
  EXPECT_EQ(both.dense.flops, 2.0 * 6 * 4 * 64);
  EXPECT_EQ(both.dense.weightBytes, 4.0 * 64 * 4 + 16);
  EXPECT_EQ(both.dense.activationBytes, c.activationBytes);
}

// Where the dense kernels are faster (AVX-512 VNNI), the fast path expands
// a 2:4 weight once and runs the dense packed GEMM: the reference's
// results up to summation order, the dense weight's cost.
TEST(SparseArtifact, SessionRunsDenseWhereFaster) {
  if (!cpuHasVnni())
    GTEST_SKIP() << "no AVX-512 VNNI: 2:4 runs the sparse kernels here";
  SparseModeGuard guard;
  setSparseMode(SparseMode::Auto);
  EXPECT_TRUE(sparseRunsDense());
  mlir::MLIRContext ctx;
  auto module = parse(ctx, kSparseModule);
  ASSERT_TRUE(module);
  Artifact a = Artifact::fromBytes(serialize(*module), "test");
  std::map<CpuKernelPath, Cost> linearCost = runSparseModule(a);
  std::map<size_t, CompressedWeight> sparse =
      compressedWeights(a, a.function("main"));
  ASSERT_EQ(sparse.size(), 1u);
  const Node &linear = a.function("main").nodes.at(sparse.begin()->first);
  const Cost dense = sparseLinearCost(a, linear, sparse.begin()->second, 6).dense;
  EXPECT_EQ(linearCost[CpuKernelPath::Fast].flops, dense.flops);
  EXPECT_EQ(linearCost[CpuKernelPath::Fast].weightBytes, dense.weightBytes);
}

// qcc --report's section (issue 15 item 7) at batch 1, context 6: decode
// M = 1, prefill M = 6. Both memory-bound on H100 and H200, so each speedup
// is the ratio of bytes: decode (1024 + 16 + 64 x 4 + 4 x 4) / (544 + 16 +
// 272) = 1312 / 832, prefill (1040 + 1632) / (560 + 1632) = 2672 / 2192.
TEST(SparseArtifact, ReportSection) {
  mlir::MLIRContext ctx;
  auto module = parse(ctx, kSparseModule);
  ASSERT_TRUE(module);
  Artifact a = Artifact::fromBytes(serialize(*module), "test");
  qcc::RooflineOptions o;
  o.context = 6;
  qcc::SparseLinears s = qcc::sparseLinearReport(a, o, gpuPeaks());
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.decodeRows, 1);
  EXPECT_EQ(s.prefillRows, 6);
  const qcc::SparseLinearRow &r = s.rows[0];
  EXPECT_EQ(r.n, 4);
  EXPECT_EQ(r.k, 64);
  EXPECT_EQ(r.decode.sparse.flops, 256.0);
  EXPECT_EQ(r.decode.dense.flops, 512.0);
  EXPECT_EQ(r.decode.sparse.bytes(), 832.0);
  EXPECT_EQ(r.decode.dense.bytes(), 1312.0);
  for (size_t t = 0; t < gpuPeaks().size(); ++t) {
    EXPECT_NEAR(r.decodeSpeedup[t], 1312.0 / 832, 1e-12);
    EXPECT_NEAR(r.prefillSpeedup[t], 2672.0 / 2192, 1e-12);
    EXPECT_NEAR(s.total.decodeSpeedup[t], 1312.0 / 832, 1e-12);
  }
  qcc::RooflineReport report;
  report.sparse = s;
  json j = qcc::rooflineReportJson(report)["sparse_linears"];
  EXPECT_EQ(j["prefill_rows"], 6);
  EXPECT_EQ(j["linears"][0]["k"], 64);
  EXPECT_EQ(j["linears"][0]["decode"]["sparse"]["weight_bytes"], 560.0);
  EXPECT_NEAR(j["total"]["prefill"]["speedup"]["H100"].get<double>(),
              2672.0 / 2192, 1e-12);
}

//===----------------------------------------------------------------------===//
// End to end: the demo model pruned 2:4
//===----------------------------------------------------------------------===//

namespace {

/// A test-only pruner: every linear / qlinear with a constant weight whose
/// K is a multiple of 32 keeps the two largest |w| of each group of four;
/// the weight becomes qcc.sparse_2_4 of constants (and a qlinear's
/// weight_sum is recomputed from the pruned weight). Returns the pruned
/// dense weights' bytes.
std::set<std::string> pruneByMagnitude(mlir::ModuleOp module) {
  std::set<std::string> pruned;
  std::map<const void *, std::tuple<mlir::ElementsAttr, mlir::ElementsAttr,
                                    mlir::ElementsAttr>>
      done;
  mlir::OpBuilder b(module.getContext());
  auto constantOf = [](mlir::Value v) {
    return v.getDefiningOp<qcc::ConstantOp>();
  };
  auto prune = [&](mlir::Operation *op, mlir::Value weight,
                   qcc::ConstantOp wsum) -> bool {
    auto c = constantOf(weight);
    auto type = mlir::cast<mlir::RankedTensorType>(weight.getType());
    if (!c || type.getDimSize(1) % 32 != 0)
      return false;
    auto bytes = qcc::getBytes(c.getValue());
    if (!bytes)
      return false;
    int64_t n = type.getDimSize(0), k = type.getDimSize(1);
    // Entry points share weights (prefill, decode): prune each once, so that
    // their constants share one blob (the artifact writer keys blobs by
    // attribute).
    auto &[vAttr, mAttr, sAttr] = done[c.getValue().getAsOpaquePointer()];
    bool i8 = type.getElementType().isInteger(8);
    std::optional<std::vector<float>> f;
    if (!i8)
      f = qcc::getF32Values(c.getValue());
    size_t eb = i8 ? 1 : type.getElementTypeBitWidth() / 8;
    std::vector<char> dense = *bytes;
    for (int64_t g = 0; g < n * k / 4 && !vAttr; ++g) {
      float mag[4];
      for (int j = 0; j < 4; ++j)
        mag[j] = i8 ? std::fabs((float)(int8_t)dense[4 * g + j])
                    : std::fabs((*f)[4 * g + j]);
      for (int drop = 0; drop < 2; ++drop) { // the two smallest, lowest first
        int s = -1;
        for (int j = 0; j < 4; ++j)
          if (mag[j] >= 0 && (s < 0 || mag[j] < mag[s]))
            s = j;
        mag[s] = -1;
        std::memset(dense.data() + (4 * g + s) * eb, 0, eb);
      }
    }
    auto vType = mlir::RankedTensorType::get({n, k / 2}, type.getElementType());
    auto mType = mlir::RankedTensorType::get({n, k / 32}, b.getI32Type());
    if (!vAttr) {
      std::vector<char> values(n * k / 2 * eb), meta(n * k / 32 * 4);
      EXPECT_FALSE(sp::compress(dense.data(), n, k, eb, values.data(),
                                (int32_t *)meta.data()));
      pruned.insert(std::string(dense.begin(), dense.end()));
      vAttr = qcc::makeElements(vType, values, "sparse_values");
      mAttr = qcc::makeElements(mType, meta, "sparse_meta");
      if (wsum) {
        std::vector<int32_t> sums(n, 0);
        for (int64_t r = 0; r < n; ++r)
          for (int64_t i = 0; i < k; ++i)
            sums[r] += (int8_t)dense[r * k + i];
        sAttr = qcc::makeElements(
            mlir::cast<mlir::RankedTensorType>(wsum.getType()),
            llvm::ArrayRef<char>((const char *)sums.data(), sums.size() * 4),
            "sparse_wsum");
      }
    }
    b.setInsertionPoint(op);
    auto v = qcc::ConstantOp::create(b, op->getLoc(), vAttr);
    auto m = qcc::ConstantOp::create(b, op->getLoc(), mAttr);
    auto s = qcc::Sparse24Op::create(b, op->getLoc(), type, v, m);
    op->replaceUsesOfWith(weight, s);
    if (wsum) {
      auto ns = qcc::ConstantOp::create(b, op->getLoc(), sAttr);
      op->replaceUsesOfWith(wsum, ns);
      if (wsum->use_empty())
        wsum->erase();
    }
    if (c->use_empty()) // a tied LM head keeps the embedding's table
      c->erase();
    return true;
  };
  module.walk([&](qcc::LinearOp l) { prune(l, l.getWeight(), nullptr); });
  module.walk([&](qcc::QLinearOp q) {
    prune(q, q.getWeight(), constantOf(q.getWeightSum()));
  });
  return pruned;
}

/// The demo model compiled for the CPU (by default without a KV cache: one
/// entry point, main), pruned unless `prune` is false, as an artifact.
struct PrunedDemo {
  std::optional<Artifact> artifact;
  std::shared_ptr<std::vector<char>> bytes;
  std::set<std::string> pruned;
};
PrunedDemo prunedDemo(qcc::QuantMode quant,
                      qcc::KvLayout kv = qcc::KvLayout::None,
                      bool prune = true) {
  qcc::CompileOptions o;
  o.quant = quant;
  o.kvCache = kv;
  o.gpuKernels = false;
  o.quiet = true;
  if (quant != qcc::QuantMode::None)
    o.calibration.statsPath =
        QCC_SOURCE_DIR "/test/codegen/Inputs/austen-stats.json";
  mlir::MLIRContext ctx;
  PrunedDemo d;
  auto c = qcc::compileTo(ctx, QCC_SOURCE_DIR "/examples/austen/model.onnx",
                          qcc::Phase::KvLayout, o);
  EXPECT_TRUE(!!c) << llvm::toString(c.takeError());
  if (!c)
    return d;
  if (prune)
    d.pruned = pruneByMagnitude(*c->module);
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*c->module)));
  d.bytes = serialize(*c->module);
  d.artifact.emplace(Artifact::fromBytes(d.bytes, "demo"));
  return d;
}

/// Every sparse_2_4 node of constants in `a`: its metadata valid, its
/// values the kept elements of one of the pruned weights. The number of
/// such nodes.
int checkEveryGroup(const Artifact &a, const std::set<std::string> &pruned) {
  int nodes = 0;
  for (const Function &fn : a.functions())
    for (const Node &n : fn.nodes) {
      if (n.kind != OpKind::Sparse24)
        continue;
      const Tensor *v = a.constant(n.inputs[0]), *m = a.constant(n.inputs[1]);
      EXPECT_TRUE(v && m) << n.name;
      if (!v || !m)
        continue;
      int64_t rows = v->dim(0), k = v->dim(1) * 2;
      EXPECT_EQ(m->dim(0), rows);
      EXPECT_EQ(m->dim(1), sp::metaCols(k));
      EXPECT_FALSE(sp::validateMeta(m->data<int32_t>(), rows, k)) << n.name;
      std::string dense(rows * k * dtypeSize(v->dtype()), '\0');
      sp::decompress(v->raw(), m->data<int32_t>(), rows, k,
                     dtypeSize(v->dtype()), dense.data());
      EXPECT_TRUE(pruned.count(dense)) << n.name << ": values do not match";
      ++nodes;
    }
  return nodes;
}

/// Token ids (and a mask of ones) for main's inputs.
std::map<std::string, Tensor> demoInput(const Function &fn, int64_t batch,
                                        int64_t seq) {
  std::map<std::string, Tensor> in;
  for (const Port &p : fn.inputs) {
    Tensor t(p.dtype, {batch, seq});
    bool mask = p.name.find("mask") != std::string::npos;
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<int64_t>()[i] = mask ? 1 : 5 + (i * 37) % 2900;
    in[p.name] = t;
  }
  return in;
}

/// {max |fast - reference|, max |reference|} over two equal-shaped tensors.
std::pair<double, double> worstDifference(const Tensor &fast,
                                          const Tensor &ref) {
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < fast.numel(); ++i) {
    worst = std::max(
        worst, (double)std::fabs(fast.data<float>()[i] - ref.data<float>()[i]));
    scale = std::max(scale, (double)std::fabs(ref.data<float>()[i]));
  }
  return {worst, scale};
}

/// Runs main both ways; returns {fast, reference} logits and checks that
/// only the reference runs sparse_2_4 nodes.
std::pair<Tensor, Tensor> bothWays(const Artifact &a) {
  std::map<CpuKernelPath, int> decompressed;
  auto runs = runFastAndReference(
      a, "main", demoInput(a.function("main"), 2, 7),
      [&](CpuKernelPath p, const Session::NodeRun &r) {
        decompressed[p] += r.node.kind == OpKind::Sparse24;
      });
  EXPECT_EQ(decompressed[CpuKernelPath::Fast], 0);
  EXPECT_GT(decompressed[CpuKernelPath::Reference], 0);
  return {runs[CpuKernelPath::Fast].out.begin()->second,
          runs[CpuKernelPath::Reference].out.begin()->second};
}

} // namespace

TEST(SparseDemo, Float) {
  PrunedDemo d = prunedDemo(qcc::QuantMode::None);
  ASSERT_TRUE(d.artifact);
  EXPECT_EQ(d.pruned.size(), 17u); // 16 block linears and the LM head
  EXPECT_EQ(checkEveryGroup(*d.artifact, d.pruned), 17);
  auto [fast, ref] = bothWays(*d.artifact);
  ASSERT_EQ(fast.shape(), ref.shape());
  auto [worst, scale] = worstDifference(fast, ref);
  // Summation order only: far below the logits' scale.
  EXPECT_LT(worst, 1e-4 * scale) << "worst " << worst << " of " << scale;
}

TEST(SparseDemo, W8A8FastVsReference) {
  PrunedDemo d = prunedDemo(qcc::QuantMode::W8A8);
  ASSERT_TRUE(d.artifact);
  EXPECT_GT(d.pruned.size(), 0u);
  EXPECT_EQ(checkEveryGroup(*d.artifact, d.pruned), (int)d.pruned.size());
  auto [fast, ref] = bothWays(*d.artifact);
  ASSERT_EQ(fast.shape(), ref.shape());
  auto [worst, scale] = worstDifference(fast, ref);
  // The sparse int8 kernels are bit-exact (the SparseLinear kernel tests);
  // the float ops between them differ by rounding on the fast path (the
  // rational erf's GELU, GEMM column blocks): 1.1e-7 to 2e-7 of the logits'
  // scale where no int8 value changes. But an activation whose x / scale
  // lands within that rounding of a .5 tie quantizes to the other int8
  // neighbour on one path: its token's row, and the later rows of its
  // sequence that attend to it, then move by about one int8 step (measured
  // on the current demo model: rows 12 and 13 of 14 by 8.7e-3 of the scale,
  // every other row within 1.6e-7; dense W8A8 on random [4, 32] ids flips
  // too, 1.3e-3 with the previous demo model, 2.5e-3 with this one). So:
  // every row within test/e2e/check_gpu.py's end-to-end W8A8 bound (2e-2 of
  // the scale: one int8 neighbour), and rows beyond rounding (1e-5) only in
  // one sequence. A kernel error shows in every row.
  const int64_t vocab = fast.shape().back(), rows = fast.numel() / vocab;
  const int64_t seq = 7; // demoInput(main, 2, 7) in bothWays
  std::set<int64_t> seqsOff;
  for (int64_t r = 0; r < rows; ++r) {
    double w = 0;
    for (int64_t v = 0; v < vocab; ++v)
      w = std::max(w, (double)std::fabs(fast.data<float>()[r * vocab + v] -
                                        ref.data<float>()[r * vocab + v]));
    EXPECT_LT(w, 2e-2 * scale) << "row " << r << ": worst " << w << " of "
                               << scale;
    if (w >= 1e-5 * scale)
      seqsOff.insert(r / seq);
  }
  EXPECT_LE(seqsOff.size(), 1u)
      << "rows beyond rounding in " << seqsOff.size()
      << " sequences (worst " << worst << " of " << scale << ")";
  // The dense packed GEMM on the expanded weights (where sparseRunsDense)
  // and the sparse kernel sum the same int8 products exactly and share the
  // epilogue: equal bits.
  if (cpuHasVnni()) {
    SparseModeGuard guard;
    PathGuard path;
    setCpuKernelPath(CpuKernelPath::Fast);
    std::map<SparseMode, Tensor> out;
    for (SparseMode m : {SparseMode::Sparse, SparseMode::Dense}) {
      setSparseMode(m);
      Session s(*d.artifact);
      out[m] = s.run("main", demoInput(d.artifact->function("main"), 2, 7))
                   .begin()
                   ->second;
    }
    ASSERT_EQ(out[SparseMode::Sparse].bytes(), out[SparseMode::Dense].bytes());
    EXPECT_EQ(std::memcmp(out[SparseMode::Sparse].raw(),
                          out[SparseMode::Dense].raw(),
                          out[SparseMode::Dense].bytes()),
              0);
  }
}
