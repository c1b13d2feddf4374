//===- RaiseLayerNorm.cpp - raise-layer-norm -----------------------------===//
//
// The LayerNormalization expansion
//   d = x - ReduceMean(x)   y = d / Sqrt(ReduceMean(d^2) + eps)
// (means over the last axis, keepdims) becomes qcc.layer_norm x with a ones
// gamma; a following Mul by a constant gamma [D] and Add of a constant
// beta [D] are then folded into it by two more patterns.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccOps.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace qcc {
#define GEN_PASS_DEF_RAISELAYERNORM
#include "passes/Passes.h.inc"
} // namespace qcc

#define DEBUG_TYPE "qcc-raise-layer-norm"

using namespace mlir;
using namespace qcc;

namespace {

/// d / Sqrt(ReduceMean(d^2) + eps) with d = x - ReduceMean(x)
///   -> qcc.layer_norm x, ones {epsilon = eps}.
/// The division may also be d * Reciprocal(s) or d * (1 / s), and d^2 may be
/// Pow(d, 2) or Mul(d, d). RootOp is DivOp or MulOp.
template <typename RootOp> struct LayerNormCore : OpRewritePattern<RootOp> {
  using OpRewritePattern<RootOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(RootOp root,
                                PatternRewriter &rewriter) const override {
    Value d;
    double eps;
    if (const char *why = matchRmsNormalization(root.getResult(), d, eps))
      return rewriter.notifyMatchFailure(root, why);
    auto sub = d.template getDefiningOp<SubOp>();
    if (!sub)
      return rewriter.notifyMatchFailure(root, "the dividend is not x - mean");
    Value x = sub.getLhs();
    if (getLastAxisMeanInput(sub.getRhs()) != x)
      return rewriter.notifyMatchFailure(
          root, "the subtrahend is not the mean of x over its last axis");
    Value ones;
    if (const char *why = createOnesGamma(rewriter, root, x, ones))
      return rewriter.notifyMatchFailure(root, why);
    rewriter.replaceOpWithNewOp<LayerNormOp>(
        root, root.getType(), x, ones, Value(), rewriter.getF32FloatAttr(eps));
    return success();
  }
};

/// The qcc.layer_norm that `v` is, if its only user is the op being matched
/// and it has no beta yet; null otherwise.
static LayerNormOp getFusableLayerNorm(Value v) {
  auto ln = v.getDefiningOp<LayerNormOp>();
  if (!ln || ln.getBeta() || !ln->hasOneUse())
    return {};
  return ln;
}

/// Mul(layer_norm(x, ones), gamma) with a constant gamma [D]
///   -> layer_norm(x, gamma).
struct LayerNormGamma : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    LayerNormOp ln;
    Value gamma;
    bool found = matchCommutative(mul, [&](Value a, Value g) {
      ln = getFusableLayerNorm(a);
      gamma = g;
      return bool(ln);
    });
    if (!found)
      return rewriter.notifyMatchFailure(
          mul, "no operand is a single-use qcc.layer_norm without beta");
    if (!isSplatNear(ln.getGamma(), 1.0))
      return rewriter.notifyMatchFailure(mul, "the norm already has a gamma");
    if (!isConstantNormParam(gamma, ln.getInput()))
      return rewriter.notifyMatchFailure(
          mul, "the other factor is not a constant [D]");
    if (mul.getType() != ln.getType())
      return rewriter.notifyMatchFailure(mul, "the product broadcasts");
    rewriter.replaceOpWithNewOp<LayerNormOp>(
        mul, mul.getType(), ln.getInput(), gamma, Value(), ln.getEpsilonAttr());
    return success();
  }
};

/// Add(layer_norm(x, gamma), beta) with a constant beta [D]
///   -> layer_norm(x, gamma, beta).
struct LayerNormBeta : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    LayerNormOp ln;
    Value beta;
    bool found = matchCommutative(add, [&](Value a, Value b) {
      ln = getFusableLayerNorm(a);
      beta = b;
      return ln && isConstantNormParam(b, ln.getInput());
    });
    if (!found)
      return rewriter.notifyMatchFailure(
          add, "not a single-use qcc.layer_norm without beta plus a constant "
               "[D]");
    if (add.getType() != ln.getType())
      return rewriter.notifyMatchFailure(add, "the sum broadcasts");
    rewriter.replaceOpWithNewOp<LayerNormOp>(add, add.getType(), ln.getInput(),
                                             ln.getGamma(), beta,
                                             ln.getEpsilonAttr());
    return success();
  }
};

struct RaiseLayerNormPass : qcc::impl::RaiseLayerNormBase<RaiseLayerNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<LayerNormCore<DivOp>, LayerNormCore<MulOp>, LayerNormGamma,
                 LayerNormBeta>(&getContext());
    if (failed(applyPatternsTraced(getOperation(), std::move(patterns),
                                   DEBUG_TYPE)))
      signalPassFailure();
  }
};

} // namespace
