//===- QccOps.cpp - qcc op verifiers --------------------------------------===//
//
// Verifiers check what the types can show: ranks, static sizes that must agree
// (a dynamic size agrees with anything), element types and attribute ranges.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccOps.h"
#include "format/Rotation.h"

#include <cmath>
#include "format/Quant.h"
#include "dialects/QccConstants.h"
#include "format/Int4.h"
#include "format/Sparse24.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

#include <limits>

using namespace mlir;
using namespace qcc;

static constexpr int64_t kDyn = ShapedType::kDynamic;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Two sizes agree when equal or when either is dynamic.
static bool sizesAgree(int64_t a, int64_t b) {
  return a == kDyn || b == kDyn || a == b;
}

static bool shapesAgree(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (auto [x, y] : llvm::zip(a, b))
    if (!sizesAgree(x, y))
      return false;
  return true;
}

FailureOr<SmallVector<int64_t>> qcc::broadcastShapes(ArrayRef<int64_t> a,
                                                      ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x == 1)
      out[i] = y;
    else if (y == 1)
      out[i] = x;
    else if (x == kDyn)
      out[i] = y;
    else if (y == kDyn || x == y)
      out[i] = x;
    else
      return failure();
  }
  return out;
}

/// Checks that `operands` broadcast to a shape that agrees with `result`.
static LogicalResult verifyBroadcast(Operation *op, ValueRange operands,
                                     Value result) {
  SmallVector<int64_t> shape;
  for (Value v : operands) {
    auto b = broadcastShapes(shape, tensorType(v).getShape());
    if (failed(b))
      return op->emitOpError("operands are not broadcast-compatible");
    shape = *b;
  }
  auto resultShape = tensorType(result).getShape();
  if (resultShape.size() != shape.size())
    return op->emitOpError("result rank ")
           << resultShape.size() << " differs from the broadcast rank "
           << shape.size();
  for (auto [r, s] : llvm::zip(resultShape, shape))
    // A broadcast size of 1 against a dynamic operand size may still be 1.
    if (!sizesAgree(r, s) && !(s == 1 || r == 1))
      return op->emitOpError("result shape does not match the broadcast shape");
  return success();
}

static LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank,
                                StringRef what = "axis") {
  if (axis < -rank || axis >= rank)
    return op->emitOpError(what) << " " << axis << " is out of range for rank "
                                 << rank;
  return success();
}

static int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getType())
    return emitOpError("value type ")
           << getValue().getType() << " differs from the result type "
           << getType();
  if (!getType().hasStaticShape())
    return emitOpError("a constant must have a static shape");
  return success();
}

#define QCC_BINARY_VERIFIER(OP, SAME_ELEMENT_RESULT)                           \
  LogicalResult OP::verify() {                                                 \
    if (getLhs().getType().getElementType() !=                                 \
            getRhs().getType().getElementType() &&                             \
        !isa<PowOp>(getOperation()))                                           \
      return emitOpError("operand element types differ");                      \
    Type resultElement = getResult().getType().getElementType();               \
    if (SAME_ELEMENT_RESULT &&                                                 \
        resultElement != getLhs().getType().getElementType())                  \
      return emitOpError("result element type differs from the operands'");   \
    if (!SAME_ELEMENT_RESULT && !resultElement.isInteger(1))                   \
      return emitOpError("result element type must be i1");                   \
    return verifyBroadcast(*this, {getLhs(), getRhs()}, getResult());          \
  }
QCC_BINARY_VERIFIER(AddOp, true)
QCC_BINARY_VERIFIER(SubOp, true)
QCC_BINARY_VERIFIER(MulOp, true)
QCC_BINARY_VERIFIER(DivOp, true)
QCC_BINARY_VERIFIER(PowOp, true)
QCC_BINARY_VERIFIER(EqualOp, false)
QCC_BINARY_VERIFIER(LessOp, false)
QCC_BINARY_VERIFIER(LessEqualOp, false)
QCC_BINARY_VERIFIER(GreaterOp, false)
QCC_BINARY_VERIFIER(GreaterEqualOp, false)
QCC_BINARY_VERIFIER(MaxOp, true)
QCC_BINARY_VERIFIER(MinOp, true)
#undef QCC_BINARY_VERIFIER

/// And / Or: i1 operands and result.
template <typename OpT> static LogicalResult verifyLogical(OpT op) {
  for (Value v : {op.getLhs(), op.getRhs(), op.getResult()})
    if (!tensorType(v).getElementType().isInteger(1))
      return op.emitOpError("operands and result must be i1");
  return verifyBroadcast(op, {op.getLhs(), op.getRhs()}, op.getResult());
}
LogicalResult AndOp::verify() { return verifyLogical(*this); }
LogicalResult OrOp::verify() { return verifyLogical(*this); }

LogicalResult IsNaNOp::verify() {
  if (!shapesAgree(getInput().getType().getShape(),
                   getResult().getType().getShape()))
    return emitOpError("input and result shapes differ");
  return success();
}

LogicalResult CumSumOp::verify() {
  if (!shapesAgree(getInput().getType().getShape(),
                   getResult().getType().getShape()) ||
      getInput().getType().getElementType() !=
          getResult().getType().getElementType())
    return emitOpError("result type differs from the input's");
  if (getInput().getType().getElementType().isInteger(1))
    return emitOpError("cannot sum i1 elements");
  return verifyAxis(*this, getAxis(), getInput().getType().getRank());
}

LogicalResult GatherElementsOp::verify() {
  auto in = getInput().getType(), idx = getIndices().getType();
  if (in.getRank() != idx.getRank() || in.getRank() == 0)
    return emitOpError("input and indices must have the same rank >= 1");
  if (!shapesAgree(idx.getShape(), getResult().getType().getShape()))
    return emitOpError("result shape differs from the indices' shape");
  if (in.getElementType() != getResult().getType().getElementType())
    return emitOpError("result element type differs from the input's");
  return verifyAxis(*this, getAxis(), in.getRank());
}

