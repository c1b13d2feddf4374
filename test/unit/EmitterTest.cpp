//===- EmitterTest.cpp - the CUDA emitter's launch records ----------------===//
//
// codegen/Emitter.cpp on the W8A8 demo model (calibration statistics from
// test/codegen/Inputs): every region of the IR gets a kernel, regions share
// units only when their sources are equal, and every launch fits sm_80
// (dynamic shared memory <= 163 KB, <= 1024 threads per block). Counts come
// from the IR, not from a given pipeline's numbering (the per-kind output is
// checked by the lit tests in test/codegen, on hand-written regions). The
// launch sizes come from the configuration types of codegen/kernels/*_config.h,
// which the host and (with NVRTC) the device compile alike.
//
//===----------------------------------------------------------------------===//
#include "codegen/EmitCommon.h"
#include "codegen/Emitter.h"
#include "codegen/kernels/attention_config.h"
#include "codegen/kernels/broadcast.h"
#include "codegen/kernels/gemm_config.h"
#include "codegen/kernels/norm_config.h"
#include "compiler/Pipeline.h"
#include "passes/Passes.h"
#ifdef QCC_HAVE_CODEGEN
#include "codegen/NvrtcCompiler.h"
#endif

#include "dialects/QccDialect.h"
#include "dialects/QccOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace {

using namespace qcc::codegen;

/// The emitter's output for the demo, and how many qcc.kernel regions the
/// module it ran on has.
qcc::codegen::EmitResult emitDemo(mlir::MLIRContext &ctx,
                                  size_t *regions = nullptr) {
  qcc::CompileOptions options;
  options.quant = qcc::QuantMode::W8A8;
  options.calibration.statsPath =
      QCC_SOURCE_DIR "/test/codegen/Inputs/austen-stats.json";
  auto module = qcc::compile(ctx, QCC_SOURCE_DIR "/examples/austen/model.onnx",
                             qcc::Phase::KvLayout, options);
  if (!module) {
    ADD_FAILURE() << llvm::toString(module.takeError());
    return {};
  }
  mlir::PassManager pm(&ctx);
  pm.nest<mlir::func::FuncOp>().addPass(qcc::createFormKernels());
  EXPECT_TRUE(mlir::succeeded(pm.run(**module)));
  if (regions) {
    *regions = 0;
    (*module)->walk([&](qcc::KernelOp) { ++*regions; });
  }
  return emitKernels(**module);
}

TEST(EmitterTest, DemoLaunchesFitSm80) {
  mlir::MLIRContext ctx;
  size_t regions = 0;
  EmitResult r = emitDemo(ctx, &regions);
  ASSERT_GT(regions, 0u);
  ASSERT_EQ(r.kernels.size(), regions);
  // Every region is in exactly one unit, the unit its `unit` names, whose
  // source and entry it shares; distinct units differ.
  std::vector<int> unitOf(r.kernels.size(), -1);
  std::set<std::string> sources;
  for (size_t u = 0; u < r.units.size(); ++u) {
    const KernelUnit &unit = r.units[u];
    ASSERT_FALSE(unit.kernels.empty()) << unit.name;
    EXPECT_TRUE(sources.insert(unit.source).second) << unit.name;
    EXPECT_EQ(r.kernels[unit.kernels.front()].entry, unit.name);
    for (size_t k : unit.kernels) {
      ASSERT_LT(k, r.kernels.size());
      EXPECT_EQ(unitOf[k], -1) << unit.name;
      unitOf[k] = (int)u;
      EXPECT_EQ(r.kernels[k].unit, u);
      EXPECT_EQ(r.kernels[k].source, unit.source);
      EXPECT_EQ(r.kernels[k].entry, unit.name);
    }
  }
  size_t steps = 0;
  for (const EmittedKernel &k : r.kernels) {
    EXPECT_EQ(k.unsupported, "") << k.function << "/" << k.name;
    EXPECT_NE(unitOf[&k - r.kernels.data()], -1) << k.function << "/" << k.name;
    ASSERT_FALSE(k.launch.steps.empty()) << k.function << "/" << k.name;
    // What the runtime will accept at load.
    nlohmann::json record = qcc::format::toJson(k.launch);
    EXPECT_EQ(qcc::format::toJson(qcc::format::fromJson(record)), record);
    for (const auto &step : k.launch.steps) {
      ++steps;
      unsigned threads = step.block[0] * step.block[1] * step.block[2];
      EXPECT_LE((int)step.dynamicSmem, kMaxDynamicSmemSm80) << step.entry;
      EXPECT_GE(threads, 32u) << step.entry;
      EXPECT_LE(threads, 1024u) << step.entry;
      EXPECT_EQ(threads % 32, 0u) << step.entry;
      EXPECT_FALSE(step.params.empty()) << step.entry;
    }
  }
  EXPECT_GT(steps, r.kernels.size()); // decode attention: split + combine
}

