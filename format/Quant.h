//===- Quant.h - integer quantization ranges, shared ------------*- C++ -*-===//
//
// The integer ranges of qcc's quantization (docs/QUANTIZATION.md), one
// definition for the compiler (the #qcc.quant attribute, the passes that
// quantize weights and KV scales) and the runtime (CPU kernels, KV cache),
// which links no MLIR and reads the bit width from the artifact (an i8
// tensor, an "i8" KV cache). Header only.
//
// Symmetric quantization uses [-qmax, qmax] with qmax = 2^(bits-1) - 1 (127
// for int8): -2^(bits-1) is left out so that the range is symmetric and a
// scale is absmax / qmax. Asymmetric (zero-point) quantization uses the whole
// range [-2^(bits-1), 2^(bits-1) - 1].
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_QUANT_H
#define QCC_FORMAT_QUANT_H

#include <cstdint>
#include <span>
#include <string>

namespace qcc::format {

/// Bits of qcc's quantized integers (weights, activations, KV cache): int8.
inline constexpr int kQuantBits = 8;

/// Largest value of symmetric `bits`-bit quantization: 2^(bits-1) - 1.
constexpr int32_t symmetricQMax(int bits = kQuantBits) {
  return (int32_t(1) << (bits - 1)) - 1;
}
/// The range of asymmetric `bits`-bit quantization: [qmin, qmax].
constexpr int32_t asymmetricQMin(int bits = kQuantBits) {
  return -(int32_t(1) << (bits - 1));
}
constexpr int32_t asymmetricQMax(int bits = kQuantBits) {
  return symmetricQMax(bits);
}
/// Number of steps of the asymmetric range (255 for int8): scale =
/// (max - min) / steps.
constexpr int32_t asymmetricSteps(int bits = kQuantBits) {
  return asymmetricQMax(bits) - asymmetricQMin(bits);
}

/// Why `columns` cannot be the outlier columns of a linear of depth k (the
/// LLM.int8()-style fallback, docs/QUANTIZATION.md section 3): they must be
/// ascending, distinct and in [0, k), at most k of them. "" when they can.
/// The compiler's verifiers and the runtime's checks of an artifact both
/// use this rule.
inline std::string outlierColumnsError(std::span<const int64_t> columns,
                                       int64_t k) {
  if ((int64_t)columns.size() > k)
    return std::to_string(columns.size()) + " outlier columns for K = " +
           std::to_string(k);
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] < 0 || columns[i] >= k)
      return "outlier column " + std::to_string(columns[i]) +
             " is outside [0, " + std::to_string(k) + ")";
    if (i > 0 && columns[i] <= columns[i - 1])
      return "outlier columns must be ascending and distinct (" +
             std::to_string(columns[i - 1]) + " then " +
             std::to_string(columns[i]) + ")";
  }
  return "";
}

static_assert(symmetricQMax(8) == 127 && asymmetricQMin(8) == -128 &&
              asymmetricSteps(8) == 255);

} // namespace qcc::format

#endif // QCC_FORMAT_QUANT_H
