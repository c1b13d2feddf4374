//===- RaiseAttention.cpp - raise-attention ----------------------------------------===//
//
// Raises exporter-written scaled dot-product attention, with its head split
// and merge, to qcc.attention on the packed [B, S, H * D] projections:
//
//   Reshape(Transpose[0, 2, 1, 3](MatMul(Softmax(mask(scale(MatMul(Q, K^T)))),
//                                        V)) -> [B, S, H * D])
//
// Q, K and V are head splits Transpose[0, 2, 1, 3](Reshape(packed)); K and V
// may be repeated over query-head groups (repeat_kv, or per token by a Gather
// of whole heads: GQA). Causality is only
// set where the mask is proven causal from its constants; any other additive
// mask becomes the op's mask operand.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccOps.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace qcc {
#define GEN_PASS_DEF_RAISEATTENTION
#include "passes/Passes.h.inc"
} // namespace qcc

#define DEBUG_TYPE "qcc-raise-attention"

using namespace mlir;
using namespace qcc;

namespace {

static bool isPerm(TransposeOp t, ArrayRef<int64_t> perm) {
  return t && t.getPerm() == perm;
}

static Value skipNoOpCasts(Value v) {
  while (auto cast = v.getDefiningOp<CastOp>()) {
    if (cast.getInput().getType() != cast.getType())
      break;
    v = cast.getInput();
  }
  return v;
}

/// One of Q, K, V: `packed` [B, S, heads * headDim] viewed as
/// [B, heads * repeat, S, headDim], every kv head repeated `repeat` times.
/// For K and V, `past` (if set) is an exporter's cache [B, heads, P, headDim]
/// that the heads of `packed` are appended to (HF `past_key_values`).
struct Heads {
  Value packed;
  Value past;
  int64_t heads = 0, headDim = 0, repeat = 1;
  /// A rotary applied to the repeated heads, to apply to `packed` instead.
  RotaryOp rotary;
};

/// Matches `v` = heads of a packed value (`matchHeadsBHSD`).
static std::optional<Heads> matchBHSD(Value v) {
  Heads h;
  if (!matchHeadsBHSD(v, h.packed, h.heads, h.headDim))
    return std::nullopt;
  return h;
}

/// K or V heads `h` of a packed value of kv heads repeated per token
/// (`createRepeatedHeads`: Falcon's new decoder architecture), also under a
/// rotary (which rotates every head alike, so it commutes with the repeat),
/// become the heads of the repeat's source, repeated.
static void seeThroughRepeatedHeads(Heads &h) {
  Value x = h.packed;
  auto rotary = x.getDefiningOp<RotaryOp>();
  if (rotary && (int64_t)rotary.getHeadDim() == h.headDim)
    x = rotary.getInput();
  else
    rotary = {};
  Value source;
  int64_t n = 1;
  if (!matchRepeatedHeads(x, h.headDim, source, n) || h.heads % n != 0)
    return;
  h.packed = source;
  h.heads /= n;
  h.repeat = n;
  h.rotary = rotary;
}

/// Matches `v` = K or V heads: `matchBHSD`, seen through a repeat.
static std::optional<Heads> matchKvHeads(Value v) {
  auto h = matchBHSD(v);
  if (h)
    seeThroughRepeatedHeads(*h);
  return h;
}

/// Matches `v` = `matchBHSD`, or the cache append
/// Concat(past [B, H, P, D], `matchBHSD`, axis 2) with any `past` whose head
/// count and size (where static) are those of the split.
static std::optional<Heads> matchKvBHSD(Value v) {
  auto cat = v.getDefiningOp<ConcatOp>();
  if (!cat)
    return matchKvHeads(v);
  int64_t axis = cat.getAxis();
  if (cat.getType().getRank() != 4 || (axis != 2 && axis != -2) ||
      cat.getInputs().size() != 2)
    return std::nullopt;
  auto h = matchKvHeads(cat.getInputs()[1]);
  if (!h)
    return std::nullopt;
  Value past = cat.getInputs()[0];
  auto pt = cast<RankedTensorType>(past.getType());
  auto dimIs = [&](int64_t i, int64_t n) {
    return pt.isDynamicDim(i) || pt.getDimSize(i) == n;
  };
  if (pt.getRank() != 4 || !dimIs(1, h->heads) || !dimIs(3, h->headDim))
    return std::nullopt;
  h->past = past;
  return h;
}

/// Matches `v` = `matchKvBHSD`, or repeat_kv of it:
/// Reshape(Expand(Unsqueeze(x, 2), [B, Hkv, n, S, D]) -> [B, Hkv * n, S, D]).
static std::optional<Heads> matchRepeatedBHSD(Value v) {
  if (auto h = matchKvBHSD(v))
    return h;
  // repeat_kv of heads repeated already is not taken (one repeat per K/V).
  auto reshape = v.getDefiningOp<ReshapeOp>();
  if (!reshape || reshape.getType().getRank() != 4)
    return std::nullopt;
  auto expand = reshape.getInput().getDefiningOp<ExpandOp>();
  if (!expand || expand.getType().getRank() != 5)
    return std::nullopt;
  auto unsq = expand.getInput().getDefiningOp<UnsqueezeOp>();
  if (!unsq || unsq.getType().getRank() != 5 || unsq.getAxes().size() != 1 ||
      (unsq.getAxes()[0] != 2 && unsq.getAxes()[0] != -3))
    return std::nullopt;
  Value x = unsq.getInput();
  auto h = matchKvBHSD(x);
  if (!h || h->repeat != 1)
    return std::nullopt;
  // Expand broadcasts only the inserted axis, to n copies.
  auto shape = getFoldedDimExprs(expand.getShape());
  if (shape.size() != 5)
    return std::nullopt;
  auto xDim = [&](int64_t i) { return resolveDimExpr(x, i); };
  const int64_t xAxis[5] = {0, 1, -1, 2, 3};
  for (int64_t i : {0, 1, 3, 4}) {
    const DimExpr &s = shape[i];
    if (s.isConstant() && s.constant == 1)
      continue;
    if (!(resolveDimExpr(s) == xDim(xAxis[i])))
      return std::nullopt;
  }
  if (!shape[2].isConstant() || shape[2].constant < 1)
    return std::nullopt;
  int64_t n = shape[2].constant;
  // The reshape merges the kv-head and copy axes.
  auto target = getFoldedDimExprs(reshape.getShape());
  if (target.size() != 4)
    return std::nullopt;
  int64_t inferred = 0;
  auto keeps = [&](const DimExpr &t, int64_t xi, bool copyOk) {
    if (t.isConstant() && t.constant == -1)
      return ++inferred, true;
    if (t.isConstant() && t.constant == 0)
      return copyOk;
    return resolveDimExpr(t) == xDim(xi);
  };
  if (!keeps(target[0], 0, /*copyOk=*/true) ||
      !keeps(target[2], 2, /*copyOk=*/false) ||
      !keeps(target[3], 3, /*copyOk=*/false))
    return std::nullopt;
  const DimExpr &merged = target[1];
  if (merged.isConstant() && merged.constant == -1)
    ++inferred;
  else if (!merged.isConstant() || merged.constant != h->heads * n)
    return std::nullopt;
  if (inferred > 1)
    return std::nullopt;
  h->repeat = n;
  return h;
}

/// Matches `kt` = K^T as [B, H, D, S]: Transpose[0, 2, 3, 1](head split) or
/// Transpose[0, 1, 3, 2](`matchRepeatedBHSD`).
static std::optional<Heads> matchKeyTransposed(Value kt) {
  auto t = kt.getDefiningOp<TransposeOp>();
  if (isPerm(t, {0, 2, 3, 1})) {
    Heads h;
    if (!matchHeadSplit(t.getInput(), h.packed, h.heads, h.headDim))
      return std::nullopt;
    seeThroughRepeatedHeads(h);
    return h;
  }
  if (isPerm(t, {0, 1, 3, 2}))
    return matchRepeatedBHSD(t.getInput());
  return std::nullopt;
}

/// True if the 1-element `starts` vector is kLen - qLen.
static bool isDifference(Value starts, const DimExpr &kLen,
                         const DimExpr &qLen) {
  if (auto c = getFoldedIndex(starts)) {
    if (kLen.isConstant() && qLen.isConstant())
      return *c == kLen.constant - qLen.constant;
    return *c == 0 && kLen == qLen;
  }
  Value v = starts;
  while (isa_and_nonnull<UnsqueezeOp, SqueezeOp, CastOp, ReshapeOp>(
      v.getDefiningOp()))
    v = v.getDefiningOp()->getOperand(0);
  auto sub = v.getDefiningOp<SubOp>();
  if (!sub)
    return false;
  auto a = getFoldedDimExprs(sub.getLhs());
  auto b = getFoldedDimExprs(sub.getRhs());
  return a.size() == 1 && b.size() == 1 && resolveDimExpr(a[0]) == kLen &&
         resolveDimExpr(b[0]) == qLen;
}

static bool isIndex(Value v, const DimExpr &expected) {
  auto e = getFoldedDimExprs(v);
  return e.size() == 1 && resolveDimExpr(e[0]) == expected;
}

/// True if the boolean `mask` (true = keep) is the causal mask for `qLen`
/// queries and `kLen` keys: a constant lower-triangular [.., N, N] buffer
/// with rows sliced to [kLen - qLen, kLen) (or [0, kLen) when qLen and kLen
/// are the same dimension) and columns to [0, kLen).
static bool isCausalBoolMask(Value mask, const DimExpr &qLen,
                             const DimExpr &kLen) {
  Value v = skipNoOpCasts(mask);
  int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
  if (rank < 2)
    return false;
  bool rowsOk = false, colsOk = false;
  while (auto slice = v.getDefiningOp<SliceOp>()) {
    auto axes = slice.getAxes();
    if (axes.size() != 1 || slice.getSteps()[0] != 1)
      return false;
    int64_t axis = axes[0] < 0 ? axes[0] + rank : axes[0];
    if (axis == rank - 2 && !rowsOk) {
      // Rows [kLen - qLen, kLen); with as many queries as keys, [0, kLen).
      bool fromZero = qLen == kLen && getFoldedIndex(slice.getStarts()) == 0;
      rowsOk = (fromZero || isDifference(slice.getStarts(), kLen, qLen)) &&
               isIndex(slice.getEnds(), kLen);
      if (!rowsOk)
        return false;
    } else if (axis == rank - 1 && !colsOk) {
      colsOk = getFoldedIndex(slice.getStarts()) == 0 &&
               isIndex(slice.getEnds(), kLen);
      if (!colsOk)
        return false;
    } else {
      return false;
    }
    v = slice.getInput();
  }
  if (!rowsOk || !colsOk)
    return false;
  auto dense = dyn_cast_or_null<DenseElementsAttr>(getConstant(v));
  if (!dense || !dense.getElementType().isInteger(1))
    return false;
  auto shape = dense.getType().getShape();
  int64_t n = shape[rank - 2], m = shape[rank - 1];
  for (int64_t i = 0; i < rank - 2; ++i)
    if (shape[i] != 1)
      return false;
  if (dense.isSplat())
    return false;
  auto values = llvm::to_vector(dense.getValues<bool>());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j)
      if (values[i * m + j] != (j <= i))
        return false;
  return true;
}

