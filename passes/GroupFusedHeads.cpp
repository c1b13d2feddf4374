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
// The same holds for parts packed per group of heads along a part axis,
// Reshape(linear -> [B, S, G, P, D]): BLOOM's [q, k, v] per head (G = H,
// P = 3, each part a Gather of one index), Falcon's new decoder architecture
// with [q_0 .. q_{n-1}, k, v] per kv head (G = H_kv, P = n + 2, Slices).
// There, Falcon broadcasts k and v over the n query heads of their group;
// that repeat becomes a Gather of whole kv heads of the packed part
// (createRepeatedHeads), which raise-attention reads as GQA.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccConstants.h"
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
/// (raise-rotary takes them as they are), not separate projections. Shapes
/// read from the parts (Falcon's legacy export builds the shapes of k and v
/// from q's) are not their values.
bool partsRejoin(ArrayRef<SmallVector<Value>> parts) {
  llvm::DenseMap<Operation *, size_t> reachedFrom;
  for (auto [i, values] : llvm::enumerate(parts)) {
    llvm::DenseSet<Operation *> seen;
    SmallVector<Operation *> frontier;
    for (Value v : values)
      for (Operation *user : v.getUsers())
        if (!isa<ShapeOp>(user) && seen.insert(user).second)
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
          if (!isa<ShapeOp>(user) && seen.insert(user).second)
            next.push_back(user);
        }
      }
      frontier = std::move(next);
    }
  }
  return false;
}

/// A linear's output split into groups of parts: [B, S, H, C] with parts
/// along C (GPT-NeoX's [q | k | v] per head; a part is [lo, hi) of C), or
/// [B, S, G, P, D] with parts along P in units of D (BLOOM's [q, k, v] per
/// head, Falcon's [q_0 .. q_{n-1}, k, v] per kv-head group).
struct FusedSplit {
  Value packed;
  int64_t groups = 0, partsPerGroup = 0, unit = 1;
  bool grouped = false; // the 5-D form
};

/// Matches `reshape` = Reshape(packed [B, S, G * P * D] -> [B, S, G, P, D])
/// keeping B and S, with G, P and D constant (one may be written -1).
bool matchGroupedSplit(ReshapeOp reshape, FusedSplit &split) {
  auto in = reshape.getInput().getType();
  auto out = reshape.getType();
  if (in.getRank() != 3 || out.getRank() != 5 || in.isDynamicDim(2) ||
      !reshapeKeepsLeadingDims(reshape, 2))
    return false;
  auto target = getFoldedDimExprs(reshape.getShape());
  if (target.size() != 5)
    return false;
  int64_t dims[3], product = 1, inferred = -1;
  for (int64_t i = 0; i < 3; ++i) {
    const DimExpr &t = target[2 + i];
    if (t.isConstant() && t.constant > 0)
      dims[i] = t.constant;
    else if (!out.isDynamicDim(2 + i))
      dims[i] = out.getDimSize(2 + i);
    else if (t.isConstant() && t.constant == -1 && inferred < 0)
      inferred = i, dims[i] = 1;
    else
      return false;
    product *= dims[i];
  }
  int64_t width = in.getDimSize(2);
  if (product <= 0 || width % product != 0)
    return false;
  if (inferred >= 0)
    dims[inferred] = width / product;
  if (dims[0] * dims[1] * dims[2] != width)
    return false;
  split = {reshape.getInput(), dims[0], dims[1], dims[2], /*grouped=*/true};
  return true;
}

