//===- Package.cpp - the back phases: emit, compile, package --------------===//
#include "compiler/Package.h"
#include "compiler/ArtifactWriter.h"

#include "runtime/core/Progress.h"
#ifdef QCC_HAVE_CODEGEN
#include "codegen/NvrtcCompiler.h"
#endif

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <chrono>

using namespace llvm;

/// Real tokenizers are a few MB (a 256k-token tokenizer.json about 30 MB).
static constexpr uint64_t kMaxTokenizerBytes = uint64_t(1) << 30;

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
  artifact.syntheticWeights = c.options.syntheticWeights;
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

namespace {

/// One field of a protobuf message in wire format: its number, wire type and
/// payload (the varint's value, or the bytes of a fixed or length-delimited
/// field).
struct WireField {
  uint64_t number = 0;
  unsigned wireType = 0;
  uint64_t varint = 0;
  StringRef bytes;
};

bool readVarint(StringRef &in, uint64_t &v) {
  v = 0;
  for (unsigned shift = 0; shift < 64 && !in.empty(); shift += 7) {
    uint8_t byte = in.front();
    in = in.drop_front();
    v |= uint64_t(byte & 0x7f) << shift;
    if (!(byte & 0x80))
      return true;
  }
  return false;
}

/// Splits `in` into its fields; false unless all of it is well-formed wire
/// format (no groups, every length inside the message).
bool readFields(StringRef in, SmallVectorImpl<WireField> &fields) {
  while (!in.empty()) {
    uint64_t key;
    if (!readVarint(in, key))
      return false;
    WireField f;
    f.number = key >> 3;
    f.wireType = key & 7;
    if (f.number == 0)
      return false;
    size_t size = 0;
    switch (f.wireType) {
    case 0:
      if (!readVarint(in, f.varint))
        return false;
      break;
    case 1:
      size = 8;
      break;
    case 5:
      size = 4;
      break;
    case 2: {
      uint64_t n;
      if (!readVarint(in, n) || n > in.size())
        return false;
      size = n;
      break;
    }
    default: // groups (3, 4) are not in SentencePiece's protos; 6, 7 invalid
      return false;
    }
    if (size > in.size())
      return false;
    f.bytes = in.take_front(size);
    in = in.drop_front(size);
    fields.push_back(f);
  }
  return true;
}

/// Whether `bytes` is a SentencePiece ModelProto in wire format: at least one
/// `pieces` (field 1) whose `piece` (1) is a string, `score` (2) a float and
/// `type` (3) a varint. qcc cannot load libsentencepiece (its private protobuf
/// clashes with ONNX's), so the structure is checked here; qrun loads it.
bool isSentencePieceModel(StringRef bytes) {
  SmallVector<WireField> top;
  if (!readFields(bytes, top))
    return false;
  size_t pieces = 0;
  for (const WireField &f : top) {
    if (f.number > 5 && f.number < 200)
      continue; // fields newer releases may add
    if (f.number != 1) {
      if (f.wireType != 2) // trainer_spec .. denormalizer_spec: messages
        return false;
      continue;
    }
    SmallVector<WireField> piece;
    if (f.wireType != 2 || !readFields(f.bytes, piece))
      return false;
    for (const WireField &p : piece)
      if ((p.number == 1 && p.wireType != 2) ||
          (p.number == 2 && p.wireType != 5) ||
          (p.number == 3 && p.wireType != 0))
        return false;
    ++pieces;
  }
  return pieces > 0;
}

} // namespace

Error qcc::checkTokenizer(StringRef path) {
  auto fail = [&](const Twine &why) { return error(path + ": " + why); };
  // Tokenizers are a few MB; a device or a huge file is refused unread.
  sys::fs::file_status status;
  if (std::error_code ec = sys::fs::status(path, status))
    return fail("cannot read the tokenizer: " + ec.message());
  if (status.type() != sys::fs::file_type::regular_file)
    return fail("cannot read the tokenizer: not a regular file");
  if (status.getSize() > kMaxTokenizerBytes)
    return fail(formatv("the tokenizer is {0} bytes; qcc embeds at most {1}",
                        status.getSize(), kMaxTokenizerBytes)
                    .str());
  auto buffer = MemoryBuffer::getFile(path);
  if (!buffer)
    return fail("cannot read the tokenizer: " + buffer.getError().message());
  StringRef text = (*buffer)->getBuffer();
  if (text.ltrim(" \t\r\n").starts_with("{")) {
    Expected<json::Value> value = json::parse(text);
    if (!value)
      return fail("not a valid tokenizer.json: " + toString(value.takeError()));
    const json::Object *top = value->getAsObject();
    const json::Object *model = top ? top->getObject("model") : nullptr;
    if (!model)
      return fail("not a tokenizer.json (no \"model\" object)");
    if (!model->get("vocab"))
      return fail("not a tokenizer.json (its \"model\" has no \"vocab\")");
    return Error::success();
  }
  if (path.ends_with(".json"))
    return fail("not a tokenizer.json (it does not start with '{')");
  if (text.empty())
    return fail("the tokenizer file is empty");
  if (!isSentencePieceModel(text))
    return fail("neither a tokenizer.json nor a SentencePiece model");
  return Error::success();
}
