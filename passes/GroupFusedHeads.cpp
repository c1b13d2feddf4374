//===- GroupFusedHeads.cpp - group-fused-heads -----------------------------===//
//
// A fused projection whose heads each hold several parts (GPT-NeoX's
// query_key_value: [q | k | v] per head) is sliced per head:
//
//   Slice(Transpose[0, 2, 1, 3](Reshape(linear -> [B, S, H, C])), lo, hi, -1)
//
// (or split along the last axis, as the dynamo exporter writes it).
// Permuting the linear's weight rows (and bias) at compile time so that each
// part is one contiguous block [B, S, H * (hi - lo)] of the output turns each
// part into an ordinary head split of a packed slice, the form raise-rotary
// and raise-attention match (as for Phi-3's fused QKV):
//
//   Transpose[0, 2, 1, 3](Reshape(Slice(linear', H * lo', H * hi', -1)))
//
//===----------------------------------------------------------------------===//
#include "dialects/QccOps.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseSet.h"

#include <map>

namespace qcc {
#define GEN_PASS_DEF_GROUPFUSEDHEADS
#include "passes/Passes.h.inc"
} // namespace qcc

#define DEBUG_TYPE "qcc-group-fused-heads"

using namespace mlir;
using namespace qcc;

namespace {

/// The rows of a constant [N, ...] `attr` (N = `heads` * `c`) taken per head
/// for each part [lo, hi) in turn: part 0 of every head, then part 1, ...;
/// null if the data cannot be read.
ElementsAttr gatherPartRows(ElementsAttr attr, int64_t heads, int64_t c,
                            ArrayRef<std::pair<int64_t, int64_t>> parts) {
  if (cast<RankedTensorType>(attr.getType()).getDimSize(0) != heads * c)
    return {};
  SmallVector<int64_t> rows;
  for (auto [lo, hi] : parts)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t r = lo; r < hi; ++r)
        rows.push_back(h * c + r);
  return gatherRows(attr, rows, "_grouped");
}

/// Uses followed from each part when looking for a Concat that joins parts.
constexpr int kRejoinHops = 10;

/// True if values computed from two different parts meet in a Concat within
/// kRejoinHops uses of their slices: a partial rotary slices one head into a
/// rotated and a passed part and joins them again; such parts are one head
/// (raise-rotary takes them as they are), not separate projections.
bool partsRejoin(ArrayRef<SmallVector<Value>> parts) {
  llvm::DenseMap<Operation *, size_t> reachedFrom;
  for (auto [i, values] : llvm::enumerate(parts)) {
    llvm::DenseSet<Operation *> seen;
    SmallVector<Operation *> frontier;
    for (Value v : values)
      for (Operation *user : v.getUsers())
        if (seen.insert(user).second)
          frontier.push_back(user);
    for (int hop = 0; hop < kRejoinHops && !frontier.empty(); ++hop) {
      SmallVector<Operation *> next;
      for (Operation *op : frontier) {
        if (isa<ConcatOp>(op)) {
          auto [it, fresh] = reachedFrom.try_emplace(op, i);
          if (!fresh && it->second != i)
            return true;
        }
        for (Operation *user : op->getUsers()) {
          if (seen.insert(user).second)
            next.push_back(user);
        }
      }
      frontier = std::move(next);
    }
  }
  return false;
}

