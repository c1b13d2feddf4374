//===- qcc-opt.cpp - the qcc pass driver ----------------------------------===//
//
// Registers the qcc dialect (plus func, which holds the graphs), the qcc
// passes and --qcc-print-cuda (the CUDA emitter on a module's kernel
// regions, codegen/PrintCuda.h), and nothing else.
//
//===----------------------------------------------------------------------===//
#include "codegen/PrintCuda.h"
#include "dialects/QccDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<qcc::QccDialect, mlir::func::FuncDialect>();
  qcc::registerAllPasses();
  qcc::codegen::registerPrintCudaPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "qcc pass driver\n", registry));
}