LogicalResult GatherNdOp::verify() {
  auto in = getInput().getType(), idx = getIndices().getType();
  int64_t b = getBatchDims();
  if (idx.getRank() < 1 || b < 0 || b >= idx.getRank() || b > in.getRank())
    return emitOpError("batch_dims ") << b << " is out of range";
  int64_t r = idx.getShape().back();
  if (r == kDyn)
    return emitOpError("the index tuple length must be static");
  if (b + r > in.getRank())
    return emitOpError("index tuples of length ")
           << r << " exceed the input's rank " << in.getRank();
  int64_t expect = idx.getRank() - 1 + in.getRank() - b - r;
  if (getResult().getType().getRank() != expect)
    return emitOpError("result rank must be ") << expect;
  return success();
}

/// The `reduction` of the scatter ops (ONNX's names).
static LogicalResult verifyScatterReduction(Operation *op,
                                            StringRef reduction) {
  if (!llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction))
    return op->emitOpError("reduction must be none, add, mul, max or min, "
                           "not \"")
           << reduction << "\"";
  return success();
}

LogicalResult ScatterNdOp::verify() {
  auto in = getInput().getType(), idx = getIndices().getType(),
       up = getUpdates().getType();
  if (getResult().getType() != in &&
      !shapesAgree(getResult().getType().getShape(), in.getShape()))
    return emitOpError("result shape differs from the input's");
  if (up.getElementType() != in.getElementType() ||
      getResult().getType().getElementType() != in.getElementType())
    return emitOpError("updates and result must have the input's element "
                       "type");
  if (idx.getRank() < 1 || idx.isDynamicDim(idx.getRank() - 1))
    return emitOpError("the index tuple length must be static");
  int64_t r = idx.getShape().back();
  if (r > in.getRank())
    return emitOpError("index tuples of length ")
           << r << " exceed the input's rank " << in.getRank();
  if (up.getRank() != idx.getRank() - 1 + in.getRank() - r)
    return emitOpError("updates must have rank ")
           << idx.getRank() - 1 + in.getRank() - r;
  return verifyScatterReduction(*this, getReduction());
}

LogicalResult ScatterElementsOp::verify() {
  auto in = getInput().getType(), idx = getIndices().getType(),
       up = getUpdates().getType(), result = getResult().getType();
  int64_t rank = in.getRank();
  if (rank < 1 || idx.getRank() != rank || up.getRank() != rank)
    return emitOpError("input, indices and updates must have one rank >= 1");
  if (!shapesAgree(up.getShape(), idx.getShape()))
    return emitOpError("updates must have the shape of the indices");
  if (up.getElementType() != in.getElementType() ||
      result.getElementType() != in.getElementType())
    return emitOpError("updates and result must have the input's element "
                       "type");
  if (!shapesAgree(result.getShape(), in.getShape()))
    return emitOpError("result shape differs from the input's");
  if (failed(verifyAxis(*this, getAxis(), rank)))
    return failure();
  int64_t axis = normalizeAxis(getAxis(), rank);
  // Off the axis an index position is also the position written.
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && !idx.isDynamicDim(d) && !in.isDynamicDim(d) &&
        idx.getDimSize(d) > in.getDimSize(d))
      return emitOpError("indices dimension ")
             << d << " (" << idx.getDimSize(d) << ") exceeds the input's ("
             << in.getDimSize(d) << ")";
  return verifyScatterReduction(*this, getReduction());
}

LogicalResult TileOp::verify() {
  auto in = getInput().getType(), result = getResult().getType();
  if (result.getRank() != in.getRank() ||
      result.getElementType() != in.getElementType())
    return emitOpError("result must have the input's rank and element type");
  int64_t n = getRepeats().getType().getDimSize(0);
  if (n != kDyn && n != in.getRank())
    return emitOpError("needs one repeat per dimension: ")
           << n << " for rank " << in.getRank();
  for (auto [d, r] : llvm::zip(in.getShape(), result.getShape()))
    if (d != kDyn && r != kDyn && (d == 0 ? r != 0 : r % d != 0))
      return emitOpError("result size ")
             << r << " is no multiple of the input size " << d;
  return success();
}

LogicalResult TopKOp::verify() {
  auto in = getInput().getType(), values = getValues().getType(),
       indices = getIndices().getType();
  if (in.getRank() < 1)
    return emitOpError("input must have rank >= 1");
  if (in.getElementType().isInteger(1))
    return emitOpError("cannot order i1 elements");
  if (values.getElementType() != in.getElementType())
    return emitOpError("values must have the input's element type");
  if (!sizesAgree(getK().getType().getDimSize(0), 1))
    return emitOpError("k must hold one element");
  if (failed(verifyAxis(*this, getAxis(), in.getRank())))
    return failure();
  int64_t axis = normalizeAxis(getAxis(), in.getRank());
  if (!shapesAgree(values.getShape(), indices.getShape()) ||
      values.getRank() != in.getRank())
    return emitOpError("values and indices must have one shape of the "
                       "input's rank");
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t i = in.getDimSize(d), v = values.getDimSize(d);
    if (d == axis ? (i != kDyn && v != kDyn && v > i) : !sizesAgree(i, v))
      return emitOpError("result shape does not fit the input's off the axis "
                         "or exceeds it along the axis");
  }
  return success();
}

LogicalResult OneHotOp::verify() {
  auto idx = getIndices().getType(), depth = getDepth().getType(),
       values = getValues().getType(), result = getResult().getType();
  if (idx.getElementType().isInteger(1) || depth.getElementType().isInteger(1))
    return emitOpError("indices and depth must be numbers, not i1");
  if (depth.getRank() > 1 ||
      (depth.getRank() == 1 && !sizesAgree(depth.getDimSize(0), 1)))
    return emitOpError("depth must hold one element");
  if (values.getRank() != 1 || !sizesAgree(values.getDimSize(0), 2))
    return emitOpError("values must be a pair [off, on]");
  if (result.getElementType() != values.getElementType())
    return emitOpError("result must have the element type of the values");
  int64_t rank = idx.getRank();
  if (result.getRank() != rank + 1)
    return emitOpError("result must have rank ") << rank + 1;
  if (failed(verifyAxis(*this, getAxis(), rank + 1)))
    return failure();
  int64_t axis = normalizeAxis(getAxis(), rank + 1);
  SmallVector<int64_t> expect(idx.getShape());
  expect.insert(expect.begin() + axis, result.getDimSize(axis));
  if (!shapesAgree(result.getShape(), expect))
    return emitOpError("result shape differs from the indices' off the axis");
  return success();
}

