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
#include "format/Checked.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"

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
  assert(attributeType(name) == onnx::AttributeProto::INT);
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}

float ConvertContext::floatAttr(StringRef name, float dflt) const {
  assert(attributeType(name) == onnx::AttributeProto::FLOAT);
  const auto *a = attr(name);
  return a ? a->f() : dflt;
}

std::optional<std::vector<int64_t>>
ConvertContext::intsAttr(StringRef name) const {
  assert(attributeType(name) == onnx::AttributeProto::INTS);
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::string ConvertContext::describeConflict(size_t i,
                                             RankedTensorType declared,
                                             RankedTensorType computed) const {
  auto shape = [](RankedTensorType t) {
    std::vector<std::string> dims;
    for (int64_t d : t.getShape())
      dims.push_back(ShapedType::isDynamic(d) ? "?" : std::to_string(d));
    return fmt::format("[{}]", llvm::join(dims, ", "));
  };
  std::string name = (int)i < node.output_size() ? node.output(i) : "?";
  return fmt::format("output '{}' is declared {}, but the node computes {}",
                     name, shape(declared), shape(computed));
}

onnx::AttributeProto::AttributeType qcc::attributeType(StringRef name) {
  using A = onnx::AttributeProto;
  static const llvm::StringMap<A::AttributeType> types = [] {
    llvm::StringMap<A::AttributeType> m;
    for (const char *n :
         {"K", "N", "allowzero", "axis", "batch_dims", "bits", "block_size",
          "causal", "do_rotary", "end", "exclusive", "interleaved",
          "is_packed_batching", "keepdims", "kv_num_heads", "largest",
          "local_window_size", "noop_with_empty_axes", "num_heads",
          "qk_output", "reverse",
          "rotary_embedding_dim", "rotary_interleaved",
          "sliding_window_cache", "smooth_softmax", "start", "stash_type",
          "to", "transA", "transB", "upper", "weight_prepacked"})
      m[n] = A::INT;
    for (const char *n : {"alpha", "beta", "epsilon", "scale", "softcap",
                          "value_float"})
      m[n] = A::FLOAT;
    for (const char *n : {"axes", "perm", "split", "value_ints"})
      m[n] = A::INTS;
    m["value_floats"] = A::FLOATS;
    m["value_int"] = A::INT;
    m["value"] = A::TENSOR;
    for (const char *n : {"approximate", "equation", "reduction",
                          "k_quant_type", "v_quant_type"})
      m[n] = A::STRING;
    return m;
  }();
  return types.lookup(name);
}

/// One list of a node (inputs or outputs) against its arity letters.
static std::string checkList(
    const google::protobuf::RepeatedPtrField<std::string> &names,
    StringRef spec, StringRef what) {
  bool variadic = spec.ends_with("*");
  StringRef fixed = variadic ? spec.drop_back() : spec;
  size_t least = fixed.rfind('r') == StringRef::npos ? 0 : fixed.rfind('r') + 1;
  if (variadic && fixed.back() == 'r')
    least = fixed.size();
  size_t n = names.size();
  if (n < least || (!variadic && n > fixed.size())) {
    std::string count =
        variadic ? fmt::format("at least {}", least)
        : least == fixed.size()
            ? std::to_string(least)
            : fmt::format("{} to {}", least, fixed.size());
    return fmt::format("takes {} {}{}, not {}", count, what.str(),
                       count == "1" ? "" : "s", n);
  }
  for (size_t i = 0; i < n; ++i) {
    char letter = i < fixed.size() ? fixed[i] : fixed.back();
    if (letter == 'r' && names[i].empty())
      return fmt::format("{} {} may not be omitted", what.str(), i);
  }
  return "";
}

std::string qcc::checkArity(const onnx::NodeProto &node, const Arity &arity) {
  std::string why = checkList(node.input(), arity.inputs, "input");
  if (why.empty())
    why = checkList(node.output(), arity.outputs, "output");
  return why;
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

std::string qcc::onnxTypeName(int32_t dataType) {
  if (onnx::TensorProto_DataType_IsValid(dataType))
    return onnx::TensorProto_DataType_Name(
        static_cast<onnx::TensorProto_DataType>(dataType));
  return std::to_string(dataType);
}

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
    error = "unsupported element type " + onnxTypeName(t.data_type());
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
    if (!bytes.empty()) // an empty tensor's buffers may be null: memcpy's UB
      std::memcpy(bytes.data(), raw->data(), bytes.size());
  } else if (et.isF32()) {
    if (t.float_data_size() != n)
      ok = failure();
    else if (!bytes.empty())
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

static constexpr int64_t kDyn = ShapedType::kDynamic;
/// Static sizes beyond this are left dynamic in products (no overflow); the
/// importer refuses results of more than kMaxElements elements anyway.
static constexpr int64_t kMaxStatic = int64_t(1) << 40;

static RankedTensorType typeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}
static ArrayRef<int64_t> shapeOf(Value v) { return typeOf(v).getShape(); }
static Type elementOf(Value v) { return typeOf(v).getElementType(); }

/// The sizes a shape vector holds where they are constants, dynamic elsewhere;
/// std::nullopt if even its length is unknown.
static std::optional<SmallVector<int64_t>> sizesOf(Value vec) {
  auto exprs = getDimExprs(vec);
  if (exprs.empty() && typeOf(vec).getNumElements() != 0)
    return std::nullopt;
  SmallVector<int64_t> out;
  for (const DimExpr &e : exprs)
    out.push_back(e.isConstant() ? e.constant : kDyn);
  return out;
}

/// `axis` (negative: from the end) as an index in [0, rank), or failure
/// recorded in `c`. Flatten's axis may also be `rank` (`inclusive`).
static FailureOr<int64_t> normalizeAxis(ConvertContext &c, int64_t axis,
                                        int64_t rank, bool inclusive = false) {
  int64_t hi = inclusive ? rank : rank - 1;
  if (axis < -rank || axis > hi) {
    (void)c.fail(fmt::format("axis {} is out of range for rank {}", axis,
                             rank));
    return failure();
  }
  return axis < 0 ? axis + rank : axis;
}

/// normalizeAxis over a list that must name distinct axes.
static FailureOr<SmallVector<int64_t>>
normalizeAxes(ConvertContext &c, ArrayRef<int64_t> axes, int64_t rank) {
  SmallVector<int64_t> out;
  for (int64_t a : axes) {
    auto n = normalizeAxis(c, a, rank);
    if (failed(n))
      return failure();
    if (llvm::is_contained(out, *n)) {
      (void)c.fail(fmt::format("axis {} is given twice", a));
      return failure();
    }
    out.push_back(*n);
  }
  return out;
}

/// Fails unless input `i` has a rank in [lo, hi].
static LogicalResult requireRank(ConvertContext &c, size_t i, int64_t lo,
                                 int64_t hi, StringRef what) {
  int64_t rank = typeOf(c.input(i)).getRank();
  if (rank >= lo && rank <= hi)
    return success();
  (void)c.fail(lo == hi ? fmt::format("{} must have rank {}, not {}",
                                      what.str(), lo, rank)
                        : fmt::format("{} must have rank {} or more, not {}",
                                      what.str(), lo, rank));
  return failure();
}

static SmallVector<int64_t> broadcastOrDynamic(ArrayRef<int64_t> a,
                                               ArrayRef<int64_t> b) {
  auto r = broadcastShapes(a, b);
  if (succeeded(r))
    return *r;
  return SmallVector<int64_t>(std::max(a.size(), b.size()), kDyn);
}

template <typename OpT> static Results convertBinary(ConvertContext &c) {
  if (std::is_same_v<OpT, PowOp> && !isa<FloatType>(elementOf(c.input(0))))
    return c.fail("an integer base is not supported");
  constexpr bool compare =
      llvm::is_one_of<OpT, EqualOp, LessOp, LessEqualOp, GreaterOp,
                      GreaterEqualOp>::value;
  Type et = compare ? c.builder.getI1Type() : elementOf(c.input(0));
  auto type = c.resultType(
      0, broadcastOrDynamic(shapeOf(c.input(0)), shapeOf(c.input(1))), et);
  return one(c.create<OpT>(type, c.input(0), c.input(1)));
}

/// Variadic Max / Min: a left-to-right chain of the binary op.
template <typename OpT> static Results convertVariadic(ConvertContext &c) {
  Value acc;
  for (Value v : c.inputs) {
    if (!v)
      continue;
    if (!acc) {
      acc = v;
      continue;
    }
    auto shape = broadcastOrDynamic(shapeOf(acc), shapeOf(v));
    acc = c.create<OpT>(RankedTensorType::get(shape, elementOf(acc)), acc, v);
  }
  if (!acc)
    return c.fail("needs at least one input");
  if (acc.getType() != c.resultType(0, shapeOf(acc), elementOf(acc)))
    acc.setType(c.resultType(0, shapeOf(acc), elementOf(acc)));
  return one(acc);
}

/// Clip(x, lo, hi) = Min(Max(x, lo), hi); an omitted bound does nothing.
static Results convertClip(ConvertContext &c) {
  Value x = c.input(0);
  auto type = c.resultLike(0, x);
  if (Value lo = c.input(1))
    x = c.create<MaxOp>(type, x, lo);
  if (Value hi = c.input(2))
    x = c.create<MinOp>(type, x, hi);
  return one(x);
}

static Results convertIsNaN(ConvertContext &c) {
  return one(c.create<IsNaNOp>(
      c.resultType(0, shapeOf(c.input(0)), c.builder.getI1Type()),
      c.input(0)));
}

static Results convertCumSum(ConvertContext &c) {
  auto axis = c.constInts(1);
  if (!axis || axis->size() != 1)
    return c.fail("a non-constant axis is not supported");
  int64_t rank = shapeOf(c.input(0)).size();
  int64_t a = (*axis)[0];
  if (a < -rank || a >= rank)
    return c.fail(fmt::format("axis {} is out of range for rank {}", a, rank));
  auto &b = c.builder;
  return one(c.create<CumSumOp>(
      c.resultLike(0, c.input(0)), c.input(0),
      b.getI64IntegerAttr(a < 0 ? a + rank : a),
      b.getBoolAttr(c.intAttr("exclusive", 0) != 0),
      b.getBoolAttr(c.intAttr("reverse", 0) != 0)));
}

static Results convertGatherElements(ConvertContext &c) {
  int64_t rank = shapeOf(c.input(0)).size();
  int64_t axis = c.intAttr("axis", 0);
  if (axis < -rank || axis >= rank)
    return c.fail(fmt::format("axis {} is out of range for rank {}", axis,
                              rank));
  if ((int64_t)shapeOf(c.input(1)).size() != rank)
    return c.fail("indices must have the input's rank");
  return one(c.create<GatherElementsOp>(
      c.resultType(0, shapeOf(c.input(1)), elementOf(c.input(0))), c.input(0),
      c.input(1), c.builder.getI64IntegerAttr(axis < 0 ? axis + rank : axis)));
}

/// Gelu (opset 20) is qcc.gelu directly, in either form.
static Results convertGelu(ConvertContext &c) {
  const auto *a = c.attr("approximate");
  std::string approximate = a ? a->s() : "none";
  if (approximate != "none" && approximate != "tanh")
    return c.fail("approximate = '" + approximate +
                  "' is not supported (none or tanh)");
  return one(c.create<GeluOp>(c.resultLike(0, c.input(0)), c.input(0),
                              c.builder.getStringAttr(approximate)));
}

/// The scatter ops' `reduction` (add and mul since version 16, max and min
/// since 18), or failure recorded in `c`.
static FailureOr<std::string> scatterReduction(ConvertContext &c) {
  const auto *red = c.attr("reduction");
  std::string reduction = red ? red->s() : "none";
  if (llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction))
    return reduction;
  (void)c.fail("reduction = '" + reduction +
               "' is not supported (none, add, mul, max or min)");
  return failure();
}