/// A dense decode GEMV launches exactly one of its two entries: the
/// one-chunk configuration up to 8 rows, the row-chunk one above
/// (kGemv / kGemvRows, measured on an H200: docs/GPU_NOTES.md).
TEST(EmitterTest, DecodeGemvPicksItsConfigByRows) {
  mlir::MLIRContext ctx;
  EmitResult r = emitDemo(ctx);
  int gemvs = 0;
  for (const EmittedKernel &k : r.kernels) {
    if (k.function != "decode" || k.kind != qcc::format::KernelKind::GemmI8)
      continue;
    ++gemvs;
    ASSERT_EQ(k.launch.steps.size(), 2u) << k.name;
    for (int64_t M : {1, 2, 8, 9, 17, 32}) {
      std::vector<int64_t> shape{M, 1, 64};
      qcc::format::ExprEvaluator eval(
          k.launch, {[&](qcc::format::TensorRef) -> const std::vector<int64_t> & {
                       return shape;
                     },
                     [](qcc::format::RuntimeSize) -> int64_t { return 0; }});
      std::vector<std::string> launched;
      for (const auto &step : k.launch.steps)
        if (!step.when || eval(*step.when) != 0)
          launched.push_back(step.entry);
      ASSERT_EQ(launched.size(), 1u) << k.name << " M=" << M;
      EXPECT_EQ(launched[0], M <= 8 ? k.entry : k.entry + "_rows")
          << k.name << " M=" << M;
    }
  }
  EXPECT_GT(gemvs, 0);
}

TEST(EmitterTest, HeuristicTilesFitSm80) {
  // The tiles the heuristics can choose (Emit<Family>.cpp); AttnPrefillLaunch
  // static_asserts its own sm_80 limit.
  EXPECT_EQ((qcc::GemmI8Config<128, 128, 64, 64, 64, 4>::kSmemBytes), 81920);
  EXPECT_EQ((qcc::GemmI8Config<64, 64, 64, 32, 32, 4>::kSmemBytes), 40960);
  EXPECT_LE((qcc::GemmF16Config<128, 128, 64, 64, 64, 4>::kSmemBytes),
            kMaxDynamicSmemSm80);
  EXPECT_EQ((qcc::GemmI8Config<128, 128, 64, 64, 64, 4>::kThreads), 128);
  EXPECT_EQ((qcc::GemvI8Config<8, 4, 1, 4>::kThreads), 128);
  EXPECT_EQ((qcc::GemvI8Config<8, 4, 1, 4>::kBlockN), 4);
  EXPECT_EQ((qcc::AttnPrefillLaunch<64, 64, 64, 4>::kDynamicSmemBytes), 49408);
  EXPECT_EQ((qcc::AttnPrefillLaunch<128, 32, 64, 4>::kDynamicSmemBytes),
            82176);
  EXPECT_EQ(qcc::normBlockThreads(4096), 256);
}

