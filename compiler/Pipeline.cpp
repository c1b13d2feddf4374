//===- Pipeline.cpp - the compiler driver ---------------------------------===//
#include "compiler/Pipeline.h"
#include "codegen/PrintCuda.h"
#include "compiler/OnnxImporter.h"
#include "compiler/Package.h"

#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

using namespace mlir;

namespace {

struct PhaseInfo {
  qcc::Phase phase;
  llvm::StringLiteral name, summary;
};
constexpr PhaseInfo kPhases[] = {
    {qcc::Phase::Import, "import", "qcc ops 1:1 with the ONNX nodes"},
    {qcc::Phase::Raise, "raise", "transformer ops plus glue (rotated with --rotate)"},
    {qcc::Phase::Calibrate, "calibrate", "+ calibration statistics"},
    {qcc::Phase::Quantize, "quantize", "+ SmoothQuant, 2:4 sparsity, quantize, MoE"},
    {qcc::Phase::KvLayout, "kv-layout", "+ the KV cache entry points"},
    {qcc::Phase::FormKernels, "form-kernels", "the GPU plan: kernel regions"},
    {qcc::Phase::Emit, "emit", "the CUDA C++ of the kernel regions"},
    {qcc::Phase::Compile, "compile", "NVRTC: each unit's binaries"},
    {qcc::Phase::Package, "package", "the artifact"},
};

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Runs `pm` on `module`: warnings go to stderr at once (one line), the first
/// error becomes the returned one, naming `sourcePath`.
llvm::Error runPasses(PassManager &pm, ModuleOp module,
                      llvm::StringRef sourcePath) {
  std::string diag;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
    // Remarks (a group smooth-quant leaves alone) are for qcc-opt.
    if (d.getSeverity() == DiagnosticSeverity::Remark)
      return success();
    // Warnings (a feature left out, saying why) go out at once, one line.
    if (d.getSeverity() == DiagnosticSeverity::Warning) {
      llvm::errs() << "qcc: warning: " << sourcePath << ": " << d.str()
                   << "\n";
      return success();
    }
    if (diag.empty())
      diag = d.str();
    return success();
  });
  if (failed(pm.run(module)))
    return error(sourcePath + ": " + diag);
  return llvm::Error::success();
}

/// Calibration rows kept per linear input for SmoothQuant's alpha search
/// and int8-fallback's error: 128 rows of K floats per input (SmolLM2: 121
/// inputs, about 50 MB in all; its alpha search took 16 minutes on 2 busy
/// cores).
constexpr int64_t kAlphaSearchRows = 128;

/// W8A8 over int8 or FP8 E4M3 (quantize).
bool quantizes(const qcc::CompileOptions &options) {
  return options.quant == qcc::QuantMode::W8A8 ||
         options.quant == qcc::QuantMode::Fp8;
}

/// Whether quantize-w4 makes int4 weights (W4A16, W4A8).
bool quantizesW4(const qcc::CompileOptions &options) {
  return options.quant == qcc::QuantMode::W4A16 ||
         options.quant == qcc::QuantMode::W4A8;
}

/// Whether SmoothQuant runs: the modes with int8 (or FP8) activations.
bool smooths(const qcc::CompileOptions &options) {
  return (quantizes(options) || options.quant == qcc::QuantMode::W4A8) &&
         options.smoothQuant;
}

/// Whether quantization reads calibration statistics: SmoothQuant's factors,
/// static scales, the int8 fallback's columns. Dynamic scales alone need
/// none (a rotated model's usual W8A8: --rotate --no-smoothquant).
bool quantizesWithStatistics(const qcc::CompileOptions &options) {
  return smooths(options) ||
         (quantizes(options) &&
          (options.activations == qcc::ActivationQuant::Static ||
           options.int8Fallback == qcc::Int8Fallback::Auto));
}

/// Whether the quantize phase measures errors on calibration rows.
bool needsActivationRows(const qcc::CompileOptions &options) {
  return (smooths(options) && options.smoothQuantAutoAlpha) ||
         (quantizes(options) &&
          options.int8Fallback == qcc::Int8Fallback::Auto);
}