LogicalResult NonZeroOp::verify() {
  int64_t rows = std::max<int64_t>(getInput().getType().getRank(), 1);
  if (!sizesAgree(getResult().getType().getDimSize(0), rows))
    return emitOpError("result must have ")
           << rows << " rows (one per dimension of the input)";
  return success();
}

LogicalResult WhereOp::verify() {
  if (getLhs().getType().getElementType() !=
          getRhs().getType().getElementType() ||
      getLhs().getType().getElementType() !=
          getResult().getType().getElementType())
    return emitOpError("value operands and result must share an element type");
  return verifyBroadcast(*this, {getCondition(), getLhs(), getRhs()},
                         getResult());
}

LogicalResult CastOp::verify() {
  if (!shapesAgree(getInput().getType().getShape(),
                   getResult().getType().getShape()))
    return emitOpError("input and result shapes differ");
  return success();
}

LogicalResult MatMulOp::verify() {
  auto lhs = getLhs().getType().getShape();
  auto rhs = getRhs().getType().getShape();
  if (lhs.empty() || rhs.empty())
    return emitOpError("operands must have rank >= 1");
  int64_t k1 = lhs.back();
  int64_t k2 = rhs.size() == 1 ? rhs[0] : rhs[rhs.size() - 2];
  if (!sizesAgree(k1, k2))
    return emitOpError("contraction sizes differ: ") << k1 << " vs " << k2;
  size_t expectRank = std::max(lhs.size(), rhs.size());
  if (lhs.size() == 1)
    --expectRank;
  if (rhs.size() == 1)
    --expectRank;
  if (lhs.size() == 1 && rhs.size() == 1)
    expectRank = 0;
  if ((size_t)getResult().getType().getRank() != expectRank)
    return emitOpError("result rank must be ") << expectRank;
  return success();
}

LogicalResult GemmOp::verify() {
  auto a = getA().getType().getShape();
  auto b = getB().getType().getShape();
  if (a.size() != 2 || b.size() != 2 || getResult().getType().getRank() != 2)
    return emitOpError("a, b and the result must be matrices");
  int64_t k1 = getTransA() ? a[0] : a[1];
  int64_t k2 = getTransB() ? b[1] : b[0];
  if (!sizesAgree(k1, k2))
    return emitOpError("contraction sizes differ: ") << k1 << " vs " << k2;
  return success();
}

template <typename ReduceOpT>
static LogicalResult verifyReduce(ReduceOpT op) {
  int64_t rank = op.getInput().getType().getRank();
  llvm::SmallSet<int64_t, 4> seen;
  for (int64_t axis : op.getAxes()) {
    if (failed(verifyAxis(op, axis, rank)))
      return failure();
    if (!seen.insert(normalizeAxis(axis, rank)).second)
      return op.emitOpError("axis ") << axis << " is repeated";
  }
  int64_t expect = op.getKeepdims() ? rank : rank - (int64_t)seen.size();
  if (op.getResult().getType().getRank() != expect)
    return op.emitOpError("result rank must be ") << expect;
  Type et = op.getInput().getType().getElementType();
  if (et != op.getResult().getType().getElementType() || et.isInteger(1))
    return op.emitOpError("result element type must be the input's (not i1)");
  return success();
}
LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }

LogicalResult TransposeOp::verify() {
  auto in = getInput().getType().getShape();
  auto out = getResult().getType().getShape();
  auto perm = getPerm();
  if (perm.size() != in.size() || out.size() != in.size())
    return emitOpError("perm, input and result must have the same rank");
  SmallVector<bool> used(in.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= (int64_t)in.size() || used[p])
      return emitOpError("perm is not a permutation");
    used[p] = true;
  }
  for (auto [i, p] : llvm::enumerate(perm))
    if (!sizesAgree(out[i], in[p]))
      return emitOpError("result dimension ") << i << " must equal input "
                                              << "dimension " << p;
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType();
  auto out = getResult().getType();
  int64_t shapeLen = getShape().getType().getDimSize(0);
  if (shapeLen != kDyn && shapeLen != out.getRank())
    return emitOpError("shape has ") << shapeLen << " elements but the result "
                                     << "has rank " << out.getRank();
  if (in.hasStaticShape() && out.hasStaticShape() &&
      in.getNumElements() != out.getNumElements())
    return emitOpError("input and result element counts differ");
  if (in.getElementType() != out.getElementType())
    return emitOpError("input and result element types differ");
  return success();
}

LogicalResult FlattenOp::verify() {
  int64_t rank = getInput().getType().getRank();
  int64_t axis = getAxis();
  if (axis < -rank || axis > rank)
    return emitOpError("axis out of range");
  if (getResult().getType().getRank() != 2)
    return emitOpError("result must be 2-D");
  return success();
}

LogicalResult SqueezeOp::verify() {
  auto in = getInput().getType().getShape();
  for (int64_t axis : getAxes()) {
    if (failed(verifyAxis(*this, axis, in.size())))
      return failure();
    int64_t size = in[normalizeAxis(axis, in.size())];
    if (size != 1 && size != kDyn)
      return emitOpError("squeezed dimension ") << axis << " has size " << size;
  }
  if (getResult().getType().getRank() !=
      (int64_t)(in.size() - getAxes().size()))
    return emitOpError("result rank must be input rank - number of axes");
  return success();
}

