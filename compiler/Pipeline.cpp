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
    // Remarks (a group smooth-quant leaves alone) are for qcc-opt.
    if (d.getSeverity() == DiagnosticSeverity::Remark)
      return success();
    // Warnings (a feature left out, saying why) go out at once, one line.
    if (d.getSeverity() == DiagnosticSeverity::Warning) {
      llvm::errs() << "qcc: warning: " << onnxPath << ": " << d.str() << "\n";
      return success();
    }
    if (diag.empty())
      diag = d.str();
    return success();
  });
  auto run = [&](PassManager &pm) -> llvm::Error {
    if (failed(pm.run(**module)))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     onnxPath + ": " + diag);
    return llvm::Error::success();
  };
  PassManager raise(&context);
  buildRaisePipeline(raise);
  if (auto err = run(raise))
    return std::move(err);

  bool quantize = options.quant == QuantMode::W8A8;
  if (quantize || options.kvDtype == KvDtype::I8)
    if (auto err = calibrate(**module, options.calibration))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     onnxPath + ": " +
                                         llvm::toString(std::move(err)));
  PassManager lower(&context);
  if (quantize) {
    OpPassManager &fn = lower.nest<func::FuncOp>();
    if (options.smoothQuant) {
      SmoothQuantOptions sq;
      sq.alpha = options.smoothQuantAlpha;
      fn.addPass(createSmoothQuant(sq));
    }
    QuantizeOptions q;
    q.activations = options.activations;
    q.asymmetric = options.asymmetric;
    fn.addPass(createQuantize(q));
  }
  if (options.kvCache != KvLayout::None) {
    KvCacheLayoutOptions kv;
    kv.layout = options.kvCache;
    kv.blockTokens = options.kvBlockTokens;
    kv.kvDtype = options.kvDtype;
    lower.addPass(createKvCacheLayout(kv));
  }
  if (auto err = run(lower))
    return std::move(err);
  return module;
}

llvm::Expected<OwningOpRef<ModuleOp>> qcc::formKernelPlan(ModuleOp module) {
  OwningOpRef<ModuleOp> plan = module.clone();
  PassManager pm(module.getContext());
  pm.nest<func::FuncOp>().addPass(createFormKernels());
  if (failed(pm.run(*plan)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "form-kernels failed");
  return plan;
}
