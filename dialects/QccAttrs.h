//===- QccAttrs.h - qcc attributes -----------------------------*- C++ -*-===//
#ifndef QCC_DIALECTS_QCCATTRS_H
#define QCC_DIALECTS_QCCATTRS_H

#include "format/KernelKinds.h"
#include "format/Quant.h"

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialects/QccEnums.h.inc"

namespace qcc {
/// The kernel kinds are format/KernelKinds.def's (KernelKindAttr holds one).
using KernelKind = format::KernelKind;
} // namespace qcc

#define GET_ATTRDEF_CLASSES
#include "dialects/QccAttrs.h.inc"

namespace qcc {
/// A kernel kind as a bare keyword (`gemm_i8`), as format/KernelKinds.def
/// spells it; an unknown one is an error naming it.
mlir::FailureOr<format::KernelKind> parseKernelKindKeyword(mlir::AsmParser &parser);
} // namespace qcc

#endif // QCC_DIALECTS_QCCATTRS_H
