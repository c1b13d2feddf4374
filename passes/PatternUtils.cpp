//===- PatternUtils.cpp - matching helpers shared by the passes -----------===//
#include "passes/PatternUtils.h"

#include "dialects/QccAttrNames.h"
#include "dialects/QccConstants.h"
#include "dialects/QccDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Debug.h"

#include <cstring>

using namespace mlir;
using namespace qcc;

ElementsAttr qcc::getConstant(Value v) {
  if (auto c = v.getDefiningOp<ConstantOp>())
    return c.getValue();
  return {};
}

std::optional<double> qcc::getSplatValue(Value v) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(getConstant(v));
  if (!dense || !dense.isSplat())
    return std::nullopt;
  Type et = dense.getElementType();
  if (isa<FloatType>(et))
    return dense.getSplatValue<APFloat>().convertToDouble();
  if (et.isInteger(1))
    return dense.getSplatValue<bool>() ? 1.0 : 0.0;
  if (isa<IntegerType>(et))
    return (double)dense.getSplatValue<APInt>().getSExtValue();
  return std::nullopt;
}

std::optional<int64_t> qcc::getIntSplatValue(Value v) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(getConstant(v));
  if (!dense || !dense.isSplat() || !isa<IntegerType>(dense.getElementType()))
    return std::nullopt;
  if (dense.getElementType().isInteger(1))
    return dense.getSplatValue<bool>() ? 1 : 0;
  APInt value = dense.getSplatValue<APInt>();
  if (value.getBitWidth() > 64)
    return std::nullopt;
  return value.getSExtValue();
}

bool qcc::isSplatNear(Value v, double expected, double rtol) {
  auto value = getSplatValue(v);
  return value && std::abs(*value - expected) <=
                      rtol * std::max(std::abs(expected), 1e-30);
}

/// Ops whose result dimension i is operand 0's dimension i, for every i below
/// the last (row-wise ops) or every i (elementwise on equal shapes).
static std::optional<Value> sameDimOperand(Operation *op, Value result,
                                           int64_t index) {
  auto rank = cast<RankedTensorType>(result.getType()).getRank();
  if (isa<LinearOp, LayerNormOp, RmsNormOp, SoftmaxOp, GeluOp, SiluOp,
          RotaryOp, AttentionOp, CastOp, SqrtOp, ReciprocalOp, ErfOp, TanhOp,
          SigmoidOp, ExpOp, CosOp, SinOp, ReluOp, NegOp, NotOp, AbsOp, LogOp,
          IsNaNOp, CumSumOp>(op)) {
    if (isa<LinearOp, AttentionOp>(op) && index == rank - 1)
      return std::nullopt;
    return op->getOperand(0);
  }
  if (isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, EqualOp, LessOp,
          LessEqualOp, GreaterOp, GreaterEqualOp, AndOp, OrOp, WhereOp>(op)) {
    // Follow an operand of the same rank whose size is not a broadcast 1.
    for (Value operand : op->getOperands()) {
      auto t = cast<RankedTensorType>(operand.getType());
      if (t.getRank() == rank && t.getDimSize(index) != 1 &&
          !t.getElementType().isInteger(1))
        return operand;
    }
    return std::nullopt;
  }
  // x [.., K] times a matrix [K, N]: every dimension but the last is x's.
  if (auto mm = dyn_cast<MatMulOp>(op)) {
    auto lhs = mm.getLhs().getType(), rhs = mm.getRhs().getType();
    if (rhs.getRank() == 2 && lhs.getRank() == rank && index < rank - 1)
      return mm.getLhs();
    // Batched [.., M, K] x [.., K, N]: rows are the lhs's, columns the rhs's,
    // batch axes the operand's that is not a broadcast 1.
    if (lhs.getRank() == rank && rhs.getRank() == rank) {
      if (index == rank - 1)
        return mm.getRhs();
      if (index == rank - 2 || lhs.getDimSize(index) != 1)
        return mm.getLhs();
      return mm.getRhs();
    }
  }
  if (auto emb = dyn_cast<EmbeddingOp>(op))
    if (index < rank - 1)
      return emb.getIds();
  // W8A8: quantized activations (and their per-token scales) keep the
  // input's token dims; a qlinear keeps all but the features.
  if (auto q = dyn_cast<QuantizeOp>(op))
    if (q.getInput().getType().getRank() == rank &&
        (result == q.getResult() || index < rank - 1))
      return q.getInput();
  if (auto ql = dyn_cast<QLinearOp>(op))
    if (ql.getInput().getType().getRank() == rank && index < rank - 1)
      return ql.getInput();
  if (auto split = dyn_cast<SplitOp>(op))
    if (index != (int64_t)split.getAxis())
      return split.getInput();
  // A concat's inputs share every dimension but the axis (a cache append).
  if (auto cat = dyn_cast<ConcatOp>(op)) {
    int64_t axis = cat.getAxis();
    if ((axis < 0 ? axis + rank : axis) != index)
      return cat.getInputs()[0];
  }
  // A gather keeps the dimensions before its axis (BLOOM picks q, k and v
  // from its [B, S, H, 3, D] view so), and by a vector of indices (a
  // permutation of features) those after it too.
  if (auto gather = dyn_cast<GatherOp>(op)) {
    int64_t axis = gather.getAxis();
    if (axis < 0)
      axis += gather.getInput().getType().getRank();
    if (index < axis ||
        (gather.getIndices().getType().getRank() == 1 && index > axis))
      return gather.getInput();
  }
  // A slice (Phi-3's fused QKV) keeps the dimensions it does not slice.
  if (auto slice = dyn_cast<SliceOp>(op)) {
    bool sliced = llvm::any_of(slice.getAxes(), [&](int64_t a) {
      return (a < 0 ? a + rank : a) == index;
    });
    if (!sliced)
      return slice.getInput();
  }
  return std::nullopt;
}

