//===- FoldShapes.cpp - fold-shapes ----------------------------------------===//
//
// Runs the op folders (QccFolders.cpp) to a fixed point, together with
// patterns that see through the shape noise exporters emit around dynamic
// dimensions: identity Reshape / Expand / Slice decided symbolically with
// DimExpr, Reshape chains, float cast round trips, torch's "-1 -> 1"
// replacement idiom, shape vectors whose elements are all known, view types
// their operands fix, and attention computed on [B * H, S, D] views, put
// back on the [B, H, S, D] heads.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccOps.h"
#include "format/Checked.h"
#include "passes/Passes.h"
#include "passes/ConstEval.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/FormatVariadic.h"

namespace qcc {
#define GEN_PASS_DEF_FOLDSHAPES
#include "passes/Passes.h.inc"
} // namespace qcc

#define DEBUG_TYPE "qcc-fold-shapes"

using namespace mlir;
using namespace qcc;

namespace {

/// Ends at or above this are "to the end" (torch exports INT64_MAX).
constexpr int64_t kEndOfDim = INT64_MAX / 2;

/// Shape vectors this pass materializes as constants stay this small.
constexpr int64_t kMaxShapeElements = 1024;

/// Evaluated constants stay this small (masks and tables of a few rows; no
/// weight is copied).
constexpr int64_t kMaxFoldElements = 4096;

/// True if float type `from` converts to `to` exactly (every value of `from`
/// is representable in `to`).
bool isExactFloatWidening(Type from, Type to) {
  auto f = dyn_cast<FloatType>(from), t = dyn_cast<FloatType>(to);
  if (!f || !t)
    return false;
  if (f == t)
    return true;
  // f16 and bf16 both embed exactly in f32 and f64; f32 in f64.
  return f.getWidth() < t.getWidth() && (t.isF32() || t.isF64()) &&
         (f.isF16() || f.isBF16() || f.isF32());
}

/// A constant i64 vector (Slice bounds, reshape targets).
Value indexVector(PatternRewriter &rewriter, Location loc,
                  ArrayRef<int64_t> values) {
  auto t = RankedTensorType::get({(int64_t)values.size()},
                                 rewriter.getI64Type());
  return ConstantOp::create(
      rewriter, loc, cast<ElementsAttr>(DenseElementsAttr::get(t, values)));
}

/// Replaces `op` by Slice(input, i, i + 1, axis): a pick that keeps the axis.
void replaceWithPick(PatternRewriter &rewriter, Operation *op, Value input,
                     int64_t axis, int64_t i) {
  int64_t end = (i == -1) ? INT64_MAX : i + 1;
  Location loc = op->getLoc();
  rewriter.replaceOpWithNewOp<SliceOp>(
      op, cast<RankedTensorType>(op->getResult(0).getType()), input,
      indexVector(rewriter, loc, {i}), indexVector(rewriter, loc, {end}),
      rewriter.getDenseI64ArrayAttr({axis}),
      rewriter.getDenseI64ArrayAttr({1}));
}

/// Cast(Cast(x : A -> B) : B -> C) with an exact float A -> B becomes
/// Cast(x : A -> C), or x when C == A.
struct FoldFloatCastChain : OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CastOp outer,
                                PatternRewriter &rewriter) const override {
    auto inner = outer.getInput().getDefiningOp<CastOp>();
    if (!inner)
      return rewriter.notifyMatchFailure(outer, "input is not a cast");
    Type a = inner.getInput().getType().getElementType();
    Type b = inner.getType().getElementType();
    Type c = outer.getType().getElementType();
    if (!isExactFloatWidening(a, b))
      return rewriter.notifyMatchFailure(
          outer, "inner cast is not an exact float widening");
    if (!isa<FloatType>(c))
      return rewriter.notifyMatchFailure(outer, "outer cast is not to float");
    Value x = inner.getInput();
    if (x.getType() == outer.getType()) {
      rewriter.replaceOp(outer, x);
      return success();
    }
    rewriter.replaceOpWithNewOp<CastOp>(outer, outer.getType(), x);
    return success();
  }
};

/// True if `op`'s target is its input's own dimensions (symbolically; a 0
/// copies, and one -1 is inferred to the only dimension left).
bool targetsOwnShape(ReshapeOp op) {
  Value in = op.getInput();
  auto target = getDimExprs(op.getShape());
  int64_t rank = op.getType().getRank();
  if ((int64_t)target.size() != rank ||
      cast<RankedTensorType>(in.getType()).getRank() != rank)
    return false;
  int64_t inferred = 0;
  for (int64_t i = 0; i < rank; ++i) {
    const DimExpr &t = target[i];
    if (t.isConstant() && t.constant == 0)
      continue; // copies input dimension i
    if (t.isConstant() && t.constant == -1) {
      ++inferred;
      continue;
    }
    DimExpr d = getDimExpr(in, i);
    if (!(t == d) && !(resolveDimExpr(t) == resolveDimExpr(d)))
      return false;
  }
  // Every other dimension matches, so one -1 is the remaining dimension.
  return inferred <= 1;
}

/// Reshape whose target is the input's own dimensions -> input. Covers
/// Reshape(shapeVector, [-1]) on a 1-D vector.
struct FoldIdentityReshape : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getInput().getType() != op.getType())
      return rewriter.notifyMatchFailure(op, "input and result types differ");
    if (!targetsOwnShape(op))
      return rewriter.notifyMatchFailure(
          op, "target dimensions differ from the input's");
    rewriter.replaceOp(op, op.getInput());
    return success();
  }
};

/// Reshape(Reshape(x, s1), s2) -> Reshape(x, s2) when the intermediate has no
/// other user and no element of s2 can be 0 (a 0 would copy a dimension of the
/// intermediate, not of x). Also when the outer reshape only retypes the
/// intermediate (its target is the intermediate's own shape, some dimension
/// typed `?`: CodeGen's view of its heads as [B, S, -1, D]): x is viewed once
/// and the intermediate stays for its other users.
/// The same holds for an Unsqueeze or Squeeze under the Reshape (views too):
/// GPT-BigCode splits its fused projection after an Unsqueeze and reshapes
/// the query part to heads.
struct FoldReshapeChain : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    Operation *inner = op.getInput().getDefiningOp();
    if (!isa_and_nonnull<ReshapeOp, UnsqueezeOp, SqueezeOp>(inner))
      return rewriter.notifyMatchFailure(op, "input is not a view");
    // Keep intermediates that something else reads (e.g. the head merge whose
    // Shape feeds GPT-2's Conv1D): later raise passes match them.
    if (!inner->hasOneUse() && !targetsOwnShape(op))
      return rewriter.notifyMatchFailure(op, "intermediate has other users");
    auto target = getDimExprs(op.getShape());
    if (target.empty())
      return rewriter.notifyMatchFailure(op, "target shape not known");
    for (const DimExpr &t : target)
      if (!t.isKnown() || (t.isConstant() && t.constant == 0))
        return rewriter.notifyMatchFailure(
            op, "target may contain 0 (copy of the intermediate dimension)");
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(),
                                           inner->getOperand(0), op.getShape());
    return success();
  }
};

