//===- Pipeline.cpp - the compiler driver ---------------------------------===//
#include "compiler/Pipeline.h"
#include "compiler/OnnxImporter.h"

#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

llvm::Expected<OwningOpRef<ModuleOp>>
qcc::compile(MLIRContext &context, StringRef onnxPath, Stage stage,
             const CompileOptions &options) {
  auto module = importOnnxFile(context, onnxPath);
  if (!module || stage == Stage::Imported)
    return module;

  std::string diag;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    if (diag.empty())
      diag = d.str();
    return success();
  });
  PassManager pm(&context);
  buildRaisePipeline(pm);
  if (options.kvCache != "none") {
    KvCacheLayoutOptions kv;
    kv.layout = options.kvCache;
    kv.blockTokens = options.kvBlockTokens;
    pm.addPass(createKvCacheLayout(kv));
  }
  if (failed(pm.run(**module)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   onnxPath + ": raising failed: " + diag);
  return module;
}