/// A function argument's dimension, named as the first argument dimension
/// with the same symbolic name (`qcc.dim_names`): the runtime holds equally
/// named dimensions equal, so input_ids' and attention_mask's "batch" are
/// one dimension.
static DimExpr canonicalArgDim(Value v, int64_t index) {
  DimExpr self{ShapedType::kDynamic, v, index};
  auto arg = dyn_cast<BlockArgument>(v);
  auto fn = arg ? dyn_cast_or_null<func::FuncOp>(
                      arg.getOwner()->getParentOp())
                : func::FuncOp();
  if (!fn || arg.getOwner() != &fn.getBody().front())
    return self;
  auto nameOf = [&](unsigned argNo, int64_t i) -> StringRef {
    auto names = fn.getArgAttrOfType<ArrayAttr>(argNo, kDimNamesAttr);
    if (!names || i >= (int64_t)names.size())
      return {};
    auto s = dyn_cast<StringAttr>(names[i]);
    return s ? s.getValue() : StringRef();
  };
  StringRef name = nameOf(arg.getArgNumber(), index);
  if (name.empty())
    return self;
  for (unsigned a = 0; a < fn.getNumArguments(); ++a) {
    auto t = dyn_cast<RankedTensorType>(fn.getArgument(a).getType());
    if (!t)
      continue;
    for (int64_t i = 0; i < t.getRank(); ++i)
      if (t.isDynamicDim(i) && nameOf(a, i) == name)
        return DimExpr{ShapedType::kDynamic, fn.getArgument(a), i};
  }
  return self;
}

/// Python slice bounds [s, e) of a dimension of `size` (negative from the
/// end; INT64_MIN / INT64_MAX as "from the start" / "to the end"), clamped.
static void clampSliceBounds(int64_t &s, int64_t &e, int64_t size) {
  // Clamp before adding the size: INT64_MIN + size must not wrap.
  s = std::max<int64_t>(s, -size);
  e = std::max<int64_t>(e, -size);
  s = std::clamp<int64_t>(s < 0 ? s + size : s, 0, size);
  e = std::clamp<int64_t>(e < 0 ? e + size : e, 0, size);
}

/// The size of dimension `index` of `slice` when that axis is sliced with
/// step 1 and bounds that fold to constants from a dimension of known size
/// (Slice(x, 0, 16) of x [.., 48] is 16 even where the result type says ?).
static std::optional<int64_t> slicedSize(SliceOp slice, int64_t index) {
  int64_t rank = slice.getType().getRank();
  for (auto [i, a] : llvm::enumerate(slice.getAxes())) {
    if ((a < 0 ? a + rank : a) != index)
      continue;
    auto starts = getFoldedDimExprs(slice.getStarts());
    auto ends = getFoldedDimExprs(slice.getEnds());
    if (slice.getSteps()[i] != 1 || i >= starts.size() || i >= ends.size() ||
        !starts[i].isConstant() || !ends[i].isConstant())
      return std::nullopt;
    DimExpr in = getDimExpr(slice.getInput(), index);
    if (!in.isConstant())
      return std::nullopt;
    int64_t s = starts[i].constant, e = ends[i].constant;
    clampSliceBounds(s, e, in.constant);
    return std::max<int64_t>(0, e - s);
  }
  return std::nullopt;
}

DimExpr qcc::getDimExpr(Value v, int64_t index) {
  for (;;) {
    auto t = cast<RankedTensorType>(v.getType());
    if (!t.isDynamicDim(index))
      return DimExpr{t.getDimSize(index), {}, -1};
    Operation *op = v.getDefiningOp();
    if (!op)
      return canonicalArgDim(v, index);
    if (auto tr = dyn_cast<TransposeOp>(op)) {
      v = tr.getInput();
      index = tr.getPerm()[index];
      continue;
    }
    if (auto slice = dyn_cast<SliceOp>(op))
      if (auto size = slicedSize(slice, index))
        return DimExpr{*size, {}, -1};
    if (auto next = sameDimOperand(op, v, index)) {
      v = *next;
      continue;
    }
    return DimExpr{ShapedType::kDynamic, v, index};
  }
}

/// getDimExprs, and with `fold` also integer arithmetic on constant elements
/// and the exporter's Expand guard (see getFoldedDimExprs).
static SmallVector<DimExpr> evalDimExprs(Value vec, bool fold);

static Value shapeElementSource(Value vec, int64_t &index);

SmallVector<DimExpr> qcc::getDimExprs(Value vec) {
  return evalDimExprs(vec, /*fold=*/false);
}

