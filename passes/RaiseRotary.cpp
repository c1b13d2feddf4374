//===- RaiseRotary.cpp - raise-rotary ----------------------------------------===//
//
// Raises the rotate-half rotary embedding that exporters write on the
// head-split [B, H, S, D] view of a projection,
//
//   x * cos + Concat(-x[..., D/2:], x[..., :D/2]) * sin,
//   x = Transpose[0, 2, 1, 3](Reshape(packed -> [B, S, H, D])),
//
// to qcc.rotary on the packed [B, S, H * D] value, re-applying the head split
// after it so that raise-attention sees Transpose(Reshape(qcc.rotary(...))).
// A partial rotary, Concat(rotation of x[..., :R], x[..., R:]), becomes
// qcc.rotary {rotary_dim = R}; a norm applied after the head transpose
// (Gemma3's q/k norms) is moved before it first.
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

/// Matches `v` = Slice(x, [start], [end]) along the last axis of `x` with step
/// 1, keeping exactly [lo, hi) of a last dimension of size `d` (an end at or
/// past `d` is clamped, as INT64_MAX is).
static bool isLastAxisSlice(Value v, Value x, int64_t d, int64_t lo,
                            int64_t hi) {
  auto slice = v.getDefiningOp<SliceOp>();
  if (!slice || slice.getInput() != x || slice.getAxes().size() != 1 ||
      slice.getSteps()[0] != 1)
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

/// The [S, D] or [B, S, D] table `t` if `v` is `t` broadcast to [B, H, S, D]
/// by Unsqueezes that insert only the head axis (and the batch axis for an
/// [S, D] table); null otherwise.
static Value getRotaryTable(Value v) {
  // Walk back through the Unsqueezes, remembering their axes outermost first.
  SmallVector<UnsqueezeOp> chain;
  Value base = v;
  while (auto unsq = base.getDefiningOp<UnsqueezeOp>()) {
    chain.push_back(unsq);
    base = unsq.getInput();
  }
  int64_t baseRank = cast<RankedTensorType>(base.getType()).getRank();
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
  // Right-align to [B, H, S, D].
  SmallVector<int64_t> full(4 - origin.size(), -1);
  full.append(origin);
  if (full[3] != baseRank - 1 || full[2] != baseRank - 2 || full[1] != -1)
    return {};
  if (full[0] != (baseRank == 3 ? 0 : -1))
    return {};
  return base;
}

/// The rotation x * cos + rotate_half(x) * sin that `add` computes on `x`
/// [B, H, S, R] (R = the static last dimension of `add`).
struct RotateHalf {
  Value x, cos, sin;
  int64_t rotaryDim = 0;
};

/// Matches `add` = Add(Mul(x, cos), Mul(Concat(-x[R/2:], x[:R/2]), sin)) (Add
/// and Mul operands in either order) on [B, H, S, R]; on a mismatch returns
/// the reason.
static const char *matchRotateHalf(AddOp add, RotateHalf &m) {
  auto type = dyn_cast<RankedTensorType>(add.getType());
  if (!type || type.getRank() != 4 || type.isDynamicDim(3))
    return "not a [B, H, S, D] tensor with a static head size";
  int64_t d = type.getDimSize(3);
  if (d % 2 != 0)
    return "odd head size";
  int64_t half = d / 2;
  auto matchRotated = [&](Value rot, Value x) {
    auto concat = rot.getDefiningOp<ConcatOp>();
    if (!concat || concat.getInputs().size() != 2)
      return false;
    int64_t axis = concat.getAxis();
    if ((axis < 0 ? axis + 4 : axis) != 3)
      return false;
    auto neg = concat.getInputs()[0].getDefiningOp<NegOp>();
    return neg && isLastAxisSlice(neg.getInput(), x, d, half, d) &&
           isLastAxisSlice(concat.getInputs()[1], x, d, 0, half);
  };
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
            if (!isRotatedValue(xv) || !matchRotated(rot, xv))
              return false;
            m = {xv, c, s, d};
            return true;
          });
    });
  });
  if (!matched)
    return "not x * cos + concat(-x[D/2:], x[:D/2]) * sin";
  return nullptr;
}