/// Reshape(linear -> [B, S, H, C]), optionally Transpose[0, 2, 1, 3], or
/// Reshape(linear -> [B, S, G, P, D]), whose users all take parts of the
/// last axis (of P for the 5-D form) -> one slice of a row-permuted linear
/// per part. In the 5-D form a part is taken by Slice, Split or a Gather of
/// one index (which drops the axis), and a part's Reshapes and its repeat
/// over the query heads of its group, Reshape(Expand(part [B, S, G, 1, D]
/// -> [B, S, G, n, D]) -> [B, S, G * n, D]), are rewritten onto the packed
/// part (the repeat as `createRepeatedHeads`), so that every head view is a
/// head split of a packed value.
struct GroupFusedHeadsPattern : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReshapeOp reshape,
                                PatternRewriter &rewriter) const override {
    FusedSplit fs;
    int64_t heads = 0, c = 0;
    if (matchHeadSplit(reshape.getResult(), fs.packed, heads, c)) {
      fs.groups = heads;
      fs.partsPerGroup = c;
    } else if (!matchGroupedSplit(reshape, fs)) {
      return rewriter.notifyMatchFailure(reshape, "not a head split");
    }
    heads = fs.groups;
    int64_t unit = fs.unit, perGroup = fs.partsPerGroup;
    c = perGroup * unit; // a group's rows
    auto linear = fs.packed.getDefiningOp<LinearOp>();
    // A runtime LoRA adapter's update on it (the importer's add(linear,
    // lora), docs/LORA.md) is regrouped with it: B's rows as the weight's.
    LoraOp lora;
    Operation *projection = linear;
    if (auto add = fs.packed.getDefiningOp<AddOp>(); add && !linear) {
      auto l = add.getLhs().getDefiningOp<LinearOp>();
      auto d = add.getRhs().getDefiningOp<LoraOp>();
      if (l && d && l->hasOneUse() && d->hasOneUse() &&
          d.getInput() == l.getInput() && getConstant(d.getB())) {
        linear = l;
        lora = d;
        projection = add;
      }
    }
    if (!linear)
      return rewriter.notifyMatchFailure(reshape, "not a linear's head split");
    // Besides the head split, the linear may only be asked for its shape:
    // B and S, which the grouped linear has too, or all of it when no rows
    // are dropped (checked below).
    SmallVector<ShapeOp> shapeUsers;
    bool widthRead = false;
    for (Operation *user : projection->getUsers()) {
      if (user == reshape)
        continue;
      auto shape = dyn_cast<ShapeOp>(user);
      if (!shape)
        return rewriter.notifyMatchFailure(
            reshape, "the linear has users other than the head split");
      int64_t start = shape.getStart();
      int64_t end = shape.getEnd() ? (int64_t)*shape.getEnd() : 3;
      widthRead |= (start < 0 ? start + 3 : start) <= 2 &&
                   (end < 0 ? end + 3 : end) > 2;
      shapeUsers.push_back(shape);
    }
    ElementsAttr weight = getConstant(linear.getWeight());
    ElementsAttr bias =
        linear.getBias() ? getConstant(linear.getBias()) : ElementsAttr();
    if (!weight || (linear.getBias() && !bias))
      return rewriter.notifyMatchFailure(reshape,
                                         "weight or bias is not a constant");

    // The parts, seen through an optional head transpose (4-D form).
    Value heads4 = reshape.getResult();
    int64_t rank = reshape.getType().getRank();
    TransposeOp transpose;
    if (!fs.grouped && heads4.hasOneUse())
      if (auto t = dyn_cast<TransposeOp>(*heads4.getUsers().begin()))
        if (t.getPerm() == ArrayRef<int64_t>{0, 2, 1, 3}) {
          transpose = t;
          heads4 = t.getResult();
        }
    // C of [B, H, S, C] or [B, S, H, C]; P of [B, S, G, P, D].
    const int64_t partAxis = 3;
    auto isPartAxis = [&](int64_t a) {
      return (a < 0 ? a + rank : a) == partAxis;
    };
    // Each part [lo, hi) (in units): the values that are it, and whether
    // each keeps the part axis (a Gather of one index drops it).
    std::map<std::pair<int64_t, int64_t>, SmallVector<std::pair<Value, bool>>>
        parts;
    SmallVector<Operation *> partOps;
    for (Operation *user : heads4.getUsers()) {
      partOps.push_back(user);
      if (auto split = dyn_cast<SplitOp>(user)) {
        if (!isPartAxis((int64_t)split.getAxis()))
          return rewriter.notifyMatchFailure(reshape,
                                             "a split of another axis");
        int64_t lo = 0;
        for (auto [size, r] : llvm::zip(split.getSizes(), split.getResults())) {
          if (size > 0)
            parts[{lo, lo + (int64_t)size}].push_back({r, true});
          lo += size;
        }
        continue;
      }
      if (auto gather = dyn_cast<GatherOp>(user); gather && fs.grouped) {
        auto index = getIntSplatValue(gather.getIndices());
        if (!isPartAxis((int64_t)gather.getAxis()) ||
            gather.getIndices().getType().getRank() != 0 || !index ||
            *index < -perGroup || *index >= perGroup)
          return rewriter.notifyMatchFailure(
              reshape, "a gather of another axis or of a non-constant index");
        int64_t i = *index < 0 ? *index + perGroup : *index;
        parts[{i, i + 1}].push_back({gather.getResult(), false});
        continue;
      }
      auto slice = dyn_cast<SliceOp>(user);
      if (!slice || slice.getAxes().size() != 1 || slice.getSteps()[0] != 1 ||
          !isPartAxis(slice.getAxes()[0]))
        return rewriter.notifyMatchFailure(
            reshape, "a user is not a split or step-1 slice of the last axis");
      auto a = getFoldedIndex(slice.getStarts());
      auto b = getFoldedIndex(slice.getEnds());
      if (!a || !b)
        return rewriter.notifyMatchFailure(reshape, "slice bounds not known");
      auto clamp = [&](int64_t v) {
        return std::clamp<int64_t>(v < 0 ? v + perGroup : v, 0, perGroup);
      };
      int64_t lo = clamp(*a), hi = clamp(*b);
      if (hi <= lo)
        return rewriter.notifyMatchFailure(reshape, "empty slice");
      parts[{lo, hi}].push_back({slice.getResult(), true});
    }
    if (parts.empty() ||
        (parts.size() == 1 && parts.begin()->first ==
                                  std::pair<int64_t, int64_t>(0, perGroup)))
      return rewriter.notifyMatchFailure(reshape, "no parts to group");
    SmallVector<std::pair<int64_t, int64_t>> bounds; // in rows of a group
    SmallVector<SmallVector<Value>> partValues;
    for (auto &[b, values] : parts) {
      if (!bounds.empty() && bounds.back().second > b.first * unit)
        return rewriter.notifyMatchFailure(reshape, "parts overlap");
      bounds.push_back({b.first * unit, b.second * unit});
      partValues.emplace_back();
      for (auto [v, keeps] : values)
        partValues.back().push_back(v);
    }
    if (partsRejoin(partValues))
      return rewriter.notifyMatchFailure(
          reshape, "parts are joined again (one head's partial rotary)");

    // Each part's value, typed as the values it replaces.
    auto lt = linear.getType();
    Type et = lt.getElementType();
    int64_t bDim = lt.getDimSize(0), sDim = lt.getDimSize(1);
    auto partType = [&](int64_t w, bool keepsAxis) {
      if (fs.grouped)
        return keepsAxis
                   ? RankedTensorType::get({bDim, sDim, heads, w, unit}, et)
                   : RankedTensorType::get({bDim, sDim, heads, unit}, et);
      return transpose ? RankedTensorType::get({bDim, heads, sDim, w}, et)
                       : RankedTensorType::get({bDim, sDim, heads, w}, et);
    };
    for (auto &[b, values] : parts)
      for (auto [v, keeps] : values)
        if (failed(verifyCompatibleShape(partType(b.second - b.first, keeps),
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
    // Where the linear was (its Shape users may come before the head
    // split); with an adapter, after its update, whose factors come later.
    rewriter.setInsertionPointAfter(projection);
    Value wv = ConstantOp::create(rewriter, loc, w2);
    Value bv = b2 ? ConstantOp::create(rewriter, loc, b2).getResult() : Value();
    auto groupedType = RankedTensorType::get({bDim, sDim, rows}, et);
    Value grouped = LinearOp::create(rewriter, loc, groupedType,
                                     linear.getInput(), wv, bv);
    if (lora) {
      // B [J, N, R]: each adapter's rows gathered as the weight's.
      ElementsAttr b = getConstant(lora.getB());
      auto bt = cast<RankedTensorType>(b.getType());
      int64_t J = bt.getDimSize(0), N = bt.getDimSize(1), R = bt.getDimSize(2);
      auto values = getF32Values(b);
      if (!values || N != heads * c)
        return rewriter.notifyMatchFailure(reshape, "lora factors not readable");
      SmallVector<int64_t> picked;
      for (auto [lo, hi] : bounds)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t r = lo; r < hi; ++r)
            picked.push_back(h * c + r);
      std::vector<float> b2;
      for (int64_t j = 0; j < J; ++j)
        for (int64_t n : picked)
          for (int64_t r = 0; r < R; ++r)
            b2.push_back((*values)[(size_t)((j * N + n) * R + r)]);
      Value bv2 = ConstantOp::create(
          rewriter, loc,
          makeFloatElements(RankedTensorType::get({J, rows, R}, bt.getElementType()),
                            b2, blobName(b, "lora_b") + "_grouped"));
      Value delta = LoraOp::create(rewriter, loc, groupedType,
                                   linear.getInput(), lora.getA(), bv2);
      grouped = AddOp::create(rewriter, loc, groupedType, grouped, delta);
    }
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
      int64_t w = (b.second - b.first) * unit; // a group's rows of the part
      Value part = SliceOp::create(
          rewriter, loc, RankedTensorType::get({bDim, sDim, heads * w}, et),
          grouped, vec(offset), vec(offset + heads * w),
          rewriter.getDenseI64ArrayAttr({2}), rewriter.getDenseI64ArrayAttr({1}));
      offset += heads * w;
      Value split; // [B, S, H, w], shared by the transposes
      for (auto [old, keeps] : values) {
        if (fs.grouped) {
          replaceGroupedPart(rewriter, loc, old, part, heads,
                             b.second - b.first, unit, keeps);
          continue;
        }
        Value shape = createLeadingDimsShape(rewriter, loc, part, {heads, w});
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
    if (projection != linear) {
      rewriter.eraseOp(projection);
      rewriter.eraseOp(lora);
    }
    rewriter.eraseOp(linear);
    return success();
  }

  /// True if `r` reshapes to a fully known target without a 0 (a 0 would
  /// copy a dimension of its input, which the part's view does not have).
  static bool isPlainReshape(Operation *op) {
    auto r = dyn_cast<ReshapeOp>(op);
    if (!r)
      return false;
    auto target = getFoldedDimExprs(r.getShape());
    return !target.empty() && llvm::all_of(target, [](const DimExpr &d) {
      return d.isKnown() && !(d.isConstant() && d.constant == 0);
    });
  }

  /// Replaces `old`, a part of `width` units of D = `unit` in each of the
  /// `groups` groups ([B, S, G, width, D], or [B, S, G, D] where the part
  /// axis was dropped), by views of `part` [B, S, G * width * D]: its
  /// Reshapes become Reshapes of `part`, its repeat over the query heads
  /// (one unit expanded to n) a head split of `createRepeatedHeads`.
  static void replaceGroupedPart(PatternRewriter &rewriter, Location loc,
                                 Value old, Value part, int64_t groups,
                                 int64_t width, int64_t unit, bool keepsAxis) {
    auto oldType = cast<RankedTensorType>(old.getType());
    // The views replace ops after the part, whose target shapes may be
    // computed there.
    OpBuilder::InsertionGuard guard(rewriter);
    for (Operation *user : llvm::make_early_inc_range(old.getUsers())) {
      rewriter.setInsertionPoint(user);
      if (isPlainReshape(user)) {
        rewriter.replaceOpWithNewOp<ReshapeOp>(
            user, cast<ReshapeOp>(user).getType(), part,
            cast<ReshapeOp>(user).getShape());
        continue;
      }
      auto expand = dyn_cast<ExpandOp>(user);
      int64_t n = keepsAxis && width == 1 && expand ? repeatCount(expand) : 0;
      if (n < 1)
        continue;
      Value repeated = createRepeatedHeads(rewriter, loc, part, unit, n);
      for (Operation *view : llvm::make_early_inc_range(expand->getUsers())) {
        auto r = dyn_cast<ReshapeOp>(view);
        if (!r)
          continue; // a Shape of the expanded value
        rewriter.setInsertionPoint(r);
        rewriter.replaceOpWithNewOp<ReshapeOp>(
            r, r.getType(), repeated,
            createLeadingDimsShape(rewriter, loc, repeated,
                                   {groups * n, unit}));
      }
      if (expand->use_empty())
        rewriter.eraseOp(expand);
    }
    if (old.use_empty())
      return;
    rewriter.setInsertionPointAfterValue(part);
    Value shape = createLeadingDimsShape(
        rewriter, loc, part,
        keepsAxis ? SmallVector<int64_t>{groups, width, unit}
                  : SmallVector<int64_t>{groups, unit});
    rewriter.replaceAllUsesWith(
        old, ReshapeOp::create(rewriter, loc, oldType, part, shape));
  }

  /// n if `expand` broadcasts a part [B, S, G, 1, D] to [B, S, G, n, D] and
  /// each of its users (but Shape ops) reshapes that to [B, S, G * n, D],
  /// with no 0 in the target; else 0.
  static int64_t repeatCount(ExpandOp expand) {
    auto in = expand.getInput().getType();
    auto target = getFoldedDimExprs(expand.getShape());
    if (in.getRank() != 5 || target.size() != 5 || in.getDimSize(3) != 1)
      return 0;
    auto keeps = [&](int64_t i) {
      const DimExpr &t = target[i];
      return (t.isConstant() && t.constant == 1) ||
             isSameDim(t, expand.getInput(), i);
    };
    if (!keeps(0) || !keeps(1) || !keeps(2) || !keeps(4) ||
        !target[3].isConstant() || target[3].constant < 1)
      return 0;
    int64_t n = target[3].constant;
    // Each view merges the group and copy axes: [B, S, G * n, D].
    for (Operation *user : expand->getUsers()) {
      if (isa<ShapeOp>(user))
        continue;
      auto r = dyn_cast<ReshapeOp>(user);
      if (!r || !isPlainReshape(r) || r.getType().getRank() != 4 ||
          !reshapeKeepsLeadingDims(r, 2))
        return 0;
      auto t = getFoldedDimExprs(r.getShape());
      int64_t g = in.getDimSize(2), d = in.getDimSize(4);
      if (ShapedType::isDynamic(g) || ShapedType::isDynamic(d))
        return 0;
      auto is = [](const DimExpr &e, int64_t v) {
        return e.isConstant() && (e.constant == v || e.constant == -1);
      };
      if (t.size() != 4 || !is(t[2], g * n) || !is(t[3], d) ||
          (t[2].constant == -1 && t[3].constant == -1))
        return 0;
    }
    return n;
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
