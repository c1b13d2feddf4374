//===- Passes.td - codegen passes --------------------------*- tablegen -*-===//
//
// The codegen library's passes (passes/Passes.td holds the compiler's); each
// has a .cpp in this folder and lit tests in test/codegen.
//
//===----------------------------------------------------------------------===//

#ifndef QCC_CODEGEN_PASSES_TD
#define QCC_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def PrintCuda : Pass<"qcc-print-cuda", "mlir::ModuleOp"> {
  let summary = "Print the CUDA units and launch records of every qcc.kernel "
                "region (the IR is unchanged)";
  let description = [{
    Runs the CUDA emitter (codegen/Emitter.h) on the module as it is, with
    no form-kernels first, so a hand-written module of qcc.kernel regions
    is enough, and prints what `qcc --emit=cuda` prints: per translation
    unit its regions, kind, launch record (format/LaunchRecord.h, as JSON)
    and CUDA source, then a line per region the emitter could not handle,
    with the reason. The lit tests in test/codegen check one kernel kind
    each this way.
  }];
}

#endif // QCC_CODEGEN_PASSES_TD