/// Replaces `root` (the rotated heads [B, H, S, D]) by
/// Transpose(split(qcc.rotary(packed, cos, sin))) where `heads` = the
/// Transpose[0, 2, 1, 3] of a head split Reshape(packed) or of heads
/// [B, S, H, D] computed per head, of which the first `m.rotaryDim` values of
/// each head rotate.
static LogicalResult rewriteOnHeads(PatternRewriter &rewriter, Operation *root,
                                    Value heads, const RotateHalf &m) {
  auto rootType = cast<RankedTensorType>(root->getResult(0).getType());
  auto transpose = heads.getDefiningOp<TransposeOp>();
  if (!transpose || transpose.getPerm() != ArrayRef<int64_t>{0, 2, 1, 3})
    return rewriter.notifyMatchFailure(root,
                                       "x is not a [0, 2, 1, 3] transpose");
  DimExpr headDim = getDimExpr(heads, 3);
  if (!headDim.isConstant())
    return rewriter.notifyMatchFailure(root, "head size is not static");
  int64_t d = headDim.constant, r = m.rotaryDim;
  Value packed;
  int64_t numHeads, splitDim;
  ReshapeOp reshape =
      matchHeadSplit(transpose.getInput(), packed, numHeads, splitDim);
  auto headsType = cast<RankedTensorType>(transpose.getInput().getType());
  if (!reshape && (headsType.getRank() != 4 || headsType.isDynamicDim(2)))
    return rewriter.notifyMatchFailure(
        root, "x is not a [0, 2, 1, 3] transpose of [B, S, H, D] heads");
  if (reshape && splitDim != d)
    return rewriter.notifyMatchFailure(root, "head split size differs");

  Value cosTable = getRotaryTable(m.cos), sinTable = getRotaryTable(m.sin);
  if (!cosTable || !sinTable)
    return rewriter.notifyMatchFailure(
        root, "cos/sin are not [S, D] or [B, S, D] tables broadcast over "
              "heads");
  for (Value t : {cosTable, sinTable}) {
    auto tt = cast<RankedTensorType>(t.getType());
    if (tt.getElementType() != rootType.getElementType() ||
        (!tt.isDynamicDim(tt.getRank() - 1) &&
         tt.getDimSize(tt.getRank() - 1) != r))
      return rewriter.notifyMatchFailure(root,
                                         "cos/sin table is not [.., R]");
  }
  auto rotatedType = RankedTensorType::get(
      {headsType.getDimSize(0), headsType.getDimSize(2),
       headsType.getDimSize(1), d},
      rootType.getElementType());
  if (failed(verifyCompatibleShape(rotatedType, rootType)))
    return rewriter.notifyMatchFailure(root, "result type differs from x");

  Location loc = root->getLoc();
  // Heads computed per head (Qwen3's and Gemma3's q/k norms) are packed
  // to [B, S, H * D] for the op and split again after it.
  auto shapeVector = [&](Value v, ArrayRef<int64_t> tail) {
    return createLeadingDimsShape(rewriter, loc, v, tail);
  };
  int64_t h = reshape ? numHeads : headsType.getDimSize(2);
  auto splitType =
      RankedTensorType::get({headsType.getDimSize(0), headsType.getDimSize(1),
                             h, d},
                            rootType.getElementType());
  if (!reshape) {
    Value y = transpose.getInput();
    auto packedType =
        RankedTensorType::get({headsType.getDimSize(0),
                               headsType.getDimSize(1), h * d},
                              headsType.getElementType());
    packed = ReshapeOp::create(rewriter, loc, packedType, y,
                               shapeVector(y, {h * d}));
  }
  auto rotary = RotaryOp::create(
      rewriter, loc, packed.getType(), packed, cosTable, sinTable,
      rewriter.getI64IntegerAttr(d),
      r == d ? IntegerAttr() : rewriter.getI64IntegerAttr(r));
  Value split =
      reshape ? ReshapeOp::create(rewriter, loc, reshape.getType(), rotary,
                                  reshape.getShape())
                    .getResult()
              : ReshapeOp::create(rewriter, loc, splitType, rotary,
                                  shapeVector(rotary, {h, d}))
                    .getResult();
  auto heads4 = TransposeOp::create(rewriter, loc, rootType, split,
                                    transpose.getPermAttr());
  rewriter.replaceOp(root, heads4.getResult());
  return success();
}

/// Add(Mul(x, cos), Mul(rotate_half(x), sin)) on a head-split [B, H, S, D]
/// view -> Transpose(Reshape(qcc.rotary(packed, cos, sin))).
struct RaiseRotaryPattern : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    RotateHalf m;
    if (const char *why = matchRotateHalf(add, m))
      return rewriter.notifyMatchFailure(add, why);
    return rewriteOnHeads(rewriter, add, m.x, m);
  }
};

/// Partial rotary (GPT-NeoX's rotary_pct, StableLM's partial_rotary_factor):
/// Concat(rotation of x[..., :R], x[..., R:], axis -1) on a head-split view x
/// -> the same with qcc.rotary {rotary_dim = R}.
struct RaisePartialRotaryPattern : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ConcatOp concat,
                                PatternRewriter &rewriter) const override {
    auto type = concat.getType();
    int64_t axis = concat.getAxis();
    if (type.getRank() != 4 || concat.getInputs().size() != 2 ||
        (axis < 0 ? axis + 4 : axis) != 3)
      return rewriter.notifyMatchFailure(concat, "not a concat of two parts "
                                                 "of [B, H, S, D] heads");
    auto add = concat.getInputs()[0].getDefiningOp<AddOp>();
    RotateHalf m;
    if (!add)
      return rewriter.notifyMatchFailure(concat, "first part is not an Add");
    if (const char *why = matchRotateHalf(add, m))
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
