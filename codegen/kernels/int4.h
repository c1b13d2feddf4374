//===- int4.h - the packed int4 weight in registers (W4A16) -----*- C++ -*-===//
//
// The device side of format/Int4.h, compiled by NVRTC (as "qcc/int4.h", for
// gemv_w4.cuh) and by the host compiler (as "codegen/kernels/int4.h", for
// test/unit/Int4LinearTest.cpp, which holds it to format::int4::dequantize):
// a 32-bit little-endian word of a packed row holds 8 consecutive stored
// columns, column i of the word in bits 4i..4i+3 (byte i/2, the low nibble
// for even i), a two's-complement int4 q, or with offsets an unsigned u.
// The value is q * s with s the group's f16 scale widened to f32 (exact),
// or u * s + m with m the group's f16 offset (u * s exact, so one rounding,
// FMA or not): every backend has the same weight.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_INT4_H
#define QCC_KERNELS_INT4_H

#if defined(__CUDACC_RTC__)
#include "qcc/host_device.h"
#else
#include "format/device/host_device.h"
#endif

namespace qcc {
namespace nibbles {

/// Stored columns per 32-bit word of a packed row.
constexpr int kPerWord = 8;

/// The int4 of column i (0..7) of `word`, sign-extended.
QCC_HOST_DEVICE inline int nibble(unsigned word, int i) {
  return static_cast<int>(word << (28 - 4 * i)) >> 28;
}

/// The eight weights of `word` with scale `s`: out[i] = nibble(word, i) * s.
QCC_HOST_DEVICE inline void dequant8(unsigned word, float s, float out[8]) {
  QCC_UNROLL
  for (int i = 0; i < kPerWord; ++i)
    out[i] = static_cast<float>(nibble(word, i)) * s;
}

/// The unsigned int4 of column i (0..7) of `word` (the asymmetric form).
QCC_HOST_DEVICE inline unsigned unsignedNibble(unsigned word, int i) {
  return (word >> (4 * i)) & 0xFu;
}

/// The eight asymmetric weights of `word` with scale `s` and offset `m`:
/// out[i] = unsignedNibble(word, i) * s + m.
QCC_HOST_DEVICE inline void dequant8Offset(unsigned word, float s, float m,
                                           float out[8]) {
  QCC_UNROLL
  for (int i = 0; i < kPerWord; ++i)
    out[i] = static_cast<float>(unsignedNibble(word, i)) * s + m;
}

} // namespace nibbles
} // namespace qcc

#endif // QCC_KERNELS_INT4_H