static SmallVector<DimExpr> evalDimExprs(Value vec, bool fold) {
  auto type = dyn_cast<RankedTensorType>(vec.getType());
  if (!type || type.getRank() > 1 || !type.hasStaticShape())
    return {};
  int64_t n = type.getNumElements();
  SmallVector<DimExpr> unknown(n);
  if (auto dense = dyn_cast_or_null<DenseIntElementsAttr>(getConstant(vec))) {
    SmallVector<DimExpr> out;
    for (const APInt &x : dense.getValues<APInt>())
      out.push_back(DimExpr{x.getSExtValue(), {}, -1});
    return out;
  }
  Operation *op = vec.getDefiningOp();
  if (!op)
    return unknown;
  if (auto shape = dyn_cast<ShapeOp>(op)) {
    SmallVector<DimExpr> out;
    auto in = cast<RankedTensorType>(shape.getInput().getType());
    int64_t start = (int64_t)shape.getStart() < 0 ? (int64_t)shape.getStart() + in.getRank()
                                         : shape.getStart();
    for (int64_t i = 0; i < n; ++i)
      out.push_back(getDimExpr(shape.getInput(), start + i));
    return out;
  }
  if (isa<UnsqueezeOp, SqueezeOp, ReshapeOp, CastOp>(op)) {
    auto in = evalDimExprs(op->getOperand(0), fold);
    return (int64_t)in.size() == n ? in : unknown;
  }
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    SmallVector<DimExpr> out;
    for (Value part : concat.getInputs()) {
      auto sub = evalDimExprs(part, fold);
      if (sub.empty())
        return unknown;
      out.append(sub);
    }
    return (int64_t)out.size() == n ? out : unknown;
  }
  if (auto gather = dyn_cast<GatherOp>(op)) {
    auto src = evalDimExprs(gather.getInput(), fold);
    auto idx = dyn_cast_or_null<DenseIntElementsAttr>(
        getConstant(gather.getIndices()));
    if (src.empty() || !idx)
      return unknown;
    SmallVector<DimExpr> out;
    for (const APInt &x : idx.getValues<APInt>()) {
      int64_t i = x.getSExtValue();
      if (i < 0)
        i += src.size();
      if (i < 0 || i >= (int64_t)src.size())
        return unknown;
      out.push_back(src[i]);
    }
    return (int64_t)out.size() == n ? out : unknown;
  }
  if (auto slice = dyn_cast<SliceOp>(op)) {
    auto src = evalDimExprs(slice.getInput(), fold);
    // Bounds are read as plain integers: torch writes INT64_MIN for "from
    // the start", which a DimExpr cannot hold (it is kDynamic).
    auto bound = [&](Value v) -> std::optional<int64_t> {
      if (auto dense = dyn_cast_or_null<DenseIntElementsAttr>(getConstant(v)))
        if (dense.getNumElements() == 1)
          return (*dense.getValues<APInt>().begin()).getSExtValue();
      auto e = evalDimExprs(v, fold);
      if (e.size() == 1 && e[0].isConstant())
        return e[0].constant;
      return std::nullopt;
    };
    auto start = bound(slice.getStarts()), end = bound(slice.getEnds());
    if (src.empty() || !start || !end || slice.getSteps()[0] != 1)
      return unknown;
    int64_t s = *start, e = *end;
    clampSliceBounds(s, e, src.size());
    if (e - s != n)
      return unknown;
    return SmallVector<DimExpr>(src.begin() + s, src.begin() + e);
  }
  if (auto div = dyn_cast<DivOp>(op); fold && div && n == 1) {
    // Div(Mul(x, c), c) is x: a merged B * H divided by H again (BLOOM
    // reads B back from its [B * H, S, D] views so).
    auto c = evalDimExprs(div.getRhs(), true);
    int64_t index = 0;
    Value source = shapeElementSource(div.getLhs(), index);
    auto mul = source ? source.getDefiningOp<MulOp>() : MulOp();
    auto isC = [&](Value x) {
      auto e = evalDimExprs(x, true);
      return e.size() == 1 && e[0].isConstant() && e[0].constant != 0 &&
             e[0].constant == c[0].constant;
    };
    if (mul && c.size() == 1 && c[0].isConstant()) {
      for (auto [x, y] : {std::pair(mul.getLhs(), mul.getRhs()),
                          std::pair(mul.getRhs(), mul.getLhs())}) {
        auto e = evalDimExprs(x, true);
        if (isC(y) && e.size() == 1 && e[0].isKnown())
          return e;
      }
    }
  }
  if (fold && isa<AddOp, SubOp, MulOp, DivOp>(op)) {
    auto a = evalDimExprs(op->getOperand(0), true);
    auto b = evalDimExprs(op->getOperand(1), true);
    if (a.empty() || b.empty())
      return unknown;
    SmallVector<DimExpr> out;
    for (int64_t i = 0; i < n; ++i) {
      const DimExpr &x = a[a.size() == 1 ? 0 : i];
      const DimExpr &y = b[b.size() == 1 ? 0 : i];
      if (!x.isConstant() || !y.isConstant()) {
        out.push_back(DimExpr{});
        continue;
      }
      int64_t r;
      if (isa<AddOp>(op))
        r = x.constant + y.constant;
      else if (isa<SubOp>(op))
        r = x.constant - y.constant;
      else if (isa<MulOp>(op))
        r = x.constant * y.constant;
      else if (y.constant == 0)
        return unknown;
      else
        r = x.constant / y.constant;
      out.push_back(DimExpr{r, {}, -1});
    }
    return out;
  }
  if (auto where = dyn_cast<WhereOp>(op); fold && where) {
    // Where(Equal(s, -1), 1, s): the exporter's guard in Expand shapes.
    Value s = where.getRhs();
    auto eq = where.getCondition().getDefiningOp<EqualOp>();
    if (!eq)
      return unknown;
    Value other = eq.getLhs() == s   ? eq.getRhs()
                  : eq.getRhs() == s ? eq.getLhs()
                                     : Value();
    if (!other)
      return unknown;
    auto minus = evalDimExprs(other, true);
    auto ones = evalDimExprs(where.getLhs(), true);
    auto in = evalDimExprs(s, true);
    auto all = [](ArrayRef<DimExpr> v, int64_t c) {
      return !v.empty() && llvm::all_of(v, [&](const DimExpr &d) {
        return d.isConstant() && d.constant == c;
      });
    };
    if (!all(minus, -1) || !all(ones, 1) || (int64_t)in.size() != n)
      return unknown;
    for (DimExpr &d : in)
      if (d.isConstant() && d.constant == -1)
        d.constant = 1;
    return in;
  }
  return unknown;
}

bool qcc::reshapeKeepsLeadingDims(ReshapeOp reshape, int64_t n) {
  auto target = getDimExprs(reshape.getShape());
  if ((int64_t)target.size() < n)
    return false;
  for (int64_t i = 0; i < n; ++i) {
    if (target[i].isConstant() && target[i].constant == 0)
      continue; // ONNX: 0 copies the input dimension.
    if (!isSameDim(target[i], reshape.getInput(), i))
      return false;
  }
  return true;
}

