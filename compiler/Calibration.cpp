//===- Calibration.cpp - activation statistics for quantization -----------===//
//
// The float model runs in qcc-calib, a runtime tool, not in this process:
// the tokenizer library carries its own protobuf, which cannot be loaded next
// to ONNX's (see runtime/text/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//
#include "compiler/Calibration.h"
#include "dialects/QccAttrNames.h"
#include "compiler/ArtifactWriter.h"

#include "dialects/QccConstants.h"
#include "dialects/QccOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>

using namespace mlir;
using nlohmann::json;

static constexpr llvm::StringLiteral kCalibId = "qcc.calib_id";

static llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// An absmax list of the statistics: finite and >= 0 (SmoothQuant divides
/// and takes powers of them), else a json error naming the problem.
static DenseElementsAttr f32Array(MLIRContext *ctx, const json &values) {
  std::vector<float> v = values.get<std::vector<float>>();
  for (float x : v)
    if (!std::isfinite(x) || x < 0)
      throw json::other_error::create(
          501, "an absmax is " + std::to_string(x) + " (must be finite and >= 0)",
          &values);
  return DenseElementsAttr::get(
      RankedTensorType::get({(int64_t)v.size()}, Float32Type::get(ctx)),
      ArrayRef<float>(v));
}

/// What a binary sidecar of the statistics holds: Gram matrices (f64
/// [k, k]) or sampled activation rows (f32 [rows, k]).
struct Sidecar {
  const char *sets, *file; ///< the JSON keys of its list and its file name
  const char *what;        ///< "Gram matrix", in errors
  const char *missing;     ///< why the file has none, in errors
  bool rows;               ///< [rows, k] f32 (else [k, k] f64)
};

constexpr Sidecar kGrams{
    "grams", "gram_file", "Gram matrix",
    "no pruning statistics (saved by a compile without "
    "--prune=wanda|sparsegpt; delete it to recalibrate)",
    false};
constexpr Sidecar kSamples{
    "sample_sets", "sample_file", "activation sample",
    "no activation samples (saved by a compile without "
    "--smoothquant-alpha=auto or --int8-fallback=auto; delete it to "
    "recalibrate)",
    true};

/// The tensors of sidecar `kind` of `stats` (its file beside `statsPath`),
/// one attribute each; errors name the file and the reason.
static llvm::Expected<std::vector<ElementsAttr>>
loadSidecar(MLIRContext *ctx, const json &stats, llvm::StringRef statsPath,
            const Sidecar &kind) {
  if (!stats.contains(kind.sets) || !stats.contains(kind.file))
    return error(statsPath + ": " + kind.missing);
  std::string name = stats.at(kind.file).get<std::string>();
  if (name.empty() || name.find('/') != std::string::npos)
    return error(statsPath + ": " + kind.file +
                 " must be a file name beside it");
  llvm::SmallString<256> path(llvm::sys::path::parent_path(statsPath));
  llvm::sys::path::append(path, name);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return error(path + ": cannot read the " + kind.what + "s");
  llvm::StringRef bytes = (*buffer)->getBuffer();
  std::vector<ElementsAttr> out;
  for (const json &g : stats.at(kind.sets)) {
    int64_t k = g.at("k").get<int64_t>();
    int64_t rows = kind.rows ? g.at("rows").get<int64_t>() : k;
    uint64_t offset = g.at("offset").get<uint64_t>();
    size_t elementBytes = kind.rows ? sizeof(float) : sizeof(double);
    uint64_t size = (uint64_t)rows * (uint64_t)k * elementBytes;
    std::string which =
        std::string(kind.what) + " " + std::to_string(out.size());
    if (k <= 0 || k > (1 << 16) || rows <= 0 || rows > (1 << 16) ||
        offset > bytes.size() || size > bytes.size() - offset)
      return error(path + ": " + which + " (k " + std::to_string(k) +
                   ") lies outside the file");
    llvm::StringRef m = bytes.substr(offset, size);
    for (size_t i = 0; i < size; i += elementBytes) {
      double v;
      if (kind.rows) {
        float f;
        std::memcpy(&f, m.data() + i, sizeof f);
        v = f;
      } else {
        std::memcpy(&v, m.data() + i, sizeof v);
      }
      if (!std::isfinite(v))
        return error(path + ": " + which + " holds a non-finite value");
    }
    Type element = kind.rows ? Type(Float32Type::get(ctx))
                             : Type(Float64Type::get(ctx));
    auto type = RankedTensorType::get({rows, k}, element);
    out.push_back(qcc::makeElements(
        type, llvm::ArrayRef<char>(m.data(), m.size()),
        std::string(kind.rows ? "samples_" : "gram_") +
            std::to_string(out.size())));
  }
  return out;
}

