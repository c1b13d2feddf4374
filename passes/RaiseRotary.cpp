//===- RaiseRotary.cpp - raise-rotary ----------------------------------------===//
//
// Raises the rotary embedding that exporters write on a head view of a
// projection, the head split x [B, S, H, D] = Reshape(packed) or its
// [B, H, S, D] transpose,
//
//   x * cos + rotate_half(x) * sin,    rotate_half(x) = Concat(-x[..., D/2:],
//                                                               x[..., :D/2])
//
// to qcc.rotary on the packed [B, S, H * D] value, re-applying the head view
// after it so that raise-attention sees Transpose(Reshape(qcc.rotary(...))).
// A partial rotary, Concat(rotation of x[..., :R], x[..., R:]), becomes
// qcc.rotary {rotary_dim = R}; a norm applied after the head transpose
// (Gemma3's q/k norms) is moved before it first. The interleaved form
// (GPT-J's rotate_every_two, which pairs x[2i] with x[2i + 1]) becomes
// qcc.rotary between two gathers that regroup each head's pairs
// (createInterleavedRotary); later passes fold the gathers away.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccOps.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace qcc {
#define GEN_PASS_DEF_RAISEROTARY
#include "passes/Passes.h.inc"
} // namespace qcc

#define DEBUG_TYPE "qcc-raise-rotary"

using namespace mlir;
using namespace qcc;

