//===- RooflineTest.cpp - FLOP and byte counts against hand computation ---===//
//
// runtime/core/Roofline.h counts on a small module (written to an artifact in
// memory, as qcc --report does): a linear, a norm, causal and bidirectional
// GQA attention, kv_attention over a cache and an embedding gather, each
// against numbers computed by hand below; and the same counts through the
// kernel regions form-kernels makes.
//
//===----------------------------------------------------------------------===//
#include "compiler/ArtifactWriter.h"
#include "compiler/Pipeline.h"
#include "dialects/QccDialect.h"
#include "runtime/core/Roofline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace qcc::rt;

namespace {

// x [2, 3, 8]: M = 6 rows of K = 8; linear to N = 4; q [1, 4, 16] = 4 heads
// of D = 4, k/v [1, 6, 8] = 2 kv heads; ids [2, 3] into a [10, 8] table.
const char *kModule = R"mlir(
func.func @main(%x: tensor<2x3x8xf32>, %q: tensor<1x4x16xf32>,
                %k: tensor<1x6x8xf32>, %v: tensor<1x6x8xf32>,
                %ids: tensor<2x3xi64>, %q1: tensor<1x1x16xf32>,
                %k1: tensor<1x1x8xf32>, %v1: tensor<1x1x8xf32>)
    -> (tensor<2x3x4xf32>, tensor<2x3x8xf32>, tensor<1x4x16xf32>,
        tensor<1x4x16xf32>, tensor<2x3x8xf32>, tensor<1x1x16xf32>) {
  %w = qcc.constant dense<1.0> : tensor<4x8xf32>
  %b = qcc.constant dense<0.5> : tensor<4xf32>
  %y = qcc.linear %x, %w, %b : (tensor<2x3x8xf32>, tensor<4x8xf32>,
       tensor<4xf32>) -> tensor<2x3x4xf32>
  %g = qcc.constant dense<1.0> : tensor<8xf32>
  %n = qcc.rms_norm %x, %g {epsilon = 1.0e-5 : f32}
       : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %c = qcc.attention %q, %k, %v {causal = true, num_heads = 4 : i64,
       num_kv_heads = 2 : i64, scale = 0.5 : f32}
       : (tensor<1x4x16xf32>, tensor<1x6x8xf32>, tensor<1x6x8xf32>)
       -> tensor<1x4x16xf32>
  %a = qcc.attention %q, %k, %v {causal = false, num_heads = 4 : i64,
       num_kv_heads = 2 : i64, scale = 0.5 : f32}
       : (tensor<1x4x16xf32>, tensor<1x6x8xf32>, tensor<1x6x8xf32>)
       -> tensor<1x4x16xf32>
  %t = qcc.constant dense<1.0> : tensor<10x8xf32>
  %e = qcc.embedding %t, %ids : (tensor<10x8xf32>, tensor<2x3xi64>)
       -> tensor<2x3x8xf32>
  %kv = qcc.kv_attention %q1, %k1, %v1 {layer = 0 : i64, num_heads = 4 : i64,
        num_kv_heads = 2 : i64, scale = 0.5 : f32}
        : (tensor<1x1x16xf32>, tensor<1x1x8xf32>, tensor<1x1x8xf32>)
        -> tensor<1x1x16xf32>
  return %y, %n, %c, %a, %e, %kv : tensor<2x3x4xf32>, tensor<2x3x8xf32>,
         tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<2x3x8xf32>,
         tensor<1x1x16xf32>
}
)mlir";

