//===- KvCacheConfig.h - the manifest's "kv_cache" object -------*- C++ -*-===//
//
// The KV cache's shape as the compiler wrote it (docs/KV_CACHE.md). Parsed
// and validated by the artifact loader (runtime/core/Artifact.cpp), so an
// artifact that loaded has a valid one; the cache itself is runtime/core/KvCache.h.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_KVCACHECONFIG_H
#define QCC_FORMAT_KVCACHECONFIG_H

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace qcc::format {

/// The manifest's "kv_cache" object.
struct KvCacheConfig {
  /// Tokens per block of a paged cache unless the compile says otherwise
  /// (qcc --kv-block-tokens, the kv-cache-layout pass's option).
  static constexpr int64_t kDefaultBlockTokens = 16;
  std::string layout = "paged"; // "paged" or "contiguous"
  int64_t blockTokens = kDefaultBlockTokens;
  int64_t layers = 0, kvHeads = 0, headDim = 0;
  /// Positions of the model's learned position table (0: no limit).
  int64_t maxPositions = 0;
  /// Throws a clear error if a sequence of `tokens` does not fit.
  void checkContext(int64_t tokens, const std::string &what) const;
  /// "f32", "f16" (IEEE binary16, format/HalfFloat.h), "i8" or "fp8" (OCP
  /// E4M3 codes, format/device/numerics.h).
  std::string dtype = "f32";
  /// i8: how the scales go (docs/QUANTIZATION.md section 4): "per-head" or
  /// "kivi" (K per channel, V per token, computed on append); fp8:
  /// "per-head".
  std::string scales = "per-head";
  /// i8 and fp8: dequantization scales as the manifest holds them: the
  /// cache stores clamp(round_half_even(x / s), -127, 127) (i8) or
  /// floatToE4M3(x / s) (fp8, saturating). per-head: [layers][kv_heads]
  /// each; kivi: kScales [layers][kv_heads * head_dim], no vScales.
  std::vector<std::vector<float>> kScales, vScales;
  /// i8 and fp8: the key scale of every (layer, kv head, channel),
  /// flattened (a per-head scale repeated head_dim times), so that the
  /// kernels read keys one way whatever `scales` is.
  std::vector<float> kChannelScales;

  bool isInt8() const { return dtype == "i8"; }
  bool isFp8() const { return dtype == "fp8"; }
  bool isF16() const { return dtype == "f16"; }
  /// One byte per element with scales (i8 or fp8).
  bool isScaled() const { return isInt8() || isFp8(); }
  /// kivi: each cached V row has its own scale (KvCache stores them).
  bool valueScalePerToken() const { return isInt8() && scales == "kivi"; }
  size_t elementBytes() const {
    return isScaled() ? 1 : isF16() ? 2 : sizeof(float);
  }
  /// The tokens a sequence's room is rounded up to when a cache is sized
  /// from a request: the block size (a contiguous cache's manifest may have
  /// none: then the default block size).
  int64_t roundingTokens() const {
    return blockTokens > 0 ? blockTokens : kDefaultBlockTokens;
  }
  /// The head_dim key scales of (layer, kv head); i8 and fp8 only.
  const float *keyScales(int64_t layer, int64_t kvHead) const {
    return kChannelScales.data() + (layer * kvHeads + kvHead) * headDim;
  }

  /// Parses and validates the manifest object; throws std::runtime_error.
  static KvCacheConfig fromJson(const nlohmann::json &j);
  /// The same without exceptions (for code built without them, as MLIR's
  /// is): nullopt and the reason in `why`.
  static std::optional<KvCacheConfig> parse(const nlohmann::json &j,
                                            std::string *why);
};

} // namespace qcc::format

#endif // QCC_FORMAT_KVCACHECONFIG_H