static Results convertScatterND(ConvertContext &c) {
  auto reduction = scatterReduction(c);
  if (failed(reduction))
    return failure();
  auto in = shapeOf(c.input(0)), idx = shapeOf(c.input(1)),
       up = shapeOf(c.input(2));
  if (idx.empty() || idx.back() == kDyn || idx.back() > (int64_t)in.size())
    return c.fail("the index tuple length (last dimension of indices) must "
                  "be static and at most the data's rank");
  if ((int64_t)up.size() != (int64_t)idx.size() - 1 + (int64_t)in.size() -
                                idx.back())
    return c.fail("updates have the wrong rank");
  return one(c.create<ScatterNdOp>(c.resultLike(0, c.input(0)), c.input(0),
                                   c.input(1), c.input(2),
                                   c.builder.getStringAttr(*reduction)));
}

static Results convertScatterElements(ConvertContext &c) {
  auto reduction = scatterReduction(c);
  if (failed(reduction))
    return failure();
  auto in = typeOf(c.input(0)), idx = typeOf(c.input(1)),
       up = typeOf(c.input(2));
  int64_t rank = in.getRank();
  if (rank < 1 || idx.getRank() != rank || up.getRank() != rank)
    return c.fail("data, indices and updates must have one rank >= 1");
  if (!isa<IntegerType>(idx.getElementType()) ||
      idx.getElementType().isInteger(1))
    return c.fail("indices must be integers");
  if (up.getElementType() != in.getElementType())
    return c.fail("updates must have the data's element type");
  auto normalized = normalizeAxis(c, c.intAttr("axis", 0), rank);
  if (failed(normalized))
    return failure();
  for (int64_t d = 0; d < rank; ++d) {
    int64_t i = idx.getDimSize(d), u = up.getDimSize(d), n = in.getDimSize(d);
    if (i != kDyn && u != kDyn && i != u)
      return c.fail("updates must have the shape of the indices");
    if (d != *normalized && i != kDyn && n != kDyn && i > n)
      return c.fail(fmt::format("indices dimension {} ({}) exceeds the "
                                "data's ({})",
                                d, i, n));
  }
  return one(c.create<ScatterElementsOp>(
      c.resultLike(0, c.input(0)), c.input(0), c.input(1), c.input(2),
      c.builder.getI64IntegerAttr(*normalized),
      c.builder.getStringAttr(*reduction)));
}

