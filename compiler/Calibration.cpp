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

#include "dialects/QccOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <nlohmann/json.hpp>

#include <cmath>

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
  if (!tmpStats.empty())
    llvm::sys::fs::remove(tmpStats);
  return llvm::Error::success();
}