namespace {

/// Matches `v` = Slice(x, [start], [end], [step]) along the last axis of `x`,
/// keeping lo, lo + step, ... below hi of a last dimension of size `d` (an
/// end at or past `d` is clamped, as INT64_MAX is).
static bool isLastAxisSlice(Value v, Value x, int64_t d, int64_t lo,
                            int64_t hi, int64_t step = 1) {
  auto slice = v.getDefiningOp<SliceOp>();
  if (!slice || slice.getInput() != x || slice.getAxes().size() != 1 ||
      slice.getSteps()[0] != step)
    return false;
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  int64_t axis = slice.getAxes()[0];
  if ((axis < 0 ? axis + rank : axis) != rank - 1)
    return false;
  auto start = getFoldedIndex(slice.getStarts());
  auto end = getFoldedIndex(slice.getEnds());
  if (!start || !end)
    return false;
  int64_t s = *start < 0 ? *start + d : *start;
  int64_t e = *end < 0 ? *end + d : std::min(*end, d);
  return s == lo && e == hi;
}

/// A cos or sin table for qcc.rotary: `base`, [S, R] or [B, S, R], or with
/// `squeezeAxis` >= 0 a 4-D `base` whose head axis that is (a size-1 axis the
/// exporter built in, as GPT-J's repeat_interleave does), to squeeze.
struct RotaryTable {
  Value base;
  int64_t squeezeAxis = -1;
};

/// The table that `v` broadcasts over the heads of a [B, H, S, D]
/// (`headAxis` 1) or [B, S, H, D] (`headAxis` 2) head view: an [S, D] or
/// [B, S, D] table with the head axis (and for [S, D] the batch axis) inserted
/// by Unsqueezes, or a 4-D table of size 1 on the head axis; null otherwise.
static RotaryTable getRotaryTable(Value v, int64_t headAxis) {
  int64_t seqAxis = 3 - headAxis;
  // Walk back through the Unsqueezes, remembering their axes outermost first.
  SmallVector<UnsqueezeOp> chain;
  Value base = v;
  while (auto unsq = base.getDefiningOp<UnsqueezeOp>()) {
    chain.push_back(unsq);
    base = unsq.getInput();
  }
  auto baseType = cast<RankedTensorType>(base.getType());
  int64_t baseRank = baseType.getRank();
  if (chain.empty() && baseRank == 4) {
    if (baseType.getDimSize(headAxis) != 1)
      return {};
    return {base, headAxis};
  }
  if (baseRank != 2 && baseRank != 3)
    return {};
  // For each axis of `v`, the axis of `base` it comes from, or -1 if inserted.
  SmallVector<int64_t> origin = llvm::to_vector(llvm::seq<int64_t>(0, baseRank));
  for (UnsqueezeOp unsq : llvm::reverse(chain)) {
    int64_t rank = unsq.getType().getRank();
    SmallVector<int64_t> axes;
    for (int64_t a : unsq.getAxes())
      axes.push_back(a < 0 ? a + rank : a);
    SmallVector<int64_t> next;
    auto it = origin.begin();
    for (int64_t i = 0; i < rank; ++i)
      next.push_back(llvm::is_contained(axes, i) ? -1 : *it++);
    origin = std::move(next);
  }
  if (origin.size() > 4)
    return {};
  // Right-align to the head view's four axes.
  SmallVector<int64_t> full(4 - origin.size(), -1);
  full.append(origin);
  if (full[3] != baseRank - 1 || full[seqAxis] != baseRank - 2 ||
      full[headAxis] != -1)
    return {};
  if (full[0] != (baseRank == 3 ? 0 : -1))
    return {};
  return {base};
}

/// The rotation x * cos + rotate(x) * sin that `add` computes on `x`, the
/// [.., R] values of each head that rotate (R = the static last dimension of
/// `add`): rotate-half, or with `interleaved` rotate_every_two.
struct Rotation {
  Value x, cos, sin;
  int64_t rotaryDim = 0;
  bool interleaved = false;
};

/// Matches `rot` = rotate_half(x) = Concat(-x[R/2:], x[:R/2]) on the last
/// axis of size `d`.
static bool isRotateHalf(Value rot, Value x, int64_t d) {
  auto concat = rot.getDefiningOp<ConcatOp>();
  if (!concat || concat.getInputs().size() != 2)
    return false;
  int64_t axis = concat.getAxis();
  if ((axis < 0 ? axis + 4 : axis) != 3)
    return false;
  auto neg = concat.getInputs()[0].getDefiningOp<NegOp>();
  return neg && isLastAxisSlice(neg.getInput(), x, d, d / 2, d) &&
         isLastAxisSlice(concat.getInputs()[1], x, d, 0, d / 2);
}

/// Matches `rot` = rotate_every_two(x) on the last axis of size `d`, as torch
/// exports stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2):
/// Reshape(Concat(Unsqueeze(Neg(x[..., 1::2]), -1), Unsqueeze(x[..., ::2],
/// -1), axis -1) -> [.., d]), the Neg before or after its Unsqueeze.
static bool isRotateEveryTwo(Value rot, Value x, int64_t d) {
  auto flatten = rot.getDefiningOp<ReshapeOp>();
  if (!flatten || flatten.getInput().getType().getRank() != 5 ||
      !reshapeKeepsLeadingDims(flatten, 3))
    return false;
  auto stack = flatten.getInput().getDefiningOp<ConcatOp>();
  if (!stack || stack.getInputs().size() != 2)
    return false;
  int64_t axis = stack.getAxis();
  if ((axis < 0 ? axis + 5 : axis) != 4)
    return false;
  // Unsqueeze(v, -1) of x[..., start::2], negated if `negated`.
  auto isStackedSlice = [&](Value v, bool negated, int64_t start) {
    if (auto neg = v.getDefiningOp<NegOp>(); neg && negated) {
      v = neg.getInput();
      negated = false;
    }
    auto unsq = v.getDefiningOp<UnsqueezeOp>();
    if (!unsq || unsq.getAxes().size() != 1 ||
        (unsq.getAxes()[0] != 4 && unsq.getAxes()[0] != -1))
      return false;
    v = unsq.getInput();
    if (negated) {
      auto neg = v.getDefiningOp<NegOp>();
      if (!neg)
        return false;
      v = neg.getInput();
    }
    return isLastAxisSlice(v, x, d, start, d, 2);
  };
  return isStackedSlice(stack.getInputs()[0], /*negated=*/true, 1) &&
         isStackedSlice(stack.getInputs()[1], /*negated=*/false, 0);
}

/// Matches `add` = Add(Mul(x, cos), Mul(rotate(x), sin)) (Add and Mul
/// operands in either order) on a 4-D head view, rotate being rotate_half or
/// rotate_every_two; on a mismatch returns the reason.
static const char *matchRotation(AddOp add, Rotation &m) {
  auto type = dyn_cast<RankedTensorType>(add.getType());
  if (!type || type.getRank() != 4 || type.isDynamicDim(3))
    return "not a 4-D head view with a static head size";
  int64_t d = type.getDimSize(3);
  if (d % 2 != 0)
    return "odd head size";
  // x may be typed [.., ?] where its size is known (a slice of a head).
  auto isRotatedValue = [&](Value xv) {
    auto xt = dyn_cast<RankedTensorType>(xv.getType());
    if (!xt || xt.getRank() != 4 ||
        xt.getElementType() != type.getElementType())
      return false;
    DimExpr last = getDimExpr(xv, 3);
    return last.isConstant() && last.constant == d;
  };
  bool matched = matchCommutative(add, [&](Value a, Value b) {
    return matchCommutative(a.getDefiningOp<MulOp>(), [&](Value xv, Value c) {
      return matchCommutative(
          b.getDefiningOp<MulOp>(), [&](Value rot, Value s) {
            if (!isRotatedValue(xv))
              return false;
            bool half = isRotateHalf(rot, xv, d);
            if (!half && !isRotateEveryTwo(rot, xv, d))
              return false;
            m = {xv, c, s, d, /*interleaved=*/!half};
            return true;
          });
    });
  });
  if (!matched)
    return "not x * cos + rotate_half(x) * sin or its rotate_every_two form";
  return nullptr;
}

/// Replaces `root` (the rotated heads) by the same head view of qcc.rotary
/// on the packed value, where `heads` is the head split Reshape(packed ->
/// [B, S, H, D]) or a Transpose[0, 2, 1, 3] of it or of heads [B, S, H, D]
/// computed per head, of which the first `m.rotaryDim` values of each head
/// rotate.
static LogicalResult rewriteOnHeads(PatternRewriter &rewriter, Operation *root,
                                    Value heads, const Rotation &m) {
  auto rootType = cast<RankedTensorType>(root->getResult(0).getType());
  // [B, H, S, D] heads are a transpose of [B, S, H, D] ones.
  auto transpose = heads.getDefiningOp<TransposeOp>();
  if (transpose && transpose.getPerm() != ArrayRef<int64_t>{0, 2, 1, 3})
    transpose = {};
  Value bshd = transpose ? transpose.getInput() : heads;
  DimExpr headDim = getDimExpr(heads, 3);
  if (!headDim.isConstant())
    return rewriter.notifyMatchFailure(root, "head size is not static");
  int64_t d = headDim.constant, r = m.rotaryDim;
  Value packed;
  int64_t numHeads, splitDim;
  ReshapeOp reshape = matchHeadSplit(bshd, packed, numHeads, splitDim);
  auto headsType = cast<RankedTensorType>(bshd.getType());
  if (!reshape && (!transpose || headsType.getRank() != 4 ||
                   headsType.isDynamicDim(2)))
    return rewriter.notifyMatchFailure(
        root, "x is not a head split [B, S, H, D] or a [0, 2, 1, 3] "
              "transpose of [B, S, H, D] heads");
  if (reshape && splitDim != d)
    return rewriter.notifyMatchFailure(root, "head split size differs");

  int64_t headAxis = transpose ? 1 : 2;
  RotaryTable cosTable = getRotaryTable(m.cos, headAxis);
  RotaryTable sinTable = getRotaryTable(m.sin, headAxis);
  if (!cosTable.base || !sinTable.base)
    return rewriter.notifyMatchFailure(
        root, "cos/sin are not [S, D] or [B, S, D] tables broadcast over "
              "heads");
  for (const RotaryTable &t : {cosTable, sinTable}) {
    auto tt = cast<RankedTensorType>(t.base.getType());
    if (tt.getElementType() != rootType.getElementType() ||
        (!tt.isDynamicDim(tt.getRank() - 1) &&
         tt.getDimSize(tt.getRank() - 1) != r))
      return rewriter.notifyMatchFailure(root,
                                         "cos/sin table is not [.., R]");
  }
  int64_t h = reshape ? numHeads : headsType.getDimSize(2);
  auto splitType =
      RankedTensorType::get({headsType.getDimSize(0), headsType.getDimSize(1),
                             h, d},
                            rootType.getElementType());
  auto viewType =
      transpose ? RankedTensorType::get({splitType.getDimSize(0), h,
                                         splitType.getDimSize(1), d},
                                        rootType.getElementType())
                : splitType;
  if (failed(verifyCompatibleShape(viewType, rootType)))
    return rewriter.notifyMatchFailure(root, "result type differs from x");

  Location loc = root->getLoc();
  auto shapeVector = [&](Value v, ArrayRef<int64_t> tail) {
    return createLeadingDimsShape(rewriter, loc, v, tail);
  };
  // Heads computed per head (Qwen3's and Gemma3's q/k norms) are packed
  // to [B, S, H * D] for the op and split again after it.
  if (!reshape) {
    auto packedType =
        RankedTensorType::get({headsType.getDimSize(0),
                               headsType.getDimSize(1), h * d},
                              headsType.getElementType());
    packed = ReshapeOp::create(rewriter, loc, packedType, bshd,
                               shapeVector(bshd, {h * d}));
  }
  auto table = [&](const RotaryTable &t) -> Value {
    Value v = t.base;
    if (t.squeezeAxis >= 0) {
      auto tt = cast<RankedTensorType>(v.getType());
      SmallVector<int64_t> shape(tt.getShape());
      shape.erase(shape.begin() + t.squeezeAxis);
      v = SqueezeOp::create(rewriter, loc,
                            RankedTensorType::get(shape, tt.getElementType()),
                            v, rewriter.getDenseI64ArrayAttr({t.squeezeAxis}));
    }
    // An interleaved table holds pair i's angle at 2i and 2i + 1; the
    // rotate-half form reads it at i and i + R/2.
    if (m.interleaved)
      v = createLastAxisGather(rewriter, loc, v,
                               deinterleavedRotaryOrder(1, r, r));
    return v;
  };
  Value cos = table(cosTable), sin = table(sinTable);
  Value rotary =
      m.interleaved
          ? createInterleavedRotary(rewriter, loc, packed, cos, sin, d, r)
          : RotaryOp::create(rewriter, loc, packed.getType(), packed, cos,
                             sin, rewriter.getI64IntegerAttr(d),
                             r == d ? IntegerAttr()
                                    : rewriter.getI64IntegerAttr(r))
                .getResult();
  Type splitResultType =
      transpose ? (reshape ? Type(reshape.getType()) : Type(splitType))
                : Type(rootType);
  Value split = ReshapeOp::create(
      rewriter, loc, splitResultType, rotary,
      reshape ? reshape.getShape() : shapeVector(rotary, {h, d}));
  if (!transpose) {
    rewriter.replaceOp(root, split);
    return success();
  }
  auto heads4 = TransposeOp::create(rewriter, loc, rootType, split,
                                    transpose.getPermAttr());
  rewriter.replaceOp(root, heads4.getResult());
  return success();
}

/// Add(Mul(x, cos), Mul(rotate(x), sin)) on a head view x of a packed value
/// -> the head view of qcc.rotary(packed, cos, sin).
struct RaiseRotaryPattern : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    Rotation m;
    if (const char *why = matchRotation(add, m))
      return rewriter.notifyMatchFailure(add, why);
    return rewriteOnHeads(rewriter, add, m.x, m);
  }
};