/// Whether quantize-w4 runs GPTQ (which needs the calibration Hessians).
bool runsGptq(const qcc::CompileOptions &options) {
  return quantizesW4(options) && options.w4Method == qcc::W4Method::Gptq;
}

bool sparsifies(const qcc::CompileOptions &options) {
  return options.sparsity == qcc::Sparsity::TwoFour;
}

/// Whether calibration data is at hand (a source, or statistics to reuse).
bool hasCalibrationData(const qcc::CompileOptions &options) {
  const qcc::CalibrationOptions &c = options.calibration;
  return !c.source.empty() ||
         (!c.statsPath.empty() && llvm::sys::fs::exists(c.statsPath));
}

} // namespace

llvm::StringRef qcc::phaseName(Phase phase) {
  for (const PhaseInfo &p : kPhases)
    if (p.phase == phase)
      return p.name;
  llvm_unreachable("unknown phase");
}

llvm::StringRef qcc::phaseSummary(Phase phase) {
  for (const PhaseInfo &p : kPhases)
    if (p.phase == phase)
      return p.summary;
  llvm_unreachable("unknown phase");
}

llvm::ArrayRef<qcc::Phase> qcc::allPhases() {
  static const std::vector<Phase> phases = [] {
    std::vector<Phase> v;
    for (const PhaseInfo &p : kPhases)
      v.push_back(p.phase);
    return v;
  }();
  return phases;
}

std::optional<qcc::Phase> qcc::parsePhase(llvm::StringRef name) {
  for (const PhaseInfo &p : kPhases)
    if (p.name == name)
      return p.phase;
  return std::nullopt;
}

llvm::Expected<OwningOpRef<ModuleOp>>
qcc::importPhase(MLIRContext &context, llvm::StringRef onnxPath,
                 const CompileOptions &options) {
  ImportOptions import;
  for (const LoraSpec &spec : options.loraMerges) {
    auto adapter = readPeftAdapter(spec.dir, spec.scale);
    if (!adapter)
      return error("--lora " + llvm::toString(adapter.takeError()));
    import.loraMerges.push_back(std::move(*adapter));
  }
  for (const LoraSpec &spec : options.loraAdapters) {
    auto adapter = readPeftAdapter(spec.dir, spec.scale);
    if (!adapter)
      return error("--lora-adapter " + spec.name + "=" +
                   llvm::toString(adapter.takeError()));
    import.loraAdapters.emplace_back(spec.name, std::move(*adapter));
  }
  return importOnnxFile(context, onnxPath, import);
}

llvm::Error qcc::raisePhase(ModuleOp module, llvm::StringRef sourcePath,
                            const CompileOptions &options) {
  PassManager pm(module.getContext());
  buildRaisePipeline(pm);
  if (options.rotate) {
    RotateResidualOptions rotate;
    rotate.seed = options.rotateSeed;
    pm.nest<func::FuncOp>().addPass(createRotateResidual(rotate));
  }
  return runPasses(pm, module, sourcePath);
}

qcc::PruneMethod qcc::pruneMethod(const CompileOptions &options) {
  if (options.prune)
    return *options.prune;
  return hasCalibrationData(options) ? PruneMethod::SparseGpt
                                     : PruneMethod::Magnitude;
}