/// True if the additive `mask` is the causal mask for `qLen` queries and
/// `kLen` keys (equal): Trilu(ConstantOfShape([qLen, kLen], -inf), upper,
/// k = 1) with leading axes added by Unsqueeze.
static bool isCausalAdditiveMask(Value mask, const DimExpr &qLen,
                                 const DimExpr &kLen) {
  Value v = skipNoOpCasts(mask);
  int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
  while (auto unsq = v.getDefiningOp<UnsqueezeOp>()) {
    int64_t r = unsq.getType().getRank();
    for (int64_t a : unsq.getAxes())
      if ((a < 0 ? a + r : a) >= r - 2)
        return false;
    v = skipNoOpCasts(unsq.getInput());
  }
  (void)rank;
  auto trilu = v.getDefiningOp<TriluOp>();
  if (!trilu || !trilu.getUpper() || static_cast<int64_t>(trilu.getK()) != 1 ||
      trilu.getType().getRank() != 2)
    return false;
  auto fill = trilu.getInput().getDefiningOp<ConstantOfShapeOp>();
  if (!fill)
    return false;
  auto value = dyn_cast<DenseElementsAttr>(fill.getValue());
  if (!value || !value.isSplat() ||
      !isa<FloatType>(value.getElementType()) ||
      !(value.getSplatValue<APFloat>().convertToDouble() <= kMaskedBelow))
    return false;
  auto dims = getFoldedDimExprs(fill.getShape());
  // k = 1 masks j > i: causal only when the key offset kLen - qLen is zero.
  return dims.size() == 2 && resolveDimExpr(dims[0]) == qLen &&
         resolveDimExpr(dims[1]) == kLen && qLen == kLen;
}