bool qcc::isSameDim(const DimExpr &t, Value v, int64_t index) {
  DimExpr d = getDimExpr(v, index);
  return t.isKnown() && (t == d || resolveDimExpr(t) == resolveDimExpr(d));
}

/// The value that holds element `index` of the shape vector `vec` (updating
/// `index` to its place there), followed through views and Concat; null if
/// a part's size is not static.
static Value shapeElementSource(Value vec, int64_t &index) {
  auto numel = [](Value v) -> int64_t {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.hasStaticShape() ? t.getNumElements() : -1;
  };
  while (Operation *op = vec.getDefiningOp()) {
    if (isa<UnsqueezeOp, SqueezeOp, ReshapeOp, CastOp>(op) &&
        numel(op->getOperand(0)) == numel(vec) && numel(vec) >= 0) {
      vec = op->getOperand(0);
      continue;
    }
    if (auto gather = dyn_cast<GatherOp>(op)) {
      // One constant index of a vector.
      auto idx = getIntSplatValue(gather.getIndices());
      int64_t n = numel(gather.getInput());
      if (gather.getInput().getType().getRank() != 1 || numel(vec) != 1 ||
          !idx || n < 0 || *idx < -n || *idx >= n)
        break;
      index = *idx < 0 ? *idx + n : *idx;
      vec = gather.getInput();
      continue;
    }
    auto cat = dyn_cast<ConcatOp>(op);
    if (!cat)
      break;
    Value part;
    for (Value p : cat.getInputs()) {
      int64_t n = numel(p);
      if (n < 0)
        return {};
      if (index < n) {
        part = p;
        break;
      }
      index -= n;
    }
    if (!part)
      return {};
    vec = part;
  }
  return vec;
}

bool qcc::isDimProduct(Value vec, int64_t index, Value v, int64_t i,
                       int64_t j) {
  auto elements = getFoldedDimExprs(vec);
  if (index < 0 || index >= (int64_t)elements.size())
    return false;
  DimExpr di = getDimExpr(v, i), dj = getDimExpr(v, j);
  if (elements[index].isConstant())
    return di.isConstant() && dj.isConstant() &&
           elements[index].constant == di.constant * dj.constant;
  Value source = shapeElementSource(vec, index);
  auto mul = source ? source.getDefiningOp<MulOp>() : MulOp();
  auto mulType = mul ? cast<RankedTensorType>(mul.getType())
                     : RankedTensorType();
  if (!mul || !mulType.hasStaticShape() || mulType.getNumElements() != 1)
    return false;
  auto scalar = [](Value x) {
    auto d = getFoldedDimExprs(x);
    return d.size() == 1 ? d[0] : DimExpr{};
  };
  DimExpr a = scalar(mul.getLhs()), b = scalar(mul.getRhs());
  return (isSameDim(a, v, i) && isSameDim(b, v, j)) ||
         (isSameDim(b, v, i) && isSameDim(a, v, j));
}

//===----------------------------------------------------------------------===//
// Elementwise-chain matching
//===----------------------------------------------------------------------===//

bool qcc::matchCommutative(Operation *binary,
                           function_ref<bool(Value, Value)> match) {
  if (!binary || binary->getNumOperands() != 2)
    return false;
  Value a = binary->getOperand(0), b = binary->getOperand(1);
  return match(a, b) || match(b, a);
}

Value qcc::getOperandBesideSplat(Operation *binary, double expected,
                                 double rtol) {
  Value other;
  matchCommutative(binary, [&](Value a, Value c) {
    if (!isSplatNear(c, expected, rtol))
      return false;
    other = a;
    return true;
  });
  return other;
}

Value qcc::getSquareBase(Value v) {
  if (auto pow = v.getDefiningOp<PowOp>())
    return isSplatNear(pow.getRhs(), 2.0) ? pow.getLhs() : Value();
  if (auto mul = v.getDefiningOp<MulOp>())
    return mul.getLhs() == mul.getRhs() ? mul.getLhs() : Value();
  return {};
}

Value qcc::getLastAxisMeanInput(Value v) {
  auto mean = v.getDefiningOp<ReduceMeanOp>();
  if (!mean || !mean.getKeepdims() || mean.getAxes().size() != 1)
    return {};
  int64_t rank = mean.getInput().getType().getRank();
  int64_t axis = mean.getAxes()[0];
  if (axis < 0)
    axis += rank;
  return axis == rank - 1 ? mean.getInput() : Value();
}

bool qcc::matchDivision(Value v, Value &num, Value &den) {
  if (auto div = v.getDefiningOp<DivOp>()) {
    num = div.getLhs();
    den = div.getRhs();
    return true;
  }
  return matchCommutative(v.getDefiningOp<MulOp>(), [&](Value a, Value r) {
    if (auto recip = r.getDefiningOp<ReciprocalOp>()) {
      num = a;
      den = recip.getInput();
      return true;
    }
    if (auto div = r.getDefiningOp<DivOp>();
        div && isSplatNear(div.getLhs(), 1.0)) {
      num = a;
      den = div.getRhs();
      return true;
    }
    return false;
  });
}

bool qcc::matchSqrtPlusConstant(Value v, Value &x, double &c) {
  auto sqrt = v.getDefiningOp<SqrtOp>();
  if (!sqrt)
    return false;
  auto add = sqrt.getInput().getDefiningOp<AddOp>();
  return matchCommutative(add, [&](Value a, Value k) {
    auto value = getSplatValue(k);
    if (!value || a.getType() != add.getType())
      return false;
    x = a;
    c = *value;
    return true;
  });
}

