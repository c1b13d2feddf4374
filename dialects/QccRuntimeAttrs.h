//===- QccRuntimeAttrs.h - attributes as the artifact holds them -*- C++ -*-===//
//
// The one translation of IR attributes into the artifact's JSON: node
// attributes as the runtime's kernels read them, element types by the
// runtime's names, and the module's KV-cache configuration, parsed by the
// loader's own parser (format/KvCacheConfig.h) so that the compiler and the
// runtime read it the same way.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_DIALECTS_QCCRUNTIMEATTRS_H
#define QCC_DIALECTS_QCCRUNTIMEATTRS_H

#include "format/KvCacheConfig.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "llvm/Support/Error.h"

#include <nlohmann/json.hpp>

#include <string>

namespace qcc {

/// The runtime's name of an element type ("f32", "i64", "bool", ...), or ""
/// for a type the runtime does not have.
std::string runtimeDType(mlir::Type elementType);

/// An attribute as the runtime reads it: numbers, booleans, strings, i64
/// arrays, and small element attributes as {dtype, values}.
llvm::Expected<nlohmann::json> runtimeAttr(mlir::Attribute attr);

/// A qcc op's attributes as the runtime reads them (what the artifact holds
/// for the node): compile-time-only attributes dropped, a cast's target added.
llvm::Expected<nlohmann::json> runtimeAttrs(mlir::Operation *op);

/// The module attribute qcc.kv_cache (kv-cache-layout writes it) as the
/// manifest's "kv_cache" object.
llvm::Expected<nlohmann::json> kvCacheJson(mlir::DictionaryAttr kvCache);

/// The same, parsed and validated by format::KvCacheConfig::parse, the
/// loader's parser: an error names the field.
llvm::Expected<format::KvCacheConfig> kvCacheConfig(mlir::DictionaryAttr kvCache);

} // namespace qcc

#endif // QCC_DIALECTS_QCCRUNTIMEATTRS_H
