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

static_assert(symmetricQMax(8) == 127 && asymmetricQMin(8) == -128 &&
              asymmetricSteps(8) == 255);

} // namespace qcc::format

#endif // QCC_FORMAT_QUANT_H
