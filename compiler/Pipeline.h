//===- Pipeline.h - the compiler driver ------------------------*- C++ -*-===//
#ifndef QCC_COMPILER_PIPELINE_H
#define QCC_COMPILER_PIPELINE_H

#include "compiler/Calibration.h"
#include "passes/Options.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace qcc {

/// How far `compile` goes.
enum class Stage {
  Imported, ///< qcc primitive ops, 1:1 with the ONNX nodes
  Raised,   ///< transformer ops plus glue
};

struct CompileOptions {
  KvLayout kvCache = KvLayout::Paged; ///< for decoders; None: no cache
  int64_t kvBlockTokens = 16;
  KvDtype kvDtype = KvDtype::F32; ///< I8 needs calibration
  QuantMode quant = QuantMode::None;
  ActivationQuant activations = ActivationQuant::PerToken;
  bool asymmetric = false;
  bool smoothQuant = true;
  double smoothQuantAlpha = 0.5;
  CalibrationOptions calibration;
};

/// Imports `onnxPath` and runs the pipeline up to `stage` (for Raised: the
/// raising passes; with quantization, calibration, smooth-quant and
/// quantize; then kv-cache-layout unless disabled). Errors are one line
/// naming the file (and the node, for import errors).
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
compile(mlir::MLIRContext &context, llvm::StringRef onnxPath, Stage stage,
        const CompileOptions &options = {});

/// The GPU plan: a clone of `module` after form-kernels, the kernel regions
/// (qcc.kernel ops) that the CUDA backend launches.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
formKernelPlan(mlir::ModuleOp module);

} // namespace qcc

#endif // QCC_COMPILER_PIPELINE_H
