//===- qcc.cpp - the qcc compiler -----------------------------------------===//
//
// qcc MODEL.onnx -o MODEL.qpkg [--no-cuda]  the deployment artifact
//     [--quant=w8a8] [--sparsity=2:4 --prune=METHOD] [--calib=TEXT]
// qcc MODEL.onnx --emit=PHASE [-o FILE]     stop after a phase, print its
//                                           output (compiler/Pipeline.h)
// qcc MODEL.onnx --report[=json] [--report-batch N --report-context N]
//                                           the roofline report (docs/ROOFLINE.md)
//
// Option parsing only: the phases (import .. package, with the GPU kernels
// compiled by NVRTC when the library has it) are the compiler library's.
//
//===----------------------------------------------------------------------===//
#include "compiler/OnnxImporter.h"
#include "compiler/Package.h"
#include "compiler/Pipeline.h"
#include "report/RooflineReport.h"
#include "runtime/core/Artifact.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/ManagedStatic.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <functional>
#include <new>

#include <unistd.h>

using namespace llvm;
using qcc::Phase;

namespace {
// --help shows these groups only; LLVM's own options (hundreds) stay
// reachable with --help-llvm.
cl::OptionCategory inputCat("Input");
cl::OptionCategory quantCat("Quantization (W8A8 SmoothQuant, W4A16 GPTQ)");
cl::OptionCategory sparsityCat("Sparsity (2:4, docs/SPARSITY.md)");
cl::OptionCategory kvCat("KV cache");
cl::OptionCategory outputCat("Output");
cl::OptionCategory reportCat("Roofline report (docs/ROOFLINE.md)");
/// qcc's own option groups: --help shows only these, and every option outside
/// them is LLVM's (unregistered unless --help-llvm).
const cl::OptionCategory *const qccCategories[] = {
    &inputCat, &quantCat, &sparsityCat, &kvCat, &outputCat, &reportCat};

/// An enum option shown on one --help line, "--name=<value_desc>", its
/// description naming the values (the parser still refuses others): keeps
/// --help short.
template <typename T> struct OneLineEnumParser : cl::parser<T> {
  using cl::parser<T>::parser;
  std::string text(const cl::Option &o) const {
    return ("  --" + o.ArgStr + "=<" + o.ValueStr + ">").str();
  }
  // LLVM's widths count 3 columns more than the text (basic_parser's).
  size_t getOptionWidth(const cl::Option &o) const override {
    return text(o).size() + 3;
  }
  void printOptionInfo(const cl::Option &o, size_t width) const override {
    outs() << text(o);
    cl::Option::printHelpStr(o.HelpStr, width, getOptionWidth(o));
  }
};
template <typename T> using EnumOpt = cl::opt<T, false, OneLineEnumParser<T>>;

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"), cl::cat(inputCat));
cl::opt<Phase> emit(
    "emit", cl::desc("Stop after a phase and write its output (default qpkg)"),
    cl::init(Phase::Package),
    cl::values(
        clEnumValN(Phase::Package, "qpkg",
                   "the deployment artifact (default; needs -o)"),
        clEnumValN(Phase::Import, "imported",
                   "the IR right after import (qcc ops 1:1 with ONNX)"),
        clEnumValN(Phase::KvLayout, "mlir",
                   "the raised IR: transformer ops plus glue"),
        clEnumValN(Phase::Emit, "cuda",
                   "the CUDA C++ emitted for the kernel regions")),
    // ... and every phase by its name (compiler/Pipeline.h): main() adds them.
    cl::cat(outputCat));
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
cl::list<std::string> lora(
    "lora",
    cl::desc("Merge a PEFT LoRA adapter (the folder save_pretrained wrote) "
             "into the weights before quantization, its update times SCALE "
             "(default 1); repeatable (docs/LORA.md)"),
    cl::value_desc("dir[:scale]"), cl::cat(inputCat));
cl::list<std::string> loraAdapter(
    "lora-adapter",
    cl::desc("Compile a PEFT LoRA adapter beside the base weights under NAME, "
             "chosen per request at run time (qrun --lora NAME); "
             "repeatable (docs/LORA.md)"),
    cl::value_desc("name=dir[:scale]"), cl::cat(inputCat));
cl::opt<std::string> tokenizerPath(
    "tokenizer",
    cl::desc("Tokenizer to embed in the artifact: a Hugging Face "
             "tokenizer.json or a SentencePiece model (default: "
             "tokenizer.json beside the ONNX file, else tokenizer.model "
             "there; tokenizer.json wins, as in Hugging Face's loaders)"),
    cl::value_desc("file"), cl::cat(inputCat));
EnumOpt<qcc::KvLayout> kvCache(
    "kv-cache",
    cl::desc("KV cache layout for decoders: paged (default; blocks of "
             "kv-block-tokens tokens), contiguous (one slab per sequence) or "
             "none (only the full-sequence entry point)"),
    cl::value_desc("layout"), qcc::optionValues(qcc::kKvLayoutNames),
    cl::values(clEnumValN(qcc::KvLayout::None, "none",
                          "only the full-sequence entry point")),
    cl::init(qcc::KvLayout::Paged), cl::cat(kvCat));
const std::string kvBlockTokensHelp =
    "Tokens per block of the paged KV cache (default " +
    std::to_string(qcc::CompileOptions().kvBlockTokens) + ")";
cl::opt<int64_t> kvBlockTokens("kv-block-tokens",
                               cl::desc(kvBlockTokensHelp),
                               cl::init(qcc::CompileOptions().kvBlockTokens),
                               cl::cat(kvCat));
cl::opt<int64_t> maxPositions(
    "max-positions",
    cl::desc("The most positions a sequence may reach (default: the model's "
             "own bound, if any); longer ones are refused at run time. Rotary "
             "cos / sin then become precomputed tables (docs/KV_CACHE.md)"),
    cl::value_desc("n"), cl::init(0), cl::cat(kvCat));
EnumOpt<qcc::KvDtype> kvDtype(
    "kv-dtype",
    cl::desc("KV cache element type: f32 (default), f16, i8 or fp8 (E4M3); "
             "i8 and fp8 with per-layer, per-head K and V scales from "
             "calibration"),
    cl::value_desc("type"), qcc::optionValues(qcc::kKvDtypeNames),
    cl::init(qcc::KvDtype::F32),
    cl::cat(kvCat));
EnumOpt<qcc::KvScales> kvScales(
    "kv-scales",
    cl::desc("Scales of an i8 KV cache: per-head (default) or kivi (K per "
             "channel, V per token)"),
    cl::value_desc("scales"), qcc::optionValues(qcc::kKvScalesNames),
    cl::init(qcc::KvScales::PerHead), cl::cat(kvCat));
EnumOpt<qcc::QuantMode> quant("quant",
                              cl::desc("Quantization: none (default), w8a8 "
                                       "(int8 weights and activations), fp8 "
                                       "(FP8 E4M3 weights and activations, "
                                       "the same options as w8a8) or "
                                       "w4a16 (int4 weights per group, GPTQ "
                                       "with --calib; also --act-order, "
                                       "--w4-method=rtn, --w4-asym, "
                                       "--w4-lm-head) or w4a8 (w4a16's "
                                       "weights, int8 activations per "
                                       "token, SmoothQuant as w8a8)"),
                              cl::value_desc("mode"),
                              qcc::optionValues(qcc::kQuantModeNames),
                              cl::init(qcc::QuantMode::None),
                              cl::cat(quantCat));
cl::opt<bool> rotate(
    "rotate",
    cl::desc("Rotate the residual stream into the weights before "
             "calibration (QuaRot: a randomized Hadamard matrix; the float "
             "function is unchanged, int8 activations lose their outlier "
             "channels; docs/QUANTIZATION.md section 10)"),
    cl::cat(quantCat));
cl::opt<uint64_t> rotateSeed(
    "rotate-seed", cl::desc("Seed of --rotate's random signs (default 0)"),
    cl::init(0), cl::Hidden, cl::cat(quantCat));
cl::opt<std::string> calib("calib",
                           cl::desc("Calibration data: a text file, or a "
                                    "folder with one .npy per model input"),
                           cl::value_desc("source"), cl::cat(quantCat));
cl::opt<qcc::ActivationQuant> actQuant(
    "act-quant", cl::desc("Activation quantization (default per-token)"),
    qcc::optionValues(qcc::kActivationQuantNames),
    cl::init(qcc::ActivationQuant::PerToken), cl::cat(quantCat));
cl::opt<std::string> smoothAlpha(
    "smoothquant-alpha",
    cl::desc("SmoothQuant migration strength in [0, 1] (0.5 default; "
             "0.75-0.9 for LLaMA-family models), or auto (per group)"),
    cl::init("0.5"), cl::cat(quantCat));
// An ablation knob (docs/QUANTIZATION.md), kept out of --help.
cl::opt<bool> smoothNormsOnly(
    "smoothquant-norms-only",
    cl::desc("Smooth only norm -> linear groups (not up -> down, V -> O)"),
    cl::Hidden, cl::cat(quantCat));
EnumOpt<qcc::Int8Fallback> int8Fallback(
    "int8-fallback",
    cl::desc("W8A8 linears keep their outlier input columns in float: off "
             "(default) or auto (chosen from calibration)"),
    cl::value_desc("mode"), qcc::optionValues(qcc::kInt8FallbackNames),
    cl::init(qcc::Int8Fallback::Off), cl::cat(quantCat));
cl::opt<int64_t> groupSize("group-size",
                            cl::desc("W4A16/W4A8: weights per int4 scale "
                                     "along K (default 128)"),
                            cl::init(128), cl::cat(quantCat));
// W4A16/W4A8 choices named in --quant's help, kept out of the list (a short
// --help).
cl::opt<bool> actOrder("act-order",
                       cl::desc("W4 GPTQ: visit columns by descending "
                                "Hessian diagonal"),
                       cl::Hidden, cl::cat(quantCat));
cl::opt<bool> w4Asym("w4-asym",
                     cl::desc("W4: unsigned int4 with an f16 offset (min) "
                              "per group, as GGUF Q4_1"),
                     cl::Hidden, cl::cat(quantCat));
cl::opt<bool> w4LmHead("w4-lm-head",
                       cl::desc("W4: the LM head in int4 too (it stays "
                                "float by default, as in GPTQ)"),
                       cl::Hidden, cl::cat(quantCat));
EnumOpt<qcc::W4Method> w4Method(
    "w4-method",
    cl::desc("W4 rounding: gptq (default; needs calibration) or rtn"),
    cl::value_desc("method"), qcc::optionValues(qcc::kW4MethodNames),
    cl::init(qcc::W4Method::Gptq), cl::Hidden, cl::cat(quantCat));
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
EnumOpt<qcc::Sparsity> sparsity(
    "sparsity",
    cl::desc("none (default) or 2:4: keep 2 of every 4 weights along K in the "
             "transformer blocks' linears (not the embedding or LM head)"),
    cl::value_desc("pattern"), qcc::optionValues(qcc::kSparsityNames),
    cl::init(qcc::Sparsity::None), cl::cat(sparsityCat));
EnumOpt<qcc::PruneMethod> prune(
    "prune",
    cl::desc("Which weights 2:4 keeps: magnitude, wanda or sparsegpt "
             "(default: sparsegpt with --calib or --calib-stats, else "
             "magnitude)"),
    cl::value_desc("method"), qcc::optionValues(qcc::kPruneMethodNames),
    cl::cat(sparsityCat));
cl::list<std::string> sparsityExclude(
    "sparsity-exclude", cl::CommaSeparated,
    cl::desc("Linears left dense: layer indices, or globs over the ONNX node "
             "or weight name"),
    cl::value_desc("pattern,..."), cl::cat(sparsityCat));
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
// Hidden (--help-hidden, docs/ROOFLINE.md): --help stays short.
cl::opt<bool> reportCpu("report-cpu",
                        cl::desc("Measure this CPU's peaks (about a second) "
                                 "and predict for it (default true; "
                                 "--report-cpu=false skips it)"),
                        cl::init(true), cl::Hidden, cl::cat(reportCat));
// Hidden (docs/CUDA_BACKEND.md, "Benchmark artifacts").
cl::opt<bool> syntheticWeights(
    "synthetic-weights",
    cl::desc("Benchmark artifacts: write every weight of 64 KiB or more as a "
             "seeded record (its RMS, a seed) that qrun expands at load, so "
             "a 1B model's artifact is a few MB; its outputs are "
             "meaningless, its speed is the real one's"),
    cl::init(false), cl::Hidden, cl::cat(outputCat));
cl::opt<bool> listOps("list-ops",
                      cl::desc("List the supported ONNX ops and exit"), cl::cat(inputCat));
/// Writes -o (default stdout) with `print`, through a temporary file renamed
/// over -o when complete; false (and an error line) if it cannot be written.
bool writeOutput(const std::function<void(raw_ostream &)> &print) {
  if (Error err = writeToOutput(outputPath, [&](raw_ostream &os) {
        print(os);
        return Error::success();
      })) {
    WithColor::error(errs(), "qcc")
        << outputPath << ": cannot write: " << toString(std::move(err))
        << "\n";
    return false;
  }
  return true;
}

/// A crash is a bug in qcc, not in the user's model: one line saying so
/// instead of LLVM's "PLEASE submit a bug report to llvm-project" banner and
/// stack dump (QCC_STACK_TRACE=1 keeps those, for developers). Running out of
/// memory and LLVM's fatal errors are one line too. Replaces InitLLVM.
void installErrorHandlers(const char *argv0) {
  sys::SetOneShotPipeSignalFunction(sys::DefaultOneShotPipeSignalHandler);
  if (std::getenv("QCC_STACK_TRACE")) {
    sys::PrintStackTraceOnErrorSignal(argv0);
    return;
  }
  // Async-signal-safe: write(2) of a constant, then the signal kills qcc.
  sys::AddSignalHandler(
      [](void *) {
        static const char line[] =
            "qcc: internal error: qcc crashed (a bug in qcc, not in the "
            "model; QCC_STACK_TRACE=1 prints a stack trace)\n";
        (void)!::write(2, line, sizeof line - 1);
      },
      nullptr);
  std::set_new_handler([] {
    static const char line[] =
        "qcc: error: out of memory (the model needs more than this machine "
        "can allocate)\n";
    (void)!::write(2, line, sizeof line - 1);
    std::_Exit(1);
  });
  install_fatal_error_handler([](void *, const char *reason, bool) {
    errs() << "qcc: internal error: " << reason << "\n";
    std::_Exit(70); // EX_SOFTWARE: qcc's bug, not a usage error
  });
}

/// Parses the command line; a usage error is one line and exit status 1.
/// LLVM's own options are unregistered (except with --help-llvm), so that
/// qcc neither accepts nor suggests them (`Did you mean '--stats'?`).
bool parseCommandLine(std::vector<char *> &args, bool llvmOptions) {
  if (!llvmOptions) {
    auto options = cl::getRegisteredOptions();
    SmallVector<cl::Option *> llvmOwn;
    for (auto &[name, option] : options)
      if (!llvm::any_of(option->Categories, [](cl::OptionCategory *c) {
            return llvm::is_contained(qccCategories, c);
          }) &&
          name != "help" && name != "version")
        llvmOwn.push_back(option);
    for (cl::Option *option : llvmOwn)
      option->removeArgument();
  }
  // Errors go to `os`, and an option's own parser writes to errs(): stderr
  // is captured in a pipe while parsing (the messages are short).
  std::string message;
  raw_string_ostream os(message);
  int pipeFds[2], savedStderr = ::dup(2);
  bool captured = savedStderr >= 0 && ::pipe(pipeFds) == 0;
  if (captured) {
    ::dup2(pipeFds[1], 2);
    ::close(pipeFds[1]);
  }
  bool parsed = cl::ParseCommandLineOptions(
          (int)args.size(), args.data(),
          "qcc: ahead-of-time compiler for quantized transformer inference\n\n"
          "  qcc MODEL.onnx -o MODEL.qpkg    compile to a deployment artifact\n"
          "  qcc MODEL.onnx --emit=mlir      print the raised IR\n"
          "  qcc MODEL.onnx --emit=imported  print the IR as imported\n"
          "  qcc MODEL.onnx --emit=PHASE     stop after any phase (below)\n"
          "  qcc MODEL.onnx --report         the roofline report per kernel\n"
          "  qcc --list-ops                  list the ONNX ops qcc imports\n"
          "  qcc --help-llvm                 also LLVM's own options\n",
          &os);
  if (captured) {
    errs().flush();
    ::dup2(savedStderr, 2);
    ::close(savedStderr);
    char buffer[4096];
    for (ssize_t n; (n = ::read(pipeFds[0], buffer, sizeof buffer)) > 0;)
      message.append(buffer, n);
    ::close(pipeFds[0]);
  }
  if (parsed)
    return true;
  // LLVM's parser reports an error over several lines ("qcc: Unknown
  // command line argument '--x'. Try: ...", "qcc: Did you mean '--y'?").
  SmallVector<StringRef> lines;
  StringRef(message).trim().split(lines, '\n', -1, false);
  std::string joined;
  for (StringRef line : lines) {
    line = line.trim();
    line.consume_front("qcc: ");
    line = line.split("  Try: ").first; // "Try: 'qcc --help'": said below
    if (line.empty())
      continue;
    if (!joined.empty())
      joined += ' ';
    joined += line;
  }
  WithColor::error(errs(), "qcc") << joined << " (see qcc --help)\n";
  return false;
}

} // namespace