/// Partial rotary (GPT-NeoX's rotary_pct, StableLM's partial_rotary_factor,
/// GPT-J's rotary_dim): Concat(rotation of x[..., :R], x[..., R:], axis -1)
/// on a head view x -> the same with qcc.rotary {rotary_dim = R}.
struct RaisePartialRotaryPattern : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ConcatOp concat,
                                PatternRewriter &rewriter) const override {
    auto type = concat.getType();
    int64_t axis = concat.getAxis();
    if (type.getRank() != 4 || concat.getInputs().size() != 2 ||
        (axis < 0 ? axis + 4 : axis) != 3)
      return rewriter.notifyMatchFailure(concat, "not a concat of two parts "
                                                 "of 4-D heads");
    auto add = concat.getInputs()[0].getDefiningOp<AddOp>();
    Rotation m;
    if (!add)
      return rewriter.notifyMatchFailure(concat, "first part is not an Add");
    if (const char *why = matchRotation(add, m))
      return rewriter.notifyMatchFailure(concat, why);
    auto rotated = m.x.getDefiningOp<SliceOp>();
    if (!rotated)
      return rewriter.notifyMatchFailure(concat, "rotated part is not a slice");
    Value heads = rotated.getInput();
    DimExpr d = getDimExpr(heads, 3);
    int64_t r = m.rotaryDim;
    if (!d.isConstant() || r >= d.constant ||
        !isLastAxisSlice(m.x, heads, d.constant, 0, r) ||
        !isLastAxisSlice(concat.getInputs()[1], heads, d.constant, r,
                         d.constant))
      return rewriter.notifyMatchFailure(
          concat, "not concat(rotate(x[..., :R]), x[..., R:])");
    return rewriteOnHeads(rewriter, concat, heads, m);
  }
};