ConstantOp qcc::createSplatConstant(OpBuilder &b, Location loc,
                                    RankedTensorType type, double value) {
  auto attr = DenseElementsAttr::get(
      type, b.getFloatAttr(type.getElementType(), value));
  return ConstantOp::create(b, loc, cast<ElementsAttr>(attr));
}

//===----------------------------------------------------------------------===//
// Shape-expression helpers
//===----------------------------------------------------------------------===//

SmallVector<DimExpr> qcc::getFoldedDimExprs(Value vec) {
  return evalDimExprs(vec, /*fold=*/true);
}

std::optional<int64_t> qcc::getFoldedIndex(Value v) {
  auto exprs = getFoldedDimExprs(v);
  if (exprs.size() != 1 || !exprs[0].isConstant())
    return std::nullopt;
  return exprs[0].constant;
}

DimExpr qcc::resolveDimExpr(DimExpr d) {
  while (!d.isConstant() && d.source) {
    Value v = d.source;
    int64_t index = d.index;
    Operation *op = v.getDefiningOp();
    if (!op)
      return d;
    auto fromTarget = [&](Value shape, Value input) -> std::optional<DimExpr> {
      auto target = getFoldedDimExprs(shape);
      if ((int64_t)target.size() <= index || !target[index].isKnown())
        return std::nullopt;
      DimExpr t = target[index];
      if (t.isConstant() && t.constant == 0 && input)
        return getDimExpr(input, index);
      if (t.isConstant() && t.constant < 0)
        return std::nullopt;
      return t;
    };
    std::optional<DimExpr> next;
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      next = fromTarget(reshape.getShape(), reshape.getInput());
    } else if (auto fill = dyn_cast<ConstantOfShapeOp>(op)) {
      next = fromTarget(fill.getShape(), Value());
    } else if (auto unsq = dyn_cast<UnsqueezeOp>(op)) {
      int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
      int64_t skipped = 0;
      bool inserted = false;
      for (int64_t a : unsq.getAxes()) {
        a = a < 0 ? a + rank : a;
        inserted |= a == index;
        skipped += a < index;
      }
      if (!inserted)
        next = getDimExpr(unsq.getInput(), index - skipped);
    } else if (auto expand = dyn_cast<ExpandOp>(op)) {
      // Broadcasting: a target dimension other than 1 is the result's, a 1
      // (or a dimension the target does not reach) keeps the input's.
      auto target = getFoldedDimExprs(expand.getShape());
      int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
      int64_t inRank = expand.getInput().getType().getRank();
      int64_t t = index - (rank - (int64_t)target.size());
      int64_t in = index - (rank - inRank);
      bool one = t < 0 || (target[t].isConstant() && target[t].constant == 1);
      if (!target.empty() && one && in >= 0)
        next = getDimExpr(expand.getInput(), in);
      else if (!target.empty() && !one &&
               !(target[t].isConstant() && target[t].constant < 1))
        next = target[t];
    } else if (auto trilu = dyn_cast<TriluOp>(op)) {
      next = getDimExpr(trilu.getInput(), index);
    } else if (auto split = dyn_cast<SplitOp>(op)) {
      int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
      int64_t axis =
          (int64_t)split.getAxis() < 0 ? (int64_t)split.getAxis() + rank
                                        : (int64_t)split.getAxis();
      if (axis != index)
        next = getDimExpr(split.getInput(), index);
    } else if (auto gather = dyn_cast<GatherOp>(op)) {
      auto ids = cast<RankedTensorType>(gather.getIndices().getType());
      if (gather.getAxis() == 0 && index < ids.getRank())
        next = getDimExpr(gather.getIndices(), index);
    }
    if (!next || !next->isKnown())
      return d;
    d = *next;
  }
  return d;
}

DimExpr qcc::resolveDimExpr(Value v, int64_t index) {
  return resolveDimExpr(getDimExpr(v, index));
}

ReshapeOp qcc::matchHeadSplit(Value v, Value &packed, int64_t &heads,
                              int64_t &headDim) {
  auto reshape = v.getDefiningOp<ReshapeOp>();
  if (!reshape)
    return {};
  auto inType = cast<RankedTensorType>(reshape.getInput().getType());
  auto outType = cast<RankedTensorType>(reshape.getType());
  if (inType.getRank() != 3 || outType.getRank() != 4 || inType.isDynamicDim(2))
    return {};
  auto target = getFoldedDimExprs(reshape.getShape());
  if (target.size() != 4)
    return {};
  // B and S stay; OPT writes S as -1, which is S when H * D is the input's
  // width (checked below).
  bool seqInferred = target[1].isConstant() && target[1].constant == -1 &&
                     (reshapeKeepsLeadingDims(reshape, 1));
  if (!seqInferred && !reshapeKeepsLeadingDims(reshape, 2))
    return {};
  int64_t dims[2];
  int64_t inferred = -1; // H or D written -1: the width over the other one
  for (int64_t i = 0; i < 2; ++i) {
    const DimExpr &t = target[2 + i];
    if (t.isConstant() && t.constant > 0)
      dims[i] = t.constant;
    else if (!seqInferred && t.isConstant() && t.constant == -1 &&
             !outType.isDynamicDim(2 + i))
      dims[i] = outType.getDimSize(2 + i);
    else if (!seqInferred && t.isConstant() && t.constant == -1 &&
             inferred < 0)
      inferred = i;
    else
      return {};
  }
  if (inferred >= 0) {
    int64_t other = dims[1 - inferred];
    if (other <= 0 || inType.getDimSize(2) % other != 0)
      return {};
    dims[inferred] = inType.getDimSize(2) / other;
  }
  if (dims[0] * dims[1] != inType.getDimSize(2))
    return {};
  packed = reshape.getInput();
  heads = dims[0];
  headDim = dims[1];
  return reshape;
}

