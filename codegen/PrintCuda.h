//===- PrintCuda.h - the emitter's output as text ---------------*- C++ -*-===//
//
// The emitted units as text (what `qcc --emit=cuda` prints) and a pass that
// runs the emitter on a module and prints that text, so the emitter can be
// tested on small hand-written .mlir files (`qcc-opt --qcc-print-cuda`):
//
//   // ===== unit ENTRY (regions: FUNC/REGION ...) kind KIND
//   // launch: {LaunchRecord JSON of the unit's first region}
//   CUDA C++ source
//   ...
//   // ===== no kernel for FUNC/REGION (KIND): REASON
//
// A pass, not an mlir-translate translation: the emitter's input is an
// ordinary qcc module that qcc-opt already parses and verifies with the
// dialect's registration, and a pass needs no second driver binary. Like
// upstream's -print-op-stats it leaves the IR unchanged and writes to a
// stream (stdout here: run `qcc-opt --qcc-print-cuda in.mlir -o /dev/null`
// for the text alone).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_CODEGEN_PRINTCUDA_H
#define QCC_CODEGEN_PRINTCUDA_H

#include "codegen/Emitter.h"

#include "mlir/Pass/Pass.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>

namespace qcc::codegen {

/// One comment line naming each unit's regions, kind and launch record, then
/// its source; then one line per region without a kernel, with the reason.
void printCuda(const EmitResult &emitted, llvm::raw_ostream &os);

/// A module pass that prints emitKernels(module) with printCuda to `os`.
std::unique_ptr<mlir::Pass> createPrintCudaPass(llvm::raw_ostream &os);
/// Registers it as --qcc-print-cuda (printing to stdout).
void registerPrintCudaPass();

} // namespace qcc::codegen

#endif // QCC_CODEGEN_PRINTCUDA_H
