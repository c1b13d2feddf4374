//===- Int4.cpp - the packed int4 weight layout (W4A16) -------------------===//

#include "format/Int4.h"

#include <vector>

namespace qcc::format::int4 {

void pack(const int8_t *q, int64_t n, int64_t k, int8_t *out) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; j += 2) {
      uint8_t lo = (uint8_t)q[r * k + j] & 0xF,
              hi = (uint8_t)q[r * k + j + 1] & 0xF;
      out[r * (k / 2) + j / 2] = (int8_t)(uint8_t)(lo | (hi << 4));
    }
}

OperandSlots operandSlots(size_t count, bool asymmetric) {
  OperandSlots s;
  size_t fixed = asymmetric ? 3 : 2; // packed, scales[, offsets]
  if (count < fixed || count > fixed + 1) {
    s.error = asymmetric ? "needs packed, scales, an optional perm and offsets"
                         : "needs packed, scales and an optional perm";
    return s;
  }
  if (count == fixed + 1)
    s.perm = 2;
  if (asymmetric)
    s.offsets = (int)count - 1;
  return s;
}

std::string groupSizeError(int64_t k, int64_t groupSize) {
  if (groupSize <= 0 || groupSize % 2 != 0)
    return "group size " + std::to_string(groupSize) +
           " must be positive and even";
  if (k <= 0 || k % groupSize != 0)
    return "K = " + std::to_string(k) +
           " is not a multiple of the group size " + std::to_string(groupSize);
  return "";
}

std::string permutationError(const int32_t *perm, int64_t k) {
  std::vector<char> seen((size_t)k, 0);
  for (int64_t j = 0; j < k; ++j) {
    int32_t c = perm[j];
    if (c < 0 || c >= k)
      return "permutation entry " + std::to_string(j) + " (" +
             std::to_string(c) + ") is outside [0, " + std::to_string(k) + ")";
    if (seen[(size_t)c]++)
      return "permutation names column " + std::to_string(c) + " twice";
  }
  return "";
}

void dequantize(const int8_t *packed, const float *scales, const float *offsets,
                const int32_t *perm, int64_t n, int64_t k, int64_t groupSize,
                float *dense) {
  // By group, through the group's 16 values (nibble -> q * s, or u * s + m
  // with offsets: the same as nibbleValue(nibbleAt(row, j)) * s[j / G]
  // (+ m[j / G]) for every j): a lookup per nibble instead of a conversion,
  // a multiply and an add.
  const int64_t groups = scaleCols(k, groupSize), pc = packedCols(k);
  float value[16];
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t *row = reinterpret_cast<const uint8_t *>(packed + r * pc);
    const float *s = scales + r * groups;
    const float *m = offsets ? offsets + r * groups : nullptr;
    float *out = dense + r * k;
    for (int64_t g = 0; g < groups; ++g) {
      for (uint32_t nib = 0; nib < 16; ++nib)
        value[nib] = weightValue(nibbleValue(nib, m != nullptr), s[g],
                                 m ? &m[g] : nullptr);
      const int64_t j0 = g * groupSize;
      if (perm)
        for (int64_t j = j0; j < j0 + groupSize; j += 2) {
          uint8_t b = row[j >> 1];
          out[perm[j]] = value[b & 0xF];
          out[perm[j + 1]] = value[b >> 4];
        }
      else
        for (int64_t j = j0; j < j0 + groupSize; j += 2) {
          uint8_t b = row[j >> 1];
          out[j] = value[b & 0xF];
          out[j + 1] = value[b >> 4];
        }
    }
  }
}

} // namespace qcc::format::int4
