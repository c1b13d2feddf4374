//===- KvCacheConfig.h - the manifest's "kv_cache" object -------*- C++ -*-===//
//
// The KV cache's shape as the compiler wrote it (docs/KV_CACHE.md). Parsed
// and validated by the artifact loader (runtime/Artifact.cpp), so an
// artifact that loaded has a valid one; the cache itself is runtime/KvCache.h.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_KVCACHECONFIG_H
#define QCC_RUNTIME_KVCACHECONFIG_H

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qcc::rt {

/// The manifest's "kv_cache" object.
struct KvCacheConfig {
  std::string layout = "paged"; // "paged" or "contiguous"
  int64_t blockTokens = 16;
  int64_t layers = 0, kvHeads = 0, headDim = 0;
  /// Positions of the model's learned position table (0: no limit).
  int64_t maxPositions = 0;
  /// Throws a clear error if a sequence of `tokens` does not fit.
  void checkContext(int64_t tokens, const std::string &what) const;
  std::string dtype = "f32"; // "f32" or "i8"
  /// i8: dequantization scales, [layers][kv_heads] each (docs/QUANTIZATION.md
  /// section 4): the cache stores clamp(round_half_even(x / s), -127, 127).
  std::vector<std::vector<float>> kScales, vScales;

  bool isInt8() const { return dtype == "i8"; }
  size_t elementBytes() const { return isInt8() ? 1 : sizeof(float); }

  /// Parses and validates the manifest object; throws std::runtime_error.
  static KvCacheConfig fromJson(const nlohmann::json &j);
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_KVCACHECONFIG_H