int main(int argc, char **argv) {
  installErrorHandlers(argv[0]);
  llvm_shutdown_obj shutdown;
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
  for (Phase p : qcc::allPhases())
    emit.getParser().addLiteralOption(qcc::phaseName(p), p,
                                      qcc::phaseSummary(p));
  if (!llvmHelp)
    cl::HideUnrelatedOptions(qccCategories);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "qcc " << QCC_VERSION << " (artifact format "
       << qcc::rt::kFormatVersion << ")\n";
  });
  if (!parseCommandLine(args, llvmHelp))
    return 1;

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
  if (emit == Phase::Package && outputPath == "-" && !reporting) {
    WithColor::error(errs(), "qcc")
        << "writing an artifact needs -o FILE.qpkg (or use --emit=mlir)\n";
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
  // The compile options' own rules are CompileOptions::validate's, below.
  if (!inRange("report-batch", reportBatch, 1, 4096) ||
      !inRange("report-context", reportContext, 1, 1 << 20))
    return 1;
  qcc::CompileOptions options;
  auto fail = [](Error err) {
    WithColor::error(errs(), "qcc") << toString(std::move(err)) << "\n";
    return 1;
  };
  for (const std::string &text : lora) {
    auto spec = qcc::parseLoraSpec(text, /*named=*/false);
    if (!spec)
      return fail(spec.takeError());
    options.loraMerges.push_back(*spec);
  }
  for (const std::string &text : loraAdapter) {
    auto spec = qcc::parseLoraSpec(text, /*named=*/true);
    if (!spec)
      return fail(spec.takeError());
    options.loraAdapters.push_back(*spec);
  }
  options.kvCache = kvCache;
  options.kvBlockTokens = kvBlockTokens;
  options.maxPositions = maxPositions;
  options.kvDtype = kvDtype;
  options.kvScales = kvScales;
  options.quant = quant;
  options.activations = actQuant;
  options.asymmetric = asymmetric;
  options.smoothQuant = !noSmooth;
  options.smoothQuantNormsOnly = smoothNormsOnly;
  options.rotate = rotate;
  options.rotateSeed = rotateSeed;
  options.int8Fallback = int8Fallback;
  options.sparsity = sparsity;
  if (prune.getNumOccurrences() > 0)
    options.prune = prune.getValue();
  options.sparsityExclude.assign(sparsityExclude.begin(),
                                 sparsityExclude.end());
  options.w4GroupSize = groupSize;
  options.w4ActOrder = actOrder;
  options.w4Method = w4Method;
  options.w4Asymmetric = w4Asym;
  options.w4LmHead = w4LmHead;
  options.calibration.source = calib;
  options.calibration.samples = calibSamples;
  options.calibration.seqLen = calibSeqLen;
  options.calibration.statsPath = calibStats;
  options.gpuKernels = !noCuda;
  options.quiet = quiet;
  options.artifactPath = outputPath;
  options.syntheticWeights = syntheticWeights;
  if (auto err = qcc::parseSmoothQuantAlpha(smoothAlpha, options))
    return fail(std::move(err));
  if (auto err = options.validate())
    return fail(std::move(err));
  if (auto err = qcc::prepareCompile(
          inputPath, tokenizerPath,
          reporting ? Phase::KvLayout : emit.getValue(), options))
    return fail(std::move(err));
  SmallString<256> tool(sys::path::parent_path(
      sys::fs::getMainExecutable(argv[0], (void *)&main)));
  sys::path::append(tool, "qcc-calib");
  options.calibration.toolPath = tool.str().str();

  mlir::MLIRContext context;
  auto c = qcc::compileTo(context, inputPath,
                          reporting ? Phase::KvLayout : emit.getValue(),
                          options);
  if (!c) {
    WithColor::error(errs(), "qcc") << toString(c.takeError()) << "\n";
    return 1;
  }
  if (reporting) {
    qcc::RooflineOptions ro;
    ro.batch = reportBatch;
    ro.context = reportContext;
    ro.cpu = reportCpu;
    auto r = qcc::buildRooflineReport(
        *c->module, sys::path::filename(inputPath), ro);
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
  if (emit == Phase::Package) // written by the package phase
    return 0;
  return writeOutput([&](raw_ostream &os) { qcc::printPhaseOutput(*c, os); })
             ? 0
             : 1;
}