/// The one element of a constant (a scalar or a one-element tensor), an
/// integer or a float truncated toward zero; nullopt where it is not a
/// constant or not finite.
static std::optional<int64_t> constantScalar(Value v) {
  auto c = v ? v.getDefiningOp<ConstantOp>() : ConstantOp();
  auto dense =
      c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  if (!dense || dense.getNumElements() != 1)
    return std::nullopt;
  if (isa<IntegerType>(dense.getElementType()))
    return (*dense.getValues<APInt>().begin()).getSExtValue();
  double f = (*dense.getValues<APFloat>().begin()).convertToDouble();
  if (!(f >= -0x1p63 && f < 0x1p63))
    return std::nullopt;
  return (int64_t)f;
}

/// Tile: repeats may be known only at run time; each result size is known
/// where its input size and its repeat are.
static Results convertTile(ConvertContext &c) {
  if (failed(requireRank(c, 1, 1, 1, "repeats")))
    return failure();
  if (!elementOf(c.input(1)).isInteger(64))
    return c.fail("repeats must be int64");
  auto in = typeOf(c.input(0));
  int64_t rank = in.getRank(), n = shapeOf(c.input(1))[0];
  if (n != kDyn && n != rank)
    return c.fail(fmt::format("repeats has {} elements for an input of rank "
                              "{}",
                              n, rank));
  auto repeats = sizesOf(c.input(1));
  SmallVector<int64_t> shape(rank, kDyn);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t r = repeats && (size_t)d < repeats->size() ? (*repeats)[d] : kDyn;
    if (r != kDyn && r < 0)
      return c.fail(fmt::format("repeats[{}] = {} is negative", d, r));
    if (r == kDyn || in.isDynamicDim(d))
      continue;
    auto size = format::checkedMul(in.getDimSize(d), r);
    if (!size || *size > kMaxStatic)
      return c.fail(fmt::format("dimension {} ({}) repeated {} times is too "
                                "large",
                                d, in.getDimSize(d), r));
    shape[d] = *size;
  }
  return one(c.create<TileOp>(c.resultType(0, shape, in.getElementType()),
                              c.input(0), c.input(1)));
}

/// TopK (11, 24): k is an input, a constant in the exports (the router's
/// experts per token); the size along the axis is known where it is.
static Results convertTopK(ConvertContext &c) {
  if (failed(requireRank(c, 0, 1, INT64_MAX, "X")) ||
      failed(requireRank(c, 1, 1, 1, "K")))
    return failure();
  auto in = typeOf(c.input(0));
  if (in.getElementType().isInteger(1))
    return c.fail("a bool input is not supported");
  int64_t kLength = shapeOf(c.input(1))[0];
  if (!elementOf(c.input(1)).isInteger(64) || (kLength != kDyn && kLength != 1))
    return c.fail("K must be a one-element int64 vector");
  auto normalized = normalizeAxis(c, c.intAttr("axis", -1), in.getRank());
  if (failed(normalized))
    return failure();
  int64_t axis = *normalized, dim = in.getDimSize(axis);
  SmallVector<int64_t> shape(in.getShape());
  shape[axis] = kDyn;
  if (auto k = constantScalar(c.input(1))) {
    if (*k < 0 || (dim != kDyn && *k > dim))
      return c.fail(fmt::format("K = {} is out of range for axis {} of size "
                                "{}",
                                *k, axis,
                                dim == kDyn ? "?" : std::to_string(dim)));
    shape[axis] = *k;
  }
  auto op = TopKOp::create(
      c.builder, c.loc, c.resultType(0, shape, in.getElementType()),
      c.resultType(1, shape, c.builder.getI64Type()), c.input(0), c.input(1),
      c.builder.getI64IntegerAttr(axis),
      c.builder.getBoolAttr(c.intAttr("largest", 1) != 0));
  // sorted = 0 leaves the order to the implementation: sorted is one.
  return SmallVector<Value>{op.getValues(), op.getIndices()};
}

/// OneHot (11): the new dimension is depth's value where it is a constant.
static Results convertOneHot(ConvertContext &c) {
  auto idx = typeOf(c.input(0)), depth = typeOf(c.input(1)),
       values = typeOf(c.input(2));
  if (idx.getElementType().isInteger(1) || depth.getElementType().isInteger(1))
    return c.fail("indices and depth must be numbers, not bool");
  if (depth.getRank() > 1 ||
      (depth.getRank() == 1 && depth.getDimSize(0) != kDyn &&
       depth.getDimSize(0) != 1))
    return c.fail("depth must be a scalar or hold one element");
  if (values.getRank() != 1 ||
      (values.getDimSize(0) != kDyn && values.getDimSize(0) != 2))
    return c.fail("values must be a pair [off_value, on_value]");
  int64_t rank = idx.getRank();
  auto normalized = normalizeAxis(c, c.intAttr("axis", -1), rank + 1);
  if (failed(normalized))
    return failure();
  int64_t d = kDyn;
  if (auto v = constantScalar(c.input(1))) {
    if (*v < 1 || *v > kMaxStatic)
      return c.fail(fmt::format("depth {} is {}", *v,
                                *v < 1 ? "not positive" : "too large"));
    d = *v;
  }
  SmallVector<int64_t> shape(idx.getShape());
  shape.insert(shape.begin() + *normalized, d);
  return one(c.create<OneHotOp>(c.resultType(0, shape, values.getElementType()),
                                c.input(0), c.input(1), c.input(2),
                                c.builder.getI64IntegerAttr(*normalized)));
}

