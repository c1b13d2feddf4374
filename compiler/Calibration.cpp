//===- Calibration.cpp - activation statistics for quantization -----------===//
//
// The float model runs in qcc-calib, a runtime tool, not in this process:
// the tokenizer library carries its own protobuf, which cannot be loaded next
// to ONNX's (see runtime/CMakeLists.txt).
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

/// The Gram matrices of `stats` ("grams", "gram_file" beside `statsPath`),
/// one f64 [K, K] attribute each; errors name the file and the reason.
static llvm::Expected<std::vector<ElementsAttr>>
loadGrams(MLIRContext *ctx, const json &stats, llvm::StringRef statsPath) {
  if (!stats.contains("grams") || !stats.contains("gram_file"))
    return error(statsPath + ": no pruning statistics (saved by a compile "
                 "without --prune=wanda|sparsegpt; delete it to recalibrate)");
  std::string name = stats.at("gram_file").get<std::string>();
  if (name.empty() || name.find('/') != std::string::npos)
    return error(statsPath + ": gram_file must be a file name beside it");
  llvm::SmallString<256> path(llvm::sys::path::parent_path(statsPath));
  llvm::sys::path::append(path, name);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return error(path + ": cannot read the Gram matrices");
  llvm::StringRef bytes = (*buffer)->getBuffer();
  std::vector<ElementsAttr> out;
  for (const json &g : stats.at("grams")) {
    int64_t k = g.at("k").get<int64_t>();
    uint64_t offset = g.at("offset").get<uint64_t>();
    uint64_t size = (uint64_t)k * (uint64_t)k * sizeof(double);
    if (k <= 0 || k > (1 << 16) || offset > bytes.size() ||
        size > bytes.size() - offset)
      return error(path + ": Gram matrix " + std::to_string(out.size()) +
                   " (k " + std::to_string(k) + ") lies outside the file");
    llvm::StringRef m = bytes.substr(offset, size);
    for (size_t i = 0; i < size; i += sizeof(double)) {
      double v;
      std::memcpy(&v, m.data() + i, sizeof v);
      if (!std::isfinite(v))
        return error(path + ": Gram matrix " + std::to_string(out.size()) +
                     " holds a non-finite value");
    }
    auto type = RankedTensorType::get({k, k}, Float64Type::get(ctx));
    out.push_back(qcc::makeElements(
        type, llvm::ArrayRef<char>(m.data(), m.size()),
        "gram_" + std::to_string(out.size())));
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

  std::string statsPath = o.statsPath;
  bool reuse = !statsPath.empty() && llvm::sys::fs::exists(statsPath);
  llvm::SmallString<128> tmpArtifact, tmpStats;
  if (!reuse) {
    if (o.source.empty())
      return error("--quant=w8a8 needs --calib=SOURCE (a text file or a "
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
    if (o.pruningStats)
      args.push_back("--pruning-stats");
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
    const json &ls = stats.at("linears");
    std::vector<ElementsAttr> grams;
    if (o.pruningStats) {
      auto loaded = loadGrams(ctx, stats, statsPath);
      if (!loaded)
        return loaded.takeError();
      grams = std::move(*loaded);
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
      if (o.pruningStats) {
        int64_t g = ls[id].at("gram").get<int64_t>();
        if (g < 0 || g >= (int64_t)grams.size() ||
            cast<ShapedType>(grams[g].getType()).getDimSize(0) !=
                absmax.getNumElements())
          return error(statsPath + ": linear " + id + " names a missing or "
                       "mis-sized Gram matrix");
        DenseElementsAttr norms = f32Array(ctx, ls[id].at("input_l2norm"));
        if (norms.getNumElements() != absmax.getNumElements())
          return error(statsPath + ": linear " + id + " has the wrong "
                       "input_l2norm width");
        l->setAttr(qcc::kInputGramAttr, grams[g]);
        l->setAttr(qcc::kInputL2NormAttr, norms);
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
    }
  } catch (const json::exception &e) {
    return error(statsPath + ": malformed calibration statistics: " +
                 e.what());
  }
  if (!tmpStats.empty()) {
    llvm::sys::fs::remove(tmpStats);
    llvm::sys::fs::remove(tmpStats.str().str() + ".gram");
  }
  return llvm::Error::success();
}
