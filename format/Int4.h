//===- Int4.h - the packed int4 weight layout (W4A16) -----------*- C++ -*-===//
//
// The one definition of how a W4A16 weight W [N, K] is stored, in the IR
// (`qcc.weight_int4 %packed, %scales [, %perm] [offsets %offsets]`), in the
// artifact and in both backends' memory (docs/QUANTIZATION.md, section 7):
//
//   packed  i8 [N, K/2]  two int4 per byte along K: byte j of row n holds
//                        k = 2j in its low nibble and k = 2j + 1 in its
//                        high nibble (a GPU thread reading 16 bytes of a
//                        row gets 32 consecutive k of one output channel);
//                        each a two's-complement int4 q, or with offsets
//                        an unsigned u in [0, 15]
//   scales  f16 [N, K/G] one scale per output channel n and group of G
//                        consecutive (stored) k: W[n, k] = q[n, k] * s[n, k/G]
//   perm    i32 [K]      optional (GPTQ act-order): stored column j is the
//                        weight's column perm[j], so the dequantized weight
//                        is W[n, perm[j]] = q[n, j] * s[n, j/G]; groups are
//                        consecutive in the stored order
//   offsets f16 [N, K/G] optional (asymmetric, "scale + min" as GGUF's
//                        Q4_1): W[n, perm[j]] = u[n, j] * s + m with
//                        m = offsets[n, j/G], u the unsigned nibble
//
// Symmetric: q in [-7, 7] (format/Quant.h, symmetricQMax(4)); a nibble
// 0x8 (-8) is never written but decodes as -8, so no input is undefined.
// q * s and u * s are exact in f32 (an 11-bit significand times a 4-bit
// integer), so u * s + m rounds once: the same with or without FMA, and
// the dequantized weight is the same bits on every backend.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_INT4_H
#define QCC_FORMAT_INT4_H

#include "format/Quant.h"

#include <cstdint>
#include <optional>
#include <string>

namespace qcc::format::int4 {

inline constexpr int kBits = 4;
/// The symmetric range's bound: q in [-kQMax, kQMax].
inline constexpr int32_t kQMax = symmetricQMax(kBits); // 7
inline constexpr int64_t kDefaultGroupSize = 128;

/// Columns of the packed array of a [n, k] weight (k even).
inline constexpr int64_t packedCols(int64_t k) { return k / 2; }
/// Columns of the scales: groups per row.
inline constexpr int64_t scaleCols(int64_t k, int64_t groupSize) {
  return k / groupSize;
}

/// The asymmetric range: u in [0, kUMax].
inline constexpr int32_t kUMax = 15;

/// The nibble at stored column `j` of a row whose packed bytes start at
/// `row`, as stored (0..15).
inline uint32_t nibbleAt(const int8_t *row, int64_t j) {
  uint8_t b = (uint8_t)row[j >> 1];
  return (j & 1) ? (uint32_t)(b >> 4) : (uint32_t)(b & 0xF);
}

/// The symmetric int4 at stored column `j` (the nibble sign-extended).
inline int32_t unpack(const int8_t *row, int64_t j) {
  return (int32_t)(int8_t)(uint8_t)(nibbleAt(row, j) << 4) >> 4;
}

/// The integer a nibble stands for: two's complement (symmetric) or
/// unsigned (with offsets).
inline int32_t nibbleValue(uint32_t nib, bool withOffsets) {
  return withOffsets ? (int32_t)nib
                     : (nib < 8 ? (int32_t)nib : (int32_t)nib - 16);
}

/// The weight a code stands for: q * s, or with an offset u * s + m. The
/// product is exact in f32, so the sum rounds once (FMA or not): every host
/// path computes it here (the device's qcc/int4.h is held to it by test).
inline float weightValue(int32_t code, float scale, const float *offset) {
  float scaled = (float)code * scale;
  return offset ? scaled + *offset : scaled;
}

/// Packs q [n, k] (each in [-8, 7], or u in [0, 15]: the low 4 bits are
/// stored) into out [n, k/2]. k must be even.
void pack(const int8_t *q, int64_t n, int64_t k, int8_t *out);

/// Where a weight_int4 node's optional operands are among its `count`
/// inputs (packed, scales, [perm], [offsets]; the artifact has no operand
/// segments: its node attribute `asymmetric` says offsets are present, and
/// they come last). -1: absent. Empty `error` when the count fits.
struct OperandSlots {
  int perm = -1, offsets = -1;
  std::string error;
};
OperandSlots operandSlots(size_t count, bool asymmetric);

/// Why `groupSize` cannot group a weight of depth k ("" when it can): it
/// must be positive and even and divide k (k even, so rows are whole bytes).
std::string groupSizeError(int64_t k, int64_t groupSize);

/// Why `perm` [k] is not a permutation of [0, k) ("" when it is).
std::string permutationError(const int32_t *perm, int64_t k);

/// The dequantized weight dense [n, k] f32 (the reference semantics of
/// qcc.weight_int4): `scales` and `offsets` [n, k/groupSize] already widened
/// to f32 (`offsets` null: symmetric), `perm` [k] or null. Preconditions:
/// groupSizeError and permutationError passed.
void dequantize(const int8_t *packed, const float *scales, const float *offsets,
                const int32_t *perm, int64_t n, int64_t k, int64_t groupSize,
                float *dense);

} // namespace qcc::format::int4

#endif // QCC_FORMAT_INT4_H
