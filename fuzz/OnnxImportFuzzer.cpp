//===- OnnxImportFuzzer.cpp - fuzz target: ONNX bytes -> import .. emit ---===//
//
// The compiler's fuzz target: the bytes as an ONNX ModelProto, imported
// (qcc::importOnnxBytes: validation, ONNX's checker and shape inference, the
// converters) and, when that succeeds, run through every later phase up to
// the CUDA emitter (compiler/Pipeline.h runPhase: raise .. kv-layout, then
// form-kernels, the GPU plan, and emit; not NVRTC's compile, which is slow
// and reads only what emit wrote). Every input must end in CUDA units or in
// an error; a crash, a sanitizer report or an abort is a bug.
//
// Seeds: fuzz/corpus/onnx-import (links to the fixture, contrib, hostile and
// invalid models of test/models); dictionary: fuzz/onnx-import.dict (op
// types, attribute names, element types). Inputs that once crashed qcc:
// test/fuzz-regressions/onnx-import/ (ctest fuzz-replay-onnx-import).
//
//===----------------------------------------------------------------------===//
#include "compiler/OnnxImporter.h"
#include "compiler/Pipeline.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
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
  for (qcc::Phase phase :
       {qcc::Phase::Raise, qcc::Phase::Calibrate, qcc::Phase::Quantize,
        qcc::Phase::KvLayout, qcc::Phase::FormKernels, qcc::Phase::Emit}) {
    if (llvm::Error err = qcc::runPhase(context, c, phase)) {
      llvm::consumeError(std::move(err));
      return 0;
    }
  }
  return 0;
}