/// Split(Unsqueeze(x, axes), axis) with `axis` not an inserted axis ->
/// Unsqueeze(Split(x, axis'), axes) for each part: GPT-BigCode's
/// `c_attn(x).unsqueeze(1).split(...)` becomes slices of the packed
/// projection, each viewed with its size-1 head axis, the form the head-split
/// and attention matchers read.
struct FoldSplitOfUnsqueeze : OpRewritePattern<SplitOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SplitOp op,
                                PatternRewriter &rewriter) const override {
    auto unsq = op.getInput().getDefiningOp<UnsqueezeOp>();
    if (!unsq)
      return rewriter.notifyMatchFailure(op, "input is not an unsqueeze");
    int64_t rank = unsq.getType().getRank();
    int64_t axis = static_cast<int64_t>(op.getAxis());
    if (axis < 0)
      axis += rank;
    SmallVector<int64_t> inserted;
    for (int64_t a : unsq.getAxes())
      inserted.push_back(a < 0 ? a + rank : a);
    if (llvm::is_contained(inserted, axis))
      return rewriter.notifyMatchFailure(op, "splits an inserted axis");
    int64_t inner = axis;
    for (int64_t a : inserted)
      inner -= a < axis;
    Value x = unsq.getInput();
    auto xType = cast<RankedTensorType>(x.getType());
    SmallVector<Type> partTypes;
    for (Value r : op.getResults()) {
      auto rt = cast<RankedTensorType>(r.getType());
      SmallVector<int64_t> shape(xType.getShape());
      shape[inner] = rt.getDimSize(axis);
      partTypes.push_back(RankedTensorType::get(shape, rt.getElementType()));
    }
    auto split = SplitOp::create(rewriter, op.getLoc(), partTypes, x,
                                 rewriter.getI64IntegerAttr(inner),
                                 op.getSizesAttr());
    SmallVector<Value> parts;
    for (auto [r, part] : llvm::zip(op.getResults(), split.getResults()))
      parts.push_back(UnsqueezeOp::create(rewriter, op.getLoc(), r.getType(),
                                          part, unsq.getAxesAttr()));
    rewriter.replaceOp(op, parts);
    return success();
  }
};

/// Split of the positions NonZero finds in a 1-D mask of static size E into
/// E parts of one: the split is defined only when all E entries are set, and
/// then part e holds e. The legacy MoE exports loop over `expert_hit.nonzero()`
/// unrolled to the experts hit when they were traced; as constants the loop
/// covers every expert (one hit by no token gets no rows), where the exported
/// graph fails at run time unless every expert is hit.
struct FoldSplitOfFullNonZero : OpRewritePattern<SplitOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SplitOp op,
                                PatternRewriter &rewriter) const override {
    Value in = op.getInput();
    int64_t countAxis = 1; // NonZero's result is [rank, count]
    if (auto t = in.getDefiningOp<TransposeOp>()) {
      if (t.getPerm() != ArrayRef<int64_t>{1, 0})
        return rewriter.notifyMatchFailure(op, "not a 2-D transpose");
      in = t.getInput();
      countAxis = 0;
    }
    auto nz = in.getDefiningOp<NonZeroOp>();
    if (!nz)
      return rewriter.notifyMatchFailure(op, "not positions of a non_zero");
    auto maskType = cast<RankedTensorType>(nz.getInput().getType());
    if (maskType.getRank() != 1 || maskType.isDynamicDim(0))
      return rewriter.notifyMatchFailure(op, "mask is not 1-D of static size");
    int64_t axis = static_cast<int64_t>(op.getAxis());
    if (axis < 0)
      axis += 2;
    int64_t n = maskType.getDimSize(0);
    if (axis != countAxis || static_cast<int64_t>(op.getNumResults()) != n ||
        !llvm::all_of(op.getSizes(), [](int64_t s) { return s == 1; }))
      return rewriter.notifyMatchFailure(op, "not one part per mask entry");
    SmallVector<Value> parts;
    for (auto [e, r] : llvm::enumerate(op.getResults())) {
      auto t = RankedTensorType::get({1, 1}, rewriter.getI64Type());
      if (cast<RankedTensorType>(r.getType()) != t)
        return rewriter.notifyMatchFailure(op, "part type is not 1x1 i64");
      parts.push_back(ConstantOp::create(
          rewriter, op.getLoc(),
          cast<ElementsAttr>(
              DenseElementsAttr::get(t, static_cast<int64_t>(e)))));
    }
    rewriter.replaceOp(op, parts);
    return success();
  }
};

/// The value of an integer splat: a splat constant, ConstantOfShape of a
/// splat, or the product of two such.
std::optional<int64_t> getIntSplat(Value v) {
  if (!v || !isa<IntegerType>(getElementTypeOrSelf(v.getType())))
    return std::nullopt;
  if (auto s = getIntSplatValue(v))
    return *s;
  if (auto cos = v.getDefiningOp<ConstantOfShapeOp>()) {
    auto dense = dyn_cast<DenseIntElementsAttr>(cos.getValue());
    if (dense && dense.getNumElements() == 1)
      return (*dense.getValues<APInt>().begin()).getSExtValue();
    return std::nullopt;
  }
  if (auto mul = v.getDefiningOp<MulOp>()) {
    auto a = getIntSplat(mul.getLhs()), b = getIntSplat(mul.getRhs());
    if (a && b) // a product that overflows is no splat we can fold
      return format::checkedMul(*a, *b);
  }
  return std::nullopt;
}

/// torch's -1 replacement before Expand:
///   ones = ConstantOfShape(Shape(v), 1); eq = Equal(v, Mul(ones, -1))
///   Where(eq, ones, v)
/// is v when no element of v can be -1 (each is a dimension or a known
/// constant other than -1).
struct FoldMinusOneReplacement : OpRewritePattern<WhereOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(WhereOp op,
                                PatternRewriter &rewriter) const override {
    Value v = op.getRhs();
    if (v.getType() != op.getType())
      return rewriter.notifyMatchFailure(op, "rhs type differs from result");
    if (getIntSplat(op.getLhs()) != std::optional<int64_t>(1))
      return rewriter.notifyMatchFailure(op, "lhs is not a splat of 1");
    auto eq = op.getCondition().getDefiningOp<EqualOp>();
    bool matched = matchCommutative(eq, [&](Value a, Value m) {
      return a == v && getIntSplat(m) == std::optional<int64_t>(-1);
    });
    if (!matched)
      return rewriter.notifyMatchFailure(op, "condition is not Equal(v, -1)");
    auto elems = getDimExprs(v);
    if (elems.empty())
      return rewriter.notifyMatchFailure(op, "v is not a shape vector");
    for (const DimExpr &e : elems)
      if (!e.isKnown() || (e.isConstant() && e.constant == -1))
        return rewriter.notifyMatchFailure(op, "an element of v may be -1");
    rewriter.replaceOp(op, v);
    return success();
  }
};

/// Expand whose target broadcasts to the input's own shape -> input.
struct FoldIdentityExpand : OpRewritePattern<ExpandOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ExpandOp op,
                                PatternRewriter &rewriter) const override {
    Value in = op.getInput();
    if (in.getType() != op.getType())
      return rewriter.notifyMatchFailure(op, "input and result types differ");
    auto target = getDimExprs(op.getShape());
    int64_t rank = op.getType().getRank();
    if (target.empty() || (int64_t)target.size() > rank)
      return rewriter.notifyMatchFailure(op, "target shape not known");
    int64_t offset = rank - target.size();
    for (auto [j, t] : llvm::enumerate(target)) {
      if (t.isConstant() && t.constant == 1)
        continue; // broadcasting against 1 keeps the input dimension
      if (!(t == getDimExpr(in, offset + j)))
        return rewriter.notifyMatchFailure(
            op, "target dimension differs from the input's");
    }
    rewriter.replaceOp(op, in);
    return success();
  }
};

