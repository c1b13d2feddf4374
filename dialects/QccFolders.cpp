//===- QccFolders.cpp - constant and identity folding ---------------------===//
//
// Folders see through the shape arithmetic that exporters emit
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape): they evaluate it when
// the sizes are static, and drop ops that do nothing. They only fold small
// `dense` integer constants; weights (dense_resource) are never copied.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace qcc;

/// Folding materializes new attributes; keep that to shape-sized tensors.
static constexpr int64_t kMaxFoldElements = 1024;

static std::optional<SmallVector<int64_t>> intValues(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseIntElementsAttr>(attr);
  if (!dense || dense.getNumElements() > kMaxFoldElements)
    return std::nullopt;
  SmallVector<int64_t> out;
  for (const APInt &v : dense.getValues<APInt>())
    out.push_back(v.getSExtValue());
  return out;
}

static DenseElementsAttr intsAttr(RankedTensorType type,
                                  ArrayRef<int64_t> values) {
  auto et = cast<IntegerType>(type.getElementType());
  SmallVector<APInt> apints;
  for (int64_t v : values)
    apints.push_back(APInt(et.getWidth(), v, /*isSigned=*/true));
  return DenseElementsAttr::get(type, apints);
}

static bool isStaticIntType(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt && rt.hasStaticShape() && isa<IntegerType>(rt.getElementType()) &&
         rt.getNumElements() <= kMaxFoldElements;
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // Integer-to-integer casts of shape constants (int32 <-> int64).
  if (auto vals = intValues(adaptor.getInput()))
    if (isStaticIntType(getType()) &&
        !getType().getElementType().isInteger(1))
      return intsAttr(getType(), *vals);
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  for (auto [i, p] : llvm::enumerate(getPerm()))
    if ((int64_t)i != p)
      return {};
  return getInput();
}

/// Reshape-like ops on a small constant become the constant, re-typed.
static OpFoldResult reshapeConstant(Attribute input, RankedTensorType type) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(input);
  if (!dense || !type.hasStaticShape() ||
      dense.getNumElements() > kMaxFoldElements)
    return {};
  return dense.reshape(type);
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  auto in = getInput().getType();
  if (in == getType() && in.hasStaticShape())
    return getInput();
  return reshapeConstant(adaptor.getInput(), getType());
}

OpFoldResult SqueezeOp::fold(FoldAdaptor adaptor) {
  return reshapeConstant(adaptor.getInput(), getType());
}

OpFoldResult UnsqueezeOp::fold(FoldAdaptor adaptor) {
  return reshapeConstant(adaptor.getInput(), getType());
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
    return getInputs()[0];
  // Only 1-D integer vectors: that is what shape arithmetic concatenates.
  if (getType().getRank() != 1 || !isStaticIntType(getType()))
    return {};
  SmallVector<int64_t> all;
  for (Attribute a : adaptor.getInputs()) {
    auto vals = intValues(a);
    if (!vals)
      return {};
    all.append(*vals);
  }
  return intsAttr(getType(), all);
}

