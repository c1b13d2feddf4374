//===- OnnxImporter.h - ONNX protobuf -> qcc dialect -----------*- C++ -*-===//
#ifndef QCC_COMPILER_ONNXIMPORTER_H
#define QCC_COMPILER_ONNXIMPORTER_H

#include "compiler/LoraAdapter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace qcc {

/// The default-domain opsets the importer is written against. Newer opsets are
/// accepted op by op: a node imports if the version of its op that the opset
/// selects is one a converter was written for (its semantics are unchanged).
inline constexpr int64_t kMinOpset = 13;
inline constexpr int64_t kMaxTestedOpset = 17;
/// The converter table lists every version of its ops up to this opset, so
/// newer models can be imported even where the installed ONNX library (whose
/// checker and shape inference know fewer opsets) cannot check them.
inline constexpr int64_t kMaxKnownOpset = 21;

struct ImportOptions {
  /// LoRA adapters merged into the weights they name as they are imported
  /// (compiler/LoraMerge.h), in order.
  std::vector<LoraAdapter> loraMerges;
  /// LoRA adapters compiled beside the base weights, chosen per sequence at
  /// run time (qcc.lora after each adapted linear; docs/LORA.md), by name.
  std::vector<std::pair<std::string, LoraAdapter>> loraAdapters;
};

/// Reads an ONNX model (with external-data weights beside it) and returns a
/// module holding `func.func @main` made of qcc primitive ops. On failure the
/// error is one line naming the file and, where there is one, the node name,
/// the op type and the reason.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxFile(mlir::MLIRContext &context, llvm::StringRef path,
               const ImportOptions &options = {});

/// importOnnxFile for a model held in memory (the importer's fuzz target):
/// `name` stands for the file in errors; external data is refused, as there
/// is no folder to find it in.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxBytes(mlir::MLIRContext &context, llvm::StringRef bytes,
                llvm::StringRef name);

/// The largest model file qcc reads: protobuf's limit for one message (larger
/// weights belong in external data). Checked before the file is read.
inline constexpr uint64_t kMaxModelBytes = (uint64_t(1) << 31) - 1;
/// The largest dimension, and element count, of any tensor qcc accepts in a
/// model (a declared value, an initializer, a converted result): far beyond
/// any real model, and small enough that sizes derived from it (products,
/// byte counts) cannot overflow int64.
inline constexpr int64_t kMaxElements = int64_t(1) << 40;

/// The op types that have a converter, with the op versions each accepts.
std::vector<std::pair<std::string, std::vector<int>>> supportedOnnxOps();

} // namespace qcc

#endif // QCC_COMPILER_ONNXIMPORTER_H
