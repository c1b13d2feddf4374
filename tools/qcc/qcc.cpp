//===- qcc.cpp - the qcc compiler -----------------------------------------===//
//
// qcc MODEL.onnx --emit=mlir [-o FILE]
// qcc MODEL.onnx --emit=cuda [-o FILE]     the emitted CUDA C++ (codegen)
// qcc MODEL.onnx -o MODEL.qpkg [--no-cuda]
// qcc MODEL.onnx --report[=json] [--report-batch N --report-context N]
//                                           the roofline report (docs/ROOFLINE.md)
//
// With a CUDA toolkit (QccCodegen), writing an artifact also compiles the GPU
// kernels: form-kernels runs on a clone of the final module (the CPU plan in
// the artifact stays op by op), the emitter writes one CUDA C++ unit per
// distinct region, NVRTC compiles each for sm_80, sm_90 and compute_90 PTX
// (cached by content hash), and the binaries and launch records go into the
// artifact ("kernels"), with the clone itself as the CUDA backend's plan
// ("gpu_functions": kernel regions as nodes, in launch order).
//
//===----------------------------------------------------------------------===//
#include "compiler/ArtifactWriter.h"
#include "compiler/OnnxImporter.h"
#include "compiler/Pipeline.h"
#include "compiler/RooflineReport.h"
#include "codegen/Emitter.h"
#include "passes/Passes.h"
#include "runtime/Artifact.h"
#include "runtime/Progress.h"
#ifdef QCC_HAVE_CODEGEN
#include "codegen/NvrtcCompiler.h"
#endif

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Chrono.h"
#include <chrono>
#include <functional>

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {
enum class Emit { Imported, Mlir, Cuda, Qpkg };

// --help shows these groups only; LLVM's own options (hundreds) stay
// reachable with --help-llvm.
cl::OptionCategory inputCat("Input");
cl::OptionCategory quantCat("Quantization (W8A8 SmoothQuant)");
cl::OptionCategory kvCat("KV cache");
cl::OptionCategory outputCat("Output");
cl::OptionCategory reportCat("Roofline report (docs/ROOFLINE.md)");

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"), cl::cat(inputCat));
cl::opt<Emit> emit(
    "emit", cl::desc("What to write (default qpkg)"), cl::init(Emit::Qpkg),
    cl::values(clEnumValN(Emit::Qpkg, "qpkg",
                          "the deployment artifact (default; needs -o)"),
               clEnumValN(Emit::Imported, "imported",
                          "the IR right after import (qcc ops 1:1 with ONNX)"),
               clEnumValN(Emit::Mlir, "mlir",
                          "the raised IR: transformer ops plus glue"),
               clEnumValN(Emit::Cuda, "cuda",
                          "the CUDA C++ emitted for the kernel regions")), cl::cat(outputCat));
cl::opt<bool> quiet("quiet",
                    cl::desc("Errors and warnings only: no progress lines "
                             "(shown on a terminal) and no summaries"),
                    cl::cat(outputCat));
cl::opt<bool> noCuda("no-cuda",
                     cl::desc("Write the artifact without GPU kernels and "
                              "without the GPU plan (skips CUDA emission and "
                              "NVRTC; qrun then runs on the CPU only)"), cl::cat(outputCat));
cl::opt<std::string> outputPath("o",
                                cl::desc("Output file (IR: default stdout)"),
                                cl::value_desc("file"), cl::init("-"), cl::cat(outputCat));
cl::opt<std::string> tokenizerPath(
    "tokenizer",
    cl::desc("Tokenizer to embed in the artifact: a Hugging Face "
             "tokenizer.json or a SentencePiece model (default: "
             "tokenizer.json beside the ONNX file, else tokenizer.model "
             "there; tokenizer.json wins, as in Hugging Face's loaders)"),
    cl::value_desc("file"), cl::cat(inputCat));
cl::opt<std::string> kvCache(
    "kv-cache",
    cl::desc("KV cache layout for decoders: paged (default), contiguous, or "
             "none (only the full-sequence entry point)"),
    cl::init("paged"), cl::cat(kvCat));
cl::opt<int64_t> kvBlockTokens("kv-block-tokens",
                               cl::desc("Tokens per block of the paged KV "
                                        "cache (default 16)"),
                               cl::init(16), cl::cat(kvCat));
cl::opt<std::string> kvDtype("kv-dtype",
                            cl::desc("KV cache element type: f32 (default) or "
                                     "i8 (per-head scales from calibration)"),
                            cl::init("f32"), cl::cat(kvCat));
cl::opt<std::string> quant("quant",
                           cl::desc("Quantization: none (default) or w8a8"),
                           cl::init("none"), cl::cat(quantCat));
cl::opt<std::string> calib("calib",
                           cl::desc("Calibration data: a text file, or a "
                                    "folder with one .npy per model input"),
                           cl::value_desc("source"), cl::cat(quantCat));
cl::opt<std::string> actQuant(
    "act-quant",
    cl::desc("Activation quantization: per-token (O1, default), per-tensor "
             "(O2) or static (O3, per-tensor scales from calibration)"),
    cl::init("per-token"), cl::cat(quantCat));
cl::opt<double> smoothAlpha(
    "smoothquant-alpha",
    cl::desc("SmoothQuant migration strength (0.5 default; 0.75-0.9 for "
             "LLaMA-family models with strong outliers)"),
    cl::init(0.5), cl::cat(quantCat));
cl::opt<bool> noSmooth("no-smoothquant",
                       cl::desc("Quantize without SmoothQuant smoothing"), cl::cat(quantCat));
cl::opt<bool> asymmetric("asymmetric",
                         cl::desc("Zero-point (asymmetric) activations"), cl::cat(quantCat));
cl::opt<int64_t> calibSamples("calib-samples",
                              cl::desc("Calibration windows or samples (default 64)"),
                              cl::init(64), cl::cat(quantCat));
cl::opt<int64_t> calibSeqLen("calib-seq-len",
                             cl::desc("Tokens per calibration window (default 128)"),
                             cl::init(128), cl::cat(quantCat));
cl::opt<std::string> calibStats(
    "calib-stats",
    cl::desc("Calibration statistics: reused if FILE exists, else saved there"),
    cl::value_desc("file"), cl::cat(quantCat));
cl::opt<std::string> report(
    "report", cl::ValueOptional,
    cl::desc("Print FLOPs, bytes and roofline times (H100, H200, this CPU) "
             "of every kernel instead of writing an artifact: text "
             "(default) or =json"),
    cl::value_desc("format"), cl::cat(reportCat));
cl::opt<int64_t> reportBatch("report-batch",
                             cl::desc("Sequences per call (default 1)"),
                             cl::init(1), cl::cat(reportCat));
cl::opt<int64_t> reportContext(
    "report-context",
    cl::desc("Tokens per sequence for main and prefill; cached tokens for "
             "decode (default 512)"),
    cl::init(512), cl::cat(reportCat));
cl::opt<bool> reportCpu("report-cpu",
                        cl::desc("Measure this CPU's peaks (about a second) "
                                 "and predict for it (default true)"),
                        cl::init(true), cl::cat(reportCat));
cl::opt<bool> listOps("list-ops",
                      cl::desc("List the supported ONNX ops and exit"), cl::cat(inputCat));
/// --tokenizer, else tokenizer.json beside the ONNX file, else
/// tokenizer.model there, else none.
std::string findTokenizer() {
  if (!tokenizerPath.empty())
    return tokenizerPath;
  for (const char *name : {"tokenizer.json", "tokenizer.model"}) {
    SmallString<256> beside(sys::path::parent_path(inputPath));
    sys::path::append(beside, name);
    if (sys::fs::exists(beside))
      return beside.str().str();
  }
  return "";
}

/// A light check of the tokenizer before it is embedded (qcc cannot load it:
/// libsentencepiece's protobuf clashes with ONNX's; qrun loads it fully): a
/// tokenizer.json must parse and have a "model" object, a SentencePiece
/// model must not be empty. Prints one error line naming the file.
bool checkTokenizer(StringRef path) {
  auto fail = [&](const Twine &why) {
    WithColor::error(errs(), "qcc") << path << ": " << why << "\n";
    return false;
  };
  auto buffer = MemoryBuffer::getFile(path);
  if (!buffer)
    return fail("cannot read the tokenizer: " + buffer.getError().message());
  StringRef text = (*buffer)->getBuffer();
  if (text.ltrim(" \t\r\n").starts_with("{")) {
    Expected<json::Value> value = json::parse(text);
    if (!value)
      return fail("not a valid tokenizer.json: " + toString(value.takeError()));
    const json::Object *top = value->getAsObject();
    if (!top || !top->getObject("model"))
      return fail("not a tokenizer.json (no \"model\" object)");
    return true;
  }
  if (path.ends_with(".json"))
    return fail("not a tokenizer.json (it does not start with '{')");
  if (text.empty())
    return fail("the tokenizer file is empty");
  return true;
}

/// form-kernels on a clone of `module` (kept in `plan`: the GPU plan), then
/// the emitter.
std::optional<qcc::codegen::EmitResult>
emitCuda(mlir::ModuleOp module, mlir::OwningOpRef<mlir::ModuleOp> &plan) {
  auto formed = qcc::formKernelPlan(module);
  if (!formed) {
    WithColor::error(errs(), "qcc") << toString(formed.takeError()) << "\n";
    return std::nullopt;
  }
  plan = std::move(*formed);
  return qcc::codegen::emitKernels(*plan);
}

void printCuda(const qcc::codegen::EmitResult &r, raw_ostream &os) {
  for (const auto &unit : r.units) {
    os << "// ===== unit " << unit.name << " (regions:";
    for (size_t k : unit.kernels)
      os << " " << r.kernels[k].function << "/" << r.kernels[k].name;
    os << ") kind "
       << qcc::format::spelling(r.kernels[unit.kernels.front()].kind) << "\n";
    os << "// launch: "
       << qcc::format::toJson(r.kernels[unit.kernels.front()].launch).dump()
       << "\n";
    os << unit.source << "\n";
  }
  for (const auto &k : r.kernels)
    if (!k.unsupported.empty())
      os << "// ===== no kernel for " << k.function << "/" << k.name << " ("
         << qcc::format::spelling(k.kind) << "): " << k.unsupported << "\n";
}

#ifdef QCC_HAVE_CODEGEN
/// Emits and compiles the GPU kernels into `artifact`.
bool compileCuda(mlir::ModuleOp module, qcc::ArtifactOptions &artifact,
                 mlir::OwningOpRef<mlir::ModuleOp> &plan) {
  auto emitted = emitCuda(module, plan);
  if (!emitted)
    return false;
  std::vector<qcc::codegen::KernelSource> sources;
  for (const auto &u : emitted->units)
    sources.push_back({u.name, u.source});
  qcc::codegen::CompileOptions options;
  qcc::rt::Progress progress("compiling CUDA kernels", sources.size(),
                             !quiet && qcc::rt::Progress::stderrIsTerminal());
  options.onProgress = [&](const qcc::codegen::CompileProgress &p) {
    progress.update(p.done, p.name + (p.cached ? " [cached]" : "") +
                                (p.failed ? " [failed]" : ""));
  };
  auto start = std::chrono::steady_clock::now();
  auto compiled = qcc::codegen::compileKernels(sources, options);
  if (!compiled) {
    WithColor::error(errs(), "qcc")
        << "CUDA kernel compilation failed: " << toString(compiled.takeError())
        << "\n";
    return false;
  }
  progress.clear();
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  size_t unsupported = 0;
  for (const auto &k : emitted->kernels) {
    qcc::ArtifactOptions::Kernel entry;
    entry.record = k.manifest();
    if (k.unsupported.empty()) {
      const auto &c = (*compiled)[k.unit];
      for (const auto &[arch, bytes] : c.cubins)
        entry.binaries[arch] = bytes;
      if (!c.ptx.empty())
        entry.binaries["ptx"] = c.ptx;
    } else {
      ++unsupported;
    }
    artifact.kernels.push_back(std::move(entry));
  }
  artifact.gpuPlan = *plan;
  if (quiet)
    return true;
  errs() << "compiled " << sources.size() << " CUDA kernel units for "
         << emitted->kernels.size() << " regions in "
         << format("%.1f", seconds) << " s";
  if (unsupported)
    errs() << " (" << unsupported << " regions without a CUDA kernel)";
  errs() << "\n";
  return true;
}
#endif

/// Writes -o (default stdout) with `print`; false (and an error line) if
/// the file cannot be written.
bool writeOutput(const std::function<void(raw_ostream &)> &print) {
  std::error_code ec;
  ToolOutputFile out(outputPath, ec, sys::fs::OF_None);
  if (ec) {
    WithColor::error(errs(), "qcc")
        << outputPath << ": cannot write: " << ec.message() << "\n";
    return false;
  }
  print(out.os());
  out.keep();
  return true;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // --help-llvm: the full LLVM option list, for developers; otherwise --help
  // shows qcc's own groups.
  std::vector<char *> args(argv, argv + argc);
  static char helpFlag[] = "--help";
  bool llvmHelp = false;
  for (char *&a : args)
    if (StringRef(a) == "--help-llvm" || StringRef(a) == "-help-llvm") {
      a = helpFlag;
      llvmHelp = true;
    }
  if (!llvmHelp)
    cl::HideUnrelatedOptions(
        {&inputCat, &quantCat, &kvCat, &outputCat, &reportCat});
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "qcc " << QCC_VERSION << " (artifact format "
       << qcc::rt::kFormatVersion << ")\n";
  });
  cl::ParseCommandLineOptions(
      (int)args.size(), args.data(),
      "qcc: ahead-of-time compiler for quantized transformer inference\n\n"
      "  qcc MODEL.onnx -o MODEL.qpkg    compile to a deployment artifact\n"
      "  qcc MODEL.onnx --emit=mlir      print the raised IR\n"
      "  qcc MODEL.onnx --emit=imported  print the IR as imported\n"
      "  qcc MODEL.onnx --report         the roofline report per kernel\n"
      "  qcc --list-ops                  list the ONNX ops qcc imports\n"
      "  qcc --help-llvm                 also LLVM's own options\n");

  if (listOps) {
    for (const auto &[op, versions] : qcc::supportedOnnxOps()) {
      outs() << op << " (op versions";
      for (int v : versions)
        outs() << " " << v;
      outs() << ")\n";
    }
    return 0;
  }
  if (inputPath.empty()) {
    WithColor::error(errs(), "qcc") << "no input model (see --help)\n";
    return 1;
  }

  bool reporting = report.getNumOccurrences() > 0;
  if (reporting && report != "" && report != "text" && report != "json") {
    WithColor::error(errs(), "qcc")
        << "--report must be text or json, not '" << report << "'\n";
    return 1;
  }
  if (reporting && emit.getNumOccurrences() > 0) {
    WithColor::error(errs(), "qcc") << "--report and --emit are exclusive\n";
    return 1;
  }
  if (emit == Emit::Qpkg && outputPath == "-" && !reporting) {
    WithColor::error(errs(), "qcc")
        << "writing an artifact needs -o FILE.qpkg (or use --emit=mlir)\n";
    return 1;
  }

  mlir::MLIRContext context;
  if (kvCache != "paged" && kvCache != "contiguous" && kvCache != "none") {
    WithColor::error(errs(), "qcc")
        << "--kv-cache must be paged, contiguous or none, not '" << kvCache
        << "'\n";
    return 1;
  }
  // Flags are untrusted input: ranges checked before anything is sized
  // from them.
  auto inRange = [](StringRef flag, int64_t v, int64_t lo, int64_t hi) {
    if (v >= lo && v <= hi)
      return true;
    WithColor::error(errs(), "qcc") << "--" << flag << " must be in [" << lo
                                    << ", " << hi << "], not " << v << "\n";
    return false;
  };
  if (!inRange("kv-block-tokens", kvBlockTokens, 1, 4096) ||
      !inRange("calib-samples", calibSamples, 1, 1 << 20) ||
      !inRange("calib-seq-len", calibSeqLen, 1, 1 << 20) ||
      !inRange("report-batch", reportBatch, 1, 4096) ||
      !inRange("report-context", reportContext, 1, 1 << 20))
    return 1;
  if (!(smoothAlpha >= 0.0 && smoothAlpha <= 1.0)) { // also NaN
    WithColor::error(errs(), "qcc")
        << "--smoothquant-alpha must be in [0, 1], not " << smoothAlpha
        << "\n";
    return 1;
  }
  bool sameFile = false;
  if (outputPath != "-" &&
      !sys::fs::equivalent(inputPath, outputPath, sameFile) && sameFile) {
    WithColor::error(errs(), "qcc")
        << "-o " << outputPath << " is the input model; refusing to overwrite "
           "it\n";
    return 1;
  }
  if (quant != "none" && quant != "w8a8") {
    WithColor::error(errs(), "qcc")
        << "--quant must be none or w8a8, not '" << quant << "'\n";
    return 1;
  }
  if (kvDtype != "f32" && kvDtype != "i8") {
    WithColor::error(errs(), "qcc")
        << "--kv-dtype must be f32 or i8, not '" << kvDtype << "'\n";
    return 1;
  }
  if (actQuant != "per-token" && actQuant != "per-tensor" &&
      actQuant != "static") {
    WithColor::error(errs(), "qcc") << "--act-quant must be per-token, "
                                       "per-tensor or static, not '"
                                    << actQuant << "'\n";
    return 1;
  }
  qcc::CompileOptions options;
  options.kvCache = kvCache;
  options.kvBlockTokens = kvBlockTokens;
  options.kvDtype = kvDtype;
  options.quant = quant;
  options.activations = actQuant;
  options.asymmetric = asymmetric;
  options.smoothQuant = !noSmooth;
  options.smoothQuantAlpha = smoothAlpha;
  options.calibration.source = calib;
  options.calibration.samples = calibSamples;
  options.calibration.seqLen = calibSeqLen;
  options.calibration.statsPath = calibStats;
  std::string tokenizer = findTokenizer();
  if (!tokenizer.empty() && (emit == Emit::Qpkg || quant != "none") &&
      !checkTokenizer(tokenizer))
    return 1;
  options.calibration.tokenizerPath = tokenizer;
  options.calibration.quiet = quiet;
  SmallString<256> tool(sys::path::parent_path(
      sys::fs::getMainExecutable(argv[0], (void *)&main)));
  sys::path::append(tool, "qcc-calib");
  options.calibration.toolPath = tool.str().str();
  auto module = qcc::compile(context, inputPath,
                             emit == Emit::Imported ? qcc::Stage::Imported
                                                    : qcc::Stage::Raised,
                             options);
  if (!module) {
    WithColor::error(errs(), "qcc") << toString(module.takeError()) << "\n";
    return 1;
  }
  if (reporting) {
    qcc::RooflineOptions ro;
    ro.batch = reportBatch;
    ro.context = reportContext;
    ro.cpu = reportCpu;
    auto r = qcc::buildRooflineReport(
        **module, sys::path::filename(inputPath), ro);
    if (!r) {
      WithColor::error(errs(), "qcc") << toString(r.takeError()) << "\n";
      return 1;
    }
    return writeOutput([&](raw_ostream &os) {
             if (report == "json")
               os << qcc::rooflineReportJson(*r).dump(1) << "\n";
             else
               qcc::printRooflineReport(*r, os);
           })
               ? 0
               : 1;
  }
  if (emit == Emit::Cuda) {
    mlir::OwningOpRef<mlir::ModuleOp> plan;
    auto kernels = emitCuda(**module, plan);
    if (!kernels)
      return 1;
    return writeOutput([&](raw_ostream &os) { printCuda(*kernels, os); }) ? 0
                                                                         : 1;
  }
  if (emit == Emit::Qpkg) {
    qcc::ArtifactOptions artifact;
    mlir::OwningOpRef<mlir::ModuleOp> plan;
#ifdef QCC_HAVE_CODEGEN
    if (!noCuda && !compileCuda(**module, artifact, plan))
      return 1;
#endif
    artifact.sourceName = sys::path::filename(inputPath).str();
    artifact.tokenizerPath = tokenizer;
    if (auto err = qcc::writeArtifact(**module, outputPath, artifact)) {
      WithColor::error(errs(), "qcc") << toString(std::move(err)) << "\n";
      return 1;
    }
    return 0;
  }
  return writeOutput([&](raw_ostream &os) { (*module)->print(os); }) ? 0 : 1;
}