bool qcc::matchHeadsBHSD(Value v, Value &packed, int64_t &heads,
                         int64_t &headDim) {
  if (auto t = v.getDefiningOp<TransposeOp>())
    return t.getPerm() == ArrayRef<int64_t>{0, 2, 1, 3} &&
           matchHeadSplit(t.getInput(), packed, heads, headDim);
  auto unsq = v.getDefiningOp<UnsqueezeOp>();
  if (!unsq || unsq.getAxes() != ArrayRef<int64_t>{1})
    return false;
  auto in = cast<RankedTensorType>(unsq.getInput().getType());
  if (in.getRank() != 3 || in.isDynamicDim(2))
    return false;
  packed = unsq.getInput();
  heads = 1;
  headDim = in.getDimSize(2);
  return true;
}

Value qcc::createRepeatedHeads(OpBuilder &b, Location loc, Value x,
                               int64_t headDim, int64_t n) {
  auto t = cast<RankedTensorType>(x.getType());
  int64_t width = t.getDimSize(2), heads = width / headDim * n;
  std::vector<int64_t> indices;
  indices.reserve(heads * headDim);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t d = 0; d < headDim; ++d)
      indices.push_back(h / n * headDim + d);
  auto it = RankedTensorType::get({(int64_t)indices.size()}, b.getI64Type());
  Value idx = ConstantOp::create(
      b, loc,
      cast<ElementsAttr>(DenseElementsAttr::get(it, ArrayRef(indices))));
  return GatherOp::create(
      b, loc,
      RankedTensorType::get({t.getDimSize(0), t.getDimSize(1), heads * headDim},
                            t.getElementType()),
      x, idx, b.getI64IntegerAttr(2));
}

bool qcc::matchRepeatedHeads(Value v, int64_t headDim, Value &x, int64_t &n) {
  auto gather = v.getDefiningOp<GatherOp>();
  if (!gather || headDim <= 0)
    return false;
  auto in = cast<RankedTensorType>(gather.getInput().getType());
  int64_t axis = gather.getAxis();
  auto idx =
      dyn_cast_or_null<DenseIntElementsAttr>(getConstant(gather.getIndices()));
  if (in.getRank() != 3 || (axis != 2 && axis != -1) || in.isDynamicDim(2) ||
      !idx || idx.getType().getRank() != 1)
    return false;
  int64_t width = in.getDimSize(2), count = idx.getNumElements();
  if (width % headDim != 0 || count % headDim != 0 || width == 0)
    return false;
  int64_t kvHeads = width / headDim, heads = count / headDim;
  if (heads % kvHeads != 0)
    return false;
  int64_t repeat = heads / kvHeads, k = 0;
  for (const APInt &i : idx.getValues<APInt>()) {
    int64_t h = k / headDim, d = k % headDim;
    if (i.getSExtValue() != h / repeat * headDim + d)
      return false;
    ++k;
  }
  x = gather.getInput();
  n = repeat;
  return true;
}

Value qcc::createLeadingDimsShape(OpBuilder &b, Location loc, Value v,
                                 ArrayRef<int64_t> tail) {
  auto i64 = b.getI64Type();
  Value lead = ShapeOp::create(b, loc, RankedTensorType::get({2}, i64), v,
                               b.getI64IntegerAttr(0), b.getI64IntegerAttr(2));
  auto t = RankedTensorType::get({(int64_t)tail.size()}, i64);
  Value c = ConstantOp::create(
      b, loc, cast<ElementsAttr>(DenseElementsAttr::get(t, tail)));
  return ConcatOp::create(b, loc,
                          RankedTensorType::get({2 + (int64_t)tail.size()}, i64),
                          ValueRange{lead, c}, b.getI64IntegerAttr(0));
}

ElementsAttr qcc::gatherRows(ElementsAttr attr, ArrayRef<int64_t> rows,
                             StringRef suffix) {
  auto type = cast<RankedTensorType>(attr.getType());
  auto bytes = getBytes(attr);
  int64_t n = type.getRank() > 0 ? type.getDimSize(0) : 0;
  if (!bytes || n <= 0)
    return {};
  size_t rowBytes = bytes->size() / n;
  std::vector<char> out;
  out.reserve(rows.size() * rowBytes);
  for (int64_t r : rows) {
    if (r < 0 || r >= n)
      return {};
    out.insert(out.end(), bytes->begin() + r * rowBytes,
               bytes->begin() + (r + 1) * rowBytes);
  }
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = (int64_t)rows.size();
  return makeElements(RankedTensorType::get(shape, type.getElementType()), out,
                      blobName(attr, "linear_param") + suffix.str());
}

SmallVector<int64_t> qcc::deinterleavedRotaryOrder(int64_t heads,
                                                   int64_t headDim,
                                                   int64_t rotaryDim) {
  SmallVector<int64_t> order;
  order.reserve(heads * headDim);
  for (int64_t h = 0; h < heads; ++h) {
    int64_t base = h * headDim;
    for (int64_t parity : {0, 1})
      for (int64_t i = parity; i < rotaryDim; i += 2)
        order.push_back(base + i);
    for (int64_t i = rotaryDim; i < headDim; ++i)
      order.push_back(base + i);
  }
  return order;
}

SmallVector<int64_t> qcc::invertPermutation(ArrayRef<int64_t> perm) {
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = (int64_t)i;
  return inverse;
}

Value qcc::createLastAxisGather(OpBuilder &b, Location loc, Value v,
                                ArrayRef<int64_t> indices) {
  auto type = cast<RankedTensorType>(v.getType());
  auto indexType =
      RankedTensorType::get({(int64_t)indices.size()}, b.getI64Type());
  Value idx = ConstantOp::create(
      b, loc, cast<ElementsAttr>(DenseElementsAttr::get(indexType, indices)));
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = (int64_t)indices.size();
  return GatherOp::create(b, loc,
                          RankedTensorType::get(shape, type.getElementType()),
                          v, idx, b.getI64IntegerAttr(type.getRank() - 1));
}