LogicalResult UnsqueezeOp::verify() {
  int64_t outRank = getResult().getType().getRank();
  if (outRank != getInput().getType().getRank() + (int64_t)getAxes().size())
    return emitOpError("result rank must be input rank + number of axes");
  for (int64_t axis : getAxes()) {
    if (failed(verifyAxis(*this, axis, outRank)))
      return failure();
    if (!sizesAgree(getResult().getType().getDimSize(
                        normalizeAxis(axis, outRank)),
                    1))
      return emitOpError("inserted dimension ") << axis << " must have size 1";
  }
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  auto out = getResult().getType();
  int64_t rank = out.getRank();
  if (failed(verifyAxis(*this, getAxis(), rank)))
    return failure();
  int64_t axis = normalizeAxis(getAxis(), rank);
  int64_t total = 0;
  for (Value v : getInputs()) {
    auto t = tensorType(v);
    if (t.getRank() != rank)
      return emitOpError("inputs must have the result's rank");
    if (t.getElementType() != out.getElementType())
      return emitOpError("inputs must have the result's element type");
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && !sizesAgree(t.getDimSize(d), out.getDimSize(d)))
        return emitOpError("input dimension ") << d << " differs from result";
    total = (total == kDyn || t.getDimSize(axis) == kDyn)
                ? kDyn
                : total + t.getDimSize(axis);
  }
  if (!sizesAgree(total, out.getDimSize(axis)))
    return emitOpError("result size along axis must be the inputs' sum");
  return success();
}

LogicalResult SplitOp::verify() {
  auto in = getInput().getType();
  if (failed(verifyAxis(*this, getAxis(), in.getRank())))
    return failure();
  int64_t axis = normalizeAxis(getAxis(), in.getRank());
  if (getSizes().size() != getResults().size())
    return emitOpError("needs one size per result");
  int64_t total = 0;
  for (auto [size, result] : llvm::zip(getSizes(), getResults())) {
    if (size < 0)
      return emitOpError("sizes must be non-negative");
    total += size;
    if (!sizesAgree(tensorType(result).getDimSize(axis), size))
      return emitOpError("result size along axis differs from its size");
  }
  if (!sizesAgree(in.getDimSize(axis), total))
    return emitOpError("sizes must add up to the input size along axis");
  return success();
}

LogicalResult SliceOp::verify() {
  int64_t rank = getInput().getType().getRank();
  if (getAxes().size() != getSteps().size())
    return emitOpError("axes and steps must have the same length");
  for (auto [axis, step] : llvm::zip(getAxes(), getSteps())) {
    if (failed(verifyAxis(*this, axis, rank)))
      return failure();
    if (step == 0)
      return emitOpError("steps must be non-zero");
  }
  for (Value v : {getStarts(), getEnds()}) {
    int64_t n = tensorType(v).getDimSize(0);
    if (n != kDyn && n != (int64_t)getAxes().size())
      return emitOpError("starts and ends need one element per axis");
  }
  if (getResult().getType().getRank() != rank)
    return emitOpError("result must have the input's rank");
  return success();
}

LogicalResult GatherOp::verify() {
  int64_t rank = getInput().getType().getRank();
  if (rank == 0 || failed(verifyAxis(*this, getAxis(), rank)))
    return emitOpError("axis must index a dimension of the input");
  int64_t expect = rank - 1 + getIndices().getType().getRank();
  if (getResult().getType().getRank() != expect)
    return emitOpError("result rank must be ") << expect;
  return success();
}

LogicalResult ShapeOp::verify() {
  int64_t rank = tensorType(getInput()).getRank();
  int64_t start = std::clamp<int64_t>(normalizeAxis(getStart(), rank), 0, rank);
  int64_t end = std::clamp<int64_t>(
      getEnd() ? normalizeAxis(*getEnd(), rank) : rank, 0, rank);
  int64_t n = std::max<int64_t>(end - start, 0);
  if (!sizesAgree(getResult().getType().getDimSize(0), n))
    return emitOpError("result must have ") << n << " elements";
  return success();
}

LogicalResult ConstantOfShapeOp::verify() {
  if (getValue().getNumElements() != 1)
    return emitOpError("value must hold exactly one element");
  if (getValue().getElementType() != getResult().getType().getElementType())
    return emitOpError("value and result element types differ");
  return success();
}

LogicalResult RangeOp::verify() {
  Type t = getResult().getType().getElementType();
  for (Value v : {getStart(), getLimit(), getDelta()})
    if (tensorType(v).getElementType() != t)
      return emitOpError("operands and result must share an element type");
  return success();
}

LogicalResult ExpandOp::verify() {
  int64_t n = getShape().getType().getDimSize(0);
  int64_t inRank = getInput().getType().getRank();
  int64_t outRank = getResult().getType().getRank();
  if (n != kDyn && outRank != std::max(n, inRank))
    return emitOpError("result rank must be max(input rank, shape length)");
  return success();
}

LogicalResult TriluOp::verify() {
  if (getInput().getType().getRank() < 2)
    return emitOpError("input must have rank >= 2");
  if (getInput().getType() != getResult().getType())
    return emitOpError("result type must equal the input type");
  return success();
}

//===----------------------------------------------------------------------===//
// Transformer ops
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  auto in = getInput().getType();
  auto w = getWeight().getType();
  auto out = getResult().getType();
  if (w.getRank() != 2)
    return emitOpError("weight must be [N, K]");
  if (in.getRank() < 1 || out.getRank() != in.getRank())
    return emitOpError("input and result must have the same rank >= 1");
  if (!sizesAgree(in.getShape().back(), w.getDimSize(1)))
    return emitOpError("input size ")
           << in.getShape().back() << " differs from the weight's K "
           << w.getDimSize(1);
  if (!sizesAgree(out.getShape().back(), w.getDimSize(0)))
    return emitOpError("result size differs from the weight's N");
  if (Value bias = getBias()) {
    auto b = tensorType(bias);
    if (b.getRank() != 1 || !sizesAgree(b.getDimSize(0), w.getDimSize(0)))
      return emitOpError("bias must be [N]");
  }
  if (!shapesAgree(in.getShape().drop_back(), out.getShape().drop_back()))
    return emitOpError("leading dimensions of input and result differ");
  return success();
}