/// NonZero: [rank, n] with n known only at run time.
static Results convertNonZero(ConvertContext &c) {
  int64_t rows = std::max<int64_t>(typeOf(c.input(0)).getRank(), 1);
  return one(c.create<NonZeroOp>(
      c.resultType(0, {rows, kDyn}, c.builder.getI64Type()), c.input(0)));
}

static Results convertGatherND(ConvertContext &c) {
  auto in = shapeOf(c.input(0)), idx = shapeOf(c.input(1));
  int64_t b = c.intAttr("batch_dims", 0);
  if (idx.empty() || idx.back() == kDyn)
    return c.fail("the index tuple length (last dimension of indices) must "
                  "be static");
  int64_t r = idx.back();
  if (b < 0 || b >= (int64_t)idx.size() || b + r > (int64_t)in.size())
    return c.fail(fmt::format("batch_dims {} with index tuples of length {} "
                              "do not fit an input of rank {}",
                              b, r, in.size()));
  SmallVector<int64_t> shape(idx.drop_back());
  llvm::append_range(shape, in.drop_front(b + r));
  return one(c.create<GatherNdOp>(
      c.resultType(0, shape, elementOf(c.input(0))), c.input(0), c.input(1),
      c.builder.getI64IntegerAttr(b)));
}

template <typename OpT> static Results convertUnary(ConvertContext &c) {
  return one(c.create<OpT>(c.resultLike(0, c.input(0)), c.input(0)));
}

static Results convertIdentity(ConvertContext &c) {
  return one(c.input(0));
}

/// Dropout at inference is the identity; training mode is not supported.
static Results convertDropout(ConvertContext &c) {
  if (c.node.output_size() > 1 && !c.node.output(1).empty())
    return c.fail("the mask output of Dropout is not supported");
  if (c.input(2)) {
    auto mode = c.constInts(2);
    if (!mode || mode->size() != 1 || (*mode)[0] != 0)
      return c.fail("training_mode is not supported (only a constant false)");
  }
  return one(c.input(0));
}

static Results convertWhere(ConvertContext &c) {
  auto shape = broadcastOrDynamic(
      broadcastOrDynamic(shapeOf(c.input(0)), shapeOf(c.input(1))),
      shapeOf(c.input(2)));
  return one(c.create<WhereOp>(c.resultType(0, shape, elementOf(c.input(1))),
                               c.input(0), c.input(1), c.input(2)));
}

static Results convertCast(ConvertContext &c) {
  Type et = onnxElementType(c.builder.getContext(), c.intAttr("to", 0));
  if (!et)
    return c.fail(fmt::format("cast to element type {} is not supported",
                              c.intAttr("to", 0)));
  return one(c.create<CastOp>(c.resultType(0, shapeOf(c.input(0)), et),
                              c.input(0)));
}

static Results convertMatMul(ConvertContext &c) {
  if (failed(requireRank(c, 0, 1, INT64_MAX, "A")) ||
      failed(requireRank(c, 1, 1, INT64_MAX, "B")))
    return failure();
  auto a = shapeOf(c.input(0)), b = shapeOf(c.input(1));
  SmallVector<int64_t> shape;
  if (a.size() >= 2 && b.size() >= 2) {
    shape = broadcastOrDynamic(a.drop_back(2), b.drop_back(2));
    shape.push_back(a[a.size() - 2]);
    shape.push_back(b.back());
  } else if (a.size() >= 2 && b.size() == 1) {
    shape.assign(a.begin(), a.end() - 1);
  } else if (a.size() == 1 && b.size() >= 2) {
    shape.assign(b.begin(), b.end() - 2);
    shape.push_back(b.back());
  }
  return one(c.create<MatMulOp>(c.resultType(0, shape, elementOf(c.input(0))),
                                c.input(0), c.input(1)));
}

static Results convertGemm(ConvertContext &c) {
  auto &b = c.builder;
  bool ta = c.intAttr("transA", 0) != 0, tb = c.intAttr("transB", 0) != 0;
  auto as = shapeOf(c.input(0)), bs = shapeOf(c.input(1));
  if (as.size() != 2 || bs.size() != 2)
    return c.fail("A and B must be matrices");
  SmallVector<int64_t> shape = {ta ? as[1] : as[0], tb ? bs[0] : bs[1]};
  return one(c.create<GemmOp>(
      c.resultType(0, shape, elementOf(c.input(0))), c.input(0), c.input(1),
      c.input(2), b.getF32FloatAttr(c.floatAttr("alpha", 1.0f)),
      b.getF32FloatAttr(c.floatAttr("beta", 1.0f)), b.getBoolAttr(ta),
      b.getBoolAttr(tb)));
}

/// Reduce ops: axes from the attribute (opset 13 ReduceMean) or from a
/// constant second input (ReduceSum 13, ReduceMean 18).
template <typename OpT> static Results convertReduce(ConvertContext &c) {
  auto in = shapeOf(c.input(0));
  int64_t rank = in.size();
  std::vector<int64_t> axes;
  if (auto a = c.intsAttr("axes")) {
    axes = *a;
  } else if (c.input(1)) {
    auto v = c.constInts(1);
    if (!v)
      return c.fail("non-constant axes are not supported");
    axes.assign(v->begin(), v->end());
  }
  if (axes.empty()) {
    if (c.intAttr("noop_with_empty_axes", 0))
      return one(c.input(0));
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  auto normalized = normalizeAxes(c, axes, rank);
  if (failed(normalized))
    return failure();
  axes.assign(normalized->begin(), normalized->end());
  bool keep = c.intAttr("keepdims", 1) != 0;
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (!llvm::is_contained(axes, i))
      shape.push_back(in[i]);
    else if (keep)
      shape.push_back(1);
  }
  // Integer sums (mask lengths) and maxima (repeat_interleave's largest
  // count) are exact in int64; no integer mean.
  Type et = elementOf(c.input(0));
  bool intMax = std::is_same_v<OpT, ReduceMaxOp> &&
                (et.isInteger(64) || et.isInteger(32));
  if (et.isInteger(1) ||
      (!std::is_same_v<OpT, ReduceSumOp> && !isa<FloatType>(et) && !intMax))
    return c.fail("an input of element type " +
                  std::string(et.isInteger(1) ? "bool" : "integer") +
                  " is not supported");
  return one(c.create<OpT>(c.resultType(0, shape, elementOf(c.input(0))),
                           c.input(0), c.builder.getDenseI64ArrayAttr(axes),
                           c.builder.getBoolAttr(keep)));
}