std::optional<SmallVector<int64_t>>
qcc::matchLastAxisPermutation(Value v, Value &input) {
  auto gather = v.getDefiningOp<GatherOp>();
  if (!gather)
    return std::nullopt;
  auto type = cast<RankedTensorType>(gather.getInput().getType());
  int64_t rank = type.getRank(), axis = gather.getAxis();
  if (rank == 0 || (axis < 0 ? axis + rank : axis) != rank - 1 ||
      type.isDynamicDim(rank - 1))
    return std::nullopt;
  auto dense = dyn_cast_or_null<DenseElementsAttr>(
      getConstant(gather.getIndices()));
  int64_t n = type.getDimSize(rank - 1);
  if (!dense || dense.getType().getRank() != 1 || dense.getNumElements() != n)
    return std::nullopt;
  SmallVector<int64_t> perm;
  llvm::SmallBitVector seen(n);
  for (const APInt &i : dense.getValues<APInt>()) {
    int64_t p = i.getSExtValue();
    p = p < 0 ? p + n : p;
    if (p < 0 || p >= n || seen.test(p))
      return std::nullopt;
    seen.set(p);
    perm.push_back(p);
  }
  input = gather.getInput();
  return perm;
}

std::pair<Value, Value> qcc::matchSharedHeadPermutation(Value query, Value key,
                                                       int64_t headDim) {
  Value q, k;
  auto qp = matchLastAxisPermutation(query, q);
  auto kp = matchLastAxisPermutation(key, k);
  if (!qp || !kp || headDim <= 0 || qp->size() % headDim != 0 ||
      kp->size() % headDim != 0)
    return {};
  // Every head's order is head 0's of the query, within the head.
  ArrayRef<int64_t> order = ArrayRef<int64_t>(*qp).take_front(headDim);
  for (ArrayRef<int64_t> perm : {ArrayRef<int64_t>(*qp), ArrayRef<int64_t>(*kp)})
    for (auto [j, p] : llvm::enumerate(perm))
      if (p / headDim != (int64_t)j / headDim ||
          p % headDim != order[j % headDim])
        return {};
  return {q, k};
}

Value qcc::createInterleavedRotary(OpBuilder &b, Location loc, Value packed,
                                   Value cos, Value sin, int64_t headDim,
                                   int64_t rotaryDim) {
  int64_t width = cast<RankedTensorType>(packed.getType()).getDimSize(2);
  SmallVector<int64_t> order =
      deinterleavedRotaryOrder(width / headDim, headDim, rotaryDim);
  Value apart = createLastAxisGather(b, loc, packed, order);
  Value rotated = RotaryOp::create(
      b, loc, apart.getType(), apart, cos, sin, b.getI64IntegerAttr(headDim),
      rotaryDim == headDim ? IntegerAttr() : b.getI64IntegerAttr(rotaryDim));
  return createLastAxisGather(b, loc, rotated, invertPermutation(order));
}

bool qcc::isConstantNormParam(Value param, Value input) {
  auto in = cast<RankedTensorType>(input.getType());
  auto p = cast<RankedTensorType>(param.getType());
  return getConstant(param) && p.getRank() == 1 &&
         p.getDimSize(0) == in.getShape().back() &&
         p.getElementType() == in.getElementType();
}

void qcc::eraseDeadConstants(Operation *root) {
  SmallVector<ConstantOp> dead;
  root->walk([&](ConstantOp c) {
    if (c->use_empty())
      dead.push_back(c);
  });
  for (ConstantOp c : dead)
    c.erase();
}

const char *qcc::matchRmsNormalization(Value v, Value &h, double &eps) {
  Value den, var;
  if (!matchDivision(v, h, den))
    return "not a division";
  if (!matchSqrtPlusConstant(den, var, eps))
    return "the divisor is not Sqrt(mean square + constant epsilon)";
  if (eps < 0)
    return "epsilon is negative";
  Value squared = getLastAxisMeanInput(var);
  if (!squared)
    return "the mean square is not over the last axis (keepdims)";
  if (getSquareBase(squared) != h)
    return "the mean square is not of the value being divided";
  return nullptr;
}

const char *qcc::createOnesGamma(OpBuilder &b, Operation *root, Value x,
                                 Value &ones) {
  auto type = cast<RankedTensorType>(x.getType());
  if (type != root->getResult(0).getType())
    return "the result type differs from the input type";
  if (type.isDynamicDim(type.getRank() - 1))
    return "the last dimension is dynamic: no ones gamma can be built";
  ones = createSplatConstant(
      b, root->getLoc(),
      RankedTensorType::get({type.getShape().back()}, type.getElementType()),
      1.0);
  return nullptr;
}

#ifndef NDEBUG
namespace {
/// Prints one line per pattern application that ends: rewrote or declined.
struct TraceListener : RewriterBase::Listener {
  explicit TraceListener(const char *debugType) : debugType(debugType) {}

  void notifyPatternBegin(const Pattern &pattern, Operation *op) override {
    // The op may be gone when the pattern ends.
    what.clear();
    llvm::raw_string_ostream(what) << op->getName() << " at " << op->getLoc();
    reason.clear();
  }
  void notifyMatchFailure(
      Location loc, function_ref<void(Diagnostic &)> reasonCallback) override {
    Diagnostic d(loc, DiagnosticSeverity::Remark);
    reasonCallback(d);
    reason = d.str();
  }
  void notifyPatternEnd(const Pattern &pattern, LogicalResult status) override {
    DEBUG_WITH_TYPE(debugType, {
      llvm::dbgs() << debugType << ": " << pattern.getDebugName()
                   << (succeeded(status) ? " rewrote " : " declined ")
                   << what;
      if (failed(status) && !reason.empty())
        llvm::dbgs() << ": " << reason;
      llvm::dbgs() << "\n";
    });
  }