llvm::Error qcc::calibratePhase(ModuleOp module, llvm::StringRef sourcePath,
                                const CompileOptions &options) {
  bool pruningStats = (sparsifies(options) &&
                       pruneMethod(options) != PruneMethod::Magnitude) ||
                      runsGptq(options);
  if (sparsifies(options) && !options.prune && !pruningStats &&
      !options.quiet)
    llvm::errs() << "qcc: note: --sparsity=2:4 without calibration data "
                    "prunes by magnitude (--calib=TEXT for sparsegpt)\n";
  if (runsGptq(options) && !hasCalibrationData(options))
    return error(sourcePath + ": --quant=" +
                 spelling(kQuantModeNames, options.quant) +
                 " rounds with GPTQ, which "
                 "needs --calib=SOURCE (a text file or a folder of .npy "
                 "inputs) or existing --calib-stats (or --w4-method=rtn)");
  if (pruningStats && !hasCalibrationData(options))
    return error(sourcePath + ": --prune=" +
                 spelling(kPruneMethodNames, pruneMethod(options)) +
                 " needs --calib=SOURCE (a text file or a folder of .npy "
                 "inputs) or existing --calib-stats");
  if (!quantizesWithStatistics(options) &&
      !qcc::kvDtypeHasScales(options.kvDtype) && !pruningStats)
    return llvm::Error::success(); // nothing uses the statistics
  CalibrationOptions calibration = options.calibration;
  calibration.pruningStats = pruningStats;
  calibration.neededBy =
      quantizesWithStatistics(options)
          ? "--quant=" + spelling(kQuantModeNames, options.quant).str()
      : qcc::kvDtypeHasScales(options.kvDtype)
          ? "--kv-dtype=" + spelling(kKvDtypeNames, options.kvDtype).str()
          : "--prune=" +
                spelling(kPruneMethodNames, pruneMethod(options)).str();
  if (needsActivationRows(options))
    calibration.activationRows = kAlphaSearchRows;
  if (auto err = calibrate(module, calibration))
    return error(sourcePath + ": " + llvm::toString(std::move(err)));
  return llvm::Error::success();
}

llvm::Error qcc::quantizePhase(ModuleOp module, llvm::StringRef sourcePath,
                               const CompileOptions &options) {
  PassManager pm(module.getContext());
  OpPassManager &fn = pm.nest<func::FuncOp>();
  if (smooths(options)) {
    SmoothQuantOptions sq;
    sq.alpha = options.smoothQuantAlpha;
    sq.autoAlpha = options.smoothQuantAutoAlpha;
    sq.reportAlpha = options.smoothQuantAutoAlpha && !options.quiet;
    sq.normsOnly = options.smoothQuantNormsOnly;
    sq.keepSamples = options.int8Fallback == Int8Fallback::Auto;
    fn.addPass(createSmoothQuant(sq));
  }
  // Prune the smoothed weights; int8 scales then come from the kept ones.
  if (sparsifies(options)) {
    Sparsify24Options sp;
    sp.method = pruneMethod(options);
    sp.exclude.assign(options.sparsityExclude.begin(),
                      options.sparsityExclude.end());
    fn.addPass(createSparsify24(sp));
  }
  if (quantizesW4(options)) {
    QuantizeW4Options w4;
    w4.method = options.w4Method;
    w4.groupSize = options.w4GroupSize;
    w4.actOrder = options.w4ActOrder;
    w4.asymmetric = options.w4Asymmetric;
    w4.allLinears = options.w4LmHead;
    w4.int8Activations = options.quant == QuantMode::W4A8;
    fn.addPass(createQuantizeW4(w4));
    if (w4.int8Activations) // q/k/v (gate/up) quantize their input once
      fn.addPass(createCSEPass());
  }
  if (quantizes(options) && options.int8Fallback == Int8Fallback::Auto) {
    Int8FallbackOptions fb;
    fb.report = !options.quiet;
    fn.addPass(createInt8Fallback(fb));
  }
  if (quantizes(options)) {
    QuantizeOptions q;
    q.activations = options.activations;
    q.asymmetric = options.asymmetric;
    q.fp8 = options.quant == QuantMode::Fp8;
    fn.addPass(createQuantize(q));
    // quantize makes one qcc.quantize per qlinear; the q/k/v (and gate/up)
    // projections of one normed input then quantize it alike: one pass
    // over it instead of three.
    fn.addPass(createCSEPass());
  }
  // After the weight passes: qcc.moe takes float experts only, so quantized
  // ones keep the exported per-expert form.
  fn.addPass(createRaiseMoe());
  return runPasses(pm, module, sourcePath);
}