/// The packed keys (or values) the op attends over: `h.packed` (rotated by
/// `h.rotary` if set), or with a past, Concat(Reshape(Transpose[0, 2, 1,
/// 3](past), [B, P, H * D]), packed, axis 1).
static Value buildPackedKv(PatternRewriter &rewriter, Location loc,
                           const Heads &h) {
  if (RotaryOp rotary = h.rotary) {
    // The rotary of the repeated heads, on the heads before the repeat.
    Value rotated = RotaryOp::create(
        rewriter, loc, h.packed.getType(), h.packed, rotary.getCos(),
        rotary.getSin(), rotary.getHeadDimAttr(), rotary.getRotaryDimAttr());
    Heads r = h;
    r.packed = rotated;
    r.rotary = {};
    return buildPackedKv(rewriter, loc, r);
  }
  if (!h.past)
    return h.packed;
  auto pt = cast<RankedTensorType>(h.past.getType());
  auto nt = cast<RankedTensorType>(h.packed.getType());
  Type et = nt.getElementType();
  int64_t width = h.heads * h.headDim;
  auto bshd = TransposeOp::create(
      rewriter, loc,
      RankedTensorType::get({pt.getDimSize(0), pt.getDimSize(2), h.heads,
                             h.headDim},
                            et),
      h.past, rewriter.getDenseI64ArrayAttr({0, 2, 1, 3}));
  auto i64 = rewriter.getI64Type();
  auto bp = ShapeOp::create(rewriter, loc, RankedTensorType::get({2}, i64),
                            bshd, rewriter.getI64IntegerAttr(0),
                            rewriter.getI64IntegerAttr(2));
  auto widthType = RankedTensorType::get({1}, i64);
  auto widthConst = ConstantOp::create(
      rewriter, loc,
      cast<ElementsAttr>(DenseElementsAttr::get(widthType, width)));
  auto shape = ConcatOp::create(rewriter, loc, RankedTensorType::get({3}, i64),
                                ValueRange{bp, widthConst},
                                rewriter.getI64IntegerAttr(0));
  auto packedPast = ReshapeOp::create(
      rewriter, loc,
      RankedTensorType::get({pt.getDimSize(0), pt.getDimSize(2), width}, et),
      bshd, shape);
  int64_t batch = nt.getDimSize(0);
  if (batch == ShapedType::kDynamic)
    batch = pt.getDimSize(0);
  int64_t len = ShapedType::kDynamic;
  if (!pt.isDynamicDim(2) && !nt.isDynamicDim(1))
    len = pt.getDimSize(2) + nt.getDimSize(1);
  return ConcatOp::create(rewriter, loc,
                          RankedTensorType::get({batch, len, width}, et),
                          ValueRange{packedPast, h.packed},
                          rewriter.getI64IntegerAttr(1));
}