class RooflineTest : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<mlir::func::FuncDialect, qcc::QccDialect>();
    module = mlir::parseSourceString<mlir::ModuleOp>(kModule, &context);
    ASSERT_TRUE(module);
    auto plan = qcc::formKernelPlan(*module);
    ASSERT_TRUE(!!plan) << llvm::toString(plan.takeError());
    this->plan = std::move(*plan);
    qcc::ArtifactOptions options;
    options.gpuPlan = *this->plan;
    auto bytes = qcc::serializeArtifact(*module, "test", options);
    ASSERT_TRUE(!!bytes) << llvm::toString(bytes.takeError());
    artifact.emplace(Artifact::fromBytes(
        std::make_shared<std::vector<char>>(std::move(*bytes)), "test"));
  }

  /// The cost of the `index`-th node with op (or kernel kind) `op` of main
  /// (op plan) or of its GPU plan, at the artifact's static shapes.
  Cost cost(const std::string &op, bool kernels = false, int index = 0,
            const KvState *kv = nullptr) {
    const Function &fn =
        kernels ? *artifact->gpuFunction("main") : artifact->function("main");
    for (const Node &n : fn.nodes) {
      std::string kind =
          n.body ? n.attrs.value("kind", "") : opKindName(n.kind);
      if (kind != op || index-- > 0)
        continue;
      std::vector<Shape> in, out;
      for (int64_t id : n.inputs)
        in.push_back(artifact->valueType(id).second);
      for (int64_t id : n.outputs)
        out.push_back(artifact->valueType(id).second);
      return nodeCost(*artifact, n, in, out, kv);
    }
    ADD_FAILURE() << "no node " << op;
    return {};
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module, plan;
  std::optional<Artifact> artifact;
};

TEST_F(RooflineTest, Linear) {
  Cost c = cost("linear");
  EXPECT_EQ(c.flops, 2.0 * 6 * 4 * 8);              // 2 M N K = 384
  EXPECT_EQ(c.weightBytes, (4 * 8 + 4) * 4.0);      // W and bias, f32
  EXPECT_EQ(c.activationBytes, (48 + 24) * 4.0);    // x in, y out
  EXPECT_EQ(c.kvBytes, 0);
  EXPECT_EQ(c.precision, Precision::F16);
  EXPECT_DOUBLE_EQ(c.intensity(), 384.0 / 432.0);
}

// A linear over no rows (a mixture-of-experts expert no token was routed
// to): the launch is skipped, so it reads nothing, its weight included.
TEST_F(RooflineTest, LinearOverNoRowsReadsNothing) {
  const Function &fn = artifact->function("main");
  for (const Node &n : fn.nodes) {
    if (n.kind != OpKind::Linear)
      continue;
    std::vector<Shape> in, out;
    for (int64_t id : n.inputs)
      in.push_back(artifact->valueType(id).second);
    in[0] = {0, 8};
    Cost c = nodeCost(*artifact, n, in, {{0, 4}}, nullptr);
    EXPECT_EQ(c.flops, 0);
    EXPECT_EQ(c.bytes(), 0);
    return;
  }
  ADD_FAILURE() << "no linear";
}

TEST_F(RooflineTest, RmsNorm) {
  Cost c = cost("rms_norm");
  EXPECT_EQ(c.flops, 4.0 * 48);
  EXPECT_EQ(c.weightBytes, 8 * 4.0);
  EXPECT_EQ(c.activationBytes, 2 * 48 * 4.0);
  EXPECT_EQ(c.precision, Precision::F32);
}

TEST_F(RooflineTest, Attention) {
  // Causal, Sq = 4 after Skv - Sq = 2 earlier keys: query i sees keys
  // 0..i+2, 3 + 4 + 5 + 6 = 18 pairs per head; 4 D = 16 FLOPs per pair.
  Cost causal = cost("attention", false, 0);
  EXPECT_EQ(causal.flops, 16.0 * 4 * 18);
  // Bidirectional: 4 x 6 = 24 pairs per head.
  Cost full = cost("attention", false, 1);
  EXPECT_EQ(full.flops, 16.0 * 4 * 24);
  EXPECT_EQ(full.weightBytes, 0);
  EXPECT_EQ(full.activationBytes, (64 + 48 + 48 + 64) * 4.0); // q k v out
}

TEST_F(RooflineTest, KvAttention) {
  // One new token after 5 cached: 6 keys per head; K and V of the 5 cached
  // tokens read and of the new one written, 2 kv heads of 4, f32.
  KvState kv{{5}, {1}, 4};
  Cost c = cost("kv_attention", false, 0, &kv);
  EXPECT_EQ(c.flops, 16.0 * 4 * 6);
  EXPECT_EQ(c.kvBytes, 2.0 * 6 * 8 * 4);
  EXPECT_EQ(c.activationBytes, (16 + 8 + 8 + 16) * 4.0);
  KvState i8{{5}, {1}, 1};
  EXPECT_EQ(cost("kv_attention", false, 0, &i8).kvBytes, 2.0 * 6 * 8);
  // kivi: a 4-byte scale per V row of each of the 2 kv heads besides.
  KvState kivi{{5}, {1}, 1, 4};
  EXPECT_EQ(cost("kv_attention", false, 0, &kivi).kvBytes,
            2.0 * 6 * 8 + 6 * 2 * 4.0);
}

