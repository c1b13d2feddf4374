//===- OnnxConverters.cpp - the ONNX op -> qcc op table -------------------===//
//
// One small converter per ONNX op, keyed by op type and by the op versions
// (ONNX schema since-versions) whose semantics it implements. Attributes that
// ONNX passes as inputs (axes, split sizes, ...) must be constants and become
// attributes here.
//
//===----------------------------------------------------------------------===//
#include "compiler/OnnxConverter.h"

#include "dialects/QccConstants.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <fmt/format.h>

using namespace mlir;
using namespace qcc;

using Results = FailureOr<SmallVector<Value>>;

//===----------------------------------------------------------------------===//
// ConvertContext
//===----------------------------------------------------------------------===//

const onnx::AttributeProto *ConvertContext::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t ConvertContext::intAttr(StringRef name, int64_t dflt) const {
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}

float ConvertContext::floatAttr(StringRef name, float dflt) const {
  const auto *a = attr(name);
  return a ? a->f() : dflt;
}

std::optional<std::vector<int64_t>>
ConvertContext::intsAttr(StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::optional<SmallVector<int64_t>> ConvertContext::constInts(size_t i) const {
  Value v = input(i);
  if (!v)
    return std::nullopt;
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast<DenseIntElementsAttr>(c.getValue());
  if (!dense)
    return std::nullopt;
  SmallVector<int64_t> out;
  for (const APInt &x : dense.getValues<APInt>())
    out.push_back(x.getSExtValue());
  return out;
}

Results ConvertContext::fail(const Twine &reason) {
  error = reason.str();
  return failure();
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

Type qcc::onnxElementType(MLIRContext *ctx, int32_t dataType) {
  Builder b(ctx);
  switch (dataType) {
  case onnx::TensorProto_DataType_FLOAT:
    return b.getF32Type();
  case onnx::TensorProto_DataType_FLOAT16:
    return b.getF16Type();
  case onnx::TensorProto_DataType_BFLOAT16:
    return b.getBF16Type();
  case onnx::TensorProto_DataType_INT64:
    return b.getI64Type();
  case onnx::TensorProto_DataType_INT32:
    return b.getI32Type();
  case onnx::TensorProto_DataType_INT8:
    return b.getI8Type();
  case onnx::TensorProto_DataType_BOOL:
    return b.getI1Type();
  default:
    return Type();
  }
}

FailureOr<ElementsAttr> qcc::tensorToElements(MLIRContext *ctx,
                                              const onnx::TensorProto &t,
                                              const std::string *external,
                                              std::string &error) {
  Type et = onnxElementType(ctx, t.data_type());
  if (!et) {
    error = fmt::format("unsupported element type {}", t.data_type());
    return failure();
  }
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  auto type = RankedTensorType::get(shape, et);
  int64_t n = type.getNumElements();
  size_t eb = et.isInteger(1) ? 1 : et.getIntOrFloatBitWidth() / 8;
  std::vector<char> bytes(n * eb);

  auto fromInts = [&](auto begin, int count) -> LogicalResult {
    if (count != n)
      return failure();
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = *(begin + i);
      if (et.isF16() || et.isBF16()) { // stored as raw uint16 bits
        uint16_t bits = (uint16_t)v;
        std::memcpy(&bytes[i * eb], &bits, 2);
      } else if (eb == 8) {
        std::memcpy(&bytes[i * eb], &v, 8);
      } else if (eb == 4) {
        int32_t x = (int32_t)v;
        std::memcpy(&bytes[i * eb], &x, 4);
      } else {
        bytes[i] = (char)(int8_t)v;
      }
    }
    return success();
  };

  const std::string *raw = external ? external
                           : t.has_raw_data() ? &t.raw_data()
                                              : nullptr;
  LogicalResult ok = success();
  if (raw) {
    if (raw->size() != bytes.size()) {
      error = fmt::format("holds {} bytes of data, but its type needs {}",
                          raw->size(), bytes.size());
      return failure();
    }
    std::memcpy(bytes.data(), raw->data(), bytes.size());
  } else if (et.isF32()) {
    if (t.float_data_size() != n)
      ok = failure();
    else
      std::memcpy(bytes.data(), t.float_data().data(), bytes.size());
  } else if (et.isInteger(64)) {
    ok = fromInts(t.int64_data().begin(), t.int64_data_size());
  } else {
    ok = fromInts(t.int32_data().begin(), t.int32_data_size());
  }
  if (failed(ok)) {
    error = fmt::format("its data does not hold the {} elements its shape "
                        "needs",
                        n);
    return failure();
  }
  return makeElements(type, bytes, t.name());
}

//===----------------------------------------------------------------------===//
// Converters
//===----------------------------------------------------------------------===//

static Results one(Value v) { return SmallVector<Value>{v}; }

template <typename OpT> static Results convertBinary(ConvertContext &c) {
  return one(c.create<OpT>(c.resultType(), c.input(0), c.input(1)));
}

template <typename OpT> static Results convertUnary(ConvertContext &c) {
  return one(c.create<OpT>(c.resultType(), c.input(0)));
}

static Results convertIdentity(ConvertContext &c) {
  if (c.node.output_size() > 1 && !c.node.output(1).empty())
    return c.fail("the mask output of Dropout is not supported");
  return one(c.input(0));
}

static Results convertWhere(ConvertContext &c) {
  return one(c.create<WhereOp>(c.resultType(), c.input(0), c.input(1),
                               c.input(2)));
}

static Results convertCast(ConvertContext &c) {
  return one(c.create<CastOp>(c.resultType(), c.input(0)));
}

static Results convertMatMul(ConvertContext &c) {
  return one(c.create<MatMulOp>(c.resultType(), c.input(0), c.input(1)));
}

static Results convertGemm(ConvertContext &c) {
  auto &b = c.builder;
  return one(c.create<GemmOp>(
      c.resultType(), c.input(0), c.input(1), c.input(2),
      b.getF32FloatAttr(c.floatAttr("alpha", 1.0f)),
      b.getF32FloatAttr(c.floatAttr("beta", 1.0f)),
      b.getBoolAttr(c.intAttr("transA", 0) != 0),
      b.getBoolAttr(c.intAttr("transB", 0) != 0)));
}

/// Reduce ops: axes from the attribute (opset 13 ReduceMean) or from a
/// constant second input (ReduceSum 13, ReduceMean 18).
template <typename OpT> static Results convertReduce(ConvertContext &c) {
  int64_t rank = cast<RankedTensorType>(c.input(0).getType()).getRank();
  std::vector<int64_t> axes;
  if (auto a = c.intsAttr("axes")) {
    axes = *a;
  } else if (c.input(1)) {
    auto v = c.constInts(1);
    if (!v)
      return c.fail("axes must be a constant");
    axes.assign(v->begin(), v->end());
  }
  if (axes.empty()) {
    if (c.intAttr("noop_with_empty_axes", 0))
      return one(c.input(0));
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  for (auto &a : axes)
    if (a < 0)
      a += rank;
  return one(c.create<OpT>(c.resultType(), c.input(0),
                           c.builder.getDenseI64ArrayAttr(axes),
                           c.builder.getBoolAttr(c.intAttr("keepdims", 1))));
}

static Results convertLayerNormalization(ConvertContext &c) {
  int64_t rank = cast<RankedTensorType>(c.input(0).getType()).getRank();
  int64_t axis = c.intAttr("axis", -1);
  if (axis != -1 && axis != rank - 1)
    return c.fail(fmt::format("axis = {} is not supported (qcc normalizes "
                              "over the last axis only, axis = -1)",
                              axis));
  for (int i = 1; i < c.node.output_size(); ++i)
    if (!c.node.output(i).empty())
      return c.fail("the Mean and InvStdDev outputs are not supported");
  return one(c.create<LayerNormOp>(
      c.resultType(), c.input(0), c.input(1), c.input(2),
      c.builder.getF32FloatAttr(c.floatAttr("epsilon", 1e-5f))));
}

static Results convertSoftmax(ConvertContext &c) {
  return one(c.create<SoftmaxOp>(c.resultType(), c.input(0),
                                 c.builder.getI64IntegerAttr(
                                     c.intAttr("axis", -1))));
}

static Results convertTranspose(ConvertContext &c) {
  int64_t rank = cast<RankedTensorType>(c.input(0).getType()).getRank();
  std::vector<int64_t> perm;
  if (auto p = c.intsAttr("perm"))
    perm = *p;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  return one(c.create<TransposeOp>(c.resultType(), c.input(0),
                                   c.builder.getDenseI64ArrayAttr(perm)));
}

static Results convertReshape(ConvertContext &c) {
  if (c.intAttr("allowzero", 0) != 0)
    return c.fail("allowzero = 1 is not supported");
  return one(c.create<ReshapeOp>(c.resultType(), c.input(0), c.input(1)));
}

static Results convertFlatten(ConvertContext &c) {
  return one(c.create<FlattenOp>(c.resultType(), c.input(0),
                                 c.builder.getI64IntegerAttr(
                                     c.intAttr("axis", 1))));
}

/// Squeeze and Unsqueeze take their axes as a constant input since opset 13.
template <typename OpT> static Results convertSqueezeLike(ConvertContext &c) {
  SmallVector<int64_t> axes;
  if (c.input(1)) {
    auto v = c.constInts(1);
    if (!v)
      return c.fail("axes must be a constant");
    axes = *v;
  } else if (std::is_same_v<OpT, SqueezeOp>) {
    auto in = cast<RankedTensorType>(c.input(0).getType());
    for (int64_t i = 0; i < in.getRank(); ++i) {
      if (in.isDynamicDim(i))
        return c.fail("Squeeze without axes needs static dimensions");
      if (in.getDimSize(i) == 1)
        axes.push_back(i);
    }
  } else {
    return c.fail("Unsqueeze needs axes");
  }
  int64_t rank = c.resultType().getRank();
  if (std::is_same_v<OpT, SqueezeOp>)
    rank = cast<RankedTensorType>(c.input(0).getType()).getRank();
  for (auto &a : axes)
    if (a < 0)
      a += rank;
  llvm::sort(axes);
  return one(c.create<OpT>(c.resultType(), c.input(0),
                           c.builder.getDenseI64ArrayAttr(axes)));
}

static Results convertConcat(ConvertContext &c) {
  SmallVector<Value> ins;
  for (Value v : c.inputs)
    if (v)
      ins.push_back(v);
  int64_t axis = c.intAttr("axis", 0);
  if (axis < 0)
    axis += c.resultType().getRank();
  return one(c.create<ConcatOp>(c.resultType(), ins,
                                c.builder.getI64IntegerAttr(axis)));
}

static Results convertSplit(ConvertContext &c) {
  auto in = cast<RankedTensorType>(c.input(0).getType());
  int64_t axis = c.intAttr("axis", 0);
  if (axis < 0)
    axis += in.getRank();
  SmallVector<int64_t> sizes;
  if (c.input(1)) {
    auto v = c.constInts(1);
    if (!v)
      return c.fail("split sizes must be a constant");
    sizes = *v;
  } else if (auto a = c.intsAttr("split")) {
    sizes.assign(a->begin(), a->end());
  } else {
    int64_t n = c.node.output_size(), dim = in.getDimSize(axis);
    if (dim == ShapedType::kDynamic)
      return c.fail("an equal split of a dynamic dimension is not supported");
    if (dim % n != 0 && c.intAttr("num_outputs", 0) == 0)
      return c.fail("the dimension does not split evenly");
    int64_t part = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::min(part, dim - i * part));
  }
  SmallVector<Type> types(c.resultTypes.begin(), c.resultTypes.end());
  auto op = c.builder.create<SplitOp>(c.loc, types, c.input(0),
                                      c.builder.getI64IntegerAttr(axis),
                                      c.builder.getDenseI64ArrayAttr(sizes));
  return SmallVector<Value>(op.getResults());
}

static Results convertSlice(ConvertContext &c) {
  int64_t rank = cast<RankedTensorType>(c.input(0).getType()).getRank();
  int64_t n = cast<RankedTensorType>(c.input(1).getType()).getDimSize(0);
  SmallVector<int64_t> axes, steps;
  if (c.input(3)) {
    auto v = c.constInts(3);
    if (!v)
      return c.fail("axes must be a constant");
    axes = *v;
  } else {
    if (n == ShapedType::kDynamic)
      return c.fail("starts must have a static length");
    for (int64_t i = 0; i < n; ++i)
      axes.push_back(i);
  }
  for (auto &a : axes)
    if (a < 0)
      a += rank;
  if (c.input(4)) {
    auto v = c.constInts(4);
    if (!v)
      return c.fail("steps must be a constant");
    steps = *v;
  } else {
    steps.assign(axes.size(), 1);
  }
  Value starts = c.input(1), ends = c.input(2);
  // Starts and ends may be int32: shape arithmetic works in int64.
  auto i64Vec = [&](Value v) -> Value {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getElementType().isInteger(64))
      return v;
    return c.create<CastOp>(
        RankedTensorType::get(t.getShape(), c.builder.getI64Type()), v);
  };
  return one(c.create<SliceOp>(c.resultType(), c.input(0), i64Vec(starts),
                               i64Vec(ends),
                               c.builder.getDenseI64ArrayAttr(axes),
                               c.builder.getDenseI64ArrayAttr(steps)));
}