/// Slice with starts 0, steps 1 and ends past the end (a large constant or
/// the dimension itself) on every axis -> input, also for dynamic dims.
struct FoldIdentitySlice : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SliceOp op,
                                PatternRewriter &rewriter) const override {
    Value in = op.getInput();
    if (in.getType() != op.getType())
      return rewriter.notifyMatchFailure(op, "input and result types differ");
    auto starts = getDimExprs(op.getStarts());
    auto ends = getDimExprs(op.getEnds());
    auto axes = op.getAxes();
    int64_t rank = op.getType().getRank();
    if (starts.size() != axes.size() || ends.size() != axes.size())
      return rewriter.notifyMatchFailure(op, "starts or ends not known");
    for (auto [i, axis] : llvm::enumerate(axes)) {
      int64_t a = axis < 0 ? axis + rank : axis;
      if (op.getSteps()[i] != 1)
        return rewriter.notifyMatchFailure(op, "step is not 1");
      if (!starts[i].isConstant() || starts[i].constant != 0)
        return rewriter.notifyMatchFailure(op, "start is not 0");
      bool toEnd = (ends[i].isConstant() && ends[i].constant >= kEndOfDim) ||
                   ends[i] == getDimExpr(in, a);
      if (!toEnd)
        return rewriter.notifyMatchFailure(op, "end is not past the end");
    }
    rewriter.replaceOp(op, in);
    return success();
  }
};

/// A shape vector (or scalar) computed by shape arithmetic whose elements are
/// all constants, e.g. Gather(Shape(x), i) of a static dimension of a
/// partially static x, or Slice(Shape(x), -1, INT64_MAX) -> a constant.
template <typename OpT>
struct FoldKnownShapeVector : OpRewritePattern<OpT> {
  using OpRewritePattern<OpT>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpT op,
                                PatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type || type.getRank() > 1 || !type.hasStaticShape() ||
        type.getNumElements() > kMaxShapeElements ||
        !isa<IntegerType>(type.getElementType()) ||
        type.getElementType().isInteger(1))
      return rewriter.notifyMatchFailure(op, "not a small integer vector");
    auto elems = getDimExprs(op->getResult(0));
    if ((int64_t)elems.size() != type.getNumElements())
      return rewriter.notifyMatchFailure(op, "elements not known");
    unsigned width = type.getElementType().getIntOrFloatBitWidth();
    SmallVector<APInt> values;
    for (const DimExpr &e : elems) {
      if (!e.isConstant())
        return rewriter.notifyMatchFailure(op, "an element is dynamic");
      values.push_back(APInt(width, e.constant, /*isSigned=*/true));
    }
    auto attr = DenseElementsAttr::get(type, values);
    rewriter.replaceOpWithNewOp<ConstantOp>(op, cast<ElementsAttr>(attr));
    return success();
  }
};

/// torch's SDPA decomposition transposes K's last two axes through a 3-D
/// view: Reshape(Transpose[0, 2, 1](Reshape(x [A, B, C, D] -> [A*B, C, D])),
/// [A, B, D, C]) -> Transpose[0, 1, 3, 2](x). The views are checked
/// symbolically: the inner one keeps C and D, the outer one restores A and
/// B and swaps C and D.
struct FoldTransposeThroughMergedView : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReshapeOp outer,
                                PatternRewriter &rewriter) const override {
    auto t = outer.getInput().getDefiningOp<TransposeOp>();
    if (!t || t.getPerm() != ArrayRef<int64_t>{0, 2, 1} ||
        outer.getType().getRank() != 4)
      return rewriter.notifyMatchFailure(outer, "not a 4-D view of a "
                                                "[0, 2, 1] transpose");
    auto inner = t.getInput().getDefiningOp<ReshapeOp>();
    if (!inner || inner.getInput().getType().getRank() != 4)
      return rewriter.notifyMatchFailure(outer, "transpose input is not a "
                                                "3-D view of a 4-D value");
    Value x = inner.getInput();
    auto dim = [&](int64_t i) { return getDimExpr(x, i); };
    auto same = [](const DimExpr &t, const DimExpr &d) {
      return t.isKnown() && t == d;
    };
    auto in = getDimExprs(inner.getShape());
    if (in.size() != 3 || !same(in[1], dim(2)) || !same(in[2], dim(3)))
      return rewriter.notifyMatchFailure(outer, "inner view does not keep "
                                                "the last two axes");
    auto out = getDimExprs(outer.getShape());
    if (out.size() != 4 || !same(out[0], dim(0)) || !same(out[1], dim(1)) ||
        !same(out[2], dim(3)) || !same(out[3], dim(2)))
      return rewriter.notifyMatchFailure(outer, "outer view is not [A, B, D, "
                                                "C]");
    auto xt = cast<RankedTensorType>(x.getType());
    auto type = RankedTensorType::get(
        {xt.getDimSize(0), xt.getDimSize(1), xt.getDimSize(3),
         xt.getDimSize(2)},
        xt.getElementType());
    if (failed(verifyCompatibleShape(type, outer.getType())))
      return rewriter.notifyMatchFailure(outer, "result types differ");
    // The outer view's type: its users were verified against it.
    Value result = TransposeOp::create(
        rewriter, outer.getLoc(), outer.getType(), x,
        rewriter.getDenseI64ArrayAttr({0, 1, 3, 2}));
    rewriter.replaceOp(outer, result);
    return success();
  }
};

/// The ops over [B * H, X, Y] views of heads that FoldMergedHeadsBatch moves
/// back onto the [B, H, X, Y] heads: a tree of batched MatMuls,
/// Transpose[0, 2, 1]s and elementwise Add / Sub / Mul / Div whose leaves are
/// merged views of heads (`mergedHeads`) with the same static H, or scalars.
class MergedHeadsTree {
public:
  explicit MergedHeadsTree(int64_t heads) : heads(heads) {}