LogicalResult MoeOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  auto ids = getExpertIds().getType(), gates = getGates().getType();
  auto up = getUpWeight().getType(), down = getDownWeight().getType();
  if (in.getRank() != 2 || out != in)
    return emitOpError("input and result must be the same [T, H]");
  if (ids.getRank() != 2 || gates.getRank() != 2 ||
      !shapesAgree(ids.getShape(), gates.getShape()) ||
      !sizesAgree(ids.getDimSize(0), in.getDimSize(0)))
    return emitOpError("expert_ids and gates must both be [T, k]");
  if (up.getRank() != 3 || down.getRank() != 3)
    return emitOpError("expert weights must be [E, N, K]");
  int64_t h = in.getDimSize(1);
  if (!sizesAgree(up.getDimSize(2), h) || !sizesAgree(down.getDimSize(1), h))
    return emitOpError("up_weight must be [E, I, H] and down_weight "
                       "[E, H, I] with H the input's ")
           << h;
  if (!sizesAgree(up.getDimSize(0), down.getDimSize(0)) ||
      !sizesAgree(up.getDimSize(1), down.getDimSize(2)))
    return emitOpError("up_weight [E, I, H] and down_weight [E, H, I] "
                       "disagree on E or I");
  if (Value g = getGateWeight())
    if (!shapesAgree(tensorType(g).getShape(), up.getShape()))
      return emitOpError("gate_weight must have up_weight's shape");
  if (!llvm::is_contained({"silu", "gelu", "gelu_tanh", "relu"},
                          getActivation()))
    return emitOpError("activation must be silu, gelu, gelu_tanh or relu, "
                       "not \"")
           << getActivation() << "\"";
  return success();
}

static LogicalResult verifyNormParam(Operation *op, Value input, Value param,
                                     StringRef name) {
  auto p = tensorType(param);
  int64_t d = tensorType(input).getShape().back();
  if (p.getRank() != 1 || !sizesAgree(p.getDimSize(0), d))
    return op->emitOpError(name) << " must be [D] with D the input's last "
                                 << "dimension";
  return success();
}

LogicalResult LayerNormOp::verify() {
  if (getInput().getType().getRank() < 1 ||
      getInput().getType() != getResult().getType())
    return emitOpError("result type must equal the input type (rank >= 1)");
  if (failed(verifyNormParam(*this, getInput(), getGamma(), "gamma")))
    return failure();
  if (getBeta() &&
      failed(verifyNormParam(*this, getInput(), getBeta(), "beta")))
    return failure();
  if (getEpsilon().convertToFloat() < 0)
    return emitOpError("epsilon must be non-negative");
  return success();
}

LogicalResult RmsNormOp::verify() {
  if (getInput().getType().getRank() < 1 ||
      getInput().getType() != getResult().getType())
    return emitOpError("result type must equal the input type (rank >= 1)");
  if (getEpsilon().convertToFloat() < 0)
    return emitOpError("epsilon must be non-negative");
  return verifyNormParam(*this, getInput(), getGamma(), "gamma");
}

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be \"none\" or \"tanh\", not \"")
           << getApproximate() << "\"";
  return success();
}

LogicalResult HadamardOp::verify() {
  auto type = getInput().getType();
  if (type.getRank() < 1 || type.isDynamicDim(type.getRank() - 1))
    return emitOpError("input must have a static last dimension");
  if (std::string why = format::Rotation::widthError(type.getShape().back());
      !why.empty())
    return emitOpError(why);
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getInput().getType().getRank());
}

/// The sliding window and the logit softcap of attention ops: 0 = none.
template <typename OpT> static LogicalResult verifyWindowSoftcap(OpT op) {
  if ((int64_t)op.getWindow() < 0)
    return op.emitOpError("window must be non-negative (0 = none)");
  if (!(op.getSoftcap().convertToFloat() >= 0.0f))
    return op.emitOpError("softcap must be non-negative (0 = none)");
  return success();
}

LogicalResult AttentionOp::verify() {
  auto q = getQuery().getType();
  auto k = getKey().getType();
  auto v = getValue().getType();
  auto out = getResult().getType();
  if (q.getRank() != 3 || k.getRank() != 3 || v.getRank() != 3 ||
      out.getRank() != 3)
    return emitOpError("query, key, value and result must be [B, S, H*D]");
  int64_t heads = getNumHeads(), kvHeads = getNumKvHeads();
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0)
    return emitOpError("num_heads must be a positive multiple of num_kv_heads");
  if (!shapesAgree(k.getShape(), v.getShape()))
    return emitOpError("key and value shapes differ");
  if (!shapesAgree(q.getShape(), out.getShape()))
    return emitOpError("result shape must equal the query shape");
  int64_t qWidth = q.getDimSize(2), kvWidth = k.getDimSize(2);
  if (qWidth != kDyn && qWidth % heads != 0)
    return emitOpError("query width ") << qWidth << " is not a multiple of "
                                       << "num_heads " << heads;
  if (qWidth != kDyn && kvWidth != kDyn &&
      qWidth / heads * kvHeads != kvWidth)
    return emitOpError("key width must be num_kv_heads * head size");
  if (!sizesAgree(q.getDimSize(0), k.getDimSize(0)))
    return emitOpError("query and key batch sizes differ");
  if (Value mask = getMask()) {
    auto m = tensorType(mask);
    if (m.getRank() > 4)
      return emitOpError("mask must broadcast to [B, H, Sq, Skv]");
    SmallVector<int64_t> full = {q.getDimSize(0), heads, q.getDimSize(1),
                                 k.getDimSize(1)};
    auto b = broadcastShapes(full, m.getShape());
    if (failed(b) || !shapesAgree(*b, full))
      return emitOpError("mask must broadcast to [B, H, Sq, Skv]");
  }
  return verifyWindowSoftcap(*this);
}

