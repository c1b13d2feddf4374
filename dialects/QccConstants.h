//===- QccConstants.h - building and reading constant tensors --*- C++ -*-===//
#ifndef QCC_DIALECTS_QCCCONSTANTS_H
#define QCC_DIALECTS_QCCCONSTANTS_H

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"

namespace qcc {

/// Tensors with more elements than this are stored as dense_resource blobs
/// (weights); smaller ones as dense attributes that folders can read.
inline constexpr int64_t kResourceThreshold = 64;

/// Builds an ElementsAttr of `type` from its row-major bytes: a dense_resource
/// blob named after `name` when large, a dense attribute otherwise.
mlir::ElementsAttr makeElements(mlir::RankedTensorType type,
                                llvm::ArrayRef<char> bytes,
                                llvm::StringRef name);

/// The row-major bytes of a dense or dense_resource attribute (i1 as one byte
/// per element); std::nullopt if the data is not available (or `attr` is
/// null).
std::optional<std::vector<char>> getBytes(mlir::ElementsAttr attr);

/// The name of a dense_resource blob, or `fallback` for other attributes; new
/// constants derived from a weight are named after it.
std::string blobName(mlir::ElementsAttr attr, llvm::StringRef fallback);

/// The values of a float constant as f32 (f16 and bf16 widened, exactly);
/// std::nullopt otherwise (null too).
std::optional<std::vector<float>> getF32Values(mlir::ElementsAttr attr);

/// makeElements for a float `type` (f32, f16 or bf16) from f32 `values`,
/// rounded to its element type to nearest even (format/HalfFloat.h): a pass
/// that rewrites an f16 weight keeps it f16.
mlir::ElementsAttr makeFloatElements(mlir::RankedTensorType type,
                                     llvm::ArrayRef<float> values,
                                     llvm::StringRef name);

} // namespace qcc

#endif // QCC_DIALECTS_QCCCONSTANTS_H
