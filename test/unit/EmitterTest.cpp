//===- EmitterTest.cpp - the CUDA emitter's launch records ----------------===//
//
// codegen/Emitter.cpp on the W8A8 demo model (calibration statistics from
// test/codegen/Inputs): every region gets a kernel, and every launch fits
// sm_80 (dynamic shared memory <= 163 KB, <= 1024 threads per block). With
// NVRTC, the host copies of the Config formulas are checked against the
// device structs by compiling static_asserts.
//
//===----------------------------------------------------------------------===//
#include "codegen/Emitter.h"
#include "compiler/Pipeline.h"
#include "passes/Passes.h"
#ifdef QCC_HAVE_CODEGEN
#include "codegen/NvrtcCompiler.h"
#endif

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

namespace {

using namespace qcc::codegen;

qcc::codegen::EmitResult emitDemo(mlir::MLIRContext &ctx) {
  qcc::CompileOptions options;
  options.quant = "w8a8";
  options.calibration.statsPath =
      QCC_SOURCE_DIR "/test/codegen/Inputs/austen-stats.json";
  auto module = qcc::compile(ctx, QCC_SOURCE_DIR "/examples/austen/model.onnx",
                             qcc::Stage::Raised, options);
  if (!module) {
    ADD_FAILURE() << llvm::toString(module.takeError());
    return {};
  }
  mlir::PassManager pm(&ctx);
  pm.nest<mlir::func::FuncOp>().addPass(qcc::createFormKernels());
  EXPECT_TRUE(mlir::succeeded(pm.run(**module)));
  return emitKernels(**module);
}

TEST(EmitterTest, DemoLaunchesFitSm80) {
  mlir::MLIRContext ctx;
  EmitResult r = emitDemo(ctx);
  ASSERT_EQ(r.kernels.size(), 123u);
  EXPECT_EQ(r.units.size(), 15u);
  size_t steps = 0;
  for (const EmittedKernel &k : r.kernels) {
    EXPECT_EQ(k.unsupported, "") << k.function << "/" << k.name;
    ASSERT_FALSE(k.launch.empty()) << k.function << "/" << k.name;
    for (const auto &step : k.launch) {
      ++steps;
      int smem = step["dynamic_smem"].get<int>();
      const auto &b = step["block"];
      int threads = b["x"].get<int>() * b["y"].get<int>() * b["z"].get<int>();
      EXPECT_LE(smem, kMaxDynamicSmemSm80) << step["entry"];
      EXPECT_GE(threads, 32) << step["entry"];
      EXPECT_LE(threads, 1024) << step["entry"];
      EXPECT_EQ(threads % 32, 0) << step["entry"];
      EXPECT_TRUE(step.contains("grid") && step.contains("params"));
    }
  }
  EXPECT_GT(steps, r.kernels.size()); // decode attention: split + combine
}

TEST(EmitterTest, HeuristicTilesFitSm80) {
  // The tiles the heuristics can choose (Emitter.h).
  EXPECT_EQ(gemmTcSmemBytes(1, 128, 128, 64, 4), 81920);
  EXPECT_EQ(gemmTcSmemBytes(1, 64, 64, 64, 4), 40960);
  EXPECT_LE(gemmTcSmemBytes(2, 128, 128, 64, 4), kMaxDynamicSmemSm80);
  EXPECT_EQ(gemmTcThreads(128, 128, 64, 64), 128);
  EXPECT_EQ(attnPrefillSmemBytes(64, 64, 64), 49408);
  EXPECT_EQ(attnPrefillSmemBytes(128, 32, 64), 82176);
  for (int d = 32; d <= 256; d += 32)
    EXPECT_LE(attnPrefillSmemBytes(d, d == 64 ? 64 : 32, 64),
              kMaxDynamicSmemSm80)
        << d;
}

#ifdef QCC_HAVE_CODEGEN
TEST(EmitterTest, HostFormulasMatchDeviceConfigs) {
  std::string src = "#include \"qcc/gemm_i8.cuh\"\n#include "
                    "\"qcc/gemm_f16.cuh\"\n#include "
                    "\"qcc/attention_prefill.cuh\"\n";
  auto gemm = [&](const char *cfg, int e, int bm, int bn, int bk, int wm,
                  int wn, int st) {
    src += "static_assert(qcc::" + std::string(cfg) + "<" +
           std::to_string(bm) + ", " + std::to_string(bn) + ", " +
           std::to_string(bk) + ", " + std::to_string(wm) + ", " +
           std::to_string(wn) + ", " + std::to_string(st) +
           ">::kSmemBytes == " +
           std::to_string(gemmTcSmemBytes(e, bm, bn, bk, st)) + ", \"smem\");\n";
    src += "static_assert(qcc::" + std::string(cfg) + "<" +
           std::to_string(bm) + ", " + std::to_string(bn) + ", " +
           std::to_string(bk) + ", " + std::to_string(wm) + ", " +
           std::to_string(wn) + ", " + std::to_string(st) +
           ">::kThreads == " + std::to_string(gemmTcThreads(bm, bn, wm, wn)) +
           ", \"threads\");\n";
  };
  gemm("GemmI8Config", 1, 128, 128, 64, 64, 64, 4);
  gemm("GemmI8Config", 1, 64, 64, 64, 32, 32, 4);
  gemm("GemmF16Config", 2, 128, 128, 64, 64, 64, 4);
  gemm("GemmF16Config", 2, 64, 64, 64, 32, 32, 4);
  for (auto [d, bq] : {std::pair{64, 64}, {128, 32}, {96, 32}})
    src += "static_assert(qcc::AttnPrefillLaunch<" + std::to_string(d) + ", " +
           std::to_string(bq) + ", 64, 4>::kDynamicSmemBytes == " +
           std::to_string(attnPrefillSmemBytes(d, bq, 64)) + ", \"attn\");\n";
  src += "extern \"C\" __global__ void qcc_formulas() {}\n";
  CompileOptions options;
  options.cubinArchs = {"sm_80"};
  options.ptxArch = "";
  options.useCache = false;
  auto r = compileKernels({{"formulas", src}}, options);
  EXPECT_TRUE(static_cast<bool>(r)) << (r ? "" : llvm::toString(r.takeError()));
}
#endif

} // namespace