llvm::Error qcc::kvLayoutPhase(ModuleOp module, llvm::StringRef sourcePath,
                               const CompileOptions &options) {
  if (options.kvCache == qcc::KvLayout::None)
    return llvm::Error::success();
  PassManager pm(module.getContext());
  KvCacheLayoutOptions kv;
  kv.layout = options.kvCache;
  kv.blockTokens = options.kvBlockTokens;
  kv.maxPositionsBound = options.maxPositions;
  kv.kvDtype = options.kvDtype;
  kv.kvScales = options.kvScales;
  pm.addPass(createKvCacheLayout(kv));
  pm.nest<func::FuncOp>().addPass(createTabulatePositions());
  return runPasses(pm, module, sourcePath);
}

llvm::Expected<OwningOpRef<ModuleOp>> qcc::formKernelPlan(ModuleOp module) {
  OwningOpRef<ModuleOp> plan = module.clone();
  PassManager pm(module.getContext());
  pm.nest<func::FuncOp>().addPass(createFormKernels());
  if (failed(pm.run(*plan)))
    return error("form-kernels failed");
  return plan;
}

llvm::Error qcc::runPhase(MLIRContext &context, Compilation &c, Phase phase) {
  assert((phase == Phase::Import ? !c.last
                                 : c.last && (int)*c.last + 1 == (int)phase) &&
         "phases run in order");
  const CompileOptions &o = c.options;
  auto run = [&]() -> llvm::Error {
    switch (phase) {
    case Phase::Import: {
      auto module = importPhase(context, c.sourcePath, o);
      if (!module)
        return module.takeError();
      c.module = std::move(*module);
      return llvm::Error::success();
    }
    case Phase::Raise:
      return raisePhase(*c.module, c.sourcePath, o);
    case Phase::Calibrate:
      return calibratePhase(*c.module, c.sourcePath, o);
    case Phase::Quantize:
      return quantizePhase(*c.module, c.sourcePath, o);
    case Phase::KvLayout:
      return kvLayoutPhase(*c.module, c.sourcePath, o);
    case Phase::FormKernels: {
      auto plan = formKernelPlan(*c.module);
      if (!plan)
        return plan.takeError();
      c.gpuPlan = std::move(*plan);
      return llvm::Error::success();
    }
    case Phase::Emit:
      c.cuda = emitPhase(*c.gpuPlan);
      return llvm::Error::success();
    case Phase::Compile: {
      auto binaries = compilePhase(c.cuda, o.quiet);
      if (!binaries)
        return binaries.takeError();
      c.binaries = std::move(*binaries);
      return llvm::Error::success();
    }
    case Phase::Package:
      return packagePhase(c);
    }
    llvm_unreachable("unknown phase");
  };
  if (llvm::Error err = run())
    return err;
  c.last = phase;
  return llvm::Error::success();
}

/// Adapter names travel in manifests, HTTP requests and metrics labels.
static bool isAdapterName(llvm::StringRef name) {
  return !name.empty() && name.size() <= 64 &&
         llvm::all_of(name, [](char c) {
           return llvm::isAlnum(c) || c == '.' || c == '_' || c == '-';
         });
}

