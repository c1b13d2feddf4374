//===- RaiseLinear.cpp - raise-linear --------------------------------------===//
//
// MatMul / Gemm with a constant 2-D weight become qcc.linear, whose weight is
// [N, K]: a [K, N] weight is transposed at compile time into a new constant
// (a dense_resource blob named after the old one when large). A following
// Add of a constant [N] bias is absorbed, and GPT-2's Conv1D (Reshape to 2-D,
// Gemm, Reshape back) becomes one linear on the original input.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccConstants.h"
#include "dialects/QccOps.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace qcc {
#define GEN_PASS_DEF_RAISELINEAR
#include "passes/Passes.h.inc"
} // namespace qcc

#define DEBUG_TYPE "qcc-raise-linear"

using namespace mlir;
using namespace qcc;

namespace {

/// Transposed copies of [K, N] weights already made by this pass run, so a
/// weight used by several matmuls is transposed (and stored) once.
using TransposeCache = llvm::DenseMap<Attribute, ElementsAttr>;

/// A name for the transposed copy of `attr`.
std::string transposedName(ElementsAttr attr) {
  return blobName(attr, "linear_weight") + "_t";
}

/// A constant [N, K] holding the transpose of the constant [K, N] `w`, placed
/// right after `w`'s definition; null if the data cannot be read.
Value createTransposed(PatternRewriter &rewriter, Value w,
                       TransposeCache &cache) {
  auto attr = getConstant(w);
  auto type = cast<RankedTensorType>(w.getType());
  int64_t k = type.getDimSize(0), n = type.getDimSize(1);
  auto tType = RankedTensorType::get({n, k}, type.getElementType());
  ElementsAttr tAttr = cache.lookup(attr);
  if (!tAttr) {
    auto bytes = getBytes(attr);
    if (!bytes || k * n == 0)
      return {};
    size_t eb = bytes->size() / (k * n);
    std::vector<char> out(bytes->size());
    for (int64_t r = 0; r < k; ++r)
      for (int64_t c = 0; c < n; ++c)
        std::memcpy(&out[(c * k + r) * eb], &(*bytes)[(r * n + c) * eb], eb);
    tAttr = makeElements(tType, out, transposedName(attr));
    cache[attr] = tAttr;
  }
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointAfterValue(w);
  return ConstantOp::create(rewriter, w.getLoc(), tAttr);
}

/// A constant 2-D float weight with static dims, or failure with a reason.
LogicalResult checkWeight(PatternRewriter &rewriter, Operation *op, Value w) {
  auto type = cast<RankedTensorType>(w.getType());
  if (!getConstant(w))
    return rewriter.notifyMatchFailure(op, "weight is not a constant");
  if (type.getRank() != 2 || !type.hasStaticShape())
    return rewriter.notifyMatchFailure(op, "weight is not a static 2-D tensor");
  return success();
}

/// MatMul(x [..., K], W const [K, N]) -> qcc.linear x, W^T; and
/// MatMul(x, Transpose[1, 0](W const [N, K])) -> qcc.linear x, W, no copy (an
/// LM head tied to the embedding, as optimum's with-past exports write it).
struct LinearFromMatMul : OpRewritePattern<MatMulOp> {
  LinearFromMatMul(MLIRContext *ctx, TransposeCache &cache)
      : OpRewritePattern(ctx), cache(cache) {}

  LogicalResult matchAndRewrite(MatMulOp op,
                                PatternRewriter &rewriter) const override {
    Value x = op.getLhs(), w = op.getRhs();
    if (auto t = w.getDefiningOp<TransposeOp>();
        t && t.getPerm() == ArrayRef<int64_t>{1, 0} &&
        succeeded(checkWeight(rewriter, op, t.getInput()))) {
      auto xType = cast<RankedTensorType>(x.getType());
      if (xType.getRank() < 2 ||
          cast<RankedTensorType>(op.getType()).getRank() != xType.getRank())
        return rewriter.notifyMatchFailure(op, "input rank");
      rewriter.replaceOpWithNewOp<LinearOp>(op, op.getType(), x, t.getInput(),
                                            Value());
      return success();
    }
    if (failed(checkWeight(rewriter, op, w)))
      return failure();
    auto xType = cast<RankedTensorType>(x.getType());
    if (xType.getRank() < 2)
      return rewriter.notifyMatchFailure(op, "input has rank < 2");
    if (cast<RankedTensorType>(op.getType()).getRank() != xType.getRank())
      return rewriter.notifyMatchFailure(op, "matmul broadcasts the input");
    Value wt = createTransposed(rewriter, w, cache);
    if (!wt)
      return rewriter.notifyMatchFailure(op, "weight data not readable");
    rewriter.replaceOpWithNewOp<LinearOp>(op, op.getType(), x, wt, Value());
    return success();
  }