/// Reshape(linear -> [B, S, H, C]), optionally Transpose[0, 2, 1, 3], whose
/// users all slice or split the last axis -> one slice of a row-permuted
/// linear per part.
struct GroupFusedHeadsPattern : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReshapeOp reshape,
                                PatternRewriter &rewriter) const override {
    Value packed;
    int64_t heads, c;
    if (!matchHeadSplit(reshape.getResult(), packed, heads, c))
      return rewriter.notifyMatchFailure(reshape, "not a head split");
    auto linear = packed.getDefiningOp<LinearOp>();
    if (!linear)
      return rewriter.notifyMatchFailure(reshape, "not a linear's head split");
    // Besides the head split, the linear may only be asked for its shape:
    // the grouped linear has the same B and S, and the same width unless
    // rows are dropped (checked below).
    SmallVector<ShapeOp> shapeUsers;
    bool widthRead = false;
    for (Operation *user : linear->getUsers()) {
      if (user == reshape)
        continue;
      auto shape = dyn_cast<ShapeOp>(user);
      if (!shape)
        return rewriter.notifyMatchFailure(
            reshape, "the linear has users other than the head split");
      int64_t end = shape.getEnd() ? (int64_t)*shape.getEnd() : 3;
      widthRead |= (int64_t)shape.getStart() < 0 || end < 0 || end > 2;
      shapeUsers.push_back(shape);
    }
    ElementsAttr weight = getConstant(linear.getWeight());
    ElementsAttr bias =
        linear.getBias() ? getConstant(linear.getBias()) : ElementsAttr();
    if (!weight || (linear.getBias() && !bias))
      return rewriter.notifyMatchFailure(reshape,
                                         "weight or bias is not a constant");

    // The parts, seen through an optional head transpose.
    Value heads4 = reshape.getResult();
    TransposeOp transpose;
    if (heads4.hasOneUse())
      if (auto t = dyn_cast<TransposeOp>(*heads4.getUsers().begin()))
        if (t.getPerm() == ArrayRef<int64_t>{0, 2, 1, 3}) {
          transpose = t;
          heads4 = t.getResult();
        }
    // Each part [lo, hi): the slice results and split results that are it.
    std::map<std::pair<int64_t, int64_t>, SmallVector<Value>> parts;
    SmallVector<Operation *> partOps;
    for (Operation *user : heads4.getUsers()) {
      partOps.push_back(user);
      if (auto split = dyn_cast<SplitOp>(user)) {
        int64_t axis = (int64_t)split.getAxis();
        if (axis != 3 && axis != -1)
          return rewriter.notifyMatchFailure(reshape,
                                             "a split of another axis");
        int64_t lo = 0;
        for (auto [size, r] : llvm::zip(split.getSizes(), split.getResults())) {
          if (size > 0)
            parts[{lo, lo + (int64_t)size}].push_back(r);
          lo += size;
        }
        continue;
      }
      auto slice = dyn_cast<SliceOp>(user);
      if (!slice || slice.getAxes().size() != 1 || slice.getSteps()[0] != 1 ||
          (slice.getAxes()[0] != 3 && slice.getAxes()[0] != -1))
        return rewriter.notifyMatchFailure(
            reshape, "a user is not a split or step-1 slice of the last axis");
      auto a = getFoldedIndex(slice.getStarts());
      auto b = getFoldedIndex(slice.getEnds());
      if (!a || !b)
        return rewriter.notifyMatchFailure(reshape, "slice bounds not known");
      auto clamp = [&](int64_t v) {
        return std::clamp<int64_t>(v < 0 ? v + c : v, 0, c);
      };
      int64_t lo = clamp(*a), hi = clamp(*b);
      if (hi <= lo)
        return rewriter.notifyMatchFailure(reshape, "empty slice");
      parts[{lo, hi}].push_back(slice.getResult());
    }
    if (parts.empty() ||
        (parts.size() == 1 && parts.begin()->first ==
                                  std::pair<int64_t, int64_t>(0, c)))
      return rewriter.notifyMatchFailure(reshape, "no parts to group");
    SmallVector<std::pair<int64_t, int64_t>> bounds;
    SmallVector<SmallVector<Value>> partValues;
    for (auto &[b, values] : parts) {
      if (!bounds.empty() && bounds.back().second > b.first)
        return rewriter.notifyMatchFailure(reshape, "parts overlap");
      bounds.push_back(b);
      partValues.push_back(values);
    }
    if (partsRejoin(partValues))
      return rewriter.notifyMatchFailure(
          reshape, "parts are joined again (one head's partial rotary)");

    // Each part's value, typed as the values it replaces.
    auto lt = linear.getType();
    Type et = lt.getElementType();
    int64_t bDim = lt.getDimSize(0), sDim = lt.getDimSize(1);
    auto partType = [&](int64_t w) {
      return transpose ? RankedTensorType::get({bDim, heads, sDim, w}, et)
                       : RankedTensorType::get({bDim, sDim, heads, w}, et);
    };
    for (auto &[b, values] : parts)
      for (Value v : values)
        if (failed(verifyCompatibleShape(partType(b.second - b.first),
                                         v.getType())))
          return rewriter.notifyMatchFailure(reshape, "part type differs");

    int64_t rows = 0;
    for (auto [lo, hi] : bounds)
      rows += heads * (hi - lo);
    if (widthRead && rows != heads * c)
      return rewriter.notifyMatchFailure(
          reshape, "the linear's width is read and some of its rows are not");
    ElementsAttr w2 = gatherPartRows(weight, heads, c, bounds);
    ElementsAttr b2 =
        bias ? gatherPartRows(bias, heads, c, bounds) : ElementsAttr();
    if (!w2 || (bias && !b2))
      return rewriter.notifyMatchFailure(reshape, "weight data not readable");

    Location loc = linear.getLoc();
    // Where the linear was: its Shape users may come before the head split.
    rewriter.setInsertionPointAfter(linear);
    Value wv = ConstantOp::create(rewriter, loc, w2);
    Value bv = b2 ? ConstantOp::create(rewriter, loc, b2).getResult() : Value();
    auto grouped = LinearOp::create(
        rewriter, loc, RankedTensorType::get({bDim, sDim, rows}, et),
        linear.getInput(), wv, bv);
    for (ShapeOp shape : shapeUsers)
      rewriter.modifyOpInPlace(shape, [&] { shape->setOperand(0, grouped); });
    auto i64 = rewriter.getI64Type();
    auto vec = [&](int64_t v) -> Value {
      auto t = RankedTensorType::get({1}, i64);
      return ConstantOp::create(
          rewriter, loc, cast<ElementsAttr>(DenseElementsAttr::get(t, v)));
    };
    int64_t offset = 0;
    for (auto &[b, values] : parts) {
      int64_t w = b.second - b.first;
      Value part = SliceOp::create(
          rewriter, loc, RankedTensorType::get({bDim, sDim, heads * w}, et),
          grouped, vec(offset), vec(offset + heads * w),
          rewriter.getDenseI64ArrayAttr({2}), rewriter.getDenseI64ArrayAttr({1}));
      offset += heads * w;
      Value shape = createLeadingDimsShape(rewriter, loc, part, {heads, w});
      Value split; // [B, S, H, w], shared by the transposes
      for (Value old : values) {
        Value v;
        if (transpose) {
          if (!split)
            split = ReshapeOp::create(
                rewriter, loc,
                RankedTensorType::get({bDim, sDim, heads, w}, et), part, shape);
          v = TransposeOp::create(rewriter, loc, old.getType(), split,
                                  transpose.getPermAttr());
        } else {
          v = ReshapeOp::create(rewriter, loc, old.getType(), part, shape);
        }
        rewriter.replaceAllUsesWith(old, v);
      }
    }
    for (Operation *op : partOps)
      rewriter.eraseOp(op);
    if (transpose)
      rewriter.eraseOp(transpose);
    rewriter.eraseOp(reshape);
    rewriter.eraseOp(linear);
    return success();
  }
};

struct GroupFusedHeadsPass
    : qcc::impl::GroupFusedHeadsBase<GroupFusedHeadsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<GroupFusedHeadsPattern>(&getContext());
    if (failed(applyPatternsTraced(getOperation(), std::move(patterns),
                                   DEBUG_TYPE)))
      signalPassFailure();
    eraseDeadConstants(getOperation());
  }
};

} // namespace
