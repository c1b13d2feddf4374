//===- CompilerModule.cpp - qcc._compiler: ONNX to artifact ---------------===//
//
// qcc.compile (python/qcc/__init__.py; docs/PYTHON.md): the compiler library
// as the qcc tool drives it. The keyword arguments are qcc's flags with '_'
// for '-' and take the same values, spelled from the same tables
// (passes/Options.h); the rules on and between them are CompileOptions::
// validate's and prepareCompile's (compiler/Pipeline.h), so a bad
// combination is refused with the line qcc prints (naming qcc's flag).
//
//===----------------------------------------------------------------------===//
#include "compiler/Pipeline.h"

#include "mlir/IR/MLIRContext.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <mutex>

namespace nb = nanobind;

namespace {

/// Raises qcc.Error (python/qcc/_errors.py) with `message`.
[[noreturn]] void raiseError(const std::string &message) {
  nb::object type = nb::module_::import_("qcc._errors").attr("Error");
  PyErr_SetString(type.ptr(), message.c_str());
  throw nb::python_error();
}

/// `value` as one of `names`' spellings, or ValueError naming `keyword`.
template <size_t N, typename Enum>
void parseChoice(const llvm::cl::OptionEnumValue (&names)[N],
                 const char *keyword, const std::string &value, Enum &out) {
  if (!qcc::parseSpelling(names, value, out))
    throw nb::value_error((std::string(keyword) + " must be " +
                           qcc::spellingList(names) + ", not '" + value + "'")
                              .c_str());
}

/// Compiles run one at a time: the phases share process-wide state (LLVM's
/// statistics and options, the NVRTC cache).
std::mutex compileMutex;

std::string compile(const std::string &model, const std::string &output,
                    const std::string &quant, std::optional<std::string> calib,
                    int64_t calibSamples, int64_t calibSeqLen,
                    std::optional<std::string> calibStats,
                    const std::string &actQuant, bool smoothQuant,
                    nb::object smoothQuantAlpha, const std::string &int8Fallback,
                    bool asymmetric, int64_t groupSize, bool actOrder,
                    const std::string &w4Method, bool w4Asym, bool w4LmHead,
                    const std::string &sparsity, std::optional<std::string> prune,
                    std::vector<std::string> sparsityExclude,
                    const std::string &kvCache, int64_t kvBlockTokens,
                    const std::string &kvDtype, const std::string &kvScales,
                    std::optional<std::string> tokenizer, bool cuda,
                    bool quiet, std::vector<std::string> lora,
                    std::vector<std::string> loraAdapters,
                    const std::string &calibTool, bool rotate) {
  if (output.empty() || output == "-")
    throw nb::value_error("output must be the artifact's path (MODEL.qpkg)");
  qcc::CompileOptions o;
  parseChoice(qcc::kQuantModeNames, "quant", quant, o.quant);
  parseChoice(qcc::kActivationQuantNames, "act_quant", actQuant,
              o.activations);
  parseChoice(qcc::kInt8FallbackNames, "int8_fallback", int8Fallback,
              o.int8Fallback);
  parseChoice(qcc::kW4MethodNames, "w4_method", w4Method, o.w4Method);
  parseChoice(qcc::kSparsityNames, "sparsity", sparsity, o.sparsity);
  if (prune) {
    qcc::PruneMethod method;
    parseChoice(qcc::kPruneMethodNames, "prune", *prune, method);
    o.prune = method;
  }
  if (kvCache == "none")
    o.kvCache = qcc::KvLayout::None;
  else
    parseChoice(qcc::kKvLayoutNames, "kv_cache", kvCache, o.kvCache);
  parseChoice(qcc::kKvDtypeNames, "kv_dtype", kvDtype, o.kvDtype);
  parseChoice(qcc::kKvScalesNames, "kv_scales", kvScales, o.kvScales);
  o.kvBlockTokens = kvBlockTokens;
  o.rotate = rotate;
  o.asymmetric = asymmetric;
  o.smoothQuant = smoothQuant;
  // A float or "auto", parsed as qcc parses --smoothquant-alpha.
  std::string alpha = nb::cast<std::string>(nb::str(smoothQuantAlpha));
  if (auto err = qcc::parseSmoothQuantAlpha(alpha, o))
    throw nb::value_error(llvm::toString(std::move(err)).c_str());
  o.w4GroupSize = groupSize;
  o.w4ActOrder = actOrder;
  o.w4Asymmetric = w4Asym;
  o.w4LmHead = w4LmHead;
  o.sparsityExclude = std::move(sparsityExclude);
  o.calibration.source = calib.value_or("");
  o.calibration.samples = calibSamples;
  o.calibration.seqLen = calibSeqLen;
  o.calibration.statsPath = calibStats.value_or("");
  o.calibration.toolPath = calibTool;
  // Spelled as qcc's flags: "DIR[:SCALE]", "NAME=DIR[:SCALE]".
  for (auto [texts, named] : {std::pair(&lora, false),
                              std::pair(&loraAdapters, true)})
    for (const std::string &text : *texts) {
      auto spec = qcc::parseLoraSpec(text, named);
      if (!spec)
        throw nb::value_error(llvm::toString(spec.takeError()).c_str());
      (named ? o.loraAdapters : o.loraMerges).push_back(*spec);
    }
  o.gpuKernels = cuda;
  o.quiet = quiet;
  o.artifactPath = output;
  if (auto err = o.validate())
    throw nb::value_error(llvm::toString(std::move(err)).c_str());

  std::string error;
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(compileMutex);
    llvm::Error err = qcc::prepareCompile(model, tokenizer.value_or(""),
                                          qcc::Phase::Package, o);
    if (!err) {
      mlir::MLIRContext context;
      auto c = qcc::compileTo(context, model, qcc::Phase::Package, o);
      if (!c)
        err = c.takeError();
    }
    if (err)
      error = llvm::toString(std::move(err));
  }
  if (!error.empty())
    raiseError(error);
  return output;
}

} // namespace