static Results convertGather(ConvertContext &c) {
  int64_t rank = cast<RankedTensorType>(c.input(0).getType()).getRank();
  int64_t axis = c.intAttr("axis", 0);
  if (axis < 0)
    axis += rank;
  return one(c.create<GatherOp>(c.resultType(), c.input(0), c.input(1),
                                c.builder.getI64IntegerAttr(axis)));
}

static Results convertShape(ConvertContext &c) {
  IntegerAttr end;
  if (const auto *a = c.attr("end"))
    end = c.builder.getI64IntegerAttr(a->i());
  return one(c.create<ShapeOp>(c.resultType(), c.input(0),
                               c.builder.getI64IntegerAttr(
                                   c.intAttr("start", 0)),
                               end));
}

static Results convertConstant(ConvertContext &c) {
  MLIRContext *ctx = c.builder.getContext();
  auto type = c.resultType();
  if (const auto *a = c.attr("value")) {
    std::string error;
    auto attr = tensorToElements(ctx, a->t(), nullptr, error);
    if (failed(attr))
      return c.fail(error);
    return one(c.create<ConstantOp>(*attr));
  }
  if (const auto *a = c.attr("value_float"))
    return one(c.create<ConstantOp>(DenseElementsAttr::get(type, a->f())));
  if (const auto *a = c.attr("value_int"))
    return one(c.create<ConstantOp>(
        DenseElementsAttr::get(type, (int64_t)a->i())));
  if (const auto *a = c.attr("value_floats"))
    return one(c.create<ConstantOp>(DenseElementsAttr::get(
        type, ArrayRef<float>(a->floats().data(), a->floats_size()))));
  if (const auto *a = c.attr("value_ints"))
    return one(c.create<ConstantOp>(DenseElementsAttr::get(
        type, ArrayRef<int64_t>(a->ints().data(), a->ints_size()))));
  return c.fail("only tensor, float(s) and int(s) constants are supported");
}

