//===- QccAttrs.h - qcc attributes -----------------------------*- C++ -*-===//
#ifndef QCC_DIALECTS_QCCATTRS_H
#define QCC_DIALECTS_QCCATTRS_H

#include "format/Quant.h"

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialects/QccEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/QccAttrs.h.inc"

#endif // QCC_DIALECTS_QCCATTRS_H