  /// True if `v` [B * H, X, Y] is such a tree; `leaf` is then one of its
  /// leaves' heads (its B is the tree's).
  bool match(Value v, int depth = 0) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    Operation *op = v.getDefiningOp();
    if (!t || t.getRank() != 3 || !op || depth > 16)
      return false;
    if (auto merge = dyn_cast<ReshapeOp>(op)) {
      Value x = mergedHeads(merge);
      if (x && !leaf)
        leaf = x;
      return static_cast<bool>(x);
    }
    if (auto tr = dyn_cast<TransposeOp>(op))
      return tr.getPerm() == ArrayRef<int64_t>{0, 2, 1} &&
             match(tr.getInput(), depth + 1);
    if (!isa<MatMulOp, AddOp, SubOp, MulOp, DivOp>(op))
      return false;
    bool anyTree = false;
    for (Value x : op->getOperands()) {
      if (!isa<MatMulOp>(op) && isScalar(x))
        continue;
      if (!match(x, depth + 1))
        return false;
      anyTree = true;
    }
    return anyTree;
  }

  /// The value of the matched tree `v` on the heads [B, H, X, Y], built at
  /// `rewriter`'s insertion point; every node's Shape users are given the
  /// same shape computed from the heads' dimensions, so that nothing keeps
  /// the [B * H, X, Y] ops alive.
  Value build(PatternRewriter &rewriter, Location loc, Value v) {
    if (auto it = built.find(v); it != built.end())
      return it->second;
    auto t = cast<RankedTensorType>(v.getType());
    Operation *op = v.getDefiningOp();
    Value result;
    if (auto merge = dyn_cast<ReshapeOp>(op)) {
      Value x = mergedHeads(merge);
      auto xt = cast<RankedTensorType>(x.getType());
      result = xt.getRank() == 4
                   ? x
                   : UnsqueezeOp::create(
                         rewriter, loc,
                         RankedTensorType::get({xt.getDimSize(0), heads, 1,
                                                xt.getDimSize(2)},
                                               xt.getElementType()),
                         x, rewriter.getDenseI64ArrayAttr({2}))
                         .getResult();
    } else {
      int64_t n = t.getDimSize(0);
      auto type = RankedTensorType::get(
          {ShapedType::isDynamic(n) ? n : n / heads, heads, t.getDimSize(1),
           t.getDimSize(2)},
          t.getElementType());
      if (auto tr = dyn_cast<TransposeOp>(op)) {
        result = TransposeOp::create(
            rewriter, loc, type, build(rewriter, loc, tr.getInput()),
            rewriter.getDenseI64ArrayAttr({0, 1, 3, 2}));
      } else {
        SmallVector<Value> operands;
        for (Value x : op->getOperands())
          operands.push_back(!isa<MatMulOp>(op) && isScalar(x)
                                 ? x
                                 : build(rewriter, loc, x));
        OperationState state(loc, op->getName().getStringRef(), operands,
                             TypeRange{type}, op->getAttrs());
        result = rewriter.create(state)->getResult(0);
      }
    }
    built[v] = result;
    for (Operation *user : llvm::make_early_inc_range(v.getUsers()))
      if (auto shape = dyn_cast<ShapeOp>(user))
        if (Value merged = mergedShape(rewriter, loc, result, shape))
          rewriter.replaceOp(shape, merged);
    return result;
  }

  Value leaf;

private:
  /// A scalar operand broadcasts alike over both layouts.
  static bool isScalar(Value x) {
    auto xt = cast<RankedTensorType>(x.getType());
    return xt.getRank() == 0 || (xt.hasStaticShape() &&
                                 xt.getNumElements() == 1 && xt.getRank() <= 3);
  }

  /// The heads of a merged view: x [B, H, X, Y] -> [B * H, X, Y] (x itself),
  /// or x [B, H, Y] -> [B * H, 1, Y] (x, to which an axis of 1 is added);
  /// null for any other reshape. The merged count is B * H where the target
  /// says so (`isDimProduct`), or where the other target dims are x's (the
  /// element count fixes it).
  Value mergedHeads(ReshapeOp merge) const {
    Value x = merge.getInput();
    auto xt = cast<RankedTensorType>(x.getType());
    int64_t rank = xt.getRank();
    auto target = getFoldedDimExprs(merge.getShape());
    if ((rank != 3 && rank != 4) || xt.getDimSize(1) != heads ||
        target.size() != 3)
      return {};
    auto isConst = [](const DimExpr &d, int64_t c) {
      return d.isConstant() && d.constant == c;
    };
    if (rank == 3 && !isConst(target[1], 1))
      return {};
    int64_t inferred = 0;
    for (int64_t i = rank == 4 ? 1 : 2; i < 3; ++i) {
      if (isConst(target[i], -1))
        ++inferred;
      else if (!isSameDim(target[i], x, i + (rank == 4 ? 1 : 0)))
        return {};
    }
    // A 0 would copy x's B; an inferred dim needs B * H written.
    if (inferred == 0 ? isConst(target[0], 0)
                      : inferred > 1 ||
                            !isDimProduct(merge.getShape(), 0, x, 0, 1))
      return {};
    return x;
  }

  /// The shape [B * H, X, Y] (the part `shape` asks for) of the merged view
  /// of `heads4` [B, H, X, Y], read from the values its dimensions are traced
  /// to, built before `shape`; null where one of those is not defined before
  /// it (the new ops are not).
  Value mergedShape(PatternRewriter &rewriter, Location loc, Value heads4,
                    ShapeOp shape) const {
    // Read through reshape targets too: from the model's inputs where
    // possible, so that no view is kept for its shape.
    auto dimExpr = [&](int64_t i) { return resolveDimExpr(heads4, i); };
    for (int64_t i = 0; i < 4; ++i) {
      DimExpr d = dimExpr(i);
      Operation *def = d.source ? d.source.getDefiningOp() : nullptr;
      if (!d.isConstant() && i != 1 &&
          (!d.source || (def && (def->getBlock() != shape->getBlock() ||
                                 !def->isBeforeInBlock(shape)))))
        return {};
    }
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(shape);
    auto i64 = rewriter.getI64Type();
    auto vecType = RankedTensorType::get({1}, i64);
    auto constant = [&](int64_t c) -> Value {
      return ConstantOp::create(
          rewriter, loc, cast<ElementsAttr>(DenseElementsAttr::get(vecType, c)));
    };
    auto dim = [&](int64_t i) -> Value {
      DimExpr d = dimExpr(i);
      if (d.isConstant())
        return constant(d.constant);
      return ShapeOp::create(rewriter, loc, vecType, d.source,
                             rewriter.getI64IntegerAttr(d.index),
                             rewriter.getI64IntegerAttr(d.index + 1));
    };
    int64_t start = shape.getStart();
    int64_t end = shape.getEnd() ? (int64_t)*shape.getEnd() : 3;
    start = std::clamp<int64_t>(start < 0 ? start + 3 : start, 0, 3);
    end = std::clamp<int64_t>(end < 0 ? end + 3 : end, 0, 3);
    SmallVector<Value> parts;
    for (int64_t i = start; i < end; ++i)
      parts.push_back(i == 0 ? MulOp::create(rewriter, loc, vecType, dim(0),
                                             constant(heads))
                                   .getResult()
                             : dim(i + 1));
    if (parts.size() == 1)
      return parts[0];
    return ConcatOp::create(
        rewriter, loc,
        RankedTensorType::get({(int64_t)parts.size()}, i64), parts,
        rewriter.getI64IntegerAttr(0));
  }

  int64_t heads;
  llvm::DenseMap<Value, Value> built;
};