static Results convertConstantOfShape(ConvertContext &c) {
  auto et = c.resultType().getElementType();
  auto one1 = RankedTensorType::get({1}, et);
  ElementsAttr value;
  if (const auto *a = c.attr("value")) {
    std::string error;
    auto attr = tensorToElements(c.builder.getContext(), a->t(), nullptr,
                                 error);
    if (failed(attr))
      return c.fail(error);
    value = *attr;
  } else {
    value = DenseElementsAttr::get(one1, 0.0f);
  }
  return one(c.create<ConstantOfShapeOp>(c.resultType(), c.input(0), value));
}

static Results convertRange(ConvertContext &c) {
  return one(c.create<RangeOp>(c.resultType(), c.input(0), c.input(1),
                               c.input(2)));
}

static Results convertExpand(ConvertContext &c) {
  return one(c.create<ExpandOp>(c.resultType(), c.input(0), c.input(1)));
}

static Results convertTrilu(ConvertContext &c) {
  int64_t k = 0;
  if (c.input(1)) {
    auto v = c.constInts(1);
    if (!v || v->size() != 1)
      return c.fail("k must be a constant scalar");
    k = (*v)[0];
  }
  return one(c.create<TriluOp>(c.resultType(), c.input(0),
                               c.builder.getBoolAttr(c.intAttr("upper", 1)),
                               c.builder.getI64IntegerAttr(k)));
}