  const char *debugType;
  std::string what, reason;
};
} // namespace
#endif

LogicalResult qcc::applyPatternsTraced(Operation *op,
                                       const FrozenRewritePatternSet &patterns,
                                       const char *debugType) {
  GreedyRewriteConfig config;
#ifndef NDEBUG
  TraceListener trace(debugType);
  config.setListener(&trace);
#else
  (void)debugType; // LLVM_DEBUG compiles to nothing
#endif
  return applyPatternsGreedily(op, patterns, config);
}

std::string qcc::locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (auto name = dyn_cast<NameLoc>(l))
        return name.getName().str();
  std::string s;
  llvm::raw_string_ostream os(s);
  os << loc;
  return s;
}

//===----------------------------------------------------------------------===//
// Block linears and their calibration Hessians
//===----------------------------------------------------------------------===//

namespace {
bool isBlockOp(Operation *op) {
  return isa<AttentionOp, LayerNormOp, RmsNormOp>(op);
}

/// Whether `linear`'s result reaches an attention op through glue only (no
/// other linear or norm on the way): a q/k/v projection of the next block.
bool feedsAttention(LinearOp linear) {
  SmallVector<Operation *> work(linear->getUsers().begin(),
                                linear->getUsers().end());
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!seen.insert(op).second)
      continue;
    if (isa<AttentionOp>(op))
      return true;
    if (isa<LinearOp, LayerNormOp, RmsNormOp>(op))
      continue;
    for (Operation *u : op->getUsers())
      work.push_back(u);
  }
  return false;
}

} // namespace

bool qcc::isRouterLinear(LinearOp l) {
  SmallVector<Value> work{l.getResult()};
  // The routing ops sit a few steps after the router's linear; the bound
  // keeps a walk over a large graph short.
  for (int steps = 0; !work.empty() && steps < 64; ++steps) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isa<TopKOp>(user))
        return true;
      bool passes = isa<SoftmaxOp, SigmoidOp, CastOp, ReshapeOp, FlattenOp,
                        UnsqueezeOp, SqueezeOp>(user);
      if (isa<AddOp>(user))
        passes = llvm::any_of(user->getOperands(), [](Value o) {
          return static_cast<bool>(getConstant(o));
        });
      if (passes)
        work.append(user->result_begin(), user->result_end());
    }
  }
  return false;
}

std::string qcc::nodeName(Operation *op) {
  std::string name;
  op->getLoc()->walk([&](Location l) {
    if (auto n = dyn_cast<NameLoc>(l)) {
      name = n.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return name;
}

llvm::DenseMap<Operation *, int64_t> qcc::blockLayers(func::FuncOp fn) {
  // Ops from which an attention or a norm is reachable: the last block's
  // down projection reaches the final norm, the LM head nothing.
  llvm::DenseSet<Operation *> reachesBlock;
  SmallVector<Operation *> ops;
  fn.walk([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : llvm::reverse(ops)) {
    bool r = isBlockOp(op);
    for (Operation *u : op->getUsers())
      r = r || reachesBlock.contains(u);
    if (r)
      reachesBlock.insert(op);
  }
  llvm::DenseMap<Operation *, int64_t> out;
  int64_t attentions = 0;
  for (Operation *op : ops) {
    if (isa<AttentionOp>(op))
      ++attentions;
    auto l = dyn_cast<LinearOp>(op);
    if (!l)
      continue;
    int64_t layer = feedsAttention(l) ? attentions : attentions - 1;
    out[op] = reachesBlock.contains(op) ? layer : -1;
  }
  return out;
}


std::optional<std::vector<double>> qcc::inputGram(LinearOp l, StringRef pass,
                                                  StringRef method,
                                                  StringRef label) {
  int64_t k = l.getWeight().getType().getDimSize(1);
  auto gram = l->getAttrOfType<ElementsAttr>(kInputGramAttr);
  auto type = gram ? cast<ShapedType>(gram.getType()) : ShapedType();
  auto bytes = gram ? getBytes(gram) : std::nullopt;
  if (!gram || !type.getElementType().isF64() || type.getRank() != 2 ||
      type.getDimSize(0) != k || type.getDimSize(1) != k) {
    l.emitError(pass) << ": " << method
                      << " needs the input's Gram matrix (qcc.input_gram, "
                         "f64 ["
                      << k << ", " << k << "]) on " << label << " (calibrate)";
    return std::nullopt;
  }
  if (!bytes || bytes->size() != (size_t)(k * k) * sizeof(double)) {
    l.emitError(pass) << ": the Gram matrix of " << label << " has no data";
    return std::nullopt;
  }
  std::vector<double> H((size_t)(k * k));
  std::memcpy(H.data(), bytes->data(), bytes->size());
  return H;
}

std::shared_ptr<obs::InverseHessian>
qcc::inverseHessianOf(LinearOp l, StringRef pass, StringRef method,
                      StringRef label, double dampening,
                      InverseHessianCache &cache) {
  auto gram = l->getAttrOfType<ElementsAttr>(kInputGramAttr);
  if (gram)
    if (auto it = cache.find(gram); it != cache.end())
      return it->second;
  auto H = inputGram(l, pass, method, label);
  if (!H)
    return nullptr;
  int64_t k = l.getWeight().getType().getDimSize(1);
  auto f = std::make_shared<obs::InverseHessian>();
  if (auto err = obs::factorInverseHessian(std::move(*H), k, dampening, *f)) {
    l.emitError(pass) << ": " << label << ": " << *err;
    return nullptr;
  }
  cache[gram] = f;
  return f;
}