LogicalResult QuantizeOp::verify() {
  auto in = getInput().getType();
  if (getResult().getType().getShape() != in.getShape())
    return emitOpError("result must have the input's shape");
  QuantAttr quant = getQuant();
  if (quant.getGranularity() != QuantGranularity::PerToken &&
      quant.getGranularity() != QuantGranularity::PerTensor)
    return emitOpError("granularity must be per_token or per_tensor");
  if (quant.getBits() != 8)
    return emitOpError("quantizes to 8 bits (the result is i8), not ")
           << quant.getBits();
  if (isa<Float8E4M3FNType>(getResult().getType().getElementType()) &&
      !quant.isSymmetric())
    return emitOpError("FP8 quantization is symmetric");
  if (getScale() && quant.getGranularity() != QuantGranularity::PerTensor)
    return emitOpError("a static scale is per tensor");
  if (getScale() && getScale()->convertToFloat() <= 0)
    return emitOpError("static scale must be positive");
  SmallVector<int64_t> expect = {1};
  if (quant.getGranularity() == QuantGranularity::PerToken) {
    expect.assign(in.getShape().begin(), in.getShape().end());
    expect.back() = 1;
  }
  for (Value v : {getScaleOut(), getZeroPoint()})
    if (!shapesAgree(tensorType(v).getShape(), expect))
      return emitOpError("scale and zero point must be [..., 1] per token "
                         "or [1] per tensor");
  if (auto cols = getOutlierColumns()) {
    // A dynamic K (a reshape's result) is checked where it is known: by the
    // qlinear against its weight, and at run time.
    int64_t k = in.getRank() ? in.getShape().back() : 0;
    if (ShapedType::isDynamic(k))
      k = std::numeric_limits<int64_t>::max();
    std::string why = format::outlierColumnsError(*cols, k);
    if (!why.empty())
      return emitOpError(why);
  }
  return success();
}

LogicalResult Sparse24Op::verify() {
  namespace sp = format::sparse24;
  auto values = getValues().getType();
  auto meta = getMeta().getType();
  auto out = getResult().getType();
  if (values.getRank() != 2 || meta.getRank() != 2 || out.getRank() != 2)
    return emitOpError("values, meta and result must be 2-D");
  if (values.getElementType() != out.getElementType())
    return emitOpError("values and result element types differ");
  int64_t n = out.getDimSize(0), k = out.getDimSize(1);
  if (ShapedType::isDynamic(k) || k % sp::kKAlignment != 0)
    return emitOpError("K (") << k << ") must be a static multiple of "
                             << sp::kKAlignment;
  if (!sizesAgree(values.getDimSize(0), n) || !sizesAgree(meta.getDimSize(0), n))
    return emitOpError("values, meta and result must have the same N");
  if (!sizesAgree(values.getDimSize(1), sp::valuesCols(k)))
    return emitOpError("values must be [N, K/2] = [N, ")
           << sp::valuesCols(k) << "]";
  if (!sizesAgree(meta.getDimSize(1), sp::metaCols(k)))
    return emitOpError("meta must be [N, K/32] = [N, ") << sp::metaCols(k)
                                                        << "]";
  if (auto c = getMeta().getDefiningOp<ConstantOp>()) {
    auto bytes = getBytes(c.getValue());
    if (bytes && !ShapedType::isDynamic(n)) {
      if (auto why = sp::validateMeta(
              reinterpret_cast<const int32_t *>(bytes->data()), n, k))
        return emitOpError("invalid metadata: ") << *why;
    }
  }
  return success();
}

LogicalResult WeightInt4Op::verify() {
  namespace i4 = format::int4;
  auto packed = getPacked().getType();
  auto scales = getScales().getType();
  auto out = getResult().getType();
  if (packed.getRank() != 2 || scales.getRank() != 2 || out.getRank() != 2)
    return emitOpError("packed, scales and result must be 2-D");
  int64_t n = out.getDimSize(0), k = out.getDimSize(1);
  int64_t g = getGroupSize();
  if (ShapedType::isDynamic(k))
    return emitOpError("K must be static");
  if (std::string why = i4::groupSizeError(k, g); !why.empty())
    return emitOpError(why);
  if (!sizesAgree(packed.getDimSize(0), n) ||
      !sizesAgree(scales.getDimSize(0), n))
    return emitOpError("packed, scales and result must have the same N");
  if (!sizesAgree(packed.getDimSize(1), i4::packedCols(k)))
    return emitOpError("packed must be [N, K/2] = [N, ")
           << i4::packedCols(k) << "]";
  if (!sizesAgree(scales.getDimSize(1), i4::scaleCols(k, g)))
    return emitOpError("scales must be [N, K/group_size] = [N, ")
           << i4::scaleCols(k, g) << "]";
  if (Value o = getOffsets())
    if (!shapesAgree(cast<RankedTensorType>(o.getType()).getShape(),
                     scales.getShape()))
      return emitOpError("offsets must have the shape of scales");
  if (Value p = getPerm()) {
    auto pt = cast<RankedTensorType>(p.getType());
    if (pt.getRank() != 1 || !sizesAgree(pt.getDimSize(0), k))
      return emitOpError("perm must be [K] = [") << k << "]";
    if (auto c = p.getDefiningOp<ConstantOp>())
      if (auto bytes = getBytes(c.getValue()))
        if (std::string why = i4::permutationError(
                reinterpret_cast<const int32_t *>(bytes->data()), k);
            !why.empty())
          return emitOpError("invalid perm: ") << why;
  }
  return success();
}