const std::vector<OnnxConverter> &qcc::onnxConverters() {
  static const std::vector<OnnxConverter> table = {
      {"Add", {7, 13, 14}, convertBinary<AddOp>},
      {"Sub", {7, 13, 14}, convertBinary<SubOp>},
      {"Mul", {7, 13, 14}, convertBinary<MulOp>},
      {"Div", {7, 13, 14}, convertBinary<DivOp>},
      {"Pow", {13, 15}, convertBinary<PowOp>},
      {"Equal", {13}, convertBinary<EqualOp>},
      {"Where", {9, 16}, convertWhere},
      {"Sqrt", {13}, convertUnary<SqrtOp>},
      {"Reciprocal", {13}, convertUnary<ReciprocalOp>},
      {"Erf", {13}, convertUnary<ErfOp>},
      {"Tanh", {13}, convertUnary<TanhOp>},
      {"Sigmoid", {13}, convertUnary<SigmoidOp>},
      {"Exp", {13}, convertUnary<ExpOp>},
      {"Cos", {7}, convertUnary<CosOp>},
      {"Sin", {7}, convertUnary<SinOp>},
      {"Relu", {13, 14}, convertUnary<ReluOp>},
      {"Neg", {13}, convertUnary<NegOp>},
      {"Not", {1}, convertUnary<NotOp>},
      {"Cast", {13}, convertCast},
      {"MatMul", {13}, convertMatMul},
      {"Gemm", {13}, convertGemm},
      {"ReduceMean", {13, 18}, convertReduce<ReduceMeanOp>},
      {"ReduceSum", {13}, convertReduce<ReduceSumOp>},
      {"LayerNormalization", {17}, convertLayerNormalization},
      {"Softmax", {13}, convertSoftmax},
      {"Transpose", {13}, convertTranspose},
      {"Reshape", {13, 14}, convertReshape},
      {"Flatten", {13}, convertFlatten},
      {"Squeeze", {13}, convertSqueezeLike<SqueezeOp>},
      {"Unsqueeze", {13}, convertSqueezeLike<UnsqueezeOp>},
      {"Concat", {13}, convertConcat},
      {"Split", {13, 18}, convertSplit},
      {"Slice", {13}, convertSlice},
      {"Gather", {13}, convertGather},
      {"Shape", {13, 15}, convertShape},
      {"Constant", {13}, convertConstant},
      {"ConstantOfShape", {9}, convertConstantOfShape},
      {"Range", {11}, convertRange},
      {"Expand", {13}, convertExpand},
      {"Trilu", {14}, convertTrilu},
      {"Identity", {13, 14, 16}, convertIdentity},
      {"Dropout", {13}, convertIdentity},
  };
  return table;
}
