//===- PatternUtils.h - matching helpers shared by the passes --*- C++ -*-===//
#ifndef QCC_PASSES_PATTERNUTILS_H
#define QCC_PASSES_PATTERNUTILS_H

#include "dialects/QccOps.h"

#include "mlir/IR/Value.h"

namespace qcc {

/// The attribute of a value produced by qcc.constant, or null.
mlir::ElementsAttr getConstant(mlir::Value v);

/// The value of a constant whose elements are all equal (any shape, float or
/// integer), as a double; std::nullopt otherwise.
std::optional<double> getSplatValue(mlir::Value v);

/// True if `v` is a constant splat equal to `expected` within a relative
/// tolerance `rtol` (exporters print constants such as 1/sqrt(2) in float32).
bool isSplatNear(mlir::Value v, double expected, double rtol = 1e-5);

/// A dimension whose size may only be known at run time: either a constant
/// or dimension `index` of `source`, followed back through ops that preserve
/// it so that equal dimensions compare equal (see `getDimExprs`).
struct DimExpr {
  int64_t constant = mlir::ShapedType::kDynamic;
  mlir::Value source;
  int64_t index = -1;

  bool isConstant() const { return constant != mlir::ShapedType::kDynamic; }
  bool isKnown() const { return isConstant() || source; }
  bool operator==(const DimExpr &o) const {
    return isKnown() && constant == o.constant && source == o.source &&
           index == o.index;
  }
};

/// Dimension `index` of `v`, traced back to the earliest value that has the
/// same dimension (through elementwise ops, linear, norms, transposes, ...).
DimExpr getDimExpr(mlir::Value v, int64_t index);

/// The elements of a 1-D (or 0-D) int64 tensor computed by shape arithmetic
/// (constants, Shape, Gather, Unsqueeze, Squeeze, Concat, Slice, Cast);
/// unknown elements have !isKnown(). Empty if the length is not static.
llvm::SmallVector<DimExpr> getDimExprs(mlir::Value shapeVector);

/// True if the reshape keeps its input's dimensions [0, n) in place, i.e. its
/// target shape starts with exactly those dimensions (or 0 = copy).
bool reshapeKeepsLeadingDims(ReshapeOp reshape, int64_t n);

} // namespace qcc

#endif // QCC_PASSES_PATTERNUTILS_H
