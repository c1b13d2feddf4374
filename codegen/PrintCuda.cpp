//===- PrintCuda.cpp - the emitter's output as text -----------------------===//
#include "codegen/PrintCuda.h"

#include "format/KernelKinds.h"
#include "format/LaunchRecord.h"

namespace qcc::codegen {
#define GEN_PASS_DEF_PRINTCUDA
#include "codegen/Passes.h.inc"
} // namespace qcc::codegen

using namespace llvm;
using namespace qcc::codegen;

void qcc::codegen::printCuda(const EmitResult &r, raw_ostream &os) {
  for (const auto &unit : r.units) {
    const EmittedKernel &first = r.kernels[unit.kernels.front()];
    os << "// ===== unit " << unit.name << " (regions:";
    for (size_t k : unit.kernels)
      os << " " << r.kernels[k].function << "/" << r.kernels[k].name;
    os << ") kind " << format::spelling(first.kind) << "\n";
    os << "// launch: " << format::toJson(first.launch).dump() << "\n";
    os << unit.source << "\n";
  }
  for (const auto &k : r.kernels)
    if (!k.unsupported.empty())
      os << "// ===== no kernel for " << k.function << "/" << k.name << " ("
         << format::spelling(k.kind) << "): " << k.unsupported << "\n";
}

namespace {
struct PrintCudaPass : qcc::codegen::impl::PrintCudaBase<PrintCudaPass> {
  explicit PrintCudaPass(raw_ostream &os = outs()) : os(os) {}
  void runOnOperation() override {
    printCuda(emitKernels(getOperation()), os);
    os.flush();
    markAllAnalysesPreserved();
  }

  raw_ostream &os;
};
} // namespace

std::unique_ptr<mlir::Pass>
qcc::codegen::createPrintCudaPass(raw_ostream &os) {
  return std::make_unique<PrintCudaPass>(os);
}

void qcc::codegen::registerPrintCudaPass() {
  mlir::PassRegistration<PrintCudaPass>();
}