/// The softmax of `p` = Softmax(x), or of torch's guard for fully masked rows
/// Where(IsNaN(Softmax(x)), 0, Softmax(x)): qcc.softmax already gives such
/// rows zeros (and NaN only from a NaN input, which the guard would hide).
static SoftmaxOp getSoftmax(Value p) {
  if (auto where = p.getDefiningOp<WhereOp>()) {
    auto isNan = where.getCondition().getDefiningOp<IsNaNOp>();
    if (!isNan || isNan.getInput() != where.getRhs() ||
        getSplatValue(where.getLhs()) != std::optional<double>(0.0))
      return {};
    p = where.getRhs();
  }
  return p.getDefiningOp<SoftmaxOp>();
}

struct RaiseAttentionPattern : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReshapeOp merge,
                                PatternRewriter &rewriter) const override {
    // Head merge: Reshape(Transpose[0, 2, 1, 3](MatMul(P, V))) -> [B, S, H*D].
    auto outType = merge.getType();
    if (merge.getInput().getType().getRank() != 4)
      return rewriter.notifyMatchFailure(merge, "not a reshape of 4-D heads");
    auto mergeT = merge.getInput().getDefiningOp<TransposeOp>();
    if (!isPerm(mergeT, {0, 2, 1, 3}))
      return rewriter.notifyMatchFailure(merge,
                                         "input is not a [0, 2, 1, 3] transpose");
    auto pv = mergeT.getInput().getDefiningOp<MatMulOp>();
    if (!pv)
      return rewriter.notifyMatchFailure(merge, "not a head merge of a matmul");
    auto softmax = getSoftmax(pv.getLhs());
    if (!softmax)
      return rewriter.notifyMatchFailure(merge, "P is not a softmax");
    int64_t sRank = softmax.getType().getRank();
    if (int64_t axis = softmax.getAxis(); sRank != 4 || (axis != -1 && axis != 3))
      return rewriter.notifyMatchFailure(merge,
                                         "softmax is not over the key axis");

    // Mask, then scale, then Q K^T.
    Value scores = softmax.getInput();
    Value maskValue, boolMask;
    Operation *maskScale = nullptr; // scales the mask too (mask first)
    Value maskAddend; // a bias added before maskValue (null: none)
    WhereOp maskWhere; // a Where to rebuild as the additive mask
    Value maskBias;    // its kept operand's bias (null: 0)
    bool maskFillFirst = false;
    Value qkLhs, qkRhs; // Q and K^T without their sqrt(scale) factors
    double softcap = 0.0;  // Gemma-2's cap * tanh(x / cap) (0 = none)
    auto matchScaled = [&](Value s, MatMulOp &qk, double &scale) {
      scale = 1.0;
      softcap = 0.0;
      if (auto capMul = s.getDefiningOp<MulOp>()) {
        auto tanh = capMul.getLhs().getDefiningOp<TanhOp>();
        auto div = tanh ? tanh.getInput().getDefiningOp<DivOp>() : DivOp();
        auto cap = getSplatValue(capMul.getRhs());
        if (div && cap && *cap > 0.0 && isSplatNear(div.getRhs(), *cap)) {
          softcap = *cap;
          s = div.getLhs();
        }
      }
      Value inner = s;
      if (auto div = s.getDefiningOp<DivOp>()) {
        auto c = getSplatValue(div.getRhs());
        if (!c || *c == 0.0)
          return false;
        scale = 1.0 / *c;
        inner = div.getLhs();
      } else if (auto mul = s.getDefiningOp<MulOp>()) {
        bool ok = matchCommutative(mul, [&](Value a, Value c) {
          auto cv = getSplatValue(c);
          if (!cv || !isa<FloatType>(
                         cast<RankedTensorType>(c.getType()).getElementType()))
            return false;
          scale = *cv;
          inner = a;
          return true;
        });
        if (!ok)
          return false;
      }
      qk = inner.getDefiningOp<MatMulOp>();
      if (!qk)
        return false;
      // torch's SDPA decomposition scales Q and K^T by sqrt(scale) each.
      auto operandScale = [&](Value v) -> std::optional<double> {
        auto mul = v.getDefiningOp<MulOp>();
        if (!mul)
          return std::nullopt;
        auto c = mul.getRhs();
        if (cast<RankedTensorType>(c.getType()).getNumElements() != 1)
          return std::nullopt;
        return getSplatValue(c);
      };
      auto qs = operandScale(qk.getLhs()), ks = operandScale(qk.getRhs());
      if (qs && ks && scale == 1.0) {
        scale = *qs * *ks;
        qkLhs = qk.getLhs().getDefiningOp<MulOp>().getLhs();
        qkRhs = qk.getRhs().getDefiningOp<MulOp>().getLhs();
      } else {
        qkLhs = qk.getLhs();
        qkRhs = qk.getRhs();
      }
      return true;
    };
    MatMulOp qk;
    double scale = 1.0;
    if (auto where = scores.getDefiningOp<WhereOp>()) {
      // Where(keep, scores, fill), masked_fill's Where(Not(keep), fill,
      // scores) or Where(masked, fill, scores); the scores may carry an
      // additive bias (MPT's ALiBi): Where(.., scores + bias, ..).
      bool fillFirst = false;
      auto isFill = [](Value v) {
        auto f = getSplatValue(v);
        return f && *f <= kMaskedBelow;
      };
      Value kept;
      if (isFill(where.getRhs())) {
        kept = where.getLhs();
        boolMask = where.getCondition();
      } else if (isFill(where.getLhs())) {
        fillFirst = true;
        kept = where.getRhs();
        auto notOp = where.getCondition().getDefiningOp<NotOp>();
        boolMask = notOp ? notOp.getInput() : Value();
      } else {
        return rewriter.notifyMatchFailure(
            merge, "Where does not fill a very negative value");
      }
      Value bias;
      if (!matchScaled(kept, qk, scale)) {
        bool ok = matchCommutative(kept.getDefiningOp<AddOp>(),
                                   [&](Value s, Value m) {
                                     if (!matchScaled(s, qk, scale))
                                       return false;
                                     bias = m;
                                     return true;
                                   });
        if (!ok)
          return rewriter.notifyMatchFailure(
              merge, "Where does not keep [biased] scaled Q K^T");
      }
      DimExpr qLen = resolveDimExpr(qkLhs, 2), kLen = resolveDimExpr(qkRhs, 3);
      if (bias || !boolMask || !isCausalBoolMask(boolMask, qLen, kLen)) {
        // Not a proven causal buffer: the same Where over the bias (or 0)
        // is the additive mask (kv-cache-layout proves what it is), built
        // once everything else matched.
        maskWhere = where;
        maskBias = bias;
        maskFillFirst = fillFirst;
        boolMask = {};
      }
    } else if (!matchScaled(scores, qk, scale)) {
      // Add(scores, mask), or Add(scores + bias, mask): BLOOM's baddbmm adds
      // its ALiBi bias before the mask; both make the additive mask.
      auto add = scores.getDefiningOp<AddOp>();
      bool ok = matchCommutative(add, [&](Value s, Value m) {
        maskValue = m;
        if (matchScaled(s, qk, scale))
          return true;
        return matchCommutative(s.getDefiningOp<AddOp>(),
                                [&](Value s2, Value bias) {
                                  maskAddend = bias;
                                  return matchScaled(s2, qk, scale);
                                });
      });
      // CodeGen masks before it scales: (Q K^T + m) / c is Q K^T / c with
      // the additive mask m / c (Div or Mul by a scalar).
      Operation *scaleOp = scores.getDefiningOp();
      if (!ok && isa_and_nonnull<DivOp, MulOp>(scaleOp)) {
        Value c = scaleOp->getOperand(1);
        auto cv = getSplatValue(c);
        ok = cv && *cv != 0.0 &&
             cast<RankedTensorType>(c.getType()).getNumElements() == 1 &&
             matchCommutative(
                 scaleOp->getOperand(0).getDefiningOp<AddOp>(),
                 [&](Value s, Value m) {
                   if (!matchScaled(s, qk, scale) || softcap != 0.0)
                     return false;
                   maskValue = m;
                   return true;
                 });
        if (ok) {
          scale *= isa<DivOp>(scaleOp) ? 1.0 / *cv : *cv;
          maskScale = scaleOp;
        }
      }
      if (!ok)
        return rewriter.notifyMatchFailure(
            merge, "softmax input is not [masked] [scaled] Q K^T");
    }

    auto q = matchBHSD(qkLhs);
    if (!q)
      return rewriter.notifyMatchFailure(
          merge, "Q is not a head split of a packed [B, S, H * D] value");
    auto k = matchKeyTransposed(qkRhs);
    if (!k)
      return rewriter.notifyMatchFailure(
          merge, "K^T is not a transposed head split (or repeat_kv of one)");
    auto v = matchRepeatedBHSD(pv.getRhs());
    if (!v)
      return rewriter.notifyMatchFailure(
          merge, "V is not a head split (or repeat_kv of one)");
    int64_t heads = q->heads, kvHeads = k->heads;
    if (v->heads != kvHeads || k->headDim != q->headDim ||
        v->headDim != q->headDim)
      return rewriter.notifyMatchFailure(merge, "K and V head shapes differ");
    if (static_cast<bool>(k->past) != static_cast<bool>(v->past))
      return rewriter.notifyMatchFailure(
          merge, "only one of K and V is appended to a past");
    if (k->repeat != v->repeat || heads % kvHeads != 0 ||
        (kvHeads * k->repeat != heads && kvHeads * k->repeat != 1))
      return rewriter.notifyMatchFailure(
          merge, "kv heads are not repeated to the query heads");

    // The merge puts the heads back where the Q split took them from: the
    // op replaces it. Any other reshape of the [B, Sq, H, D] heads (GPT-2's
    // Conv1D flattens them to [B * Sq, H * D]) is the same reshape of the
    // op's [B, Sq, H * D] result, so it stays, applied to the op.
    auto target = getFoldedDimExprs(merge.getShape());
    auto keeps = [&](int64_t i, int64_t qAxis) {
      const DimExpr &t = target[i];
      if (t.isConstant() && t.constant == 0)
        return true;
      // The target may name B and S through Q's producers.
      return t.isKnown() &&
             resolveDimExpr(t) == resolveDimExpr(qkLhs, qAxis);
    };
    int64_t width = heads * q->headDim;
    bool direct =
        outType == q->packed.getType() && target.size() == 3 &&
        (reshapeKeepsLeadingDims(merge, 2) || (keeps(0, 0) && keeps(1, 2))) &&
        target[2].isConstant() &&
        (target[2].constant == width ||
         (target[2].constant == -1 && outType.getDimSize(2) == width));

    bool causal = false;
    DimExpr qLen = resolveDimExpr(qkLhs, 2);
    DimExpr kLen = resolveDimExpr(qkRhs, 3);
    if (boolMask) { // kept only where proven causal (the Where branch above)
      causal = true;
    } else if (maskValue && !maskAddend &&
               isCausalAdditiveMask(maskValue, qLen, kLen)) {
      causal = true;
      maskValue = {};
    }
    for (Value m : {maskValue, maskAddend}) {
      if (!m)
        continue;
      auto mt = cast<RankedTensorType>(m.getType());
      if (mt.getRank() > 4 ||
          mt.getElementType() != outType.getElementType() ||
          mt.getRank() < 1)
        return rewriter.notifyMatchFailure(merge, "unsupported mask type");
    }
    if (maskScale && maskValue) { // m / c (CodeGen), maskAddend is null
      OperationState state(maskScale->getLoc(), maskScale->getName());
      state.addOperands({maskValue, maskScale->getOperand(1)});
      state.addTypes(maskValue.getType());
      maskValue = rewriter.create(state)->getResult(0);
    }
    if (maskAddend) {
      // bias + mask: kv-cache-layout proves what it is (causal + padding
      // + ALiBi for BLOOM).
      int64_t rank =
          std::max(cast<RankedTensorType>(maskValue.getType()).getRank(),
                   cast<RankedTensorType>(maskAddend.getType()).getRank());
      maskValue = AddOp::create(
          rewriter, merge.getLoc(),
          RankedTensorType::get(SmallVector<int64_t>(rank, ShapedType::kDynamic),
                                outType.getElementType()),
          maskAddend, maskValue);
    }
    if (maskWhere) {
      Type et = outType.getElementType();
      auto condType = cast<RankedTensorType>(maskWhere.getCondition().getType());
      int64_t rank = condType.getRank();
      if (maskBias) {
        auto bt = cast<RankedTensorType>(maskBias.getType());
        rank = std::max(rank, bt.getRank());
        if (bt.getElementType() != et)
          return rewriter.notifyMatchFailure(merge, "unsupported bias type");
      }
      if (rank > 4 || rank < 1 ||
          cast<RankedTensorType>(maskWhere.getType()).getElementType() != et)
        return rewriter.notifyMatchFailure(merge, "unsupported mask type");
      Value bias = maskBias;
      if (!bias)
        bias = ConstantOp::create(
            rewriter, merge.getLoc(),
            cast<ElementsAttr>(DenseElementsAttr::get(
                RankedTensorType::get({}, et), rewriter.getFloatAttr(et, 0.0))));
      auto maskType = RankedTensorType::get(
          SmallVector<int64_t>(rank, ShapedType::kDynamic), et);
      Value fill = maskFillFirst ? maskWhere.getLhs() : maskWhere.getRhs();
      maskValue = WhereOp::create(rewriter, merge.getLoc(), maskType,
                                  maskWhere.getCondition(),
                                  maskFillFirst ? fill : bias,
                                  maskFillFirst ? bias : fill);
    }

    // With a past, the op attends over the past and the new keys/values,
    // packed; the head-layout Concat (the exporter's `present`) stays for
    // its other users.
    Value keys = buildPackedKv(rewriter, merge.getLoc(), *k);
    Value values = buildPackedKv(rewriter, merge.getLoc(), *v);
    auto attention = AttentionOp::create(
        rewriter, merge.getLoc(), q->packed.getType(), q->packed, keys, values,
        maskValue, rewriter.getI64IntegerAttr(heads),
        rewriter.getI64IntegerAttr(kvHeads),
        rewriter.getF32FloatAttr(static_cast<float>(scale)),
        rewriter.getBoolAttr(causal), rewriter.getI64IntegerAttr(0),
        rewriter.getF32FloatAttr(static_cast<float>(softcap)));
    if (direct) {
      rewriter.replaceOp(merge, attention.getResult());
      return success();
    }
    rewriter.replaceOpWithNewOp<ReshapeOp>(merge, outType, attention.getResult(),
                                           merge.getShape());
    return success();
  }
};

