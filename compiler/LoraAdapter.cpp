//===- LoraAdapter.cpp - PEFT LoRA adapters -------------------------------===//
#include "compiler/LoraAdapter.h"
#include "compiler/Safetensors.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <regex>

// ordered: PEFT matches rank_pattern / alpha_pattern keys in file order.
using json = nlohmann::ordered_json;
using qcc::LoraAdapter;
using qcc::LoraFactors;

namespace {

llvm::Error fail(const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// adapter_config.json is a few KiB; anything near this is not one.
constexpr uint64_t kMaxConfigBytes = 16u << 20;
/// PEFT names every tensor after the wrapped model ("base_model.model.")
/// and the adapted module; the adapter's own name is dropped on save.
constexpr llvm::StringLiteral kPrefix = "base_model.model.";

struct Suffix {
  llvm::StringLiteral text;
  LoraFactors::Kind kind;
  bool isA;
};
constexpr Suffix kSuffixes[] = {
    {".lora_A.weight", LoraFactors::Kind::Linear, true},
    {".lora_B.weight", LoraFactors::Kind::Linear, false},
    {".lora_embedding_A", LoraFactors::Kind::Embedding, true},
    {".lora_embedding_B", LoraFactors::Kind::Embedding, false},
};

/// PEFT's rank_pattern / alpha_pattern lookup (peft.utils.other.
/// get_pattern_key): the first key k, in the file's order, that matches the
/// module path as the regular expression `(.*\.)?(k)$` from its start.
llvm::Expected<const json *> patternValue(const json &patterns,
                                          const std::string &module,
                                          const std::string &field,
                                          const std::string &where) {
  if (patterns.is_null())
    return nullptr;
  for (const auto &[key, value] : patterns.items()) {
    std::regex re;
    try {
      re = std::regex("(.*\\.)?(" + key + ")$", std::regex::ECMAScript);
    } catch (const std::regex_error &) {
      return fail(where + ": " + field + " key '" + key +
                  "' is not a regular expression qcc can read");
    }
    if (std::regex_search(module, re, std::regex_constants::match_continuous))
      return &value;
  }
  return nullptr;
}

} // namespace

std::vector<float> LoraFactors::delta() const {
  std::vector<float> out((size_t)(rows * cols));
  std::vector<double> acc((size_t)cols);
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t k = 0; k < rank; ++k) {
      if (kind == Kind::Linear) {
        // B [rows, rank] times A [rank, cols].
        double bk = b[(size_t)(r * rank + k)];
        const float *ak = &a[(size_t)(k * cols)];
        for (int64_t c = 0; c < cols; ++c)
          acc[c] += bk * ak[c];
      } else {
        // (B A)^T: B [cols, rank], A [rank, rows].
        double ak = a[(size_t)(k * rows + r)];
        for (int64_t c = 0; c < cols; ++c)
          acc[c] += (double)b[(size_t)(c * rank + k)] * ak;
      }
    }
    for (int64_t c = 0; c < cols; ++c)
      out[(size_t)(r * cols + c)] = (float)(scaling * acc[c]);
  }
  return out;
}

