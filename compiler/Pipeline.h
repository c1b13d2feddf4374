//===- Pipeline.h - the compiler driver ------------------------*- C++ -*-===//
//
// qcc's pipeline, ONNX to artifact, as named phases (docs: README "Layout"):
//
//   import        ONNX -> qcc primitive ops, 1:1 with the nodes
//   raise         the raising passes: transformer ops plus glue
//   calibrate     activation statistics on linears and attentions (with
//                 --quant=w8a8, --kv-dtype=i8 or --prune=wanda|sparsegpt;
//                 else nothing to do)
//   quantize      smooth-quant (with --quant=w8a8), sparsify-2-4 (with
//                 --sparsity=2:4), quantize (with --quant=w8a8)
//   kv-layout     the prefill/decode entry points over a KV cache (unless
//                 --kv-cache=none); the module is now the CPU plan
//   form-kernels  the GPU plan: a clone of the module with qcc.kernel regions
//   emit          CUDA C++ for every kernel region (codegen/Emitter.h)
//   compile       NVRTC: cubins and PTX per translation unit
//   package       the .qpkg artifact (compiler/ArtifactWriter.h)
//
// Each phase is a function of its own (below and compiler/Package.h); a
// Compilation holds what the phases run so far produced, and `compileTo`
// runs them in order up to a chosen one (qcc --emit=<phase>).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_COMPILER_PIPELINE_H
#define QCC_COMPILER_PIPELINE_H

#include "compiler/Calibration.h"
#include "format/KvCacheConfig.h"
#include "passes/Options.h"
#include "codegen/Emitter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace qcc {

/// The phases of the pipeline, in the order they run.
enum class Phase {
  Import,
  Raise,
  Calibrate,
  Quantize,
  KvLayout,
  FormKernels,
  Emit,
  Compile,
  Package,
};

/// "import", "raise", ..., "kv-layout", "form-kernels", ..., "package".
llvm::StringRef phaseName(Phase phase);
/// What a phase's output is, in a few words ("the GPU plan: kernel regions").
llvm::StringRef phaseSummary(Phase phase);
/// Every phase, in order.
llvm::ArrayRef<Phase> allPhases();
/// The phase named `name` (phaseName's spelling), or nullopt.
std::optional<Phase> parsePhase(llvm::StringRef name);

/// A LoRA adapter: merged (qcc --lora DIR[:SCALE]) or compiled beside the
/// base weights under a name (qcc --lora-adapter NAME=DIR[:SCALE]).
struct LoraSpec {
  std::string name;   ///< runtime adapters only
  std::string dir;    ///< PEFT's save_pretrained folder
  double scale = 1.0; ///< times PEFT's own scaling (alpha / r)
};

/// --lora's value "DIR" or "DIR:SCALE" (SCALE a number), or with `named`
/// --lora-adapter's "NAME=DIR[:SCALE]"; one line naming the flag otherwise.
llvm::Expected<LoraSpec> parseLoraSpec(llvm::StringRef text, bool named);

struct CompileOptions {
  /// import: LoRA adapters merged into the weights, in order, before any
  /// pass (so calibration and quantization see the adapted model).
  std::vector<LoraSpec> loraMerges;
  /// import: LoRA adapters kept apart and chosen per sequence at run time
  /// (qcc.lora; names unique, [A-Za-z0-9._-]).
  std::vector<LoraSpec> loraAdapters;
  KvLayout kvCache = KvLayout::Paged; ///< for decoders; None: no cache
  int64_t kvBlockTokens = format::KvCacheConfig::kDefaultBlockTokens;
  /// The most positions a sequence may reach (0: the model's own bound, if
  /// it has one). Bounds the cache, so position-only values (rotary cos and
  /// sin) can become tables (tabulate-positions).
  int64_t maxPositions = 0;
  KvDtype kvDtype = KvDtype::F32; ///< I8 needs calibration
  KvScales kvScales = KvScales::PerHead; ///< of an I8 cache
  QuantMode quant = QuantMode::None;
  /// raise: rotate the residual stream into the weights (rotate-residual,
  /// QuaRot) before calibration, with this seed for the Hadamard signs.
  bool rotate = false;
  uint64_t rotateSeed = 0;
  ActivationQuant activations = ActivationQuant::PerToken;
  bool asymmetric = false;
  bool smoothQuant = true;
  double smoothQuantAlpha = 0.5;
  /// Pick alpha per group by W8A8 error on calibration activation rows
  /// (calibration then keeps a sample of each linear input's rows).
  bool smoothQuantAutoAlpha = false;
  /// Smooth only norm -> linear groups (not up -> down, V -> O).
  bool smoothQuantNormsOnly = false;
  /// LLM.int8()-style float outlier columns (int8-fallback; Auto needs
  /// calibration activation rows, like auto alpha).
  Int8Fallback int8Fallback = Int8Fallback::Off;
  /// W4A16 (--quant=w4a16, docs/QUANTIZATION.md section 7): int4 weights
  /// per group of w4GroupSize k; gptq needs calibration (the Gram matrices).
  int64_t w4GroupSize = 128;
  bool w4ActOrder = false;
  /// Asymmetric int4 (an f16 offset per group, GGUF Q4_1's scale + min).
  bool w4Asymmetric = false;
  /// The LM head (the linears outside the transformer blocks) in int4 too.
  bool w4LmHead = false;
  W4Method w4Method = W4Method::Gptq;
  CalibrationOptions calibration;
  /// 2:4 sparsity of the block linears (docs/SPARSITY.md); `prune` unset:
  /// sparsegpt with calibration data (--calib or existing --calib-stats),
  /// else magnitude (with a note).
  Sparsity sparsity = Sparsity::None;
  std::optional<PruneMethod> prune;
  std::vector<std::string> sparsityExclude; ///< layer indices or name globs

