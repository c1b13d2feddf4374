//===- HalfFloat.h - f16 and bf16 <-> f32, one definition -------*- C++ -*-===//
//
// f16 (IEEE binary16) and bf16 (the upper half of a binary32) are storage
// types: the artifact keeps weights in them and the runtime keeps tensors in
// them, while every kernel computes in f32. Widening to f32 is exact.
// Narrowing rounds to nearest, ties to even, with integer arithmetic only
// (independent of the floating-point rounding mode); infinities stay
// infinities, values beyond the largest finite number round to infinity as
// RNE says, and NaN stays NaN (made quiet, sign and the top payload bits
// kept).
//
// Header-only and the only definition: the compiler (constants, the W4
// quantizer), the runtime (tensors, the CUDA backend's uploads) and the
// tests round the very same way.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_HALFFLOAT_H
#define QCC_FORMAT_HALFFLOAT_H

#include <bit>
#include <cstdint>

namespace qcc::format {

/// Rounds `bits` >> `shift` to nearest, ties to even (0 < shift < 32).
inline uint32_t shiftRoundEven(uint32_t bits, unsigned shift) {
  uint32_t r = bits >> shift, rem = bits & ((1u << shift) - 1),
           half = 1u << (shift - 1);
  return r + (rem > half || (rem == half && (r & 1)));
}

inline float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f,
           mant = h & 0x3ff;
  if (exp == 0x1f) // inf, NaN (payload kept)
    return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp != 0)
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24, exact in f32.
  float v = float(mant) * 0x1p-24f;
  return sign ? -v : v;
}

inline uint16_t floatToHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7fffffff;
  if (ax > 0x7f800000) // NaN: quiet, top payload bits kept
    return sign | 0x7e00 | ((ax >> 13) & 0x3ff);
  if (ax >= 0x477ff000) // >= 65520, halfway past 65504: infinity under RNE
    return sign | 0x7c00;
  if (ax >= 0x38800000) // normal f16 (>= 2^-14): rebias, round 13 bits away
    return sign | (uint16_t)shiftRoundEven(ax - (112u << 23), 13);
  if (ax <= 0x33000000) // <= 2^-25, half the smallest subnormal: zero
    return sign;
  // Subnormal f16: the 24-bit significand in units of 2^-24.
  uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
  return sign | (uint16_t)shiftRoundEven(m, 126 - e);
}

inline float bf16ToFloat(uint16_t b) {
  return std::bit_cast<float>(uint32_t(b) << 16);
}

inline uint16_t floatToBF16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000) // NaN: quiet, sign and payload top kept
    return (uint16_t)((x >> 16) | 0x40);
  return (uint16_t)shiftRoundEven(x, 16); // a carry reaches inf as RNE says
}

} // namespace qcc::format

#endif // QCC_FORMAT_HALFFLOAT_H