static Results convertLayerNormalization(ConvertContext &c) {
  if (failed(requireRank(c, 0, 1, INT64_MAX, "X")))
    return failure();
  int64_t rank = shapeOf(c.input(0)).size();
  int64_t axis = c.intAttr("axis", -1);
  if (axis != -1 && axis != rank - 1)
    return c.fail(fmt::format("axis = {} is not supported (qcc normalizes "
                              "over the last axis only, axis = -1)",
                              axis));
  for (int i = 1; i < c.node.output_size(); ++i)
    if (!c.node.output(i).empty())
      return c.fail("the Mean and InvStdDev outputs are not supported");
  return one(c.create<LayerNormOp>(
      c.resultLike(0, c.input(0)), c.input(0), c.input(1), c.input(2),
      c.builder.getF32FloatAttr(c.floatAttr("epsilon", 1e-5f))));
}

static Results convertSoftmax(ConvertContext &c) {
  if (failed(requireRank(c, 0, 1, INT64_MAX, "the input")) ||
      failed(normalizeAxis(c, c.intAttr("axis", -1), typeOf(c.input(0)).getRank())))
    return failure();
  return one(c.create<SoftmaxOp>(
      c.resultLike(0, c.input(0)), c.input(0),
      c.builder.getI64IntegerAttr(c.intAttr("axis", -1))));
}

static Results convertTranspose(ConvertContext &c) {
  auto in = shapeOf(c.input(0));
  std::vector<int64_t> perm;
  if (auto p = c.intsAttr("perm"))
    perm = *p;
  else
    for (int64_t i = in.size() - 1; i >= 0; --i)
      perm.push_back(i);
  SmallVector<int64_t> shape;
  for (auto [i, p] : llvm::enumerate(perm)) {
    if (p < 0 || p >= (int64_t)in.size() || perm.size() != in.size() ||
        llvm::is_contained(ArrayRef(perm).take_front(i), p))
      return c.fail("perm is not a permutation of the input's dimensions");
    shape.push_back(in[p]);
  }
  return one(c.create<TransposeOp>(
      c.resultType(0, shape, elementOf(c.input(0))), c.input(0),
      c.builder.getDenseI64ArrayAttr(perm)));
}

/// The size a Reshape's -1 stands for when dynamic dimensions of the input
/// reappear in the target (as Shape(x)[i] of an equal dimension, or 0 =
/// copy): they cancel, and -1 is the quotient of the static rest, e.g.
/// [B, S, 64] -> [B, S, -1, 16] gives 4. kDyn when that does not work out.
static int64_t inferSymbolically(Value input, Value shapeVector,
                                 int64_t inferred) {
  auto in = typeOf(input);
  auto target = getDimExprs(shapeVector);
  SmallVector<bool> matched(target.size(), false);
  int64_t inStatic = 1, targetStatic = 1;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (!in.isDynamicDim(i)) {
      inStatic *= in.getDimSize(i);
      continue;
    }
    DimExpr d = getDimExpr(input, i);
    bool found = false;
    for (auto [j, t] : llvm::enumerate(target)) {
      if ((int64_t)j == inferred || matched[j])
        continue;
      bool copy = t.isConstant() && t.constant == 0 && (int64_t)j == i;
      if (copy || (d.isKnown() && t == d)) {
        matched[j] = found = true;
        break;
      }
    }
    if (!found)
      return kDyn;
  }
  for (auto [j, t] : llvm::enumerate(target)) {
    if ((int64_t)j == inferred || matched[j])
      continue;
    if (t.isConstant() && t.constant > 0)
      targetStatic *= t.constant;
    else if (t.isConstant() && t.constant == 0 && (int64_t)j < in.getRank() &&
             !in.isDynamicDim(j))
      targetStatic *= in.getDimSize(j);
    else
      return kDyn;
  }
  if (targetStatic == 0 || inStatic % targetStatic != 0)
    return kDyn;
  return inStatic / targetStatic;
}

static Results convertReshape(ConvertContext &c) {
  if (failed(requireRank(c, 1, 1, 1, "the shape")))
    return failure();
  auto target = sizesOf(c.input(1));
  if (!target)
    return c.fail("the target shape has unknown length (unknown rank)");
  // allowzero = 1 differs only where the target holds a 0 (an empty
  // dimension instead of a copied one).
  bool allowZero = c.intAttr("allowzero", 0) != 0;
  if (allowZero && llvm::is_contained(*target, 0))
    return c.fail("allowzero = 1 with a constant 0 in the target shape is "
                  "not supported");
  auto in = typeOf(c.input(0));
  SmallVector<int64_t> shape = *target;
  if (llvm::count(shape, -1) > 1 ||
      llvm::any_of(shape, [](int64_t d) { return d < -1 && d != kDyn; }))
    return c.fail("the target shape may hold one -1 and no other negative "
                  "size");
  int64_t inferred = -1, known = 1;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (d == 0 && i < (size_t)in.getRank() && !allowZero)
      d = in.getDimSize(i);
    if (d == -1)
      inferred = i;
    else if (d == kDyn || known == kDyn || d > kMaxStatic ||
             known > kMaxStatic)
      known = kDyn;
    else
      known *= d;
  }
  if (inferred >= 0)
    shape[inferred] = (known != kDyn && known != 0 && in.hasStaticShape())
                          ? in.getNumElements() / known
                          : inferSymbolically(c.input(0), c.input(1), inferred);
  return one(c.create<ReshapeOp>(c.resultType(0, shape, in.getElementType()),
                                 c.input(0), c.input(1), allowZero));
}

static Results convertFlatten(ConvertContext &c) {
  auto in = shapeOf(c.input(0));
  auto normalized = normalizeAxis(c, c.intAttr("axis", 1), in.size(),
                                  /*inclusive=*/true);
  if (failed(normalized))
    return failure();
  int64_t axis = *normalized;
  auto prod = [](ArrayRef<int64_t> dims) {
    int64_t p = 1;
    for (int64_t d : dims)
      p = (d == kDyn || p == kDyn || d > kMaxStatic || p > kMaxStatic)
              ? kDyn
              : p * d;
    return p;
  };
  SmallVector<int64_t> shape = {prod(in.take_front(axis)),
                                prod(in.drop_front(axis))};
  return one(c.create<FlattenOp>(
      c.resultType(0, shape, elementOf(c.input(0))), c.input(0),
      c.builder.getI64IntegerAttr(axis)));
}