LogicalResult QLinearOp::verify() {
  auto in = getInput().getType();
  auto w = getWeight().getType();
  if (w.getRank() != 2 || in.getRank() < 1)
    return emitOpError("weight must be [N, K] and the input [..., K]");
  if (!sizesAgree(in.getShape().back(), w.getDimSize(1)))
    return emitOpError("input size differs from the weight's K");
  if (in.getElementType() != w.getElementType())
    return emitOpError("input and weight must both be i8 or both f8E4M3FN");
  if (!w.getElementType().isInteger(8) &&
      getWeight().getDefiningOp<Sparse24Op>())
    return emitOpError("an FP8 weight is dense (no 2:4 form)");
  for (Value v : {getWeightScale(), getWeightSum()}) {
    auto t = tensorType(v);
    if (t.getRank() != 1 || !sizesAgree(t.getDimSize(0), w.getDimSize(0)))
      return emitOpError("weight_scale and weight_sum must be [N]");
  }
  if (Value b = getBias())
    if (tensorType(b).getRank() != 1 ||
        !sizesAgree(tensorType(b).getDimSize(0), w.getDimSize(0)))
      return emitOpError("bias must be [N]");
  auto out = getResult().getType();
  if (out.getRank() != in.getRank() ||
      !shapesAgree(out.getShape().drop_back(), in.getShape().drop_back()) ||
      !sizesAgree(out.getShape().back(), w.getDimSize(0)))
    return emitOpError("result must be the input's leading dims followed by N");
  return verifyOutliers();
}

LogicalResult QLinearOp::verifyOutliers() {
  std::optional<ArrayRef<int64_t>> cols = getOutlierColumns();
  if (!getOutlierInput() && !cols)
    return success();
  if (!getOutlierInput() || !cols)
    return emitOpError("outlier_input, outlier_weight and outlier_columns "
                       "come together");
  auto in = getInput().getType();
  auto w = getWeight().getType();
  int64_t k = w.getDimSize(1);
  if (ShapedType::isDynamic(k))
    return emitOpError("outlier columns need a static K");
  std::string why = format::outlierColumnsError(*cols, k);
  if (!why.empty())
    return emitOpError(why);
  if (getWeight().getDefiningOp<Sparse24Op>())
    return emitOpError("outlier columns and a 2:4 sparse weight do not mix");
  if (!shapesAgree(tensorType(getOutlierInput()).getShape(), in.getShape()))
    return emitOpError("outlier_input must have the input's shape");
  auto ow = tensorType(getOutlierWeight());
  if (ow.getRank() != 2 || !sizesAgree(ow.getDimSize(0), w.getDimSize(0)) ||
      !sizesAgree(ow.getDimSize(1), (int64_t)cols->size()))
    return emitOpError("outlier_weight must be [N, number of outlier columns]");
  if (auto q = getInput().getDefiningOp<QuantizeOp>())
    if (q.getOutlierColumns() != cols || q.getInput() != getOutlierInput())
      return emitOpError("the quantize of the input must read outlier_input "
                         "with the same outlier_columns");
  return success();
}

/// qcc.kernel's kind, bare (`qcc.kernel gemm_i8 "k3" ...`).
static ParseResult parseKernelKind(OpAsmParser &parser, KernelKindAttr &kind) {
  FailureOr<format::KernelKind> k = parseKernelKindKeyword(parser);
  if (failed(k))
    return failure();
  kind = KernelKindAttr::get(parser.getContext(), *k);
  return success();
}

static void printKernelKind(OpAsmPrinter &printer, KernelOp,
                            KernelKindAttr kind) {
  printer << format::spelling(kind.getValue());
}

/// Whether `body` holds a `Gemm` (linear / qlinear) whose weight is a
/// qcc.sparse_2_4 of the region's block arguments: what the sparse GEMM kinds
/// read straight from the compressed form.
template <class Gemm> static bool holdsSparseGemm(Block &body) {
  return llvm::any_of(body.getOps<Gemm>(), [&](Gemm gemm) {
    auto sparse = gemm.getWeight().template getDefiningOp<Sparse24Op>();
    auto isArg = [&](Value v) {
      auto a = dyn_cast<BlockArgument>(v);
      return a && a.getOwner() == &body;
    };
    return sparse && isArg(sparse.getValues()) && isArg(sparse.getMeta());
  });
}

LogicalResult KernelOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("needs one block argument per operand");
  for (auto [arg, in] : llvm::zip(body.getArguments(), getInputs()))
    if (arg.getType() != in.getType())
      return emitOpError("block argument types must match the operands");
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yielded types must match the results");
  // The op the kind's device template is built around.
  auto holds = [&](auto... op) {
    return llvm::any_of(
        body, [](Operation &o) { return (isa<decltype(op)>(o) || ...); });
  };
  const char *needs = nullptr;
  switch (getKind()) {
  case KernelKind::GemmI8:
    needs = holds(QLinearOp()) ? nullptr : "a qcc.qlinear";
    break;
  case KernelKind::GemmF16:
    needs = holds(LinearOp()) ? nullptr : "a qcc.linear";
    break;
  case KernelKind::Norm:
    needs = holds(LayerNormOp(), RmsNormOp()) ? nullptr : "a norm";
    break;
  case KernelKind::NormQuantize:
    needs = holds(LayerNormOp(), RmsNormOp()) && holds(QuantizeOp())
                ? nullptr
                : "a norm and a qcc.quantize";
    break;
  case KernelKind::Quantize:
    needs = holds(QuantizeOp()) ? nullptr : "a qcc.quantize";
    break;
  case KernelKind::Hadamard:
    needs = holds(HadamardOp()) ? nullptr : "a qcc.hadamard";
    break;
  case KernelKind::Embedding:
    needs = holds(EmbeddingOp()) ? nullptr : "a qcc.embedding";
    break;
  case KernelKind::Elementwise:
    needs = body.getOperations().size() > 1 ? nullptr : "an op";
    break;
  case KernelKind::Attention:
    needs = holds(AttentionOp(), KvAttentionOp()) ? nullptr : "an attention op";
    break;
  case KernelKind::GemmI8Sp:
    needs = holdsSparseGemm<QLinearOp>(body)
                ? nullptr
                : "a qcc.qlinear whose weight is a qcc.sparse_2_4 of block "
                  "arguments";
    break;
  case KernelKind::GemmF16Sp:
    needs = holdsSparseGemm<LinearOp>(body)
                ? nullptr
                : "a qcc.linear whose weight is a qcc.sparse_2_4 of block "
                  "arguments";
    break;
  case KernelKind::GemmI8Mixed:
    needs = llvm::any_of(body.getOps<QLinearOp>(),
                         [](QLinearOp q) { return q.getOutlierInput(); })
                ? nullptr
                : "a qcc.qlinear with outlier columns";
    break;
  case KernelKind::GemmW4:
    needs = llvm::any_of(body.getOps<LinearOp>(),
                         [&](LinearOp l) {
                           auto w = l.getWeight().getDefiningOp<WeightInt4Op>();
                           auto isArg = [&](Value v) {
                             auto a = dyn_cast<BlockArgument>(v);
                             return a && a.getOwner() == &body;
                           };
                           return w && !w.getPerm() && isArg(w.getPacked()) &&
                                  isArg(w.getScales()) &&
                                  (!w.getOffsets() || isArg(w.getOffsets()));
                         })
                ? nullptr
                : "a qcc.linear whose weight is a qcc.weight_int4 (without "
                  "perm) of block arguments";
    break;
  case KernelKind::Moe:
    needs = holds(MoeOp()) ? nullptr : "a qcc.moe";
    break;
  case KernelKind::Router:
    needs = holds(SoftmaxOp()) && holds(TopKOp()) ? nullptr
                                                  : "a qcc.softmax and a qcc.top_k";
    break;
  }
  if (needs)
    return emitOpError("of kind '") << format::spelling(getKind())
                                    << "' needs " << needs << " in its body";
  return success();
}