/// Attention(Gather(q, P), Gather(k, P), v) with P one order of the features
/// within every head -> Attention(q, k, v): the scores do not depend on that
/// order (raise-rotary leaves such gathers around an interleaved rotary).
/// Only a key without a past is taken: a past holds keys in the model's
/// order.
struct DropSharedHeadPermutation : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp attention,
                                PatternRewriter &rewriter) const override {
    int64_t width = attention.getQuery().getType().getDimSize(2);
    if (width == ShapedType::kDynamic)
      return rewriter.notifyMatchFailure(attention, "query width not static");
    // Plain values, not structured bindings: clang rejects capturing a
    // binding in the lambda below.
    auto unpermuted = matchSharedHeadPermutation(
        attention.getQuery(), attention.getKey(),
        width / (int64_t)attention.getNumHeads());
    Value q = unpermuted.first, k = unpermuted.second;
    if (!q)
      return rewriter.notifyMatchFailure(
          attention, "q and k are not permuted alike within each head");
    rewriter.modifyOpInPlace(attention, [&] {
      attention.getQueryMutable().assign(q);
      attention.getKeyMutable().assign(k);
    });
    return success();
  }
};

/// Whether `softmax` normalizes attention scores: its input is, through
/// the elementwise steps a mask, scale, bias or softcap takes, a MatMul of
/// two computed operands (Q K^T; a router or a classifier multiplies by a
/// weight, a constant).
static bool normalizesScores(SoftmaxOp softmax) {
  SmallVector<Value> work = {softmax.getInput()};
  for (int steps = 0; !work.empty() && steps < 32; ++steps) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (auto mm = dyn_cast_or_null<MatMulOp>(def))
      return !getConstant(mm.getLhs()) && !getConstant(mm.getRhs());
    if (isa_and_nonnull<AddOp, SubOp, MulOp, DivOp, WhereOp, TanhOp, CastOp>(
            def))
      for (Value v : def->getOperands())
        if (!getConstant(v))
          work.push_back(v);
  }
  return false;
}