/// Attention computed on [B * H, S, D] views (BLOOM's baddbmm(alibi, q, k^T)
/// and bmm(probs, v)) back on the [B, H, S, D] heads:
///
///   Reshape(E([B * H, X, Y] views) -> [B, H, X', Y'])
///     -> E(the [B, H, X, Y] values)
///
/// for a `MergedHeadsTree` E whose H is the target's: each op of E computes
/// the merge of the same op on the heads, so the reshape un-merges that
/// merge. It is dropped where it restores [B, H, X, Y] (X' and Y' are X and
/// Y, or B' is B and one of them is inferred), and kept on the heads'
/// value otherwise.
struct FoldMergedHeadsBatch : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReshapeOp unmerge,
                                PatternRewriter &rewriter) const override {
    Value v = unmerge.getInput();
    auto vt = unmerge.getInput().getType();
    auto target = getFoldedDimExprs(unmerge.getShape());
    if (vt.getRank() != 3 || unmerge.getType().getRank() != 4 ||
        target.size() != 4)
      return rewriter.notifyMatchFailure(unmerge, "not a 3-D -> 4-D reshape");
    if (!target[1].isConstant() || target[1].constant <= 0)
      return rewriter.notifyMatchFailure(unmerge, "head count not constant");
    if (!isa_and_nonnull<MatMulOp, AddOp, SubOp, MulOp, DivOp>(
            v.getDefiningOp()))
      return rewriter.notifyMatchFailure(unmerge, "input is not a batched op");
    MergedHeadsTree tree(target[1].constant);
    if (!tree.match(v))
      return rewriter.notifyMatchFailure(
          unmerge, "not batched ops over merged [B * H, X, Y] heads");
    // The target restores the heads: X' and Y' are the merged X and Y (then
    // the count fixes B' = B), or one is inferred and B' is the leaves' B.
    auto isConst = [](const DimExpr &d, int64_t c) {
      return d.isConstant() && d.constant == c;
    };
    int64_t inferred = 0;
    bool restores = true;
    for (int64_t i : {2, 3}) {
      if (isConst(target[i], -1))
        ++inferred;
      else
        restores &= isSameDim(target[i], v, i - 1);
    }
    restores &= inferred == 0 ||
                (inferred == 1 && isSameDim(target[0], tree.leaf, 0));
    bool plain = llvm::all_of(target, [&](const DimExpr &d) {
      return d.isKnown() && !isConst(d, 0);
    });
    int64_t n = vt.getDimSize(0), h = target[1].constant;
    auto headsType = RankedTensorType::get(
        {ShapedType::isDynamic(n) ? n : n / h, h, vt.getDimSize(1),
         vt.getDimSize(2)},
        vt.getElementType());
    restores &= headsType == unmerge.getType();
    if (!restores && !plain)
      return rewriter.notifyMatchFailure(
          unmerge, "the target may copy a merged dimension (a 0)");
    Value heads = tree.build(rewriter, unmerge.getLoc(), v);
    if (restores) {
      rewriter.replaceOp(unmerge, heads);
      return success();
    }
    // A 0-free target reshapes the heads as it did their merge.
    rewriter.replaceOpWithNewOp<ReshapeOp>(unmerge, unmerge.getType(), heads,
                                           unmerge.getShape());
    return success();
  }
};

/// Transpose(Transpose(x, p), q) -> Transpose(x, p[q[i]]): one data movement,
/// and the form the attention matcher reads (SDPA's K^T after the head split
/// is Transpose[0, 1, 3, 2](Transpose[0, 2, 1, 3](heads))).
struct FoldTransposeChain : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp outer,
                                PatternRewriter &rewriter) const override {
    auto inner = outer.getInput().getDefiningOp<TransposeOp>();
    if (!inner)
      return rewriter.notifyMatchFailure(outer, "input is not a transpose");
    ArrayRef<int64_t> p = inner.getPerm(), q = outer.getPerm();
    SmallVector<int64_t> perm;
    for (int64_t i : q)
      perm.push_back(p[i]);
    rewriter.replaceOpWithNewOp<TransposeOp>(
        outer, outer.getType(), inner.getInput(),
        rewriter.getDenseI64ArrayAttr(perm));
    return success();
  }
};

/// Gather(x, [i], axis) with one constant index is Slice(x, i, i + 1, axis):
/// the axis stays, of size 1 (Falcon and GPT-J pick K and V heads so).
/// Only on rank >= 2 data; shape vectors keep their Gathers.
struct FoldGatherOfOneIndex : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherOp op,
                                PatternRewriter &rewriter) const override {
    auto in = cast<RankedTensorType>(op.getInput().getType());
    auto idxType = cast<RankedTensorType>(op.getIndices().getType());
    if (in.getRank() < 2 || idxType.getRank() != 1 ||
        idxType.getDimSize(0) != 1)
      return rewriter.notifyMatchFailure(op, "not one index into data");
    auto index = getFoldedIndex(op.getIndices());
    if (!index)
      return rewriter.notifyMatchFailure(op, "index not constant");
    int64_t axis = (int64_t)op.getAxis();
    if (axis < 0)
      axis += in.getRank();
    int64_t i = *index, n = in.getDimSize(axis);
    // Out of range is the model's error at run time: leave it to Gather.
    if (i >= 0 ? (ShapedType::isDynamic(n) || i >= n)
               : (!ShapedType::isDynamic(n) && i < -n))
      return rewriter.notifyMatchFailure(op, "index not known in range");
    replaceWithPick(rewriter, op, op.getInput(), axis, i);
    return success();
  }
};

/// The last-axis range [lo, hi) that `slice` (step 1, constant bounds) keeps
/// of a last dimension of size `n`; std::nullopt for any other slice.
std::optional<std::pair<int64_t, int64_t>> lastAxisRange(SliceOp slice,
                                                         int64_t n) {
  int64_t rank = slice.getType().getRank();
  if (slice.getAxes().size() != 1 || slice.getSteps()[0] != 1)
    return std::nullopt;
  int64_t axis = slice.getAxes()[0];
  auto start = getFoldedIndex(slice.getStarts());
  auto end = getFoldedIndex(slice.getEnds());
  if ((axis < 0 ? axis + rank : axis) != rank - 1 || !start || !end)
    return std::nullopt;
  auto clamp = [&](int64_t v) {
    return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n);
  };
  return std::pair(clamp(*start), clamp(*end));
}

/// True if `user` reads only the shape of its operands: a Shape op, or a
/// view whose result is read only so (an exporter's shape arithmetic on a
/// view the raise passes replaced).
bool readsOnlyShape(Operation *user) {
  if (isa<ShapeOp>(user))
    return true;
  return isa<ReshapeOp, TransposeOp, UnsqueezeOp, SqueezeOp, SliceOp>(user) &&
         llvm::all_of(user->getResult(0).getUsers(), readsOnlyShape);
}

/// A permutation of the last axis whose result is read only for its shape
/// -> its input, which has that shape (the key an exporter measures for its
/// mask after raise-attention took the key before the permutation).
struct FoldShapeOnlyPermutation : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherOp gather,
                                PatternRewriter &rewriter) const override {
    Value input;
    if (!matchLastAxisPermutation(gather.getResult(), input) ||
        input.getType() != gather.getType())
      return rewriter.notifyMatchFailure(gather,
                                         "not a permutation of the last axis");
    if (gather->use_empty() ||
        !llvm::all_of(gather->getUsers(), readsOnlyShape))
      return rewriter.notifyMatchFailure(gather, "its values are read");
    rewriter.replaceOp(gather, input);
    return success();
  }
};

/// Constants of `linear`'s weight rows `rows` (and its bias's), in that
/// order, created before `linear`; std::nullopt when the weight or bias is
/// not a readable constant. The bias value is null for a linear without one.
std::optional<std::pair<Value, Value>>
linearRows(PatternRewriter &rewriter, LinearOp linear, ArrayRef<int64_t> rows,
           StringRef suffix) {
  ElementsAttr weight = getConstant(linear.getWeight());
  ElementsAttr bias =
      linear.getBias() ? getConstant(linear.getBias()) : ElementsAttr();
  if (!weight || (linear.getBias() && !bias))
    return std::nullopt;
  ElementsAttr w2 = gatherRows(weight, rows, suffix);
  ElementsAttr b2 = bias ? gatherRows(bias, rows, suffix) : ElementsAttr();
  if (!w2 || (bias && !b2))
    return std::nullopt;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(linear);
  Location loc = linear.getLoc();
  Value wv = ConstantOp::create(rewriter, loc, w2);
  Value bv = b2 ? ConstantOp::create(rewriter, loc, b2).getResult() : Value();
  return std::pair(wv, bv);
}