/// Squeeze and Unsqueeze take their axes as a constant input since opset 13.
template <typename OpT> static Results convertSqueezeLike(ConvertContext &c) {
  constexpr bool squeeze = std::is_same_v<OpT, SqueezeOp>;
  auto in = shapeOf(c.input(0));
  SmallVector<int64_t> axes;
  if (c.input(1)) {
    auto v = c.constInts(1);
    if (!v)
      return c.fail("non-constant axes are not supported");
    axes = *v;
  } else if (squeeze) {
    for (int64_t i = 0; i < (int64_t)in.size(); ++i) {
      if (in[i] == kDyn)
        return c.fail("Squeeze without axes needs static dimensions");
      if (in[i] == 1)
        axes.push_back(i);
    }
  } else {
    return c.fail("Unsqueeze needs axes");
  }
  int64_t rank = squeeze ? in.size() : in.size() + axes.size();
  auto normalized = normalizeAxes(c, axes, rank);
  if (failed(normalized))
    return failure();
  axes = std::move(*normalized);
  llvm::sort(axes);
  if (squeeze)
    for (int64_t a : axes)
      if (in[a] != 1 && in[a] != kDyn)
        return c.fail(fmt::format("axis {} has size {}, not 1", a, in[a]));
  SmallVector<int64_t> shape;
  if (squeeze) {
    for (int64_t i = 0; i < rank; ++i)
      if (!llvm::is_contained(axes, i))
        shape.push_back(in[i]);
  } else {
    auto it = in.begin();
    for (int64_t i = 0; i < rank; ++i)
      shape.push_back(llvm::is_contained(axes, i) ? 1 : *it++);
  }
  return one(c.create<OpT>(c.resultType(0, shape, elementOf(c.input(0))),
                           c.input(0), c.builder.getDenseI64ArrayAttr(axes)));
}

static Results convertConcat(ConvertContext &c) {
  SmallVector<Value> ins;
  for (Value v : c.inputs)
    if (v)
      ins.push_back(v);
  int64_t rank = shapeOf(ins[0]).size();
  auto normalized = normalizeAxis(c, c.intAttr("axis", 0), rank);
  if (failed(normalized))
    return failure();
  int64_t axis = *normalized;
  for (Value v : ins)
    if ((int64_t)shapeOf(v).size() != rank)
      return c.fail("the inputs must have one rank");
  SmallVector<int64_t> shape(shapeOf(ins[0]));
  shape[axis] = 0;
  for (Value v : ins) {
    int64_t d = shapeOf(v)[axis];
    shape[axis] = (d == kDyn || shape[axis] == kDyn) ? kDyn : shape[axis] + d;
  }
  return one(c.create<ConcatOp>(c.resultType(0, shape, elementOf(ins[0])),
                                ins, c.builder.getI64IntegerAttr(axis)));
}

static Results convertSplit(ConvertContext &c) {
  auto in = typeOf(c.input(0));
  auto normalized = normalizeAxis(c, c.intAttr("axis", 0), in.getRank());
  if (failed(normalized))
    return failure();
  int64_t axis = *normalized;
  SmallVector<int64_t> sizes;
  if (c.input(1)) {
    auto v = c.constInts(1);
    if (!v)
      return c.fail("non-constant split sizes are not supported");
    sizes = *v;
  } else if (auto a = c.intsAttr("split")) {
    sizes.assign(a->begin(), a->end());
  } else {
    int64_t n = c.node.output_size(), dim = in.getDimSize(axis);
    if (dim == kDyn)
      return c.fail("an equal split of a dynamic dimension is not supported");
    int64_t part = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::min(part, dim - i * part));
  }
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0 || size > kMaxStatic)
      return c.fail(fmt::format("split size {} is out of range", size));
    total += size;
  }
  if ((int64_t)sizes.size() != c.node.output_size() ||
      (in.getDimSize(axis) != kDyn && total != in.getDimSize(axis)))
    return c.fail("the split sizes do not match the outputs and the "
                  "dimension split");
  SmallVector<Type> types;
  for (auto [i, size] : llvm::enumerate(sizes)) {
    SmallVector<int64_t> shape(in.getShape());
    shape[axis] = size;
    types.push_back(c.resultType(i, shape, in.getElementType()));
  }
  auto op = SplitOp::create(c.builder, c.loc, types, c.input(0),
                            c.builder.getI64IntegerAttr(axis),
                            c.builder.getDenseI64ArrayAttr(sizes));
  return SmallVector<Value>(op.getResults());
}

static Results convertSlice(ConvertContext &c) {
  if (failed(requireRank(c, 1, 1, 1, "starts")) ||
      failed(requireRank(c, 2, 1, 1, "ends")))
    return failure();
  auto in = typeOf(c.input(0));
  int64_t rank = in.getRank();
  int64_t n = shapeOf(c.input(1))[0];
  SmallVector<int64_t> axes, steps;
  if (c.input(3)) {
    auto v = c.constInts(3);
    if (!v)
      return c.fail("non-constant axes are not supported");
    axes = *v;
  } else {
    if (n == kDyn)
      return c.fail("starts must have a static length");
    for (int64_t i = 0; i < n; ++i)
      axes.push_back(i);
  }
  auto normalized = normalizeAxes(c, axes, rank);
  if (failed(normalized))
    return failure();
  axes = std::move(*normalized);
  if (c.input(4)) {
    auto v = c.constInts(4);
    if (!v)
      return c.fail("non-constant steps are not supported");
    steps = *v;
  } else {
    steps.assign(axes.size(), 1);
  }
  if (steps.size() != axes.size() || llvm::is_contained(steps, 0) ||
      (n != kDyn && n != (int64_t)axes.size()))
    return c.fail("starts, ends, axes and steps must have one length, and "
                  "no step may be 0");
  // Starts and ends may be int32: shape arithmetic works in int64.
  auto i64Vec = [&](Value v) -> Value {
    if (elementOf(v).isInteger(64))
      return v;
    return c.create<CastOp>(
        RankedTensorType::get(shapeOf(v), c.builder.getI64Type()), v);
  };
  Value starts = i64Vec(c.input(1)), ends = i64Vec(c.input(2));
  // Sliced sizes are known when the bounds are constants and the dimension
  // is static; otherwise dynamic.
  SmallVector<int64_t> shape(in.getShape());
  auto s = getDimExprs(starts), e = getDimExprs(ends);
  for (auto [i, axis] : llvm::enumerate(axes)) {
    int64_t dim = in.getDimSize(axis);
    if (dim == kDyn || i >= s.size() || i >= e.size() ||
        !s[i].isConstant() || !e[i].isConstant() || steps[i] == 0) {
      shape[axis] = kDyn;
      continue;
    }
    shape[axis] =
        format::sliceAxis(s[i].constant, e[i].constant, steps[i], dim).count;
  }
  return one(c.create<SliceOp>(c.resultType(0, shape, in.getElementType()),
                               c.input(0), starts, ends,
                               c.builder.getDenseI64ArrayAttr(axes),
                               c.builder.getDenseI64ArrayAttr(steps)));
}