LogicalResult KvAttentionOp::verify() {
  auto q = getQuery().getType();
  auto k = getKey().getType();
  auto v = getValue().getType();
  if (q.getRank() != 3 || k.getRank() != 3 || v.getRank() != 3 ||
      getResult().getType() != q)
    return emitOpError("query, key, value must be [B, S, H*D] and the result "
                       "the query's type");
  int64_t heads = getNumHeads(), kvHeads = getNumKvHeads();
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0)
    return emitOpError("num_heads must be a positive multiple of num_kv_heads");
  if (!shapesAgree(k.getShape(), v.getShape()) ||
      !sizesAgree(q.getDimSize(1), k.getDimSize(1)))
    return emitOpError("key and value must be [B, S, Hkv*D] for the query's S");
  int64_t qWidth = q.getDimSize(2), kvWidth = k.getDimSize(2);
  if (qWidth != kDyn && kvWidth != kDyn &&
      (qWidth % heads != 0 || qWidth / heads * kvHeads != kvWidth))
    return emitOpError("key width must be num_kv_heads * head size");
  if ((int64_t)getLayer() < 0)
    return emitOpError("layer must be non-negative");
  if (auto alibi = getAlibi()) {
    if ((int64_t)alibi->size() != heads)
      return emitOpError("alibi must have one slope per query head (")
             << heads << "), got " << alibi->size();
    for (float m : *alibi)
      if (!std::isfinite(m))
        return emitOpError("alibi slopes must be finite");
  }
  return verifyWindowSoftcap(*this);
}

LogicalResult RotaryOp::verify() {
  auto in = getInput().getType();
  int64_t d = getHeadDim();
  if (in.getRank() != 3 || getResult().getType() != in)
    return emitOpError("input and result must be [B, S, H*D] of one type");
  if (d <= 0)
    return emitOpError("head_dim must be positive");
  if (in.getDimSize(2) != kDyn && in.getDimSize(2) % d != 0)
    return emitOpError("input width is not a multiple of head_dim");
  int64_t r = getRotatedDim();
  if (r <= 0 || r % 2 != 0 || r > d)
    return emitOpError("the rotated part (rotary_dim, else head_dim) must be "
                       "positive, even and at most head_dim");
  for (Value table : {getCos(), getSin()}) {
    auto t = tensorType(table);
    if ((t.getRank() != 2 && t.getRank() != 3) ||
        !sizesAgree(t.getShape().back(), r) ||
        !sizesAgree(t.getShape()[t.getRank() - 2], in.getDimSize(1)))
      return emitOpError("cos and sin must be [S, R] or [B, S, R] with R = "
                         "rotary_dim");
  }
  return success();
}

LogicalResult EmbeddingOp::verify() {
  auto table = getTable().getType();
  auto ids = getIds().getType();
  auto out = getResult().getType();
  if (table.getRank() != 2)
    return emitOpError("table must be [V, E]");
  if (out.getRank() != ids.getRank() + 1 ||
      !shapesAgree(out.getShape().drop_back(), ids.getShape()) ||
      !sizesAgree(out.getShape().back(), table.getDimSize(1)))
    return emitOpError("result must be ids' shape followed by E");
  return success();
}

LogicalResult LoraOp::verify() {
  auto in = getInput().getType();
  auto a = getA().getType();
  auto b = getB().getType();
  auto out = getResult().getType();
  if (a.getRank() != 3 || b.getRank() != 3)
    return emitOpError("a must be [J, R, K] and b [J, N, R]");
  if (in.getRank() < 1 || out.getRank() != in.getRank() ||
      !shapesAgree(out.getShape().drop_back(), in.getShape().drop_back()))
    return emitOpError("result must be input's shape with N last");
  if (!sizesAgree(a.getDimSize(0), b.getDimSize(0)) ||
      !sizesAgree(a.getDimSize(1), b.getDimSize(2)) ||
      !sizesAgree(a.getDimSize(2), in.getShape().back()) ||
      !sizesAgree(b.getDimSize(1), out.getShape().back()))
    return emitOpError("a [J, R, K] and b [J, N, R] must agree with each "
                       "other, with input's K and the result's N");
  return success();
}

#define GET_OP_CLASSES
#include "dialects/QccOps.cpp.inc"
