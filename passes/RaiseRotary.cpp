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

/// Add(Mul(x, cos), Mul(rotate_half(x), sin)) on a head-split [B, H, S, D]
/// view -> Transpose(Reshape(qcc.rotary(packed, cos, sin))).
struct RaiseRotaryPattern : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(add.getType());
    if (!type || type.getRank() != 4 || type.isDynamicDim(3))
      return rewriter.notifyMatchFailure(add, "not a [B, H, S, D] tensor "
                                              "with a static head size");
    int64_t d = type.getDimSize(3);
    if (d % 2 != 0)
      return rewriter.notifyMatchFailure(add, "odd head size");
    int64_t half = d / 2;

    Value x, cos, sin;
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
    bool matched = matchCommutative(add, [&](Value a, Value b) {
      return matchCommutative(a.getDefiningOp<MulOp>(), [&](Value xv, Value c) {
        return matchCommutative(
            b.getDefiningOp<MulOp>(), [&](Value rot, Value s) {
              if (xv.getType() != type || !matchRotated(rot, xv))
                return false;
              x = xv;
              cos = c;
              sin = s;
              return true;
            });
      });
    });
    if (!matched)
      return rewriter.notifyMatchFailure(
          add, "not x * cos + concat(-x[D/2:], x[:D/2]) * sin");

    auto transpose = x.getDefiningOp<TransposeOp>();
    if (!transpose || transpose.getPerm() != ArrayRef<int64_t>{0, 2, 1, 3})
      return rewriter.notifyMatchFailure(add,
                                         "x is not a [0, 2, 1, 3] transpose");
    Value packed;
    int64_t heads, headDim;
    ReshapeOp reshape =
        matchHeadSplit(transpose.getInput(), packed, heads, headDim);
    auto headsType = cast<RankedTensorType>(transpose.getInput().getType());
    if (!reshape && (headsType.getRank() != 4 || headsType.isDynamicDim(2) ||
                     headsType.getDimSize(3) != d))
      return rewriter.notifyMatchFailure(
          add, "x is not a [0, 2, 1, 3] transpose of [B, S, H, D] heads");
    if (reshape && headDim != d)
      return rewriter.notifyMatchFailure(add, "head split size differs");

    Value cosTable = getRotaryTable(cos), sinTable = getRotaryTable(sin);
    if (!cosTable || !sinTable)
      return rewriter.notifyMatchFailure(
          add, "cos/sin are not [S, D] or [B, S, D] tables broadcast over "
               "heads");
    for (Value t : {cosTable, sinTable}) {
      auto tt = cast<RankedTensorType>(t.getType());
      if (tt.getElementType() != type.getElementType() ||
          (!tt.isDynamicDim(tt.getRank() - 1) &&
           tt.getDimSize(tt.getRank() - 1) != d))
        return rewriter.notifyMatchFailure(add, "cos/sin table is not [.., D]");
    }

    if (transpose.getType() != add.getType())
      return rewriter.notifyMatchFailure(add, "result type differs from x");

    Location loc = add.getLoc();
    // Heads computed per head (Qwen3's and Gemma3's q/k norms) are packed
    // to [B, S, H * D] for the op and split again after it.
    auto i64 = rewriter.getI64Type();
    auto leadingDims = [&](Value v) {
      return ShapeOp::create(rewriter, loc, RankedTensorType::get({2}, i64), v,
                             rewriter.getI64IntegerAttr(0),
                             rewriter.getI64IntegerAttr(2));
    };
    auto shapeVector = [&](Value v, ArrayRef<int64_t> tail) -> Value {
      auto t = RankedTensorType::get({(int64_t)tail.size()}, i64);
      Value c = ConstantOp::create(
          rewriter, loc,
          cast<ElementsAttr>(DenseElementsAttr::get(t, tail)));
      return ConcatOp::create(
          rewriter, loc, RankedTensorType::get({2 + (int64_t)tail.size()}, i64),
          ValueRange{leadingDims(v), c}, rewriter.getI64IntegerAttr(0));
    };
    if (!reshape) {
      Value y = transpose.getInput();
      int64_t h = headsType.getDimSize(2);
      auto packedType = RankedTensorType::get(
          {headsType.getDimSize(0), headsType.getDimSize(1), h * d},
          headsType.getElementType());
      packed = ReshapeOp::create(rewriter, loc, packedType, y,
                                 shapeVector(y, {h * d}));
    }
    auto rotary = RotaryOp::create(rewriter, loc, packed.getType(), packed,
                                   cosTable, sinTable,
                                   rewriter.getI64IntegerAttr(d));
    Value split =
        reshape ? ReshapeOp::create(rewriter, loc, reshape.getType(), rotary,
                                    reshape.getShape())
                      .getResult()
                : ReshapeOp::create(
                      rewriter, loc, headsType, rotary,
                      shapeVector(rotary, {headsType.getDimSize(2), d}))
                      .getResult();
    auto heads4 = TransposeOp::create(rewriter, loc, transpose.getType(), split,
                                      transpose.getPermAttr());
    rewriter.replaceOp(add, heads4.getResult());
    return success();
  }
};

struct RaiseRotaryPass : qcc::impl::RaiseRotaryBase<RaiseRotaryPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseRotaryPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
