//===- KvCacheConfig.cpp - parsing the manifest's "kv_cache" --------------===//
#include "format/KvCacheConfig.h"

#include "format/Checked.h"

#include <cmath>
#include <stdexcept>

using namespace qcc::format;

static std::string str(int64_t v) { return std::to_string(v); }

[[noreturn]] static void fail(const std::string &msg) {
  throw std::runtime_error("KV cache: " + msg);
}

KvCacheConfig KvCacheConfig::fromJson(const nlohmann::json &j) {
  if (!j.is_object())
    fail("the manifest's \"kv_cache\" is not an object");
  KvCacheConfig c;
  auto num = [&](const char *name, int64_t &out, bool required) {
    if (!j.contains(name)) {
      if (required)
        fail(std::string("the manifest's \"kv_cache\" has no \"") + name +
             "\"");
      return;
    }
    if (!j.at(name).is_number_integer() || j.at(name).get<int64_t>() <= 0)
      fail(std::string("\"kv_cache\".\"") + name +
           "\" must be a positive integer");
    out = j.at(name).get<int64_t>();
  };
  if (j.contains("layout"))
    c.layout = j.at("layout").get<std::string>();
  if (c.layout != "paged" && c.layout != "contiguous")
    fail("unknown layout '" + c.layout + "' (expected paged or contiguous)");
  num("block_tokens", c.blockTokens, c.layout == "paged");
  num("layers", c.layers, true);
  num("kv_heads", c.kvHeads, true);
  num("head_dim", c.headDim, true);
  num("max_positions", c.maxPositions, false);
  if (j.contains("dtype"))
    c.dtype = j.at("dtype").get<std::string>();
  if (c.dtype != "f32" && c.dtype != "f16" && c.dtype != "i8" &&
      c.dtype != "fp8")
    fail("dtype '" + c.dtype + "' is not supported by the CPU backend "
         "(expected f32, f16, i8 or fp8)");
  if (j.contains("scales")) {
    if (!j.at("scales").is_string())
      fail("\"kv_cache\".\"scales\" must be a string");
    c.scales = j.at("scales").get<std::string>();
    if (!c.isScaled())
      fail("\"scales\" is only valid with dtype i8 or fp8");
  }
  if (c.scales != "per-head" && c.scales != "kivi")
    fail("unknown scales '" + c.scales + "' (expected per-head or kivi)");
  if (c.isFp8() && c.scales != "per-head")
    fail("dtype fp8 has per-head scales only, not '" + c.scales + "'");
  bool kivi = c.scales == "kivi";
  // i8 and fp8 expand the key scales per channel (kChannelScales): a bound on
  // their number, far above any model's (80 x 8 x 128 = 81,920), checked
  // factor by factor so that the product cannot overflow.
  constexpr int64_t kMaxScales = int64_t(1) << 26;
  if (c.isScaled() &&
      (c.layers > kMaxScales || c.kvHeads > kMaxScales ||
       c.headDim > kMaxScales || c.layers * c.kvHeads > kMaxScales ||
       c.layers * c.kvHeads * c.headDim > kMaxScales))
    fail("layers x kv_heads x head_dim is above 2^26: too many " + c.dtype +
         " scales");
  // i8 and fp8: "k_scales" / "v_scales", [layers][kv_heads] positive finite floats
  // (kivi: "k_scales" [layers][kv_heads * head_dim], no "v_scales").
  auto scales = [&](const char *name, std::vector<std::vector<float>> &out,
                    int64_t perHead) {
    // Appended piece by piece: gcc 12's -Wrestrict misreads
    // "literal" + std::string&& here (GCC bug 105329).
    std::string shape = "[";
    shape += str(c.layers);
    shape += "][";
    shape += str(c.kvHeads);
    if (perHead > 1) {
      shape += " * ";
      shape += str(perHead);
    }
    shape += "]";
    bool wanted = c.isScaled() && perHead > 0;
    if (!j.contains(name)) {
      if (wanted)
        fail("dtype " + c.dtype + " needs \"" + name + "\" (" + shape +
             " floats)");
      return;
    }
    if (!wanted)
      fail(std::string("\"") + name + "\" is only valid with dtype i8 or fp8" +
           (c.isScaled() ? " and per-head scales" : ""));
    const nlohmann::json &a = j.at(name);
    if (!a.is_array() || (int64_t)a.size() != c.layers)
      fail(std::string("\"") + name + "\" must be " + shape + " floats");
    for (const auto &row : a) {
      if (!row.is_array() || (int64_t)row.size() != c.kvHeads * perHead)
        fail(std::string("\"") + name + "\" must be " + shape + " floats");
      out.emplace_back();
      for (const auto &v : row) {
        if (!v.is_number() || !std::isfinite(v.get<double>()) ||
            (float)v.get<double>() <= 0.0f)
          fail(std::string("\"") + name + "\" must hold positive finite "
               "floats, got " + v.dump());
        out.back().push_back((float)v.get<double>());
      }
    }
  };
  scales("k_scales", c.kScales, kivi ? c.headDim : 1);
  scales("v_scales", c.vScales, kivi ? 0 : 1);
  for (const std::vector<float> &layer : c.kScales)
    for (float s : layer)
      c.kChannelScales.insert(c.kChannelScales.end(),
                              kivi ? 1 : (size_t)c.headDim, s);
  // A block (or one token, contiguous) must have a size: the pool's size
  // is checked again, with the number of blocks, when it is allocated.
  if (!qcc::format::checkedBytes(
          std::vector<int64_t>{c.layers, 2, c.kvHeads, c.headDim,
                               c.layout == "paged" ? c.blockTokens : 1},
          c.elementBytes()))
    fail("layers x kv_heads x head_dim x block_tokens is beyond 64 bits");
  return c;
}

void KvCacheConfig::checkContext(int64_t tokens, const std::string &what) const {
  if (maxPositions > 0 && tokens > maxPositions)
    fail(what + " needs " + std::to_string(tokens) +
         " positions, but the model has " + std::to_string(maxPositions));
}

std::optional<KvCacheConfig> KvCacheConfig::parse(const nlohmann::json &j,
                                                  std::string *why) {
  try {
    return fromJson(j);
  } catch (const std::exception &e) {
    if (why)
      *why = e.what();
    return std::nullopt;
  }
}