TEST_F(RooflineTest, EmbeddingCountsGatheredRows) {
  Cost c = cost("embedding");
  EXPECT_EQ(c.flops, 0);
  EXPECT_EQ(c.weightBytes, 6 * 8 * 4.0); // 6 rows of 8, not the whole table
  EXPECT_EQ(c.activationBytes, 6 * 8.0 + 6 * 8 * 4.0); // i64 ids, rows out
}

TEST_F(RooflineTest, KernelRegionsCountTheSame) {
  for (const char *op : {"linear", "rms_norm", "embedding"}) {
    std::string kind = op == std::string("linear")     ? "gemm_f16"
                       : op == std::string("rms_norm") ? "norm"
                                                       : "embedding";
    Cost plain = cost(op), region = cost(kind, true);
    EXPECT_EQ(plain.flops, region.flops) << op;
    EXPECT_EQ(plain.bytes(), region.bytes()) << op;
  }
  EXPECT_EQ(cost("attention", true, 0).flops, 16.0 * 4 * 18);
}

TEST(Roofline, TimeIsTheSlowerSide) {
  Peaks p{"test", 100.0, 10.0, 1000.0, 2000.0, ""};
  Cost c;
  c.flops = 4000;
  c.activationBytes = 100;
  c.precision = Precision::I8;
  EXPECT_DOUBLE_EQ(rooflineSeconds(c, p), 2.0); // compute: 4000 / 2000
  c.precision = Precision::F32;
  EXPECT_DOUBLE_EQ(rooflineSeconds(c, p), 400.0); // f32: 4000 / 10
  c.flops = 10;
  EXPECT_DOUBLE_EQ(rooflineSeconds(c, p), 1.0); // memory: 100 / 100
  EXPECT_EQ(gpuPeaks().at(0).name, "H100");
  EXPECT_EQ(gpuPeaks().at(0).bandwidth, 3.35e12);
  EXPECT_EQ(gpuPeaks().at(1).bandwidth, 4.8e12);
}

TEST(Roofline, GpuPeaksByDeviceName) {
  // The driver's names: the datasheet of the GPU they name, nothing measured.
  auto unused = []() -> double {
    ADD_FAILURE() << "measured a GPU that has a datasheet";
    return 0;
  };
  EXPECT_EQ(gpuPeaksFor("NVIDIA H100 80GB HBM3", unused).bandwidth, 3.35e12);
  EXPECT_EQ(gpuPeaksFor("NVIDIA H200", unused).bandwidth, 4.8e12);
  // Any other: the measured copy, no compute peaks (MFU reads 0).
  Peaks other = gpuPeaksFor("NVIDIA A10", [] { return 5e11; });
  EXPECT_EQ(other.name, "NVIDIA A10");
  EXPECT_EQ(other.bandwidth, 5e11);
  EXPECT_EQ(other.compute(Precision::I8), 0);
}

TEST(Roofline, NodeProfileSumsPerKind) {
  Node linear, gelu;
  linear.kind = OpKind::Linear;
  gelu.kind = OpKind::Gelu;
  Cost c;
  c.flops = 10;
  NodeProfile p;
  EXPECT_EQ(profileKind(linear), "linear");
  p.add("main", profileKind(linear), 1.0, c);
  p.add("main", profileKind(gelu), 3.0, c);
  p.add("main", "linear", 1.5, c);
  p.add("decode", "gelu", 0.5, c);
  auto rows = p.rows();
  ASSERT_EQ(rows.size(), 3u);
  // By entry point, then time, most first.
  EXPECT_EQ(rows[0].function, "decode");
  EXPECT_EQ(rows[1].kind, "gelu");
  EXPECT_EQ(rows[2].kind, "linear");
  EXPECT_EQ(rows[2].calls, 2);
  EXPECT_DOUBLE_EQ(rows[2].seconds, 2.5);
  EXPECT_DOUBLE_EQ(rows[2].cost.flops, 20);
}

} // namespace