/// Gather(linear, P, last axis) with P a permutation -> the linear with its
/// constant weight rows (and bias) in the order P: its output features come
/// out permuted at no cost (raise-rotary gathers an interleaved rotary's q
/// and k so). Also Gather(Slice(linear, lo, hi, last axis), P), a part of a
/// fused projection (group-fused-heads), permuting rows [lo, hi) in place.
/// The linear's (and the part's) other users may only read other parts or
/// shapes.
struct FoldPermutationIntoLinear : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherOp gather,
                                PatternRewriter &rewriter) const override {
    Value input;
    auto perm = matchLastAxisPermutation(gather.getResult(), input);
    if (!perm)
      return rewriter.notifyMatchFailure(gather,
                                         "not a permutation of the last axis");
    auto part = input.getDefiningOp<SliceOp>();
    auto linear = (part ? part.getInput() : input).getDefiningOp<LinearOp>();
    if (!linear)
      return rewriter.notifyMatchFailure(gather,
                                         "not a linear's output or a part");
    auto n = (int64_t)linear.getType().getShape().back();
    int64_t lo = 0, hi = n;
    if (part) {
      auto range = lastAxisRange(part, n);
      if (!range || llvm::any_of(part->getUsers(), [&](Operation *user) {
            return user != gather && !readsOnlyShape(user);
          }))
        return rewriter.notifyMatchFailure(
            gather, "the part is not a constant last-axis slice read only "
                    "here");
      std::tie(lo, hi) = *range;
    }
    if (hi - lo != (int64_t)perm->size())
      return rewriter.notifyMatchFailure(gather, "permutation size differs");
    Operation *reader = part ? part.getOperation() : gather.getOperation();
    for (Operation *user : linear->getUsers()) {
      if (user == reader || readsOnlyShape(user))
        continue;
      auto other = dyn_cast<SliceOp>(user);
      auto range = other ? lastAxisRange(other, n) : std::nullopt;
      if (!range || (range->first < hi && lo < range->second))
        return rewriter.notifyMatchFailure(
            gather, "another user reads the permuted rows");
    }
    SmallVector<int64_t> rows = llvm::to_vector(llvm::seq<int64_t>(0, n));
    for (auto [i, p] : llvm::enumerate(*perm))
      rows[lo + i] = lo + p;
    auto permuted = linearRows(rewriter, linear, rows, "_permuted");
    if (!permuted)
      return rewriter.notifyMatchFailure(
          gather, "weight or bias is not a readable constant");
    // Copies, not structured bindings: clang 14 rejects capturing those.
    Value wv = permuted->first, bv = permuted->second;
    rewriter.modifyOpInPlace(linear, [&] {
      linear.getWeightMutable().assign(wv);
      if (bv)
        linear.getBiasMutable().assign(bv);
    });
    rewriter.replaceOp(gather, input);
    return success();
  }
};

/// Slice(linear(x, W, b), lo, hi, last axis) -> linear(x, W[lo:hi], b[lo:hi])
/// when every user of the linear is such a slice: a fused projection (BLOOM's
/// query_key_value, Falcon's, GPT-NeoX's, after group-fused-heads made each
/// part one block) becomes one linear per part. The parts then need no copy
/// out of the fused result (a strided slice of device data, which kept a
/// decode step from being one CUDA graph), and form-kernels groups them as
/// it groups q, k and v.
struct FoldSliceIntoLinear : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SliceOp part,
                                PatternRewriter &rewriter) const override {
    auto linear = part.getInput().getDefiningOp<LinearOp>();
    if (!linear)
      return rewriter.notifyMatchFailure(part, "not a part of a linear");
    auto n = (int64_t)linear.getType().getShape().back();
    if (ShapedType::isDynamic(n))
      return rewriter.notifyMatchFailure(part, "dynamic output features");
    for (Operation *user : linear->getUsers()) {
      auto other = dyn_cast<SliceOp>(user);
      if (!other || !lastAxisRange(other, n))
        return rewriter.notifyMatchFailure(
            part, "the linear has a user other than last-axis slices");
    }
    auto [lo, hi] = *lastAxisRange(part, n);
    auto out = part.getType();
    if (hi <= lo || out.getShape().back() != hi - lo)
      return rewriter.notifyMatchFailure(part, "empty or mistyped part");
    SmallVector<int64_t> rows = llvm::to_vector(llvm::seq<int64_t>(lo, hi));
    auto sliced = linearRows(rewriter, linear, rows,
                             llvm::formatv("_rows{0}_{1}", lo, hi).str());
    if (!sliced)
      return rewriter.notifyMatchFailure(
          part, "weight or bias is not a readable constant");
    rewriter.replaceOpWithNewOp<LinearOp>(part, out, linear.getInput(),
                                          sliced->first, sliced->second);
    return success();
  }
};

/// GatherND(x, [[i]]) (batch_dims 0) is Slice(x, i, i + 1, axis 0): the
/// dynamo exporter picks Falcon's K and V heads so, after moving the head
/// axis first.
struct FoldGatherNdOfOneIndex : OpRewritePattern<GatherNdOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherNdOp op,
                                PatternRewriter &rewriter) const override {
    auto in = cast<RankedTensorType>(op.getInput().getType());
    auto idxType = cast<RankedTensorType>(op.getIndices().getType());
    if (op.getBatchDims() != 0 || in.getRank() < 2 ||
        idxType.getShape() != ArrayRef<int64_t>{1, 1})
      return rewriter.notifyMatchFailure(op, "not one index into axis 0");
    auto dense =
        dyn_cast_or_null<DenseIntElementsAttr>(getConstant(op.getIndices()));
    int64_t n = in.getDimSize(0);
    if (!dense || ShapedType::isDynamic(n))
      return rewriter.notifyMatchFailure(op, "index not constant");
    int64_t i = (*dense.getValues<APInt>().begin()).getSExtValue();
    if (i < -n || i >= n)
      return rewriter.notifyMatchFailure(op, "index out of range");
    replaceWithPick(rewriter, op, op.getInput(), /*axis=*/0,
                    i < 0 ? i + n : i);
    return success();
  }
};

/// Slice(Transpose(x, p), axes) -> Transpose(Slice(x, p[axes]), p) for a
/// slice that picks one index per axis: the pick moves next to what it picks
/// from (a head split), transposes gather in chains that FoldTransposeChain
/// composes.
struct FoldSliceOfTranspose : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SliceOp op,
                                PatternRewriter &rewriter) const override {
    auto t = op.getInput().getDefiningOp<TransposeOp>();
    if (!t)
      return rewriter.notifyMatchFailure(op, "input is not a transpose");
    ArrayRef<int64_t> perm = t.getPerm();
    int64_t rank = op.getType().getRank();
    // Only picks (one index per sliced axis): rotate-half slices of heads
    // stay where raise-rotary reads them.
    for (int64_t a : op.getAxes())
      if (op.getType().getDimSize(a < 0 ? a + rank : a) != 1)
        return rewriter.notifyMatchFailure(op, "slice is not a pick");
    auto xt = cast<RankedTensorType>(t.getInput().getType());
    SmallVector<int64_t> shape(xt.getShape()), axes;
    for (int64_t a : op.getAxes()) {
      int64_t axis = perm[a < 0 ? a + rank : a];
      axes.push_back(axis);
      shape[axis] = op.getType().getDimSize(a < 0 ? a + rank : a);
    }
    Value sliced = SliceOp::create(
        rewriter, op.getLoc(),
        RankedTensorType::get(shape, xt.getElementType()), t.getInput(),
        op.getStarts(), op.getEnds(), rewriter.getDenseI64ArrayAttr(axes),
        op.getStepsAttr());
    rewriter.replaceOpWithNewOp<TransposeOp>(op, op.getType(), sliced,
                                             t.getPermAttr());
    return success();
  }
};

