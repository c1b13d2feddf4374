//===- GpuPlanTest.cpp - binaries and shape rules of the CUDA backend -----===//
//
// What the CUDA backend computes on the host before a launch, tested without
// a GPU (launch records: LaunchRecordTest): the choice of binary per
// architecture, and result-shape rules (also checked against real shapes
// whenever the CPU session runs a GPU plan: test/runtime/gpu-plan.test).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/GpuSession.h"
#include "runtime/core/HalfFloat.h"
#include "runtime/core/ShapeInference.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace qcc::rt;
using nlohmann::json;

namespace {

TEST(BinaryTarget, ByArchitecture) {
  KernelRecord k;
  k.function = "decode";
  k.region = "k0";
  k.entry = "qcc_decode_k0";
  k.binaries = {{"sm_80", {0, 1}}, {"sm_90", {64, 1}}, {"ptx", {128, 1}}};
  auto dev = [](int major, int minor) {
    CudaDevice d;
    d.name = "test";
    d.major = major;
    d.minor = minor;
    return d;
  };
  EXPECT_EQ(pickBinaryTarget(k, dev(8, 0)), "sm_80");
  EXPECT_EQ(pickBinaryTarget(k, dev(8, 9)), "sm_80"); // same major: runs
  EXPECT_EQ(pickBinaryTarget(k, dev(9, 0)), "sm_90");
  EXPECT_EQ(pickBinaryTarget(k, dev(10, 0)), "ptx"); // JIT for newer GPUs
  try {
    pickBinaryTarget(k, dev(7, 5));
    FAIL() << "sm_75 accepted";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("older than sm_80"),
              std::string::npos);
  }
  k.binaries.erase("ptx");
  try {
    pickBinaryTarget(k, dev(10, 0));
    FAIL() << "no binary accepted";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("decode/k0"), std::string::npos);
  }
}

Node node(const std::string &op, json attrs = json::object()) {
  Node n;
  n.kind = *qcc::format::parseOpKind(op);
  n.name = op; // (a literal here trips GCC 12's -Wrestrict false positive)
  n.attrs = std::move(attrs);
  return n;
}

TEST(ShapeRules, TransformerOps) {
  EXPECT_EQ(inferShapes(node("qlinear"),
                        {{2, 5, 64}, {2, 5, 1}, {2, 5, 1}, {256, 64}, {256}, {256}})
                .at(0),
            (Shape{2, 5, 256}));
  EXPECT_EQ(inferShapes(node("linear"), {{7, 64}, {32, 64}}).at(0),
            (Shape{7, 32}));
  auto q = inferShapes(node("quantize", {{"granularity", "per_token"}}),
                       {{2, 5, 64}});
  EXPECT_EQ(q.at(1), (Shape{2, 5, 1}));
  q = inferShapes(node("quantize", {{"granularity", "per_tensor"}}),
                  {{2, 5, 64}});
  EXPECT_EQ(q.at(2), (Shape{1}));
  EXPECT_EQ(inferShapes(node("embedding"), {{3000, 256}, {2, 5}}).at(0),
            (Shape{2, 5, 256}));
  EXPECT_EQ(inferShapes(node("add"), {{2, 5, 64}, {64}}).at(0),
            (Shape{2, 5, 64}));
  EXPECT_THROW(inferShapes(node("add"), {{2, 5, 64}, {32}}),
               std::runtime_error);
  EXPECT_THROW(inferShapes(node("reshape"), {{2, 5}}), std::runtime_error);
  // Sizes that depend on operand values (k, depth) or on the data
  // (non_zero) have no rule: such ops run on the host, in no region.
  for (const char *op : {"top_k", "one_hot", "non_zero", "tile"})
    EXPECT_THROW(inferShapes(node(op), {{2, 5}, {1}}), std::runtime_error)
        << op;
}

TEST(ShapeRules, KernelBodies) {
  // kernel(x, w, ws, wsum) { q, s, z = quantize(x); y = qlinear(q, s, z, w,
  // ws, wsum); g = gelu(y); yield g }
  auto body = std::make_shared<KernelBody>();
  body->args = {10, 11, 12, 13};
  Node quant = node("quantize", {{"granularity", "per_token"}});
  quant.inputs = {10};
  quant.outputs = {20, 21, 22};
  Node lin = node("qlinear");
  lin.inputs = {20, 21, 22, 11, 12, 13};
  lin.outputs = {23};
  Node gelu = node("gelu");
  gelu.inputs = {23};
  gelu.outputs = {24};
  body->nodes = {quant, lin, gelu};
  body->yields = {24};
  Node k = node("kernel", {{"kind", "gemm_i8"}, {"kernel", 0}});
  k.inputs = {1, 2, 3, 4};
  k.outputs = {5};
  k.body = body;
  EXPECT_EQ(inferShapes(k, {{4, 1, 64}, {128, 64}, {128}, {128}}).at(0),
            (Shape{4, 1, 128}));
}

} // namespace

namespace {
// The one f32 -> f16 conversion (runtime/core/HalfFloat.h), which GpuSession uses
// for f16 GEMM weights.
TEST(FloatToHalf, RoundsToNearestEven) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(0.1f), 0x2e66);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);         // largest finite
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);         // rounds up to inf
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 1); // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -26)), 0); // below half of it
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);     // tie: even
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02); // tie: even
  EXPECT_EQ(floatToHalf(0.0f), 0);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
}
} // namespace