/// Attention (head size 32, GQA 4/2) whose q and k are rotated with
/// `rotaryAttrs` over tables [B, S, `tableWidth`], in a prefill and a decode
/// function: the rotary is fused into both attention kernels, which compile
/// for sm_80; returns their sources. `attnAttrs` are more kv_attention
/// attributes.
static std::vector<std::string>
emitRotaryAttention(const std::string &rotaryAttrs, int tableWidth,
                    const std::string &attnAttrs = "") {
  mlir::MLIRContext ctx;
  ctx.loadDialect<qcc::QccDialect, mlir::func::FuncDialect>();
  std::string table = "tensor<?x?x" + std::to_string(tableWidth) + "xf32>";
  std::string body = R"(
    %qr = qcc.rotary %q, %cos, %sin {)" + rotaryAttrs + R"(} : (tensor<?x?x128xf32>, )" + table + ", " + table + R"() -> tensor<?x?x128xf32>
    %kr = qcc.rotary %k, %cos, %sin {)" + rotaryAttrs + R"(} : (tensor<?x?x64xf32>, )" + table + ", " + table + R"() -> tensor<?x?x64xf32>
    %a = qcc.kv_attention %qr, %kr, %v {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.17677669 : f32)" + attnAttrs + R"(} : (tensor<?x?x128xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x128xf32>
    return %a : tensor<?x?x128xf32>
  })";
  std::string sig = "(%q: tensor<?x?x128xf32>, %k: tensor<?x?x64xf32>, %v: "
                    "tensor<?x?x64xf32>, %cos: " + table + ", %sin: " + table +
                    ") -> tensor<?x?x128xf32> {";
  std::string text =
      "module attributes {qcc.kv_cache = {block_tokens = 16 : i64, dtype = "
      "\"f32\", head_dim = 32 : i64, kv_heads = 2 : i64, layers = 1 : i64, "
      "layout = \"paged\"}} {\n func.func @prefill" +
      sig + body + "\n func.func @decode" + sig.substr(0, sig.size() - 1) +
      "attributes {qcc.tokens_per_row = 1 : i64} {" + body + "\n}\n";
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  EXPECT_TRUE(module);
  if (!module)
    return {};
  mlir::PassManager pm(&ctx);
  pm.nest<mlir::func::FuncOp>().addPass(qcc::createFormKernels());
  EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
  EmitResult r = emitKernels(*module);
  EXPECT_EQ(r.kernels.size(), 2u);
  std::vector<std::string> sources;
  for (const EmittedKernel &k : r.kernels) {
    EXPECT_EQ(k.kind, qcc::format::KernelKind::Attention);
    EXPECT_EQ(k.unsupported, "") << k.function;
    EXPECT_NE(k.source.find("p.rope.cos = rope_cos"), std::string::npos);
    bool stride = false;
    for (const auto &p : k.launch.steps.front().params)
      stride |= p.name == "rope_stride" &&
                p.expr.kind == qcc::format::ExprKind::Select;
    EXPECT_TRUE(stride) << k.function;
    sources.push_back(k.source);
  }
#ifdef QCC_HAVE_CODEGEN
  std::vector<KernelSource> units;
  for (const KernelUnit &u : r.units)
    units.push_back({u.name, u.source});
  CompileOptions options;
  options.cubinArchs = {"sm_80"};
  options.ptxArch = "";
  auto compiled = compileKernels(units, options);
  EXPECT_TRUE(static_cast<bool>(compiled))
      << (compiled ? "" : llvm::toString(compiled.takeError()));
#endif
  return sources;
}

// LLaMA-style: rotary over whole heads.
TEST(EmitterTest, RotaryFusesIntoAttention) {
  for (const std::string &src : emitRotaryAttention("head_dim = 32 : i64", 32))
    EXPECT_NE(src.find("p.rope.rotary_dim = 32;"), std::string::npos);
}

// GPT-NeoX / StableLM-style partial rotary: only the first 8 values of each
// head rotate (tables [B, S, 8]); the kernels get rotary_dim and pass the rest.
TEST(EmitterTest, PartialRotaryFusesIntoAttention) {
  for (const std::string &src : emitRotaryAttention(
           "head_dim = 32 : i64, rotary_dim = 8 : i64", 8))
    EXPECT_NE(src.find("p.rope.rotary_dim = 8;"), std::string::npos);
}

// Gemma-2: a sliding window and a logit softcap, baked into the prefill and
// decode units (which compile with them).
TEST(EmitterTest, WindowAndSoftcapReachAttention) {
  for (const std::string &src :
       emitRotaryAttention("head_dim = 32 : i64", 32,
                           ", window = 4 : i64, softcap = 50.0 : f32")) {
    EXPECT_NE(src.find("p.window = 4;"), std::string::npos) << src;
    EXPECT_NE(src.find("p.softcap = 5.000000000e+01f;"), std::string::npos);
  }
  for (const std::string &src : emitRotaryAttention("head_dim = 32 : i64", 32)) {
    EXPECT_NE(src.find("p.window = 0; p.softcap = 0.000000000e+00f;"),
              std::string::npos);
    EXPECT_EQ(src.find("alibi"), std::string::npos);
  }
}

