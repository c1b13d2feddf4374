//===- QccDialect.h - the qcc dialect --------------------------*- C++ -*-===//
#ifndef QCC_DIALECTS_QCCDIALECT_H
#define QCC_DIALECTS_QCCDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/QccDialect.h.inc"

namespace qcc {
/// Function argument/result attribute: an array of strings, one per dimension,
/// holding the ONNX dim_param name of each dynamic dimension ("" if static).
inline constexpr llvm::StringLiteral kDimNamesAttr = "qcc.dim_names";
} // namespace qcc

#endif // QCC_DIALECTS_QCCDIALECT_H
