//===- RaiseEmbedding.cpp - raise-embedding --------------------------------===//
//
// Gather(table const [V, E] float, ids integer, axis 0) becomes
// qcc.embedding table, ids. Gathers on 1-D shape vectors (shape arithmetic),
// along other axes, or from computed tensors are left alone.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccOps.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace qcc {
#define GEN_PASS_DEF_RAISEEMBEDDING
#include "passes/Passes.h.inc"
} // namespace qcc

#define DEBUG_TYPE "qcc-raise-embedding"

using namespace mlir;
using namespace qcc;

namespace {

/// Gather(table const [V, E], ids, axis = 0) -> qcc.embedding table, ids.
struct EmbeddingFromGather : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherOp op,
                                PatternRewriter &rewriter) const override {
    Value table = op.getInput();
    auto type = cast<RankedTensorType>(table.getType());
    if (type.getRank() != 2)
      return rewriter.notifyMatchFailure(op, "table is not 2-D");
    if (!isa<FloatType>(type.getElementType()))
      return rewriter.notifyMatchFailure(op, "table is not float");
    if (!getConstant(table))
      return rewriter.notifyMatchFailure(op, "table is not a constant");
    int64_t axis = op.getAxis();
    if (axis != 0 && axis != -2)
      return rewriter.notifyMatchFailure(op, "gather is not along rows");
    rewriter.replaceOpWithNewOp<EmbeddingOp>(op, op.getType(), table,
                                             op.getIndices());
    return success();
  }
};

struct RaiseEmbeddingPass
    : qcc::impl::RaiseEmbeddingBase<RaiseEmbeddingPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<EmbeddingFromGather>(&getContext());
    if (failed(applyPatternsTraced(getOperation(), std::move(patterns),
                                   DEBUG_TYPE)))
      signalPassFailure();
  }
};

} // namespace