llvm::Error qcc::CompileOptions::validate() const {
  auto fail = [](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
  };
  // Sizes are taken from these: bounded before anything is allocated.
  struct Range {
    const char *flag;
    int64_t value, lo, hi;
  };
  for (const Range &r :
       {Range{"kv-block-tokens", kvBlockTokens, 1, 4096},
        Range{"calib-samples", calibration.samples, 1, 1 << 20},
        Range{"calib-seq-len", calibration.seqLen, 1, 1 << 20},
        Range{"group-size", w4GroupSize, 2, 1 << 20},
        Range{"max-positions", maxPositions, 0, int64_t(1) << 24}})
    if (r.value < r.lo || r.value > r.hi)
      return fail(llvm::Twine("--") + r.flag + " must be in [" +
                  llvm::Twine(r.lo) + ", " + llvm::Twine(r.hi) + "], not " +
                  llvm::Twine(r.value));
  if (!smoothQuantAutoAlpha &&
      !(smoothQuantAlpha >= 0.0 && smoothQuantAlpha <= 1.0)) // also NaN
    return fail("--smoothquant-alpha must be in [0, 1] or auto, not " +
                fmt::format("{}", smoothQuantAlpha));
  for (const LoraSpec &spec : loraMerges)
    if (!std::isfinite(spec.scale))
      return fail("--lora " + spec.dir + ": the scale must be a finite "
                  "number");
  std::set<std::string> adapterNames;
  for (const LoraSpec &spec : loraAdapters) {
    if (!std::isfinite(spec.scale))
      return fail("--lora-adapter " + spec.name + ": the scale must be a "
                  "finite number");
    if (!isAdapterName(spec.name))
      return fail("--lora-adapter: the name '" + spec.name + "' must be 1-64 "
                  "characters of A-Z a-z 0-9 . _ -");
    if (spec.name == "base")
      return fail("--lora-adapter: 'base' names the model without an adapter "
                  "(qrun --lora base); choose another name");
    if (!adapterNames.insert(spec.name).second)
      return fail("--lora-adapter: the name '" + spec.name + "' is given "
                  "twice");
  }
  if (kvScales == KvScales::Kivi && kvDtype != KvDtype::I8)
    return fail("--kv-scales=kivi needs --kv-dtype=i8");
  if (sparsity == Sparsity::None && (prune || !sparsityExclude.empty()))
    return fail("--prune and --sparsity-exclude need --sparsity=2:4");
  if (w4GroupSize % 2 != 0)
    return fail("--group-size must be even (two int4 per byte), not " +
                llvm::Twine(w4GroupSize));
  CompileOptions defaults;
  bool w4Options = w4GroupSize != defaults.w4GroupSize || w4ActOrder ||
                   w4Asymmetric || w4LmHead || w4Method != defaults.w4Method;
  const bool w4 = quantizesW4(*this);
  if (w4Options && !w4)
    return fail("--group-size, --act-order, --w4-method, --w4-asym and "
                "--w4-lm-head need --quant=w4a16 or w4a8");
  if (w4ActOrder && w4Method == W4Method::Rtn)
    return fail("--act-order orders GPTQ's columns; it does not apply to "
                "--w4-method=rtn");
  if (w4 && sparsity != Sparsity::None)
    return fail("--quant=" + spelling(kQuantModeNames, quant) +
                " and --sparsity=2:4 do not combine (yet)");
  // W4A8's activations are per-token dynamic int8 with every column in
  // int8 (quantize-w4's int8-activations).
  if (quant == QuantMode::W4A8 &&
      (activations != ActivationQuant::PerToken || asymmetric ||
       int8Fallback != Int8Fallback::Off))
    return fail("--quant=w4a8 quantizes activations per token, symmetric, "
                "every column: --act-quant, --asymmetric and "
                "--int8-fallback do not apply");
  return llvm::Error::success();
}

llvm::Expected<qcc::LoraSpec> qcc::parseLoraSpec(llvm::StringRef text,
                                                 bool named) {
  const char *flag = named ? "--lora-adapter" : "--lora";
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::Twine(flag) + " " + text + ": " + why);
  };
  LoraSpec spec;
  llvm::StringRef rest = text;
  if (named) {
    auto [name, dir] = text.split('=');
    if (name.empty() || dir.empty())
      return fail("needs NAME=DIR or NAME=DIR:SCALE");
    spec.name = name.str();
    rest = dir;
  }
  spec.dir = rest.str();
  auto [dir, scale] = rest.rsplit(':');
  // A folder whose name has a colon is taken whole when it exists.
  if (dir.size() < rest.size() && !llvm::sys::fs::is_directory(rest)) {
    double value;
    if (scale.getAsDouble(value) || !std::isfinite(value))
      return fail("the scale after ':' must be a number, not '" + scale + "'");
    spec.dir = dir.str();
    spec.scale = value;
  }
  if (spec.dir.empty())
    return fail("needs a folder");
  return spec;
}