// BLOOM / MPT: ALiBi slopes (one per query head) become a device array of
// the unit, exact to the last bit (1/3 has no short decimal), in the prefill
// and decode kernels (which compile with them).
TEST(EmitterTest, AlibiSlopesReachAttention) {
  for (const std::string &src : emitRotaryAttention(
           "head_dim = 32 : i64", 32,
           ", alibi = array<f32: 0.5, 0.25, 0.125, 0.333333343>")) {
    EXPECT_NE(src.find("__device__ const float qcc_alibi[] = {5.000000000e-01f, "
                       "2.500000000e-01f, 1.250000000e-01f, 3.333333433e-01f, };"),
              std::string::npos)
        << src;
    EXPECT_NE(src.find("p.alibi = qcc_alibi;"), std::string::npos);
  }
}

/// An elementwise chain reads each operand where ONNX broadcasting says:
/// the emitted launch parameters, evaluated for concrete shapes, and
/// broadcast.h's index (the kernel's own formula) give every output
/// element's operand element, checked against coordinates computed here.
/// Mixtral's router normalizes its top-k weights as [T, 2] / [T, 1]: read
/// modulo its size, the [T, 1] operand gave the wrong row (an H200 run,
/// 2026-11-30: error 0.12).
TEST(EmitterTest, ElementwiseOperandsBroadcastAsOnnx) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<qcc::QccDialect, mlir::func::FuncDialect>();
  const char *text = R"(
func.func @chain(%a: tensor<?x?x4xf32>, %b: tensor<?x1x4xf32>, %c: tensor<4xf32>, %d: tensor<?x?x1xf32>, %e: tensor<f32>, %f: tensor<?x?x?xf32>) -> tensor<?x?x4xf32> {
  %0 = qcc.kernel elementwise "k0"(%a, %b, %c, %d, %e, %f) : (tensor<?x?x4xf32>, tensor<?x1x4xf32>, tensor<4xf32>, tensor<?x?x1xf32>, tensor<f32>, tensor<?x?x?xf32>) -> tensor<?x?x4xf32> {
  ^bb0(%a1: tensor<?x?x4xf32>, %b1: tensor<?x1x4xf32>, %c1: tensor<4xf32>, %d1: tensor<?x?x1xf32>, %e1: tensor<f32>, %f1: tensor<?x?x?xf32>):
    %1 = qcc.add %a1, %b1 : (tensor<?x?x4xf32>, tensor<?x1x4xf32>) -> tensor<?x?x4xf32>
    %2 = qcc.mul %1, %c1 : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %3 = qcc.div %2, %d1 : (tensor<?x?x4xf32>, tensor<?x?x1xf32>) -> tensor<?x?x4xf32>
    %4 = qcc.sub %3, %e1 : (tensor<?x?x4xf32>, tensor<f32>) -> tensor<?x?x4xf32>
    %5 = qcc.add %4, %f1 : (tensor<?x?x4xf32>, tensor<?x?x?xf32>) -> tensor<?x?x4xf32>
    qcc.yield %5 : tensor<?x?x4xf32>
  }
  return %0 : tensor<?x?x4xf32>
})";
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  ASSERT_TRUE(module);
  EmitResult r = emitKernels(*module);
  ASSERT_EQ(r.kernels.size(), 1u);
  const EmittedKernel &k = r.kernels[0];
  ASSERT_EQ(k.unsupported, "");
  const std::vector<int64_t> out{3, 5, 4};
  // Operand shapes at run time; %f is [3, 1, 4] once (broadcast along a
  // dynamic dimension) and the result's shape once.
  for (int64_t fRows : {1, 5}) {
    std::vector<std::vector<int64_t>> shapes{
        {3, 5, 4}, {3, 1, 4}, {4}, {3, 5, 1}, {}, {3, fRows, 4}};
    qcc::format::ExprEvaluator eval(
        k.launch,
        {[&](qcc::format::TensorRef t) -> const std::vector<int64_t> & {
           return t.side == qcc::format::TensorRef::Side::Result
                      ? out
                      : shapes[t.index];
         },
         [](qcc::format::RuntimeSize) -> int64_t { return 0; }});
    std::map<std::string, int64_t> param;
    for (const auto &p : k.launch.steps.front().params)
      if (p.kind == qcc::format::ParamKind::Int64)
        param[p.name] = eval(p.expr);
    long long dims[3];
    for (int d = 0; d < 3; ++d)
      dims[d] = param.count("d" + std::to_string(d))
                    ? param["d" + std::to_string(d)]
                    : -1;
    for (size_t j = 0; j < shapes.size(); ++j) {
      std::string sj = std::to_string(j);
      const auto &shape = shapes[j];
      int64_t lead = 3 - (int64_t)shape.size();
      for (int64_t i = 0; i < 3 * 5 * 4; ++i) {
        // The reference: the output's coordinates, clamped to 0 along the
        // operand's size-1 dimensions, row-major over the operand's shape.
        int64_t coord[3] = {i / 20, i / 4 % 5, i % 4}, want = 0;
        for (int64_t a = 0; a < (int64_t)shape.size(); ++a)
          want = want * shape[a] + (shape[a] == 1 ? 0 : coord[a + lead]);
        int64_t got;
        if (!param.count("full" + sj)) {
          // Read at 0 (static one element), at i modulo a static size (a
          // bias) or at i (the result's static shape).
          std::string read = "x[" + sj + "] = in" + sj + "[";
          size_t at = k.source.find(read);
          ASSERT_NE(at, std::string::npos) << k.source;
          std::string index =
              k.source.substr(at + read.size(),
                              k.source.find(']', at + read.size()) - at -
                                  read.size());
          if (index == "0")
            got = 0;
          else if (index.rfind("i % ", 0) == 0)
            got = i % std::stoll(index.substr(4));
          else
            got = i;
        } else if (param["full" + sj]) {
          got = i;
        } else {
          long long st[3];
          for (int d = 0; d < 3; ++d)
            st[d] = param["s" + sj + "_" + std::to_string(d)];
          got = qcc::broadcastIndex<3>(i, dims, st);
        }
        ASSERT_EQ(got, want) << "operand " << j << " element " << i
                             << " (%f rows " << fRows << ")";
      }
    }
  }
}

