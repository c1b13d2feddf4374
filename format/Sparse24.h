//===- Sparse24.h - the 2:4 compressed weight layout ------------*- C++ -*-===//
//
// The one definition of how a 2:4 structured-sparse weight is stored, in the
// IR (`qcc.sparse_2_4 %values, %meta`), in the artifact and in both backends'
// memory. It is the layout the sparse tensor-core instruction reads for its
// sparse operand A (PTX ISA, "Sparse matrix storage" of mma.sp), with the
// weight W [N, K] as A (y^T = W x^T), so a row of W is a row of A:
//
//   values  [N, K/2]  the kept elements of each row, two per group of four
//                     consecutive k, in ascending k (the weight's element
//                     type: f32 / f16 / bf16 / i8)
//   meta    [N, K/32] i32; bits 4j..4j+3 of meta[n][c] describe group
//                     g = 8c + j (k = 4g .. 4g+3) of row n: bits 0-1 the
//                     index in the group of the first kept element, bits
//                     2-3 of the second, first < second
//
// One 32-bit word covers 32 k: exactly one row's metadata register of
// mma.sp m16n8k32 (f16/bf16); m16n8k64 (s8) reads two consecutive words.
// Indices are distinct and ascending, as `mma.sp::ordered_metadata` requires:
// the six valid nibbles are 0x4 (0,1), 0x8 (0,2), 0xC (0,3), 0x9 (1,2),
// 0xD (1,3), 0xE (2,3). A group with fewer than two nonzeros still names two
// positions (zeros are stored as kept values).
//
// K must be a multiple of 32 (kKAlignment): a row's metadata is whole words.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_SPARSE24_H
#define QCC_FORMAT_SPARSE24_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace qcc::format::sparse24 {

inline constexpr int64_t kGroup = 4;          // consecutive k per group
inline constexpr int64_t kKept = 2;           // kept elements per group
inline constexpr int64_t kBitsPerGroup = 4;   // two 2-bit indices
inline constexpr int64_t kGroupsPerWord = 32 / kBitsPerGroup; // 8
inline constexpr int64_t kKPerWord = kGroupsPerWord * kGroup; // 32
inline constexpr int64_t kKAlignment = kKPerWord;

/// Shapes of the two parts of an [n, k] weight (k a multiple of kKAlignment).
inline constexpr int64_t valuesCols(int64_t k) { return k / kGroup * kKept; }
inline constexpr int64_t metaCols(int64_t k) { return k / kKPerWord; }

/// The nibble for kept positions i < j of a group.
inline constexpr uint32_t nibble(int i, int j) {
  return (uint32_t)i | ((uint32_t)j << 2);
}
/// Whether a nibble names two distinct positions in ascending order.
inline constexpr bool validNibble(uint32_t v) {
  return (v & 3u) < ((v >> 2) & 3u);
}
/// The two kept positions of group `g` of a row whose metadata starts at
/// `rowMeta`.
inline void keptPositions(const int32_t *rowMeta, int64_t g, int &first,
                          int &second) {
  uint32_t word = (uint32_t)rowMeta[g / kGroupsPerWord];
  uint32_t v = (word >> (kBitsPerGroup * (g % kGroupsPerWord))) & 0xFu;
  first = (int)(v & 3u);
  second = (int)((v >> 2) & 3u);
}

/// Compresses a dense row-major [n, k] weight of `elementBytes`-byte elements
/// (an element is zero when all its bytes are). Fails, naming the row and
/// group, if k is not a multiple of kKAlignment or a group holds more than two
/// nonzeros. `values` holds n * valuesCols(k) elements, `meta` n * metaCols(k).
std::optional<std::string> compress(const void *dense, int64_t n, int64_t k,
                                    size_t elementBytes, void *values,
                                    int32_t *meta);

/// The dense [n, k] weight back (zeros where nothing was kept).
/// Precondition: validateMeta passed.
void decompress(const void *values, const int32_t *meta, int64_t n, int64_t k,
                size_t elementBytes, void *dense);

/// Checks every group's nibble of an [n, metaCols(k)] metadata array; the
/// error names the first bad row and group.
std::optional<std::string> validateMeta(const int32_t *meta, int64_t n,
                                        int64_t k);

} // namespace qcc::format::sparse24

#endif // QCC_FORMAT_SPARSE24_H
