//===- Pipeline.h - the compiler driver ------------------------*- C++ -*-===//
#ifndef QCC_COMPILER_PIPELINE_H
#define QCC_COMPILER_PIPELINE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace qcc {

/// How far `compile` goes.
enum class Stage {
  Imported, ///< qcc primitive ops, 1:1 with the ONNX nodes
  Raised,   ///< transformer ops plus glue
};

/// Imports `onnxPath` and runs the pipeline up to `stage`. Errors are one line
/// naming the file (and the node, for import errors).
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
compile(mlir::MLIRContext &context, llvm::StringRef onnxPath, Stage stage);

} // namespace qcc

#endif // QCC_COMPILER_PIPELINE_H