TEST(EmitterTest, WrappersFillParamsStructsFromTheirDeclaration) {
  // A parameter struct's fields come from its *_PARAMS list: each takes the
  // wrapper parameter of its name or a given value, a group per line; a
  // field without either (say, one just added to the list) stops the
  // emitter rather than being left unset.
  using namespace qcc::codegen::detail;
  KernelInterface iface;
  iface.pointer("const float", qcc::format::Param::operand("in", 0))
      .pointer("float", qcc::format::Param::result("out", 0))
      .scalar(qcc::format::Param::int32("rows", 4));
  EXPECT_EQ(iface.signature(), "const float *in, float *out, int rows");
  static constexpr ParamsField kNorm[] = {QCC_PARAMS_FIELDS(QCC_NORM_PARAMS)};
  FieldValues given;
  given.values = {{"gamma", "g"}, {"beta", "nullptr"}, {"q", "nullptr"},
                  {"q_scale", "nullptr"}, {"q_zero_point", "nullptr"},
                  {"dim", "8"}, {"epsilon", "1e-5f"}};
  EXPECT_EQ(assignFields(kNorm, iface, given),
            "  p.in = in; p.gamma = g; p.beta = nullptr; p.out = out;\n"
            "  p.q = nullptr; p.q_scale = nullptr; p.q_zero_point = nullptr;\n"
            "  p.rows = rows; p.dim = 8; p.epsilon = 1e-5f;\n");
  given.values.pop_back(); // epsilon: no parameter, no value
  EXPECT_DEATH(assignFields(kNorm, iface, given), "'epsilon' has no value");
}

