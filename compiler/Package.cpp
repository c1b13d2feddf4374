//===- Package.cpp - the back phases: emit, compile, package --------------===//
#include "compiler/Package.h"
#include "compiler/ArtifactWriter.h"

#include "runtime/Progress.h"
#ifdef QCC_HAVE_CODEGEN
#include "codegen/NvrtcCompiler.h"
#endif

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <chrono>

using namespace llvm;

static Error error(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

qcc::codegen::EmitResult qcc::emitPhase(mlir::ModuleOp gpuPlan) {
  return codegen::emitKernels(gpuPlan);
}

#ifdef QCC_HAVE_CODEGEN
bool qcc::canCompileCuda() { return true; }

Expected<std::vector<qcc::UnitBinaries>>
qcc::compilePhase(const codegen::EmitResult &emitted, bool quiet) {
  std::vector<codegen::KernelSource> sources;
  for (const auto &u : emitted.units)
    sources.push_back({u.name, u.source});
  codegen::CompileOptions options;
  rt::Progress progress("compiling CUDA kernels", sources.size(),
                        !quiet && rt::Progress::stderrIsTerminal());
  options.onProgress = [&](const codegen::CompileProgress &p) {
    progress.update(p.done, p.name + (p.cached ? " [cached]" : "") +
                                (p.failed ? " [failed]" : ""));
  };
  auto start = std::chrono::steady_clock::now();
  auto compiled = codegen::compileKernels(sources, options);
  if (!compiled)
    return error("CUDA kernel compilation failed: " +
                 toString(compiled.takeError()));
  progress.clear();
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  std::vector<UnitBinaries> binaries;
  for (auto &c : *compiled) {
    UnitBinaries &b = binaries.emplace_back(std::move(c.cubins));
    if (!c.ptx.empty())
      b["ptx"] = std::move(c.ptx);
  }
  if (quiet)
    return binaries;
  size_t unsupported = 0;
  for (const auto &k : emitted.kernels)
    unsupported += !k.unsupported.empty();
  errs() << "compiled " << sources.size() << " CUDA kernel units for "
         << emitted.kernels.size() << " regions in "
         << llvm::format("%.1f", seconds) << " s";
  if (unsupported)
    errs() << " (" << unsupported << " regions without a CUDA kernel)";
  errs() << "\n";
  return binaries;
}
#else
bool qcc::canCompileCuda() { return false; }

Expected<std::vector<qcc::UnitBinaries>>
qcc::compilePhase(const codegen::EmitResult &, bool) {
  return error("qcc was built without the CUDA toolkit: the compile phase "
               "(NVRTC) is not available");
}
#endif

Error qcc::packagePhase(const Compilation &c) {
  ArtifactOptions artifact;
  artifact.sourceName = sys::path::filename(c.sourcePath).str();
  artifact.tokenizerPath = c.options.tokenizerPath;
  // With GPU kernels (compile ran): every region's launch record, with the
  // binaries of its unit; the GPU plan launches them.
  if (c.gpuPlan) {
    assert(c.binaries.size() == c.cuda.units.size() && "compile ran");
    for (const auto &k : c.cuda.kernels) {
      ArtifactOptions::Kernel entry;
      entry.record = k.manifest();
      if (k.unsupported.empty())
        entry.binaries = c.binaries[k.unit];
      artifact.kernels.push_back(std::move(entry));
    }
    artifact.gpuPlan = *c.gpuPlan;
  }
  return writeArtifact(*c.module, c.options.artifactPath, artifact);
}

std::string qcc::findTokenizer(StringRef explicitPath, StringRef modelPath) {
  if (!explicitPath.empty())
    return explicitPath.str();
  for (const char *name : {"tokenizer.json", "tokenizer.model"}) {
    SmallString<256> beside(sys::path::parent_path(modelPath));
    sys::path::append(beside, name);
    if (sys::fs::exists(beside))
      return beside.str().str();
  }
  return "";
}

Error qcc::checkTokenizer(StringRef path) {
  auto fail = [&](const Twine &why) { return error(path + ": " + why); };
  auto buffer = MemoryBuffer::getFile(path);
  if (!buffer)
    return fail("cannot read the tokenizer: " + buffer.getError().message());
  StringRef text = (*buffer)->getBuffer();
  if (text.ltrim(" \t\r\n").starts_with("{")) {
    Expected<json::Value> value = json::parse(text);
    if (!value)
      return fail("not a valid tokenizer.json: " + toString(value.takeError()));
    const json::Object *top = value->getAsObject();
    if (!top || !top->getObject("model"))
      return fail("not a tokenizer.json (no \"model\" object)");
    return Error::success();
  }
  if (path.ends_with(".json"))
    return fail("not a tokenizer.json (it does not start with '{')");
  if (text.empty())
    return fail("the tokenizer file is empty");
  return Error::success();
}