/// Norm(Transpose(y)) over the last axis, with a transpose that keeps the
/// last axis in place -> Transpose(Norm(y)): Gemma3 normalizes q and k after
/// the head transpose; the rotary and attention matchers then see a
/// transpose of heads computed per head, as for Qwen3.
template <typename NormOp>
struct NormBeforeTranspose : OpRewritePattern<NormOp> {
  using OpRewritePattern<NormOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(NormOp norm,
                                PatternRewriter &rewriter) const override {
    auto transpose = norm.getInput().template getDefiningOp<TransposeOp>();
    if (!transpose)
      return rewriter.notifyMatchFailure(norm, "input is not a transpose");
    ArrayRef<int64_t> perm = transpose.getPerm();
    if (perm.back() != (int64_t)perm.size() - 1)
      return rewriter.notifyMatchFailure(norm, "transpose moves the last axis");
    Operation *moved = rewriter.clone(*norm.getOperation());
    moved->setOperand(0, transpose.getInput());
    moved->getResult(0).setType(transpose.getInput().getType());
    rewriter.replaceOpWithNewOp<TransposeOp>(norm, norm.getType(),
                                             moved->getResult(0),
                                             transpose.getPermAttr());
    return success();
  }
};

struct RaiseRotaryPass : qcc::impl::RaiseRotaryBase<RaiseRotaryPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseRotaryPattern, RaisePartialRotaryPattern,
                 NormBeforeTranspose<RmsNormOp>,
                 NormBeforeTranspose<LayerNormOp>>(&getContext());
    if (failed(applyPatternsTraced(getOperation(), std::move(patterns),
                                   DEBUG_TYPE)))
      signalPassFailure();
  }
};
} // namespace