/// ONNX Slice index normalization for one dimension of size `dim`.
static void sliceBounds(int64_t dim, int64_t step, int64_t &start,
                        int64_t &end) {
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
  }
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  auto starts = intValues(adaptor.getStarts());
  auto ends = intValues(adaptor.getEnds());
  auto in = getInput().getType();
  if (!starts || !ends)
    return {};
  // A slice that keeps everything (common in exporter output) is a no-op.
  bool identity = in == getType() && in.hasStaticShape();
  for (auto [i, axis] : llvm::enumerate(getAxes())) {
    int64_t a = axis < 0 ? axis + in.getRank() : axis;
    int64_t dim = in.getDimSize(a);
    if (dim == ShapedType::kDynamic || getSteps()[i] != 1) {
      identity = false;
      continue;
    }
    int64_t s = (*starts)[i], e = (*ends)[i];
    sliceBounds(dim, 1, s, e);
    identity &= s == 0 && e == dim;
  }
  if (identity)
    return getInput();
  // Slices of 1-D integer constants (shape vectors).
  auto vals = intValues(adaptor.getInput());
  if (!vals || in.getRank() != 1 || !isStaticIntType(getType()))
    return {};
  int64_t s = (*starts)[0], e = (*ends)[0], step = getSteps()[0];
  sliceBounds(vals->size(), step, s, e);
  SmallVector<int64_t> out;
  for (int64_t i = s; step > 0 ? i < e : i > e; i += step)
    out.push_back((*vals)[i]);
  if ((int64_t)out.size() != getType().getNumElements())
    return {};
  return intsAttr(getType(), out);
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  auto idx = intValues(adaptor.getIndices());
  if (!idx || getInput().getType().getRank() != 1 ||
      !isStaticIntType(getType()))
    return {};
  int64_t n = getInput().getType().getDimSize(0);
  auto normalize = [&](int64_t i) { return i < 0 ? i + n : i; };
  // Gather from a shape: static dimensions are known even if others are not.
  if (auto shape = getInput().getDefiningOp<ShapeOp>()) {
    auto dims = shape.getInput().getType();
    auto ranked = cast<RankedTensorType>(dims);
    int64_t start = (int64_t)shape.getStart() < 0 ? (int64_t)shape.getStart() + ranked.getRank()
                                         : shape.getStart();
    SmallVector<int64_t> out;
    for (int64_t i : *idx) {
      if (n == ShapedType::kDynamic)
        return {};
      int64_t j = normalize(i);
      if (j < 0 || j >= n || start + j >= ranked.getRank())
        return {};
      int64_t d = ranked.getDimSize(start + j);
      if (d == ShapedType::kDynamic)
        return {};
      out.push_back(d);
    }
    return intsAttr(getType(), out);
  }
  auto vals = intValues(adaptor.getInput());
  if (!vals)
    return {};
  SmallVector<int64_t> out;
  for (int64_t i : *idx) {
    int64_t j = i < 0 ? i + (int64_t)vals->size() : i;
    if (j < 0 || j >= (int64_t)vals->size())
      return {};
    out.push_back((*vals)[j]);
  }
  return intsAttr(getType(), out);
}

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  auto in = cast<RankedTensorType>(getInput().getType());
  if (!getType().hasStaticShape())
    return {};
  int64_t start = (int64_t)getStart() < 0 ? (int64_t)getStart() + in.getRank() : getStart();
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i < getType().getDimSize(0); ++i) {
    int64_t d = in.getDimSize(start + i);
    if (d == ShapedType::kDynamic)
      return {};
    dims.push_back(d);
  }
  return intsAttr(getType(), dims);
}

OpFoldResult ConstantOfShapeOp::fold(FoldAdaptor) {
  if (!getType().hasStaticShape() ||
      getType().getNumElements() > kMaxFoldElements)
    return {};
  auto value = dyn_cast<DenseElementsAttr>(getValue());
  if (!value)
    return {};
  return DenseElementsAttr::get(getType(),
                                value.getSplatValue<Attribute>());
}

OpFoldResult RangeOp::fold(FoldAdaptor adaptor) {
  auto start = intValues(adaptor.getStart());
  auto limit = intValues(adaptor.getLimit());
  auto delta = intValues(adaptor.getDelta());
  if (!start || !limit || !delta || (*delta)[0] == 0 ||
      !isStaticIntType(getType()))
    return {};
  SmallVector<int64_t> out;
  for (int64_t v = (*start)[0]; (*delta)[0] > 0 ? v < (*limit)[0]
                                                : v > (*limit)[0];
       v += (*delta)[0])
    out.push_back(v);
  if ((int64_t)out.size() != getType().getNumElements())
    return {};
  return intsAttr(getType(), out);
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  auto in = getInput().getType();
  if (in == getType() && in.hasStaticShape())
    return getInput();
  auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput());
  if (dense && dense.isSplat() && getType().hasStaticShape() &&
      getType().getNumElements() <= kMaxFoldElements)
    return DenseElementsAttr::get(getType(), dense.getSplatValue<Attribute>());
  return {};
}