/// A slice of whole heads from a head split is the head split of a slice of
/// the packed features:
///   Slice(Reshape(P [B, S, H * D] -> [B, S, H, D]), a, b, axis 2)
///     -> Reshape(Slice(P, a * D, b * D, axis 2), [B, S, b - a, D])
/// so fused QKV projections sliced by heads (Falcon, GPT-J) reach the
/// rotary and attention matchers as ordinary packed projections.
struct FoldHeadSliceIntoPacked : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SliceOp op,
                                PatternRewriter &rewriter) const override {
    auto out = op.getType();
    if (out.getRank() != 4 || op.getAxes().size() != 1 ||
        op.getSteps()[0] != 1 ||
        (op.getAxes()[0] != 2 && op.getAxes()[0] != -2))
      return rewriter.notifyMatchFailure(op, "not a step-1 slice of axis 2");
    Value packed;
    int64_t heads = 0, headDim = 0;
    ReshapeOp split = matchHeadSplit(op.getInput(), packed, heads, headDim);
    if (!split)
      return rewriter.notifyMatchFailure(op, "input is not a head split");
    auto a = getFoldedIndex(op.getStarts()), b = getFoldedIndex(op.getEnds());
    if (!a || !b)
      return rewriter.notifyMatchFailure(op, "bounds not constant");
    // ONNX Slice clamping, on the static head count.
    format::SliceAxis range = format::sliceAxis(*a, *b, 1, heads);
    int64_t lo = range.first, hi = lo + range.count;
    if (range.count == 0 || out.getDimSize(2) != hi - lo)
      return rewriter.notifyMatchFailure(op, "empty or mistyped slice");
    Location loc = op.getLoc();
    auto i64 = rewriter.getI64Type();
    auto vec = [&](ArrayRef<int64_t> v) { return indexVector(rewriter, loc, v); };
    auto pt = cast<RankedTensorType>(packed.getType());
    auto slicedType = RankedTensorType::get(
        {pt.getDimSize(0), pt.getDimSize(1), (hi - lo) * headDim},
        pt.getElementType());
    Value sliced = SliceOp::create(rewriter, loc, slicedType, packed,
                                   vec({lo * headDim}), vec({hi * headDim}),
                                   rewriter.getDenseI64ArrayAttr({2}),
                                   rewriter.getDenseI64ArrayAttr({1}));
    Value lead = ShapeOp::create(rewriter, loc, RankedTensorType::get({2}, i64),
                                 sliced, rewriter.getI64IntegerAttr(0),
                                 rewriter.getI64IntegerAttr(2));
    Value shape = ConcatOp::create(rewriter, loc,
                                   RankedTensorType::get({4}, i64),
                                   ValueRange{lead, vec({hi - lo, headDim})},
                                   rewriter.getI64IntegerAttr(0));
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, out, sliced, shape);
    return success();
  }
};

/// A Slice with constant bounds of a static dimension gets the static size
/// in its result type (the legacy exporter's slices of MPT's fused Wqkv come
/// out [?, ?, ?]): the head-split matchers need the packed width. Only where
/// every user is a view or shape op, whose types do not depend on it.
struct RefineStaticSlice : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SliceOp op,
                                PatternRewriter &rewriter) const override {
    auto in = op.getInput().getType(), out = op.getType();
    auto constants = [](Value v) -> std::optional<SmallVector<int64_t>> {
      SmallVector<int64_t> out;
      for (const DimExpr &d : getFoldedDimExprs(v)) {
        if (!d.isConstant())
          return std::nullopt;
        out.push_back(d.constant);
      }
      return out;
    };
    auto starts = constants(op.getStarts()), ends = constants(op.getEnds());
    auto axes = op.getAxes(), steps = op.getSteps();
    if (!starts || !ends || starts->size() != axes.size() ||
        ends->size() != axes.size())
      return rewriter.notifyMatchFailure(op, "bounds not constant");
    for (Operation *u : op->getUsers())
      if (!isa<ReshapeOp, TransposeOp, ShapeOp, SliceOp>(u))
        return rewriter.notifyMatchFailure(op, "a user's type may depend on it");
    SmallVector<int64_t> shape(out.getShape());
    bool changed = false;
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t axis = axes[i] < 0 ? axes[i] + in.getRank() : axes[i];
      if (axis < 0 || axis >= in.getRank() || in.isDynamicDim(axis) ||
          !out.isDynamicDim(axis) || steps[i] != 1)
        continue;
      int64_t dim = in.getDimSize(axis);
      auto clampIdx = [&](int64_t v) {
        if (v < 0)
          v += dim;
        return std::clamp<int64_t>(v, 0, dim);
      };
      int64_t b = clampIdx((*starts)[i]), e = clampIdx((*ends)[i]);
      shape[axis] = std::max<int64_t>(e - b, 0);
      changed = true;
    }
    if (!changed)
      return rewriter.notifyMatchFailure(op, "nothing to refine");
    rewriter.modifyOpInPlace(op, [&] {
      op.getResult().setType(RankedTensorType::get(shape, out.getElementType()));
    });
    return success();
  }
};

