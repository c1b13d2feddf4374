//===- RaiseSilu.cpp - raise-silu ----------------------------------------===//
//
// Mul(x, Sigmoid(x)), operands in either order, becomes qcc.silu x.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccOps.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace qcc {
#define GEN_PASS_DEF_RAISESILU
#include "passes/Passes.h.inc"
} // namespace qcc

#define DEBUG_TYPE "qcc-raise-silu"

using namespace mlir;
using namespace qcc;

namespace {

/// Mul(x, Sigmoid(x)) -> qcc.silu x.
struct SiluFromMulSigmoid : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    Value x;
    bool found = matchCommutative(mul, [&](Value a, Value s) {
      auto sigmoid = s.getDefiningOp<SigmoidOp>();
      if (!sigmoid || sigmoid.getInput() != a)
        return false;
      x = a;
      return true;
    });
    if (!found)
      return rewriter.notifyMatchFailure(
          mul, "not x * sigmoid(x) with the same x on both sides");
    if (x.getType() != mul.getType())
      return rewriter.notifyMatchFailure(
          mul, "the product's type differs from the input's");
    rewriter.replaceOpWithNewOp<SiluOp>(mul, mul.getType(), x);
    return success();
  }
};

struct RaiseSiluPass : qcc::impl::RaiseSiluBase<RaiseSiluPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SiluFromMulSigmoid>(&getContext());
    if (failed(applyPatternsTraced(getOperation(), std::move(patterns),
                                   DEBUG_TYPE)))
      signalPassFailure();
  }
};

} // namespace
