//===- RaiseEmbedding.cpp - raise-embedding ----------------------------------------===//
#include "dialects/QccOps.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace qcc {
#define GEN_PASS_DEF_RAISEEMBEDDING
#include "passes/Passes.h.inc"
} // namespace qcc

using namespace mlir;
using namespace qcc;

namespace {
struct RaiseEmbeddingPass : qcc::impl::RaiseEmbeddingBase<RaiseEmbeddingPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // TODO(owner): patterns.
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