/// An Expand, Reshape or Transpose whose result type has a dynamic dimension
/// that its operands fix gets it in its result type: an Expand to a
/// constant, a Reshape to a constant or to the -1 that the other target
/// dimensions leave (matched symbolically against the input's), a Transpose
/// of a static input dimension. Falcon's legacy export expands its kv heads
/// to [B, S, G, n, D] and views them as [B, S, -1, D], which comes out
/// [?, ?, ?, D]; with H static, its later view [B, H, S, D] of the
/// transposed heads is an identity. Only where every user is a view or
/// shape op, whose types do not depend on it (as RefineStaticSlice), or a
/// MatMul / linear, whose verifiers only ask that the sizes agree: Hugging
/// Face's attention output `reshape(*input_shape, -1)` before o_proj then
/// keeps its hidden size, and the reshape folds as an identity.
template <typename OpT>
struct RefineViewType : OpRewritePattern<OpT> {
  using OpRewritePattern<OpT>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpT op,
                                PatternRewriter &rewriter) const override {
    auto out = cast<RankedTensorType>(op.getType());
    for (Operation *u : op->getUsers())
      if (!isa<ReshapeOp, TransposeOp, ShapeOp, SliceOp, ExpandOp, MatMulOp,
               LinearOp, QLinearOp>(u))
        return rewriter.notifyMatchFailure(op, "a user's type may depend on it");
    SmallVector<int64_t> shape(out.getShape());
    bool changed = false;
    for (int64_t i = 0; i < out.getRank(); ++i) {
      if (!out.isDynamicDim(i))
        continue;
      if (std::optional<int64_t> d = staticDim(op, i); d && *d >= 0) {
        shape[i] = *d;
        changed = true;
      }
    }
    if (!changed)
      return rewriter.notifyMatchFailure(op, "nothing to refine");
    rewriter.modifyOpInPlace(op, [&] {
      op.getResult().setType(RankedTensorType::get(shape, out.getElementType()));
    });
    return success();
  }

  static std::optional<int64_t> staticDim(TransposeOp op, int64_t i) {
    auto in = op.getInput().getType();
    int64_t d = in.getDimSize(op.getPerm()[i]);
    return ShapedType::isDynamic(d) ? std::nullopt : std::optional(d);
  }

  static std::optional<int64_t> staticDim(ExpandOp op, int64_t i) {
    auto target = getFoldedDimExprs(op.getShape());
    auto in = op.getInput().getType();
    int64_t rank = op.getType().getRank();
    int64_t t = i - (rank - (int64_t)target.size());
    int64_t j = i - (rank - in.getRank());
    bool one = t < 0 || (target[t].isConstant() && target[t].constant == 1);
    if (target.empty() || (!one && !target[t].isConstant()))
      return std::nullopt;
    if (!one)
      return target[t].constant > 1 ? std::optional(target[t].constant)
                                    : std::nullopt;
    if (j < 0)
      return 1;
    int64_t d = in.getDimSize(j);
    return ShapedType::isDynamic(d) ? std::nullopt : std::optional(d);
  }

  static std::optional<int64_t> staticDim(ReshapeOp op, int64_t i) {
    auto target = getFoldedDimExprs(op.getShape());
    if ((int64_t)target.size() != op.getType().getRank())
      return std::nullopt;
    const DimExpr &t = target[i];
    if (t.isConstant() && t.constant > 0)
      return t.constant;
    if (!t.isConstant() || t.constant != -1)
      return std::nullopt;
    // -1: the input's dims the other target dims do not account for.
    Value in = op.getInput();
    auto inType = op.getInput().getType();
    SmallVector<int64_t> left = llvm::to_vector(
        llvm::seq<int64_t>(0, inType.getRank()));
    int64_t divisor = 1;
    for (auto [j, e] : llvm::enumerate(target)) {
      if ((int64_t)j == i)
        continue;
      if (e.isConstant() && e.constant > 0) {
        divisor *= e.constant;
        continue;
      }
      if (e.isConstant() && e.constant == 0 && !op.getAllowzero()) {
        auto it = llvm::find(left, (int64_t)j);
        if (it == left.end())
          return std::nullopt;
        left.erase(it);
        continue;
      }
      // A copy, not the structured binding: clang rejects capturing one.
      const DimExpr dim = e;
      auto it = llvm::find_if(left, [&](int64_t k) {
        return isSameDim(dim, in, k);
      });
      if (it == left.end())
        return std::nullopt;
      left.erase(it);
    }
    int64_t rest = 1;
    for (int64_t k : left) {
      if (inType.isDynamicDim(k))
        return std::nullopt;
      rest *= inType.getDimSize(k);
    }
    if (divisor <= 0 || rest % divisor != 0)
      return std::nullopt;
    return rest / divisor;
  }
};

/// Concat that drops operands of size 0 along its axis (Phi-3's rotary keeps
/// an empty "pass-through" part when the whole head rotates).
struct FoldConcatOfEmpty : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &rewriter) const override {
    int64_t rank = op.getType().getRank();
    int64_t axis = (int64_t)op.getAxis();
    axis = axis < 0 ? axis + rank : axis;
    SmallVector<Value> kept;
    for (Value v : op.getInputs())
      if (cast<RankedTensorType>(v.getType()).getDimSize(axis) != 0)
        kept.push_back(v);
    if (kept.size() == op.getInputs().size() || kept.empty())
      return rewriter.notifyMatchFailure(op, "no empty operand to drop");
    if (kept.size() == 1) {
      if (kept[0].getType() != op.getType())
        return rewriter.notifyMatchFailure(op, "the rest has another type");
      rewriter.replaceOp(op, kept[0]);
      return success();
    }
    rewriter.replaceOpWithNewOp<ConcatOp>(op, op.getType(), kept,
                                          op.getAxisAttr());
    return success();
  }
};

/// Any op whose operands are all small constants (dense, not weight blobs)
/// and whose results are small and static -> constants, computed by the CPU
/// reference kernel of the op (passes/ConstEval.h): mask and position
/// builders fold with exactly the semantics the runtime would run.
struct EvaluateConstantOp : RewritePattern {
  EvaluateConstantOp(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    // A 2:4 weight stays compressed: the GEMMs read that form.
    if (!op->getDialect() || op->getDialect()->getNamespace() != "qcc" ||
        isa<ConstantOp, KernelOp, Sparse24Op>(op) ||
        op->getNumRegions() != 0 ||
        op->getNumResults() == 0 || op->getNumOperands() == 0)
      return rewriter.notifyMatchFailure(op, "not a foldable qcc op");
    for (Value r : op->getResults()) {
      auto t = dyn_cast<RankedTensorType>(r.getType());
      if (!t || !t.hasStaticShape() || t.getNumElements() > kMaxFoldElements)
        return rewriter.notifyMatchFailure(op, "result not small and static");
    }
    SmallVector<ElementsAttr> operands;
    for (Value v : op->getOperands()) {
      auto c = v.getDefiningOp<ConstantOp>();
      if (!c || !isa<DenseElementsAttr>(c.getValue()))
        return rewriter.notifyMatchFailure(op, "an operand is not a small "
                                               "constant");
      operands.push_back(c.getValue());
    }
    std::string why;
    auto results = evaluateOp(op, operands, &why);
    if (failed(results))
      return rewriter.notifyMatchFailure(op, why);
    SmallVector<Value> replacements;
    for (auto [attr, r] : llvm::zip(*results, op->getResults())) {
      if (attr.getType() != r.getType())
        return rewriter.notifyMatchFailure(op, "evaluated type differs");
      replacements.push_back(ConstantOp::create(rewriter, op->getLoc(),
                                                cast<ElementsAttr>(attr)));
    }
    rewriter.replaceOp(op, replacements);
    return success();
  }
};

struct FoldShapesPass : qcc::impl::FoldShapesBase<FoldShapesPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    // The greedy driver also runs every op's folder.
    patterns.add<FoldFloatCastChain, FoldIdentityReshape, FoldReshapeChain,
                 FoldSplitOfUnsqueeze, FoldSplitOfFullNonZero,
                 FoldMinusOneReplacement, FoldIdentityExpand,
                 FoldIdentitySlice, FoldTransposeThroughMergedView,
                 FoldMergedHeadsBatch, FoldTransposeChain, FoldConcatOfEmpty,
                 FoldGatherOfOneIndex, FoldGatherNdOfOneIndex,
                 FoldPermutationIntoLinear, FoldShapeOnlyPermutation,
                 FoldSliceIntoLinear,
                 FoldSliceOfTranspose, FoldHeadSliceIntoPacked,
                 RefineStaticSlice, RefineViewType<ExpandOp>,
                 RefineViewType<ReshapeOp>, RefineViewType<TransposeOp>,
                 EvaluateConstantOp>(ctx);
    patterns.add<FoldKnownShapeVector<ShapeOp>, FoldKnownShapeVector<GatherOp>,
                 FoldKnownShapeVector<SliceOp>, FoldKnownShapeVector<ConcatOp>,
                 FoldKnownShapeVector<UnsqueezeOp>,
                 FoldKnownShapeVector<SqueezeOp>,
                 FoldKnownShapeVector<ReshapeOp>>(ctx);
    if (failed(applyPatternsTraced(getOperation(), std::move(patterns),
                                   DEBUG_TYPE)))
      signalPassFailure();
  }
};

} // namespace
