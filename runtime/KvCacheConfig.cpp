//===- KvCacheConfig.cpp - parsing the manifest's "kv_cache" --------------===//
#include "runtime/KvCacheConfig.h"

#include "format/Checked.h"

#include <cmath>
#include <stdexcept>

using namespace qcc::rt;

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
  if (c.dtype != "f32" && c.dtype != "i8")
    fail("dtype '" + c.dtype + "' is not supported by the CPU backend "
         "(expected f32 or i8)");
  // i8: "k_scales" / "v_scales", [layers][kv_heads] positive finite floats.
  auto scales = [&](const char *name, std::vector<std::vector<float>> &out) {
    if (!j.contains(name)) {
      if (c.isInt8())
        fail(std::string("dtype i8 needs \"") + name + "\" ([layers][kv_heads] "
             "floats)");
      return;
    }
    if (!c.isInt8())
      fail(std::string("\"") + name + "\" is only valid with dtype i8");
    const nlohmann::json &a = j.at(name);
    std::string shape = "[" + str(c.layers) + "][" + str(c.kvHeads) + "]";
    if (!a.is_array() || (int64_t)a.size() != c.layers)
      fail(std::string("\"") + name + "\" must be " + shape + " floats");
    for (const auto &row : a) {
      if (!row.is_array() || (int64_t)row.size() != c.kvHeads)
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
  scales("k_scales", c.kScales);
  scales("v_scales", c.vScales);
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
