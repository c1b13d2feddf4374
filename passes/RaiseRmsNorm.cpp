//===- RaiseRmsNorm.cpp - raise-rms-norm ---------------------------------===//
//
// The RMSNorm expansion (HF LlamaRMSNorm as torch.onnx exports it)
//   h * (1 / Sqrt(ReduceMean(h^2) + eps))
// (mean over the last axis, keepdims) becomes qcc.rms_norm h with a ones
// gamma; a following Mul by a constant gamma [D] is then folded into it.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccOps.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace qcc {
#define GEN_PASS_DEF_RAISERMSNORM
#include "passes/Passes.h.inc"
} // namespace qcc

#define DEBUG_TYPE "qcc-raise-rms-norm"

using namespace mlir;
using namespace qcc;

namespace {

/// h / Sqrt(ReduceMean(h^2) + eps) -> qcc.rms_norm h, ones {epsilon = eps}.
/// The division may be Mul(h, Div(1, s)) (the exported form),
/// Mul(h, Reciprocal(s)) or Div(h, s); h^2 may be Pow(h, 2) or Mul(h, h).
/// RootOp is MulOp or DivOp.
template <typename RootOp> struct RmsNormCore : OpRewritePattern<RootOp> {
  using OpRewritePattern<RootOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(RootOp root,
                                PatternRewriter &rewriter) const override {
    Value h;
    double eps;
    if (const char *why = matchRmsNormalization(root.getResult(), h, eps))
      return rewriter.notifyMatchFailure(root, why);
    if (auto sub = h.template getDefiningOp<SubOp>();
        sub && getLastAxisMeanInput(sub.getRhs()) == sub.getLhs())
      return rewriter.notifyMatchFailure(
          root, "the input is x - mean(x): a layer norm, not an RMS norm");
    Value ones;
    if (const char *why = createOnesGamma(rewriter, root, h, ones))
      return rewriter.notifyMatchFailure(root, why);
    rewriter.replaceOpWithNewOp<RmsNormOp>(root, root.getType(), h, ones,
                                           rewriter.getF32FloatAttr(eps));
    return success();
  }
};

/// Mul(gamma, rms_norm(h, ones)) with a constant gamma [D], either order
///   -> rms_norm(h, gamma).
struct RmsNormGamma : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    RmsNormOp norm;
    Value gamma;
    bool found = matchCommutative(mul, [&](Value a, Value g) {
      norm = a.getDefiningOp<RmsNormOp>();
      gamma = g;
      return norm && norm->hasOneUse();
    });
    if (!found)
      return rewriter.notifyMatchFailure(
          mul, "no operand is a single-use qcc.rms_norm");
    if (!isSplatNear(norm.getGamma(), 1.0))
      return rewriter.notifyMatchFailure(mul, "the norm already has a gamma");
    if (!isConstantNormParam(gamma, norm.getInput()))
      return rewriter.notifyMatchFailure(
          mul, "the other factor is not a constant [D]");
    if (mul.getType() != norm.getType())
      return rewriter.notifyMatchFailure(mul, "the product broadcasts");
    rewriter.replaceOpWithNewOp<RmsNormOp>(mul, mul.getType(), norm.getInput(),
                                           gamma, norm.getEpsilonAttr());
    return success();
  }
};

struct RaiseRmsNormPass : qcc::impl::RaiseRmsNormBase<RaiseRmsNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RmsNormCore<MulOp>, RmsNormCore<DivOp>, RmsNormGamma>(
        &getContext());
    if (failed(applyPatternsTraced(getOperation(), std::move(patterns),
                                   DEBUG_TYPE)))
      signalPassFailure();
  }
};

} // namespace
