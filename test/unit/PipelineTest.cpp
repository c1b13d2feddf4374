//===- PipelineTest.cpp - the named phases of the compiler library --------===//
//
// compiler/Pipeline.h on the gpt2 fixture: every phase stops where asked and
// leaves what it promises; package writes what qrun --list-kernels reads.
//
//===----------------------------------------------------------------------===//
#include "compiler/ArtifactWriter.h"
#include "compiler/Package.h"
#include "compiler/Pipeline.h"
#include "format/KernelKinds.h"
#include "dialects/QccAttrNames.h"
#include "dialects/QccOps.h"
#include "runtime/core/Artifact.h"
#include "runtime/core/KernelListing.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <sstream>

namespace {

using qcc::Phase;

constexpr const char *kGpt2 = QCC_SOURCE_DIR "/test/models/gpt2.onnx";

TEST(Pipeline, PhaseNames) {
  ASSERT_EQ(qcc::allPhases().size(), 9u);
  for (Phase p : qcc::allPhases())
    EXPECT_EQ(qcc::parsePhase(qcc::phaseName(p)), p) << qcc::phaseName(p).str();
  EXPECT_EQ(qcc::phaseName(Phase::KvLayout), "kv-layout");
  EXPECT_EQ(qcc::phaseName(Phase::FormKernels), "form-kernels");
  EXPECT_FALSE(qcc::parsePhase("mlir")); // a qcc --emit spelling, no phase
}

bool hasFunction(mlir::ModuleOp m, llvm::StringRef name) {
  return !!m.lookupSymbol<mlir::func::FuncOp>(name);
}

TEST(Pipeline, StopsAfterEachIrPhase) {
  for (Phase last : {Phase::Import, Phase::Raise, Phase::Quantize,
                     Phase::KvLayout, Phase::FormKernels, Phase::Emit}) {
    mlir::MLIRContext ctx;
    auto c = qcc::compileTo(ctx, kGpt2, last);
    ASSERT_TRUE(!!c) << llvm::toString(c.takeError());
    EXPECT_EQ(c->last, last);
    ASSERT_TRUE(c->module);
    // kv-layout adds the entry points over the KV cache.
    EXPECT_EQ(hasFunction(*c->module, "decode"), last >= Phase::KvLayout);
    EXPECT_EQ(!!c->gpuPlan, last >= Phase::FormKernels);
    EXPECT_EQ(c->cuda.kernels.empty(), last < Phase::Emit);
    EXPECT_TRUE(c->binaries.empty());
  }
}

// calibrate attaches the statistics (here a saved --calib-stats file, so
// qcc-calib does not run); statistics of another model are refused.
TEST(Pipeline, CalibrateAttachesStatistics) {
  qcc::CompileOptions o;
  o.quant = qcc::QuantMode::W8A8;
  o.calibration.statsPath =
      QCC_SOURCE_DIR "/test/codegen/Inputs/austen-stats.json";
  mlir::MLIRContext ctx;
  auto c = qcc::compileTo(ctx, QCC_SOURCE_DIR "/examples/austen/model.onnx",
                          Phase::Calibrate, o);
  ASSERT_TRUE(!!c) << llvm::toString(c.takeError());
  int linears = 0;
  c->module.get()->walk([&](qcc::LinearOp l) {
    ++linears;
    EXPECT_TRUE(l->hasAttr("qcc.input_absmax"));
    EXPECT_FALSE(l->hasAttr("qcc.calib_id"));
  });
  EXPECT_EQ(linears, 17);

  mlir::MLIRContext other;
  auto stale = qcc::compileTo(other, kGpt2, Phase::Calibrate, o);
  ASSERT_FALSE(!!stale);
  std::string message = llvm::toString(stale.takeError());
  EXPECT_EQ(message.rfind(std::string(kGpt2) + ": ", 0), 0u) << message;
  EXPECT_NE(message.find("stale --calib-stats"), std::string::npos)
      << message;
}

TEST(Pipeline, ImportErrorNamesTheFile) {
  mlir::MLIRContext ctx;
  auto c = qcc::compileTo(ctx, "/nonexistent/model.onnx", Phase::Raise);
  ASSERT_FALSE(!!c);
  EXPECT_NE(llvm::toString(c.takeError()).find("/nonexistent/model.onnx"),
            std::string::npos);
}

TEST(Pipeline, PackageWithoutGpuKernels) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("pipeline", "qpkg", path));
  mlir::MLIRContext ctx;
  qcc::CompileOptions o;
  o.gpuKernels = false;
  o.artifactPath = path.str().str();
  auto c = qcc::compileTo(ctx, kGpt2, Phase::Package, o);
  ASSERT_TRUE(!!c) << llvm::toString(c.takeError());
  EXPECT_FALSE(c->gpuPlan); // form-kernels .. compile skipped
  auto a = qcc::rt::Artifact::load(o.artifactPath);
  EXPECT_EQ(a.gpuFunction("main"), nullptr);
  std::ostringstream list;
  qcc::rt::listKernels(a, list);
  EXPECT_EQ(list.str(),
            "no GPU kernels (compiled with --no-cuda or without CUDA)\n");
  llvm::sys::fs::remove(path);
}

