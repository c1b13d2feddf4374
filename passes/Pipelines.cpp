//===- Pipelines.cpp - named pass pipelines -------------------------------===//
#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void qcc::buildRaisePipeline(OpPassManager &pm) {
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createFoldShapes());
  fn.addPass(createRaiseLayerNorm());
  fn.addPass(createRaiseRmsNorm());
  fn.addPass(createRaiseGelu());
  fn.addPass(createRaiseSilu());
  fn.addPass(createRaiseLinear());
  fn.addPass(createRaiseEmbedding());
  fn.addPass(createGroupFusedHeads());
  // Views of the regrouped parts (CodeGen's [B, S, -1, D] of its heads) fold
  // onto the new head splits before rotary and attention match them.
  fn.addPass(createFoldShapes());
  fn.addPass(createRaiseRotary());
  fn.addPass(createRaiseAttention());
  fn.addPass(createFoldShapes());
  fn.addPass(createCSEPass());
}

void qcc::registerAllPasses() {
  registerQccPasses();
  PassPipelineRegistration<>(
      "qcc-raise", "Raise imported ONNX ops to qcc transformer ops",
      [](OpPassManager &pm) { buildRaisePipeline(pm); });
}
