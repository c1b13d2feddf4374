//===- OnnxImporter.h - ONNX protobuf -> qcc dialect -----------*- C++ -*-===//
#ifndef QCC_COMPILER_ONNXIMPORTER_H
#define QCC_COMPILER_ONNXIMPORTER_H

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

/// Reads an ONNX model (with external-data weights beside it) and returns a
/// module holding `func.func @main` made of qcc primitive ops. On failure the
/// error is one line naming the file and, where there is one, the node name,
/// the op type and the reason.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxFile(mlir::MLIRContext &context, llvm::StringRef path);

/// The op types that have a converter, with the op versions each accepts.
std::vector<std::pair<std::string, std::vector<int>>> supportedOnnxOps();

} // namespace qcc

#endif // QCC_COMPILER_ONNXIMPORTER_H