  TransposeCache &cache;
};

/// Add(b const [N], linear without bias) (either order) -> linear with bias.
struct AbsorbBiasAdd : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    LinearOp linear;
    Value bias;
    matchCommutative(op, [&](Value a, Value b) {
      auto l = a.getDefiningOp<LinearOp>();
      if (!l || l.getBias() || !getConstant(b))
        return false;
      linear = l;
      bias = b;
      return true;
    });
    if (!linear)
      return rewriter.notifyMatchFailure(
          op, "not Add(linear without bias, constant)");
    auto bType = cast<RankedTensorType>(bias.getType());
    int64_t n =
        cast<RankedTensorType>(linear.getWeight().getType()).getDimSize(0);
    if (bType.getRank() != 1 || bType.getDimSize(0) != n ||
        bType.getElementType() != getElementTypeOrSelf(linear.getType()))
      return rewriter.notifyMatchFailure(op, "bias is not [N]");
    if (op.getType() != linear.getType())
      return rewriter.notifyMatchFailure(op, "the add changes the type");
    if (!linear->hasOneUse())
      return rewriter.notifyMatchFailure(op, "linear has other users");
    rewriter.replaceOpWithNewOp<LinearOp>(op, op.getType(), linear.getInput(),
                                          linear.getWeight(), bias);
    return success();
  }
};

/// Gemm(a [M, K], B const, c const [N] or none) with alpha = 1,
/// beta = 1 (or no c) and transA = 0 -> qcc.linear; B is [N, K] already when
/// transB = 1 and is transposed otherwise.
struct LinearFromGemm : OpRewritePattern<GemmOp> {
  LinearFromGemm(MLIRContext *ctx, TransposeCache &cache)
      : OpRewritePattern(ctx), cache(cache) {}

  LogicalResult matchAndRewrite(GemmOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getTransA())
      return rewriter.notifyMatchFailure(op, "transA is set");
    if (op.getAlpha().convertToFloat() != 1.0f)
      return rewriter.notifyMatchFailure(op, "alpha != 1");
    Value c = op.getC();
    if (c && op.getBeta().convertToFloat() != 1.0f)
      return rewriter.notifyMatchFailure(op, "beta != 1");
    Value b = op.getB();
    if (failed(checkWeight(rewriter, op, b)))
      return failure();
    int64_t n = cast<RankedTensorType>(b.getType()).getDimSize(op.getTransB() ? 0 : 1);
    if (c) {
      auto cType = cast<RankedTensorType>(c.getType());
      if (!getConstant(c) || cType.getRank() != 1 || cType.getDimSize(0) != n)
        return rewriter.notifyMatchFailure(op, "c is not a constant [N] bias");
    }
    Value w = op.getTransB() ? b : createTransposed(rewriter, b, cache);
    if (!w)
      return rewriter.notifyMatchFailure(op, "weight data not readable");
    rewriter.replaceOpWithNewOp<LinearOp>(op, op.getType(), op.getA(), w, c);
    return success();
  }

  TransposeCache &cache;
};

/// GPT-2 Conv1D after the Gemm became a linear:
///   Reshape(linear(Reshape(x [d0..dr-2, K], [-1, K]), W, b), [d0..dr-2, N])
///   -> linear(x, W, b) : [d0..dr-2, N]
struct LinearThroughFlatten : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReshapeOp outer,
                                PatternRewriter &rewriter) const override {
    auto linear = outer.getInput().getDefiningOp<LinearOp>();
    if (!linear || cast<RankedTensorType>(linear.getType()).getRank() != 2)
      return rewriter.notifyMatchFailure(outer, "input is not a 2-D linear");
    if (!linear->hasOneUse())
      return rewriter.notifyMatchFailure(outer, "linear has other users");
    auto inner = linear.getInput().getDefiningOp<ReshapeOp>();
    if (!inner)
      return rewriter.notifyMatchFailure(outer, "linear input is no reshape");
    Value x = inner.getInput();
    auto xType = cast<RankedTensorType>(x.getType());
    int64_t rank = xType.getRank();
    if (rank < 2)
      return rewriter.notifyMatchFailure(outer, "x has rank < 2");
    // The inner reshape must flatten the leading dims and keep K last.
    auto flat = getDimExprs(inner.getShape());
    DimExpr k = getDimExpr(x, rank - 1);
    if (flat.size() != 2 || !flat[0].isConstant() || flat[0].constant != -1 ||
        !(flat[1] == k))
      return rewriter.notifyMatchFailure(outer, "inner reshape is not [-1, K]");
    // The outer reshape must restore x's leading dims, then N.
    auto target = getDimExprs(outer.getShape());
    auto outType = cast<RankedTensorType>(outer.getType());
    if ((int64_t)target.size() != rank || outType.getRank() != rank)
      return rewriter.notifyMatchFailure(outer, "outer reshape changes rank");
    for (int64_t i = 0; i + 1 < rank; ++i)
      if (!(target[i] == getDimExpr(x, i)))
        return rewriter.notifyMatchFailure(
            outer, "outer reshape does not restore x's leading dims");
    int64_t n =
        cast<RankedTensorType>(linear.getWeight().getType()).getDimSize(0);
    if (!target.back().isConstant() || target.back().constant != n)
      return rewriter.notifyMatchFailure(outer, "last target dim is not N");
    rewriter.replaceOpWithNewOp<LinearOp>(outer, outType, x,
                                          linear.getWeight(), linear.getBias());
    return success();
  }
};

struct RaiseLinearPass : qcc::impl::RaiseLinearBase<RaiseLinearPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    TransposeCache cache;
    RewritePatternSet patterns(ctx);
    patterns.add<LinearFromMatMul, LinearFromGemm>(ctx, cache);
    patterns.add<AbsorbBiasAdd, LinearThroughFlatten>(ctx);
    if (failed(applyPatternsTraced(getOperation(), std::move(patterns),
                                   DEBUG_TYPE)))
      signalPassFailure();
  }
};

} // namespace