NB_MODULE(_compiler, m) {
  m.doc() = "qcc's compiler: ONNX to a deployment artifact (qcc.compile)";
  m.attr("VERSION") = QCC_VERSION;
  // Defaults are CompileOptions' own.
  const qcc::CompileOptions defaults;
  m.def("compile", &compile, nb::arg("model"), nb::arg("output"),
        nb::kw_only(), nb::arg("quant") = "none",
        nb::arg("calib").none() = nb::none(), nb::arg("calib_samples") = defaults.calibration.samples,
        nb::arg("calib_seq_len") = defaults.calibration.seqLen,
        nb::arg("calib_stats").none() = nb::none(),
        nb::arg("act_quant") = "per-token", nb::arg("smoothquant") = true,
        nb::arg("smoothquant_alpha") = defaults.smoothQuantAlpha, nb::arg("int8_fallback") = "off",
        nb::arg("asymmetric") = false, nb::arg("group_size") = defaults.w4GroupSize,
        nb::arg("act_order") = false, nb::arg("w4_method") = "gptq",
        nb::arg("w4_asym") = false, nb::arg("w4_lm_head") = false,
        nb::arg("sparsity") = "none",
        nb::arg("prune").none() = nb::none(),
        nb::arg("sparsity_exclude") = std::vector<std::string>(),
        nb::arg("kv_cache") = "paged", nb::arg("kv_block_tokens") = defaults.kvBlockTokens,
        nb::arg("kv_dtype") = "f32", nb::arg("kv_scales") = "per-head",
        nb::arg("tokenizer").none() = nb::none(), nb::arg("cuda") = true,
        nb::arg("quiet") = true, nb::arg("lora") = std::vector<std::string>(),
        nb::arg("lora_adapters") = std::vector<std::string>(),
        nb::arg("calib_tool") = "", nb::arg("rotate") = false);
}
