//===- qcc.cpp - the qcc compiler -----------------------------------------===//
//
// qcc MODEL.onnx --emit=mlir [-o FILE]
//
//===----------------------------------------------------------------------===//
#include "compiler/OnnxImporter.h"
#include "compiler/Pipeline.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {
enum class Emit { Imported, Mlir };

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"));
cl::opt<Emit> emit(
    "emit", cl::desc("What to write"), cl::init(Emit::Mlir),
    cl::values(clEnumValN(Emit::Imported, "imported",
                          "the IR right after import (qcc ops 1:1 with ONNX)"),
               clEnumValN(Emit::Mlir, "mlir",
                          "the raised IR: transformer ops plus glue")));
cl::opt<std::string> outputPath("o", cl::desc("Output file (default: stdout)"),
                                cl::value_desc("file"), cl::init("-"));
cl::opt<bool> listOps("list-ops",
                      cl::desc("List the supported ONNX ops and exit"));
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv,
      "qcc: ahead-of-time compiler for quantized transformer inference\n\n"
      "  qcc MODEL.onnx --emit=mlir      print the raised IR\n"
      "  qcc MODEL.onnx --emit=imported  print the IR as imported\n"
      "  qcc --list-ops                  list the ONNX ops qcc imports\n");

  if (listOps) {
    for (const auto &[op, versions] : qcc::supportedOnnxOps()) {
      outs() << op << " (op versions";
      for (int v : versions)
        outs() << " " << v;
      outs() << ")\n";
    }
    return 0;
  }
  if (inputPath.empty()) {
    WithColor::error(errs(), "qcc") << "no input model (see --help)\n";
    return 1;
  }

  mlir::MLIRContext context;
  auto module = qcc::compile(context, inputPath,
                             emit == Emit::Imported ? qcc::Stage::Imported
                                                    : qcc::Stage::Raised);
  if (!module) {
    WithColor::error(errs(), "qcc") << toString(module.takeError()) << "\n";
    return 1;
  }
  std::error_code ec;
  ToolOutputFile out(outputPath, ec, sys::fs::OF_None);
  if (ec) {
    WithColor::error(errs(), "qcc")
        << outputPath << ": cannot write: " << ec.message() << "\n";
    return 1;
  }
  (*module)->print(out.os());
  out.keep();
  return 0;
}