static Results convertGather(ConvertContext &c) {
  auto in = shapeOf(c.input(0));
  auto normalized = normalizeAxis(c, c.intAttr("axis", 0), in.size());
  if (failed(normalized))
    return failure();
  int64_t axis = *normalized;
  SmallVector<int64_t> shape(in.take_front(axis));
  llvm::append_range(shape, shapeOf(c.input(1)));
  llvm::append_range(shape, in.drop_front(axis + 1));
  return one(c.create<GatherOp>(c.resultType(0, shape, elementOf(c.input(0))),
                                c.input(0), c.input(1),
                                c.builder.getI64IntegerAttr(axis)));
}

static Results convertShape(ConvertContext &c) {
  int64_t rank = shapeOf(c.input(0)).size();
  int64_t start = c.intAttr("start", 0), end = c.intAttr("end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  IntegerAttr endAttr;
  if (c.attr("end"))
    endAttr = c.builder.getI64IntegerAttr(end);
  return one(c.create<ShapeOp>(
      c.resultType(0, {std::max<int64_t>(end - start, 0)},
                   c.builder.getI64Type()),
      c.input(0), c.builder.getI64IntegerAttr(start), endAttr));
}

static Results convertConstant(ConvertContext &c) {
  if (const auto *a = c.attr("value")) {
    std::string error;
    auto attr = tensorToElements(c.builder.getContext(), a->t(), nullptr,
                                 error);
    if (failed(attr))
      return c.fail(error);
    return one(c.create<ConstantOp>(*attr));
  }
  Builder &b = c.builder;
  if (const auto *a = c.attr("value_float"))
    return one(c.create<ConstantOp>(DenseElementsAttr::get(
        RankedTensorType::get({}, b.getF32Type()), a->f())));
  if (const auto *a = c.attr("value_int"))
    return one(c.create<ConstantOp>(DenseElementsAttr::get(
        RankedTensorType::get({}, b.getI64Type()), (int64_t)a->i())));
  if (const auto *a = c.attr("value_floats"))
    return one(c.create<ConstantOp>(DenseElementsAttr::get(
        RankedTensorType::get({a->floats_size()}, b.getF32Type()),
        ArrayRef<float>(a->floats().data(), a->floats_size()))));
  if (const auto *a = c.attr("value_ints"))
    return one(c.create<ConstantOp>(DenseElementsAttr::get(
        RankedTensorType::get({a->ints_size()}, b.getI64Type()),
        ArrayRef<int64_t>(a->ints().data(), a->ints_size()))));
  return c.fail("only tensor, float(s) and int(s) constants are supported");
}

static Results convertConstantOfShape(ConvertContext &c) {
  ElementsAttr value;
  if (const auto *a = c.attr("value")) {
    std::string error;
    auto attr = tensorToElements(c.builder.getContext(), a->t(), nullptr,
                                 error);
    if (failed(attr))
      return c.fail(error);
    value = *attr;
    if (value.getNumElements() != 1)
      return c.fail("value must hold one element");
  } else {
    value = DenseElementsAttr::get(
        RankedTensorType::get({1}, c.builder.getF32Type()), 0.0f);
  }
  if (failed(requireRank(c, 0, 1, 1, "the shape")))
    return failure();
  auto shape = sizesOf(c.input(0));
  if (!shape)
    return c.fail("the shape has unknown length (unknown rank)");
  for (int64_t &d : *shape)
    if (d < 0)
      d = kDyn;
  return one(c.create<ConstantOfShapeOp>(
      c.resultType(0, *shape, value.getElementType()), c.input(0), value));
}

static Results convertRange(ConvertContext &c) {
  return one(c.create<RangeOp>(c.resultType(0, {kDyn}, elementOf(c.input(0))),
                               c.input(0), c.input(1), c.input(2)));
}

static Results convertExpand(ConvertContext &c) {
  if (failed(requireRank(c, 1, 1, 1, "the shape")))
    return failure();
  auto target = sizesOf(c.input(1));
  if (!target)
    return c.fail("the target shape has unknown length (unknown rank)");
  // A dynamic target size stays dynamic even against an input size of 1.
  SmallVector<int64_t> shape = broadcastOrDynamic(shapeOf(c.input(0)),
                                                  *target);
  size_t offset = shape.size() - target->size();
  for (auto [i, d] : llvm::enumerate(*target))
    if (d == kDyn && shapeOf(c.input(0)).size() + i < shape.size() + offset)
      shape[offset + i] = kDyn;
  return one(c.create<ExpandOp>(c.resultType(0, shape, elementOf(c.input(0))),
                                c.input(0), c.input(1)));
}

static Results convertTrilu(ConvertContext &c) {
  if (failed(requireRank(c, 0, 2, INT64_MAX, "the input")))
    return failure();
  int64_t k = 0;
  if (c.input(1)) {
    auto v = c.constInts(1);
    if (!v || v->size() != 1)
      return c.fail("a non-constant k is not supported");
    k = (*v)[0];
  }
  return one(c.create<TriluOp>(c.resultLike(0, c.input(0)), c.input(0),
                               c.builder.getBoolAttr(c.intAttr("upper", 1)),
                               c.builder.getI64IntegerAttr(k)));
}

/// Einsum: only the outer product "i,j->ij" (what torch.outer exports to, as
/// in rotary tables) is supported; it becomes unsqueeze + broadcast multiply.
static Results convertEinsum(ConvertContext &c) {
  const auto *eq = c.attr("equation");
  std::string equation = eq ? eq->s() : "";
  equation.erase(std::remove(equation.begin(), equation.end(), ' '),
                 equation.end());
  if (c.inputs.size() != 2 || equation.size() != 7 || equation[1] != ',' ||
      equation.substr(3, 2) != "->" || equation[0] == equation[2] ||
      equation[5] != equation[0] || equation[6] != equation[2])
    return c.fail("equation '" + equation + "' is not supported (only the "
                  "outer product \"i,j->ij\")");
  if (failed(requireRank(c, 0, 1, 1, "each input")) ||
      failed(requireRank(c, 1, 1, 1, "each input")))
    return failure();
  Value a = c.input(0), b = c.input(1);
  int64_t m = shapeOf(a)[0], n = shapeOf(b)[0];
  Type et = elementOf(a);
  auto &bd = c.builder;
  Value col = c.create<UnsqueezeOp>(RankedTensorType::get({m, 1}, et), a,
                                    bd.getDenseI64ArrayAttr({1}));
  Value row = c.create<UnsqueezeOp>(RankedTensorType::get({1, n}, et), b,
                                    bd.getDenseI64ArrayAttr({0}));
  return one(c.create<MulOp>(c.resultType(0, {m, n}, et), col, row));
}

const std::vector<OnnxConverter> &qcc::onnxConverters() {
  static const std::vector<OnnxConverter> table = {
      {"Add", {7, 13, 14}, {"rr"}, convertBinary<AddOp>},
      {"Sub", {7, 13, 14}, {"rr"}, convertBinary<SubOp>},
      {"Mul", {7, 13, 14}, {"rr"}, convertBinary<MulOp>},
      {"Div", {7, 13, 14}, {"rr"}, convertBinary<DivOp>},
      {"Pow", {13, 15}, {"rr"}, convertBinary<PowOp>},
      {"Equal", {13, 19}, {"rr"}, convertBinary<EqualOp>},
      {"Less", {13}, {"rr"}, convertBinary<LessOp>},
      {"LessOrEqual", {12, 16}, {"rr"}, convertBinary<LessEqualOp>},
      {"Greater", {13}, {"rr"}, convertBinary<GreaterOp>},
      {"GreaterOrEqual", {12, 16}, {"rr"}, convertBinary<GreaterEqualOp>},
      {"And", {7}, {"rr"}, convertBinary<AndOp>},
      {"Or", {7}, {"rr"}, convertBinary<OrOp>},
      {"Max", {13}, {"r*"}, convertVariadic<MaxOp>},
      {"Min", {13}, {"r*"}, convertVariadic<MinOp>},
      {"Clip", {11, 12, 13}, {"roo"}, convertClip},
      {"Where", {9, 16}, {"rrr"}, convertWhere},
      {"Sqrt", {13}, {"r"}, convertUnary<SqrtOp>},
      {"Reciprocal", {13}, {"r"}, convertUnary<ReciprocalOp>},
      {"Erf", {13}, {"r"}, convertUnary<ErfOp>},
      {"Tanh", {13}, {"r"}, convertUnary<TanhOp>},
      {"Sigmoid", {13}, {"r"}, convertUnary<SigmoidOp>},
      {"Exp", {13}, {"r"}, convertUnary<ExpOp>},
      {"Cos", {7}, {"r"}, convertUnary<CosOp>},
      {"Sin", {7}, {"r"}, convertUnary<SinOp>},
      {"Relu", {13, 14}, {"r"}, convertUnary<ReluOp>},
      {"Neg", {13}, {"r"}, convertUnary<NegOp>},
      {"Not", {1}, {"r"}, convertUnary<NotOp>},
      {"Abs", {13}, {"r"}, convertUnary<AbsOp>},
      {"Gelu", {20}, {"r"}, convertGelu},
      {"Log", {13}, {"r"}, convertUnary<LogOp>},
      {"IsNaN", {9, 13, 20}, {"r"}, convertIsNaN},
      {"CumSum", {11, 14}, {"rr"}, convertCumSum},
      {"GatherElements", {13}, {"rr"}, convertGatherElements},
      {"GatherND", {13}, {"rr"}, convertGatherND},
      {"ScatterND", {13, 16, 18}, {"rrr"}, convertScatterND},
      {"ScatterElements", {11, 13, 16, 18}, {"rrr"}, convertScatterElements},
      {"Tile", {13}, {"rr"}, convertTile},
      {"TopK", {11, 24}, {"rr", "rr"}, convertTopK},
      {"OneHot", {11}, {"rrr"}, convertOneHot},
      {"NonZero", {9, 13}, {"r"}, convertNonZero},
      {"Cast", {13, 19, 21}, {"r"}, convertCast},
      {"MatMul", {13}, {"rr"}, convertMatMul},
      {"Gemm", {13}, {"rro"}, convertGemm},
      {"ReduceMean", {13, 18}, {"ro"}, convertReduce<ReduceMeanOp>},
      {"ReduceSum", {13}, {"ro"}, convertReduce<ReduceSumOp>},
      {"ReduceMax", {13, 18, 20}, {"ro"}, convertReduce<ReduceMaxOp>},
      {"LayerNormalization", {17}, {"rro", "roo"}, convertLayerNormalization},
      {"Softmax", {13}, {"r"}, convertSoftmax},
      {"Transpose", {13, 21}, {"r"}, convertTranspose},
      {"Reshape", {13, 14, 19, 21}, {"rr"}, convertReshape},
      {"Flatten", {13, 21}, {"r"}, convertFlatten},
      {"Squeeze", {13, 21}, {"ro"}, convertSqueezeLike<SqueezeOp>},
      {"Unsqueeze", {13, 21}, {"rr"}, convertSqueezeLike<UnsqueezeOp>},
      {"Concat", {13}, {"r*"}, convertConcat},
      {"Split", {13, 18}, {"ro", "r*"}, convertSplit},
      {"Slice", {13}, {"rrroo"}, convertSlice},
      {"Gather", {13}, {"rr"}, convertGather},
      {"Shape", {13, 15, 19, 21}, {"r"}, convertShape},
      {"Constant", {13, 19, 21}, {""}, convertConstant},
      {"ConstantOfShape", {9, 20, 21}, {"r"}, convertConstantOfShape},
      {"Range", {11}, {"rrr"}, convertRange},
      {"Expand", {13}, {"rr"}, convertExpand},
      {"Trilu", {14}, {"ro"}, convertTrilu},
      {"Identity", {13, 14, 16, 19, 21}, {"r"}, convertIdentity},
      {"Dropout", {13}, {"roo", "ro"}, convertDropout},
      {"Einsum", {12}, {"r*"}, convertEinsum},
  };
  return table;
}