  /// Whether a run up to `package` goes through form-kernels, emit and
  /// compile (false: qcc --no-cuda; also skipped when the library was built
  /// without NVRTC). A run that stops at one of them runs it regardless.
  bool gpuKernels = true;
  /// Errors and warnings only: no progress line, no summary.
  bool quiet = false;
  /// package: where the artifact goes, and the tokenizer to embed ("" none).
  std::string artifactPath;
  std::string tokenizerPath;
  /// package: weights written as seeded records (qcc --synthetic-weights).
  bool syntheticWeights = false;

  /// The rules on and between options, in one place: ranges (sizes are
  /// taken from them), and which options need which (kivi needs an int8
  /// cache, pruning needs 2:4, the W4 options need W4A16, W4A16 and 2:4 do
  /// not combine). One line naming the qcc flag and the reason. compileTo
  /// checks it, so no library caller can start an invalid compile.
  llvm::Error validate() const;
};

/// --smoothquant-alpha's value: a number (validate() checks its range) or
/// "auto" (then smoothQuantAutoAlpha); one line naming the flag otherwise.
llvm::Error parseSmoothQuantAlpha(llvm::StringRef text,
                                  CompileOptions &options);

/// What a driver (qcc, the Python package) does with a model path and
/// options before compileTo up to `last`: refuses an artifactPath that is
/// one of the inputs (the model, the tokenizer, the calibration source or
/// statistics); finds the tokenizer (`tokenizerFlag`, else beside the
/// model: findTokenizer) and checks it where it will be embedded or
/// calibrated with; and hands both to calibration. One line naming the file.
llvm::Error prepareCompile(llvm::StringRef onnxPath,
                           llvm::StringRef tokenizerFlag, Phase last,
                           CompileOptions &options);

/// The pruning method a compile with `options` uses (its default resolved).
PruneMethod pruneMethod(const CompileOptions &options);

/// The binaries of one emitted translation unit: "sm_80" / "sm_90" (cubins)
/// and "ptx" -> bytes.
using UnitBinaries = std::map<std::string, std::string>;

/// What the phases run so far produced.
struct Compilation {
  std::string sourcePath; ///< the ONNX model; names it in errors
  CompileOptions options;
  std::optional<Phase> last; ///< the last phase run (none yet: nullopt)
  /// import .. kv-layout rewrite it in place: the CPU plan, op by op.
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// form-kernels: a clone of `module` whose functions are kernel regions.
  mlir::OwningOpRef<mlir::ModuleOp> gpuPlan;
  /// emit: one record per region of `gpuPlan`, one source per unit.
  codegen::EmitResult cuda;
  /// compile: one entry per `cuda.units`.
  std::vector<UnitBinaries> binaries;
};

/// The phases, one by one. Each takes the module the phases before it left;
/// errors are one line naming `sourcePath` (and the node, for import
/// errors). Warnings (a feature left out, saying why) go to stderr at once.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importPhase(mlir::MLIRContext &context, llvm::StringRef onnxPath,
            const CompileOptions &options = {});
llvm::Error raisePhase(mlir::ModuleOp module, llvm::StringRef sourcePath,
                       const CompileOptions &options);
llvm::Error calibratePhase(mlir::ModuleOp module, llvm::StringRef sourcePath,
                           const CompileOptions &options);
llvm::Error quantizePhase(mlir::ModuleOp module, llvm::StringRef sourcePath,
                          const CompileOptions &options);
llvm::Error kvLayoutPhase(mlir::ModuleOp module, llvm::StringRef sourcePath,
                          const CompileOptions &options);
/// form-kernels on a clone of `module` (which stays the CPU plan).
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
formKernelPlan(mlir::ModuleOp module);
// emit, compile and package: compiler/Package.h.

/// Runs `phase` on `c`, which must hold the results of the phase before it
/// (for import: an empty Compilation with sourcePath and options set).
llvm::Error runPhase(mlir::MLIRContext &context, Compilation &c, Phase phase);

/// Runs import .. `last` over `onnxPath`. A run up to package skips
/// form-kernels, emit and compile without options.gpuKernels or NVRTC.
llvm::Expected<Compilation> compileTo(mlir::MLIRContext &context,
                                      llvm::StringRef onnxPath, Phase last,
                                      const CompileOptions &options = {});

/// compileTo for an IR phase (import .. kv-layout): the module it leaves.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
compile(mlir::MLIRContext &context, llvm::StringRef onnxPath, Phase last,
        const CompileOptions &options = {});

/// The output of `c`'s last phase as text: the IR (import .. kv-layout: the
/// module; form-kernels: the GPU plan), the CUDA C++ units (emit), a list of
/// the binaries (compile), the artifact's path (package).
void printPhaseOutput(const Compilation &c, llvm::raw_ostream &os);

} // namespace qcc

#endif // QCC_COMPILER_PIPELINE_H