// The artifact writer parses the module's qcc.kv_cache with the loader's own
// parser (format/KvCacheConfig.h): a cache the runtime would refuse is a
// compile error naming the attribute, not an artifact that cannot load.
TEST(Pipeline, PackageRefusesACacheTheLoaderWouldRefuse) {
  mlir::MLIRContext ctx;
  auto c = qcc::compileTo(ctx, kGpt2, Phase::KvLayout);
  ASSERT_TRUE(!!c) << llvm::toString(c.takeError());
  mlir::ModuleOp m = *c->module;
  auto good = qcc::serializeArtifact(m, "gpt2", {});
  ASSERT_TRUE(!!good) << llvm::toString(good.takeError());
  mlir::NamedAttrList kv(m->getAttrOfType<mlir::DictionaryAttr>(qcc::kKvCacheAttr));
  mlir::Builder b(&ctx);
  kv.set("layout", b.getStringAttr("ring"));
  m->setAttr(qcc::kKvCacheAttr, kv.getDictionary(&ctx));
  auto bad = qcc::serializeArtifact(m, "gpt2", {});
  ASSERT_FALSE(!!bad);
  std::string why = llvm::toString(bad.takeError());
  EXPECT_NE(why.find("qcc.kv_cache"), std::string::npos) << why;
  EXPECT_NE(why.find("unknown layout 'ring'"), std::string::npos) << why;
}

// package after emit, with stand-in binaries for the compile phase (NVRTC is
// KernelCompileTest's): the artifact's GPU plan launches one record per
// region, each with its unit's binaries, as --list-kernels shows.
TEST(Pipeline, PackageAndListKernels) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("pipeline", "qpkg", path));
  mlir::MLIRContext ctx;
  auto c = qcc::compileTo(ctx, kGpt2, Phase::Emit);
  ASSERT_TRUE(!!c) << llvm::toString(c.takeError());
  for (size_t u = 0; u < c->cuda.units.size(); ++u)
    c->binaries.push_back({{"sm_80", "cubin"}, {"ptx", "ptx"}});
  c->last = Phase::Compile;
  c->options.artifactPath = path.str().str();
  ASSERT_FALSE(!!qcc::runPhase(ctx, *c, Phase::Package));
  auto a = qcc::rt::Artifact::load(c->options.artifactPath);
  ASSERT_EQ(a.kernels().size(), c->cuda.kernels.size());
  std::ostringstream list;
  qcc::rt::listKernels(a, list);
  size_t regions = 0;
  for (const auto &k : c->cuda.kernels)
    regions += k.function == "main";
  std::string text = list.str();
  EXPECT_NE(text.find("function main: " + std::to_string(regions) +
                      " launches\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("function decode: "), std::string::npos);
  const auto &first = c->cuda.kernels.front();
  if (first.unsupported.empty()) {
    EXPECT_NE(text.find("  " + first.name + " " + std::string(qcc::format::spelling(first.kind)) + " " +
                        first.entry + " sm_80=5 sm_90=0 ptx=3 smem="),
              std::string::npos)
        << text;
  }
  llvm::sys::fs::remove(path);
}

TEST(Pipeline, PrintsEachPhaseOutput) {
  mlir::MLIRContext ctx;
  auto c = qcc::compileTo(ctx, kGpt2, Phase::Emit);
  ASSERT_TRUE(!!c) << llvm::toString(c.takeError());
  std::string text;
  llvm::raw_string_ostream os(text);
  qcc::printPhaseOutput(*c, os);
  EXPECT_EQ(text.rfind("// ===== unit ", 0), 0u) << text.substr(0, 200);
  text.clear();
  c->last = Phase::FormKernels;
  qcc::printPhaseOutput(*c, os);
  EXPECT_NE(text.find("qcc.kernel"), std::string::npos);
}

} // namespace