/// The reason RaiseAttentionPattern declines attention with probabilities
/// `softmax`: its notifyMatchFailure message on the head merge the
/// probabilities reach, Reshape(Transpose(MatMul(P, V))), or that there is
/// no such merge.
static std::string declineReason(SoftmaxOp softmax) {
  for (Operation *pUser : softmax->getUsers()) {
    // torch's NaN guard (getSoftmax) sits between P and its MatMul.
    SmallVector<Operation *> pvs = {pUser};
    if (isa<WhereOp>(pUser))
      pvs.assign(pUser->getUsers().begin(), pUser->getUsers().end());
    for (Operation *pv : pvs) {
      if (!isa<MatMulOp>(pv))
        continue;
      for (Operation *t : pv->getUsers())
        for (Operation *merge : t->getUsers()) {
          auto reshape = dyn_cast<ReshapeOp>(merge);
          if (!isa<TransposeOp>(t) || !reshape)
            continue;
          struct Recorder : RewriterBase::Listener {
            std::string reason;
            void notifyMatchFailure(
                Location loc,
                function_ref<void(Diagnostic &)> reasonCallback) override {
              Diagnostic d(loc, DiagnosticSeverity::Remark);
              reasonCallback(d);
              if (reason.empty())
                reason = d.str();
            }
          } recorder;
          PatternRewriter rewriter(softmax.getContext());
          rewriter.setListener(&recorder);
          // The driver left it unmatched, so this declines again (a
          // pattern changes nothing before it succeeds).
          if (failed(RaiseAttentionPattern(softmax.getContext())
                         .matchAndRewrite(reshape, rewriter)))
            return recorder.reason.empty() ? "no reason given"
                                           : recorder.reason;
        }
    }
  }
  return "its output P V is not merged back to [B, S, H * D] as "
         "Reshape(Transpose[0, 2, 1, 3](P V))";
}

struct RaiseAttentionPass : qcc::impl::RaiseAttentionBase<RaiseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseAttentionPattern, DropSharedHeadPermutation>(
        &getContext());
    if (failed(applyPatternsTraced(getOperation(), std::move(patterns),
                                   DEBUG_TYPE)))
      return signalPassFailure();
    // Attention left as separate ops runs without the fused kernels and,
    // in a decoder, without a KV cache (full recompute per token): say so
    // once, with the first such attention's node and the reason.
    SmallVector<SoftmaxOp> left;
    getOperation().walk([&](SoftmaxOp s) {
      if (normalizesScores(s))
        left.push_back(s);
    });
    if (left.empty())
      return;
    std::string reason = declineReason(left.front());
    InFlightDiagnostic w = left.front().emitWarning()
                           << "raise-attention: attention at node '"
                           << locationName(left.front().getLoc())
                           << "' not raised: " << reason;
    if (left.size() > 1)
      w << " (and " << left.size() - 1 << " more)";
    w << "; it runs as separate ops, without fused kernels or a KV cache";
  }
};
} // namespace