llvm::Expected<LoraAdapter> qcc::readPeftAdapter(llvm::StringRef dir,
                                                 double scale) {
  LoraAdapter adapter;
  adapter.dir = dir.str();
  llvm::SmallString<256> configPath(dir), weightsPath(dir);
  llvm::sys::path::append(configPath, "adapter_config.json");
  llvm::sys::path::append(weightsPath, "adapter_model.safetensors");
  std::string where = configPath.str().str();

  auto text = llvm::MemoryBuffer::getFile(configPath, /*IsText=*/true);
  if (!text)
    return fail(where + ": cannot read the file: " +
                text.getError().message() +
                " (a LoRA adapter is a folder PEFT's save_pretrained wrote)");
  if ((*text)->getBufferSize() > kMaxConfigBytes)
    return fail(where + ": not an adapter configuration (over 16 MiB)");
  llvm::StringRef body = (*text)->getBuffer();
  json config = json::parse(body.begin(), body.end(), nullptr, false);
  if (config.is_discarded() || !config.is_object())
    return fail(where + ": not a JSON object");

  auto field = [&](const char *name) -> const json & {
    static const json null;
    auto it = config.find(name);
    return it == config.end() ? null : *it;
  };
  auto refuse = [&](const std::string &why) { return fail(where + ": " + why); };
  if (const json &t = field("peft_type"); !t.is_null() && t != "LORA")
    return refuse("peft_type is " + t.dump() + "; qcc applies LORA adapters");
  const json &rJson = field("r"), &alphaJson = field("lora_alpha");
  if (!rJson.is_number_integer() || rJson.get<int64_t>() <= 0)
    return refuse("'r' must be a positive integer");
  if (!alphaJson.is_number() || !std::isfinite(alphaJson.get<double>()))
    return refuse("'lora_alpha' must be a finite number");
  bool rslora = false;
  if (const json &v = field("use_rslora"); !v.is_null()) {
    if (!v.is_boolean())
      return refuse("'use_rslora' must be true or false");
    rslora = v.get<bool>();
  }
  if (const json &v = field("use_dora"); v.is_boolean() && v.get<bool>())
    return refuse("use_dora is true: DoRA adapters (a magnitude vector "
                  "per module) are not supported");
  if (const json &v = field("bias"); !v.is_null() && v != "none")
    return refuse("bias is " + v.dump() + ": adapters that train biases "
                  "are not supported (bias \"none\" only)");
  if (const json &v = field("lora_bias"); v.is_boolean() && v.get<bool>())
    return refuse("lora_bias is true: a bias on lora_B is not supported");
  if (const json &v = field("modules_to_save"); !v.is_null() &&
                                                !(v.is_array() && v.empty()))
    return refuse("modules_to_save is set: adapters that replace whole "
                  "modules are not supported");
  const json &rankPattern = field("rank_pattern"),
             &alphaPattern = field("alpha_pattern");
  for (const auto *p : {&rankPattern, &alphaPattern})
    if (!p->is_null() && !p->is_object())
      return refuse(std::string(p == &rankPattern ? "rank_pattern"
                                                  : "alpha_pattern") +
                    " must be an object");

  auto weights = SafetensorsFile::read(weightsPath);
  if (!weights)
    return weights.takeError();
  struct Pair {
    LoraFactors::Kind kind;
    std::string a, b;
  };
  std::map<std::string, Pair> pairs; // by module path
  for (const auto &[name, tensor] : weights->tensors()) {
    llvm::StringRef key(name);
    const Suffix *suffix = nullptr;
    for (const Suffix &s : kSuffixes)
      if (key.starts_with(kPrefix) && key.ends_with(s.text))
        suffix = &s;
    if (!suffix || key.size() <= kPrefix.size() + suffix->text.size())
      return fail(weights->path() + ": tensor '" + name +
                  "' is not a LoRA factor (base_model.model.<module>."
                  "lora_A.weight / lora_B.weight, or lora_embedding_A / B); "
                  "adapters with other trained tensors are not supported");
    std::string module =
        key.drop_front(kPrefix.size()).drop_back(suffix->text.size()).str();
    auto [it, fresh] = pairs.try_emplace(module, Pair{suffix->kind, "", ""});
    if (!fresh && it->second.kind != suffix->kind)
      return fail(weights->path() + ": module '" + module +
                  "' has both linear and embedding factors");
    (suffix->isA ? it->second.a : it->second.b) = name;
  }
  if (pairs.empty())
    return fail(weights->path() + ": holds no LoRA factors");

  for (const auto &[module, pair] : pairs) {
    std::string about = weights->path() + ": module '" + module + "'";
    if (pair.a.empty() || pair.b.empty())
      return fail(about + ": has only its " + (pair.a.empty() ? "B" : "A") +
                  " factor");
    const SafetensorsTensor &a = weights->tensors().at(pair.a),
                            &b = weights->tensors().at(pair.b);
    if (a.shape.size() != 2 || b.shape.size() != 2 || a.shape[0] == 0 ||
        a.shape[0] != b.shape[1] || a.shape[1] == 0 || b.shape[0] == 0)
      return fail(about + fmt::format(": factor shapes A [{}] and B [{}] are "
                                      "not [r, *] and [*, r] with r > 0",
                                      fmt::join(a.shape, ", "),
                                      fmt::join(b.shape, ", ")));
    LoraFactors f;
    f.kind = pair.kind;
    f.module = module;
    f.rank = a.shape[0];
    bool linear = pair.kind == LoraFactors::Kind::Linear;
    f.rows = linear ? b.shape[0] : a.shape[1];
    f.cols = linear ? a.shape[1] : b.shape[0];
    auto rankFor = patternValue(rankPattern, module, "rank_pattern", where);
    auto alphaFor = patternValue(alphaPattern, module, "alpha_pattern", where);
    if (!rankFor)
      return rankFor.takeError();
    if (!alphaFor)
      return alphaFor.takeError();
    const json &rank = *rankFor ? **rankFor : rJson;
    const json &alpha = *alphaFor ? **alphaFor : alphaJson;
    if (!rank.is_number_integer() || rank.get<int64_t>() != f.rank)
      return fail(about + fmt::format(": its factors have rank {}, but the "
                                      "configuration says {}",
                                      f.rank, rank.dump()));
    if (!alpha.is_number() || !std::isfinite(alpha.get<double>()))
      return fail(where + ": the alpha of module '" + module +
                  "' is not a finite number");
    double r = (double)f.rank;
    f.scaling = scale * alpha.get<double>() / (rslora ? std::sqrt(r) : r);
    auto av = weights->floats(pair.a);
    if (!av)
      return av.takeError();
    auto bv = weights->floats(pair.b);
    if (!bv)
      return bv.takeError();
    f.a = std::move(*av);
    f.b = std::move(*bv);
    for (const auto *v : {&f.a, &f.b})
      for (float x : *v)
        if (!std::isfinite(x))
          return fail(about + ": a factor holds a NaN or an infinity");
    adapter.modules.push_back(std::move(f));
  }
  return adapter;
}