// CompileOptions::validate, rule by rule: each invalid combination is refused
// with its one line (naming the qcc flag), the defaults and the valid
// neighbours pass, and compileTo refuses before it reads the model.
TEST(Pipeline, ValidateRulesBetweenOptions) {
  using namespace qcc;
  auto message = [](const CompileOptions &o) {
    llvm::Error err = o.validate();
    return err ? llvm::toString(std::move(err)) : std::string();
  };
  CompileOptions ok;
  EXPECT_EQ(message(ok), "");
  struct Case {
    const char *what;
    std::function<void(CompileOptions &)> set;
    const char *error; // "" when valid
  };
  const Case cases[] = {
      {"block 0", [](auto &o) { o.kvBlockTokens = 0; },
       "--kv-block-tokens must be in [1, 4096], not 0"},
      {"block 4096", [](auto &o) { o.kvBlockTokens = 4096; }, ""},
      {"positions", [](auto &o) { o.maxPositions = -1; },
       "--max-positions must be in [0, 16777216], not -1"},
      {"samples", [](auto &o) { o.calibration.samples = int64_t(1) << 40; },
       "--calib-samples must be in [1, 1048576], not 1099511627776"},
      {"seq len", [](auto &o) { o.calibration.seqLen = -1; },
       "--calib-seq-len must be in [1, 1048576], not -1"},
      {"group 0", [](auto &o) { o.w4GroupSize = 0; },
       "--group-size must be in [2, 1048576], not 0"},
      {"alpha nan",
       [](auto &o) { o.smoothQuantAlpha = std::numeric_limits<double>::quiet_NaN(); },
       "--smoothquant-alpha must be in [0, 1] or auto, not nan"},
      {"alpha 1.5", [](auto &o) { o.smoothQuantAlpha = 1.5; },
       "--smoothquant-alpha must be in [0, 1] or auto, not 1.5"},
      {"alpha auto", [](auto &o) {
         o.smoothQuantAlpha = 7;
         o.smoothQuantAutoAlpha = true;
       }, ""},
      {"kivi f32", [](auto &o) { o.kvScales = KvScales::Kivi; },
       "--kv-scales=kivi needs --kv-dtype=i8"},
      {"kivi i8", [](auto &o) {
         o.kvScales = KvScales::Kivi;
         o.kvDtype = KvDtype::I8;
       }, ""},
      {"prune dense", [](auto &o) { o.prune = PruneMethod::Wanda; },
       "--prune and --sparsity-exclude need --sparsity=2:4"},
      {"exclude dense", [](auto &o) { o.sparsityExclude = {"0"}; },
       "--prune and --sparsity-exclude need --sparsity=2:4"},
      {"prune 2:4", [](auto &o) {
         o.prune = PruneMethod::Wanda;
         o.sparsity = Sparsity::TwoFour;
       }, ""},
      {"odd group", [](auto &o) {
         o.quant = QuantMode::W4A16;
         o.w4GroupSize = 33;
       }, "--group-size must be even (two int4 per byte), not 33"},
      {"w4 options without w4a16", [](auto &o) { o.w4Asymmetric = true; },
       "--group-size, --act-order, --w4-method, --w4-asym and --w4-lm-head "
       "need --quant=w4a16 or w4a8"},
      {"w4 head without w4a16", [](auto &o) { o.w4LmHead = true; },
       "--group-size, --act-order, --w4-method, --w4-asym and --w4-lm-head "
       "need --quant=w4a16 or w4a8"},
      {"act order rtn", [](auto &o) {
         o.quant = QuantMode::W4A16;
         o.w4Method = W4Method::Rtn;
         o.w4ActOrder = true;
       }, "--act-order orders GPTQ's columns; it does not apply to "
          "--w4-method=rtn"},
      {"w4a16 2:4", [](auto &o) {
         o.quant = QuantMode::W4A16;
         o.sparsity = Sparsity::TwoFour;
       }, "--quant=w4a16 and --sparsity=2:4 do not combine (yet)"},
      {"w4a16 asym act order", [](auto &o) {
         o.quant = QuantMode::W4A16;
         o.w4Asymmetric = true;
         o.w4ActOrder = true;
       }, ""},
      {"w4a8 asym head rtn", [](auto &o) {
         o.quant = QuantMode::W4A8;
         o.w4Asymmetric = true;
         o.w4LmHead = true;
         o.w4Method = W4Method::Rtn;
       }, ""},
      {"w4a8 2:4", [](auto &o) {
         o.quant = QuantMode::W4A8;
         o.sparsity = Sparsity::TwoFour;
       }, "--quant=w4a8 and --sparsity=2:4 do not combine (yet)"},
      {"w4a8 per tensor", [](auto &o) {
         o.quant = QuantMode::W4A8;
         o.activations = ActivationQuant::PerTensor;
       }, "--quant=w4a8 quantizes activations per token, symmetric, every "
          "column: --act-quant, --asymmetric and --int8-fallback do not "
          "apply"},
      {"w4a8 fallback", [](auto &o) {
         o.quant = QuantMode::W4A8;
         o.int8Fallback = Int8Fallback::Auto;
       }, "--quant=w4a8 quantizes activations per token, symmetric, every "
          "column: --act-quant, --asymmetric and --int8-fallback do not "
          "apply"},
  };
  for (const Case &c : cases) {
    CompileOptions o;
    c.set(o);
    EXPECT_EQ(message(o), c.error) << c.what;
  }
  mlir::MLIRContext context;
  CompileOptions bad;
  bad.kvScales = KvScales::Kivi;
  auto result = compileTo(context, "no-such-model.onnx", Phase::Import, bad);
  ASSERT_FALSE(result);
  EXPECT_EQ(llvm::toString(result.takeError()),
            "--kv-scales=kivi needs --kv-dtype=i8");
}
