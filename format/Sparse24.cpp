//===- Sparse24.cpp - the 2:4 compressed weight layout ----------------------===//

#include "format/Sparse24.h"

#include <cstring>

namespace qcc::format::sparse24 {

namespace {

bool isZero(const unsigned char *p, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    if (p[i])
      return false;
  return true;
}

std::string groupName(int64_t row, int64_t group) {
  return "row " + std::to_string(row) + ", group " + std::to_string(group) +
         " (k " + std::to_string(group * kGroup) + ".." +
         std::to_string(group * kGroup + kGroup - 1) + ")";
}

} // namespace

std::optional<std::string> compress(const void *dense, int64_t n, int64_t k,
                                    size_t elementBytes, void *values,
                                    int32_t *meta) {
  if (n < 0 || k < 0 || k % kKAlignment != 0)
    return "2:4 sparsity needs K to be a multiple of " +
           std::to_string(kKAlignment) + ", got " + std::to_string(k);
  const auto *src = static_cast<const unsigned char *>(dense);
  auto *dst = static_cast<unsigned char *>(values);
  const int64_t groups = k / kGroup;
  for (int64_t r = 0; r < n; ++r) {
    int32_t *rowMeta = meta + r * metaCols(k);
    std::memset(rowMeta, 0, sizeof(int32_t) * (size_t)metaCols(k));
    for (int64_t g = 0; g < groups; ++g) {
      const unsigned char *group =
          src + (size_t)(r * k + g * kGroup) * elementBytes;
      // The nonzero positions, then the lowest zero positions to make two.
      int kept[kGroup], count = 0;
      for (int i = 0; i < kGroup; ++i)
        if (!isZero(group + i * elementBytes, elementBytes))
          kept[count++] = i;
      if (count > kKept)
        return groupName(r, g) + " has " + std::to_string(count) +
               " nonzeros; 2:4 keeps at most 2";
      for (int i = 0; i < kGroup && count < kKept; ++i)
        if (count == 0 || kept[0] != i)
          kept[count++] = i;
      if (kept[0] > kept[1])
        std::swap(kept[0], kept[1]);
      rowMeta[g / kGroupsPerWord] = (int32_t)(
          (uint32_t)rowMeta[g / kGroupsPerWord] |
          (nibble(kept[0], kept[1]) << (kBitsPerGroup * (g % kGroupsPerWord))));
      for (int j = 0; j < kKept; ++j)
        std::memcpy(dst + (size_t)(r * valuesCols(k) + g * kKept + j) *
                              elementBytes,
                    group + kept[j] * elementBytes, elementBytes);
    }
  }
  return std::nullopt;
}

void decompress(const void *values, const int32_t *meta, int64_t n, int64_t k,
                size_t elementBytes, void *dense) {
  const auto *src = static_cast<const unsigned char *>(values);
  auto *dst = static_cast<unsigned char *>(dense);
  std::memset(dst, 0, (size_t)(n * k) * elementBytes);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < k / kGroup; ++g) {
      int pos[kKept];
      keptPositions(meta + r * metaCols(k), g, pos[0], pos[1]);
      for (int j = 0; j < kKept; ++j)
        std::memcpy(dst + (size_t)(r * k + g * kGroup + pos[j]) * elementBytes,
                    src + (size_t)(r * valuesCols(k) + g * kKept + j) *
                              elementBytes,
                    elementBytes);
    }
}

std::optional<std::string> validateMeta(const int32_t *meta, int64_t n,
                                        int64_t k) {
  if (k % kKAlignment != 0)
    return "2:4 sparsity needs K to be a multiple of " +
           std::to_string(kKAlignment) + ", got " + std::to_string(k);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < k / kGroup; ++g) {
      int first, second;
      keptPositions(meta + r * metaCols(k), g, first, second);
      if (first >= second)
        return groupName(r, g) + " has metadata positions " +
               std::to_string(first) + ", " + std::to_string(second) +
               "; 2:4 needs two distinct positions in ascending order";
    }
  return std::nullopt;
}

} // namespace qcc::format::sparse24