llvm::Error qcc::calibrate(ModuleOp module, const CalibrationOptions &o) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return error("calibration: the module has no @main");
  MLIRContext *ctx = module.getContext();
  Builder b(ctx);
  SmallVector<LinearOp> linears;
  SmallVector<AttentionOp> attentions;
  main.walk([&](LinearOp l) {
    l->setAttr(kCalibId, b.getI64IntegerAttr(linears.size()));
    linears.push_back(l);
  });
  main.walk([&](AttentionOp a) {
    a->setAttr(kCalibId, b.getI64IntegerAttr(attentions.size()));
    attentions.push_back(a);
  });

  // Statistics of a rotated model describe other activations than the
  // unrotated model's (rotate-residual): they carry the rotation, and are
  // reused only for the same one.
  std::string rotation;
  if (auto r = module->getAttrOfType<StringAttr>(qcc::kRotationAttr))
    rotation = r.str();
  std::string statsPath = o.statsPath;
  bool reuse = !statsPath.empty() && llvm::sys::fs::exists(statsPath);
  llvm::SmallString<128> tmpArtifact, tmpStats;
  if (!reuse) {
    if (o.source.empty())
      return error(o.neededBy + " needs --calib=SOURCE (a text file or a "
                   "folder of .npy inputs) or existing --calib-stats");
    if (!llvm::sys::fs::exists(o.source))
      return error(o.source + ": calibration source not found");
    // A device (/dev/zero) never ends: text comes from a regular file.
    llvm::sys::fs::file_status source;
    if (!llvm::sys::fs::status(o.source, source) &&
        source.type() != llvm::sys::fs::file_type::directory_file &&
        (source.type() != llvm::sys::fs::file_type::regular_file ||
         source.getSize() > (uint64_t(1) << 30)))
      return error(o.source + ": calibration source is not a folder or a "
                   "regular file of at most 1 GiB");
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
            "qcc-calib", "qpkg", tmpArtifact))
      return error("cannot create a temporary file: " + ec.message());
    ArtifactOptions ao;
    ao.sourceName = "calibration";
    ao.tokenizerPath = o.tokenizerPath;
    if (auto err = writeArtifact(module, tmpArtifact, ao))
      return err;
    if (statsPath.empty()) {
      if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
              "qcc-calib", "json", tmpStats))
        return error("cannot create a temporary file: " + ec.message());
      statsPath = tmpStats.str().str();
    }
    std::string samples = std::to_string(o.samples),
                seqLen = std::to_string(o.seqLen);
    llvm::SmallVector<llvm::StringRef> args = {
        o.toolPath, tmpArtifact,   "--source", o.source,    "--samples",
        samples,    "--seq-len",   seqLen,     "--out",     statsPath};
    if (o.quiet)
      args.push_back("--quiet");
    if (!rotation.empty()) {
      args.push_back("--rotation");
      args.push_back(rotation);
    }
    if (o.pruningStats)
      args.push_back("--pruning-stats");
    std::string rows = std::to_string(o.activationRows);
    if (o.activationRows > 0) {
      args.push_back("--activation-rows");
      args.push_back(rows);
    }
    std::string message;
    int rc = llvm::sys::ExecuteAndWait(o.toolPath, args, std::nullopt, {}, 0,
                                       0, &message);
    llvm::sys::fs::remove(tmpArtifact);
    if (rc != 0)
      return error("calibration failed" +
                   (message.empty() ? std::string(" (see qcc-calib's error "
                                                  "above)")
                                    : ": " + message));
  }

  // Statistics are a few kB per linear: a device or a huge file is refused
  // unread.
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(statsPath, status) ||
      status.type() != llvm::sys::fs::file_type::regular_file ||
      status.getSize() > (uint64_t(1) << 30))
    return error(statsPath + ": cannot read calibration statistics (not a "
                 "regular file of at most 1 GiB)");
  auto buffer = llvm::MemoryBuffer::getFile(statsPath);
  if (!buffer)
    return error(statsPath + ": cannot read calibration statistics");
  try {
    json stats = json::parse((*buffer)->getBuffer().str());
    std::string statsRotation = stats.value("rotation", "");
    if (statsRotation != rotation)
      return error(statsPath + ": calibration statistics of " +
                   (statsRotation.empty()
                        ? std::string("the unrotated model")
                        : "a model rotated (" + statsRotation + ")") +
                   ", but this compile " +
                   (rotation.empty() ? std::string("does not rotate")
                                     : "rotates (" + rotation + ")") +
                   "; use another --calib-stats file");
    const json &ls = stats.at("linears");
    std::vector<ElementsAttr> grams, samples;
    if (o.pruningStats) {
      auto loaded = loadSidecar(ctx, stats, statsPath, kGrams);
      if (!loaded)
        return loaded.takeError();
      grams = std::move(*loaded);
    }
    if (o.activationRows > 0) {
      auto loaded = loadSidecar(ctx, stats, statsPath, kSamples);
      if (!loaded)
        return loaded.takeError();
      samples = std::move(*loaded);
    }
    for (LinearOp l : linears) {
      std::string id = std::to_string(
          l->getAttrOfType<IntegerAttr>(kCalibId).getInt());
      if (!ls.contains(id))
        return error(statsPath + ": no statistics for linear " + id +
                     " (stale --calib-stats for another model?)");
      DenseElementsAttr absmax = f32Array(ctx, ls[id].at("input_absmax"));
      // The weight [N, K] knows K even where the input's type does not
      // (a head merge reshaped with -1).
      if (absmax.getNumElements() != l.getWeight().getType().getDimSize(1))
        return error(statsPath + ": linear " + id + " has the wrong width "
                     "(stale --calib-stats for another model?)");
      l->setAttr(qcc::kInputAbsmaxAttr, absmax);
      l->removeAttr(kCalibId);
      // Entry `key` of the linear's statistics: an index into `list`,
      // whose tensor's dimension `dim` must be the linear's K.
      auto sidecarEntry = [&](const char *key,
                              const std::vector<ElementsAttr> &list,
                              int dim) -> ElementsAttr {
        int64_t i = ls[id].at(key).get<int64_t>();
        if (i < 0 || i >= (int64_t)list.size() ||
            cast<ShapedType>(list[i].getType()).getDimSize(dim) !=
                absmax.getNumElements())
          return {};
        return list[i];
      };
      if (o.pruningStats) {
        ElementsAttr gram = sidecarEntry("gram", grams, 0);
        if (!gram)
          return error(statsPath + ": linear " + id + " names a missing or "
                       "mis-sized Gram matrix");
        DenseElementsAttr norms = f32Array(ctx, ls[id].at("input_l2norm"));
        if (norms.getNumElements() != absmax.getNumElements())
          return error(statsPath + ": linear " + id + " has the wrong "
                       "input_l2norm width");
        l->setAttr(qcc::kInputGramAttr, gram);
        l->setAttr(qcc::kInputL2NormAttr, norms);
      }
      if (o.activationRows > 0) {
        ElementsAttr rows = sidecarEntry("samples", samples, 1);
        if (!rows)
          return error(statsPath + ": linear " + id + " names missing or "
                       "mis-sized activation samples");
        l->setAttr(qcc::kInputSamplesAttr, rows);
      }
    }
    const json &as = stats.value("attentions", json::object());
    for (AttentionOp a : attentions) {
      std::string id = std::to_string(
          a->getAttrOfType<IntegerAttr>(kCalibId).getInt());
      a->removeAttr(kCalibId);
      if (!as.contains(id))
        continue; // only an int8 KV cache needs these
      a->setAttr("qcc.k_absmax", f32Array(ctx, as[id].at("k_absmax")));
      a->setAttr("qcc.v_absmax", f32Array(ctx, as[id].at("v_absmax")));
      if (as[id].contains("k_channel_absmax")) // --kv-scales=kivi
        a->setAttr("qcc.k_channel_absmax",
                   f32Array(ctx, as[id].at("k_channel_absmax")));
    }
  } catch (const json::exception &e) {
    return error(statsPath + ": malformed calibration statistics: " +
                 e.what());
  }
  if (!tmpStats.empty()) {
    llvm::sys::fs::remove(tmpStats);
    llvm::sys::fs::remove(tmpStats.str().str() + ".gram");
    llvm::sys::fs::remove(tmpStats.str().str() + ".rows");
  }
  return llvm::Error::success();
}
