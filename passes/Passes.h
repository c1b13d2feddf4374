//===- Passes.h - qcc passes -----------------------------------*- C++ -*-===//
#ifndef QCC_PASSES_PASSES_H
#define QCC_PASSES_PASSES_H

#include "format/KvCacheConfig.h" // the default block size
#include "passes/Options.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace qcc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Import output -> transformer ops: shape folding, then every raising pass in
/// dependency order (rotary before attention, which looks through it).
void buildRaisePipeline(mlir::OpPassManager &pm);

/// Registers all qcc passes and the `qcc-raise` pipeline.
void registerAllPasses();

} // namespace qcc

#endif // QCC_PASSES_PASSES_H