llvm::Error qcc::parseSmoothQuantAlpha(llvm::StringRef text,
                                      CompileOptions &options) {
  options.smoothQuantAutoAlpha = text == "auto";
  if (options.smoothQuantAutoAlpha)
    return llvm::Error::success();
  // The range is validate()'s rule; a number is all this checks.
  double alpha = 0;
  if (text.trim().getAsDouble(alpha))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--smoothquant-alpha must be in [0, 1] or auto, not " + text);
  options.smoothQuantAlpha = alpha;
  return llvm::Error::success();
}

llvm::Error qcc::prepareCompile(llvm::StringRef onnxPath,
                                llvm::StringRef tokenizerFlag, Phase last,
                                CompileOptions &options) {
  // The artifact may not overwrite what the compile reads.
  std::pair<llvm::StringRef, const char *> inputs[] = {
      {onnxPath, "the input model"},
      {tokenizerFlag, "the --tokenizer file"},
      {options.calibration.source, "the --calib source"},
      {options.calibration.statsPath, "the --calib-stats file"}};
  const std::string &out = options.artifactPath;
  for (auto [input, what] : inputs) {
    bool sameFile = false;
    if (out != "-" && !out.empty() && !input.empty() &&
        !llvm::sys::fs::equivalent(input, out, sameFile) && sameFile)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "-o " + out + " is " + what + "; refusing to overwrite it");
  }
  options.tokenizerPath = findTokenizer(tokenizerFlag, onnxPath);
  if (!options.tokenizerPath.empty() &&
      (last == Phase::Package || options.quant != QuantMode::None ||
       options.sparsity != Sparsity::None))
    if (auto err = checkTokenizer(options.tokenizerPath))
      return err;
  options.calibration.tokenizerPath = options.tokenizerPath;
  options.calibration.quiet = options.quiet;
  return llvm::Error::success();
}

llvm::Expected<qcc::Compilation>
qcc::compileTo(MLIRContext &context, llvm::StringRef onnxPath, Phase last,
               const CompileOptions &options) {
  if (auto err = options.validate())
    return std::move(err);
  Compilation c;
  c.sourcePath = onnxPath.str();
  c.options = options;
  // --no-cuda (or no NVRTC): the artifact holds the CPU plan only.
  bool gpu = options.gpuKernels && canCompileCuda();
  for (const PhaseInfo &p : kPhases) {
    if ((int)p.phase > (int)last)
      break;
    if (last == Phase::Package && !gpu && p.phase >= Phase::FormKernels &&
        p.phase <= Phase::Compile) {
      c.last = p.phase; // skipped: nothing to do
      continue;
    }
    if (auto err = runPhase(context, c, p.phase))
      return std::move(err);
  }
  return c;
}

llvm::Expected<OwningOpRef<ModuleOp>>
qcc::compile(MLIRContext &context, llvm::StringRef onnxPath, Phase last,
             const CompileOptions &options) {
  assert(last <= Phase::KvLayout && "an IR phase");
  auto c = compileTo(context, onnxPath, last, options);
  if (!c)
    return c.takeError();
  return std::move(c->module);
}

void qcc::printPhaseOutput(const Compilation &c, llvm::raw_ostream &os) {
  assert(c.last && "no phase ran");
  switch (*c.last) {
  case Phase::Import:
  case Phase::Raise:
  case Phase::Calibrate:
  case Phase::Quantize:
  case Phase::KvLayout:
    c.module.get()->print(os);
    return;
  case Phase::FormKernels:
    c.gpuPlan.get()->print(os);
    return;
  case Phase::Emit:
    codegen::printCuda(c.cuda, os);
    return;
  case Phase::Compile:
    for (size_t u = 0; u < c.binaries.size(); ++u) {
      os << "unit " << c.cuda.units[u].name << ":";
      for (const auto &[target, bytes] : c.binaries[u])
        os << " " << target << "=" << bytes.size();
      os << "\n";
    }
    return;
  case Phase::Package:
    os << c.options.artifactPath << "\n";
    return;
  }
}