TEST(EmitterTest, EveryEntryWaitsForPriorGridsFirst) {
  // Programmatic dependent launch is safe only for a kernel whose first act
  // is to wait for the grids before it (else it could read what they have
  // not written, or finish before them and break the chain for the next
  // kernel). The runtime trusts the record's waitsForPriorGrids, so the
  // record must match the source: the wait opens every entry.
  mlir::MLIRContext ctx;
  EmitResult r = emitDemo(ctx);
  ASSERT_FALSE(r.kernels.empty());
  size_t checked = 0, prefetching = 0;
  for (const EmittedKernel &k : r.kernels)
    for (const auto &step : k.launch.steps) {
      EXPECT_TRUE(step.waitsForPriorGrids) << step.entry;
      const std::string &name = step.entry;
      size_t at = k.source.find("\n" + name + "(");
      ASSERT_NE(at, std::string::npos) << name;
      size_t body = k.source.find(") {\n", at);
      ASSERT_NE(body, std::string::npos) << name;
      // Only weight prefetches may come first (they read what no kernel
      // writes; a grouped GEMV picks its member's weights by block index).
      const std::string wait = "  qcc::wait_for_prior_grids();\n";
      size_t first = body + 4, waitAt = k.source.find(wait, first);
      ASSERT_NE(waitAt, std::string::npos) << name;
      llvm::SmallVector<llvm::StringRef> before;
      llvm::StringRef(k.source).slice(first, waitAt).split(before, '\n', -1,
                                                             false);
      for (llvm::StringRef line : before) {
        bool prefetch = line.contains("qcc::gemv_prefetch_weights<") &&
                        line.contains("(w") && line.ends_with(";");
        EXPECT_TRUE(prefetch || line == "  const int b = blockIdx.x;")
            << name << ": '" << line.str() << "' before the wait";
        prefetching += prefetch;
      }
      ++checked;
    }
  EXPECT_GT(checked, r.kernels.size());
  EXPECT_GT(prefetching, 0u); // the decode GEMVs
}

#ifdef QCC_HAVE_CODEGEN
TEST(EmitterTest, PriorGridWaitIsHoppersInstruction) {
  // griddepcontrol exists from sm_90: the compute_90 PTX carries it, the
  // sm_80 build compiles it out (there the runtime launches in stream
  // order).
  std::string src = "#include \"qcc/common.cuh\"\n"
                    "extern \"C\" __global__ void qcc_wait(float *x) {\n"
                    "  qcc::wait_for_prior_grids();\n  x[threadIdx.x] = 1.0f;\n}\n";
  CompileOptions options;
  options.cubinArchs = {"sm_80"};
  options.ptxArch = "compute_90";
  options.useCache = false;
  auto hopper = compileKernels({{"wait", src}}, options);
  ASSERT_TRUE(static_cast<bool>(hopper)) << llvm::toString(hopper.takeError());
  const std::string &ptx = hopper->front().ptx;
  EXPECT_NE(ptx.find("griddepcontrol.wait"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("griddepcontrol.launch_dependents"), std::string::npos);
  ASSERT_NE(ptx.find("st.global"), std::string::npos);
  EXPECT_LT(ptx.find("griddepcontrol.wait"), ptx.find("st.global"));
  options.ptxArch = "compute_80";
  auto ampere = compileKernels({{"wait", src}}, options);
  ASSERT_TRUE(static_cast<bool>(ampere)) << llvm::toString(ampere.takeError());
  EXPECT_EQ(ampere->front().ptx.find("griddepcontrol"), std::string::npos);
}

TEST(EmitterTest, ConfigHeadersCompileOnTheDevice) {
  // The embedded configuration headers stand alone under NVRTC and give the
  // device the sizes the host (the emitter) reads.
  std::string src = "#include \"qcc/gemm_config.h\"\n#include "
                    "\"qcc/attention_config.h\"\n#include "
                    "\"qcc/norm_config.h\"\n";
  auto check = [&](const std::string &expr, long long host) {
    src += "static_assert(" + expr + " == " + std::to_string(host) + ", \"" +
           expr + "\");\n";
  };
  check("qcc::GemmI8Config<128, 128, 64, 64, 64, 4>::kSmemBytes",
        qcc::GemmI8Config<128, 128, 64, 64, 64, 4>::kSmemBytes);
  check("qcc::GemmF16Config<64, 64, 64, 32, 32, 4>::kThreads",
        qcc::GemmF16Config<64, 64, 64, 32, 32, 4>::kThreads);
  check("qcc::GemvF16Config<8, 4, 1, 4>::kBlockN",
        qcc::GemvF16Config<8, 4, 1, 4>::kBlockN);
  check("qcc::AttnPrefillLaunch<96, 32, 64, 4>::kDynamicSmemBytes",
        qcc::AttnPrefillLaunch<96, 32, 64, 4>::kDynamicSmemBytes);
  check("qcc::normBlockThreads(8192)", qcc::normBlockThreads(8192));
  src += "extern \"C\" __global__ void qcc_configs() {}\n";
  CompileOptions options;
  options.cubinArchs = {"sm_80"};
  options.ptxArch = "";
  options.useCache = false;
  auto r = compileKernels({{"configs", src}}, options);
  EXPECT_TRUE(static_cast<bool>(r)) << (r ? "" : llvm::toString(r.takeError()));
}
#endif

} // namespace
