//===- fuzz_onnx_import.cpp - fuzz target: bytes -> ONNX import -> raise --===//
//
// The ONNX importer's fuzz target: the bytes as an ONNX ModelProto, imported
// (qcc::importOnnxBytes: validation, ONNX's checker and shape inference, the
// converters) and, when that succeeds, run through the raising pipeline up to
// kv-layout (compiler/Pipeline.h runPhase). Every input must end in a module
// or in an error; a crash, a sanitizer report or an abort is a bug.
//
// Seeds: the fixture models (test/models/**/*.onnx); dictionary:
// fuzz/onnx_import.dict (op types, attribute and field names). Inputs that
// once crashed qcc: test/fuzz-regressions/onnx_import/, replayed by the
// ctest test fuzz-replay-onnx-import.
//
//===----------------------------------------------------------------------===//
#include "compiler/OnnxImporter.h"
#include "compiler/Pipeline.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>

int fuzzOnnxImport(const uint8_t *data, size_t size) {
  mlir::MLIRContext context;
  context.disableMultithreading();
  // Warnings of the raising passes are expected; keep the fuzzer's log quiet.
  mlir::ScopedDiagnosticHandler quiet(&context,
                                      [](mlir::Diagnostic &) { return mlir::success(); });
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  auto module = qcc::importOnnxBytes(context, bytes, "fuzz.onnx");
  if (!module) {
    llvm::consumeError(module.takeError());
    return 0;
  }
  qcc::Compilation c;
  c.sourcePath = "fuzz.onnx";
  c.module = std::move(*module);
  c.last = qcc::Phase::Import;
  for (qcc::Phase phase : {qcc::Phase::Raise, qcc::Phase::Calibrate,
                           qcc::Phase::Quantize, qcc::Phase::KvLayout}) {
    if (llvm::Error err = qcc::runPhase(context, c, phase)) {
      llvm::consumeError(std::move(err));
      return 0;
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzzOnnxImport(data, size);
}
