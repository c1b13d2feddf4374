//===- sparse_fragment.h - 2:4 metadata -> mma.sp / GEMV registers -------===//
//
// The index arithmetic of gemm_sp.cuh that a layout bug would hide in, as
// plain C++17 the device templates include ("qcc/sparse_fragment.h") and the
// host tests run ("codegen/kernels/sparse_fragment.h"): test/unit/
// SparseFragmentTest.cpp feeds it format/Sparse24.h's layout, emulates
// mma.sp and the GEMV's byte selection on the CPU and compares with a dense
// GEMM. No GPU is needed to find a wrong lane, word or nibble.
//
// The layout (format/Sparse24.h): row n of the weight W [N, K] is row n of
// mma.sp's sparse operand A (y^T = W x^T). values [N, K/2] hold the kept
// elements in ascending k; meta [N, K/32] i32, word c of row n = groups
// 8c .. 8c+7 of that row (k = 32c .. 32c+31), group 8c+j in bits 4j..4j+3
// (bits 0-1 the first kept index, 2-3 the second, first < second).
//
// mma.sp's metadata register (g = lane / 4, t = lane % 4). The PTX ISA
// gives these as figures only; both were read off an H100 (sm_90) by
// test/e2e/mma_sp_layout.cu (docs/GPU_NOTES.md):
//   m16n8k32 f16 (sparsity selector 0: threads t = 0, 1 of each quad give
//     the metadata): t holds groups 4t .. 4t+3 of the instruction's 32 k of
//     row g in bits 0-15 and of row g+8 in bits 16-31, i.e. half t of the
//     row's metadata word (t = 2, 3: ignored, computed alike).
//   m16n8k64 s8 (selector 0, all four threads): t holds the whole metadata
//     word (t / 2) of the two the instruction covers, of row g (t even) or
//     g+8 (t odd): groups 8 (t / 2) .. 8 (t / 2) + 7, nibble i = group
//     8 (t / 2) + i. (The first version assumed the f16 arrangement here; the
//     first GPU run found gemm_i8_sp wrong by 70%.)
// Either way a thread's register is made of the row-major metadata as
// stored: no reordering (unlike CUTLASS's, whose iterators want a permuted
// one).
//
// A metadata word that was zero-filled (rows n >= N, or k >= K in the K tile
// past the end: cp.async src-size 0) names positions (0, 0), which
// mma.sp::ordered_metadata leaves undefined; its values and x are zero too,
// so any valid pattern gives the right 0: kZeroFillMeta (0, 1 everywhere)
// replaces it. A valid word is never 0 (0x0 is no valid nibble).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_SPARSE_FRAGMENT_H
#define QCC_KERNELS_SPARSE_FRAGMENT_H

#if defined(__CUDACC_RTC__)
#include "qcc/host_device.h"
#else
#include "format/device/host_device.h"
#include <cstdint>
#endif

namespace qcc {
namespace sparse_fragment {

typedef unsigned int u32;

/// The nibble pattern standing in for a zero-filled metadata word.
constexpr u32 kZeroFillMeta = 0x44444444u;

/// A metadata word as mma.sp may see it: a zero-filled one replaced.
QCC_HOST_DEVICE inline u32 validMeta(u32 word) {
  return word ? word : kZeroFillMeta;
}

/// The metadata register of `lane` for the `step`-th mma.sp of a K tile,
/// from the tile's row-major metadata words of rows g (`rowG`) and g+8
/// (`rowG8`); MetaWordsPerMma = 1: m16n8k32 f16, 2: m16n8k64 s8.
template <int MetaWordsPerMma>
QCC_HOST_DEVICE inline u32 metaRegister(const u32 *rowG, const u32 *rowG8,
                                        int step, int lane) {
  static_assert(MetaWordsPerMma == 1 || MetaWordsPerMma == 2,
                "mma.sp shapes: m16n8k32 f16 or m16n8k64 s8");
  const int t = lane & 3;
  if (MetaWordsPerMma == 1) {
    const int shift = 16 * (t & 1);
    return ((validMeta(rowG[step]) >> shift) & 0xFFFFu) |
           (((validMeta(rowG8[step]) >> shift) & 0xFFFFu) << 16);
  }
  return validMeta((t & 1 ? rowG8 : rowG)[MetaWordsPerMma * step + (t >> 1)]);
}

//===--- the sparse GEMV ---------------------------------------------------===//
//
// A lane takes one metadata word of a weight row (32 k, 8 groups) with its
// 16 values (s8: 16 bytes; f16: 32 bytes) and the 32 matching x elements
// (s8: 8 words, word j = group j; f16: 16 words, words 2j, 2j+1 = group j),
// and picks the x elements the kept values multiply with byte permutes
// (prmt): no gather through memory, no dynamic register indexing.

/// __byte_perm(lo, hi, s): byte i of the result is byte (s >> 4i) & 7 of
/// the 8 bytes hi:lo. Emulated on the host for the tests.
QCC_HOST_DEVICE inline u32 bytePerm(u32 lo, u32 hi, u32 s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(lo, hi, s);
#else
  const unsigned long long both = ((unsigned long long)hi << 32) | lo;
  u32 r = 0;
  for (int i = 0; i < 4; ++i)
    r |= (u32)((both >> (8 * ((s >> (4 * i)) & 7))) & 0xFFu) << (8 * i);
  return r;
#endif
}

/// s8: the selector taking, from the x words of groups 2q (lo) and 2q+1
/// (hi), the four bytes that the values word q (groups 2q, 2q+1, two kept
/// bytes each, ascending) multiplies: `metaByte` = bits 8q..8q+7 of the
/// metadata word.
QCC_HOST_DEVICE inline u32 s8PairSelector(u32 metaByte) {
  return (metaByte & 3u) | (((metaByte >> 2) & 3u) << 4) |
         ((((metaByte >> 4) & 3u) + 4u) << 8) |
         ((((metaByte >> 6) & 3u) + 4u) << 12);
}

/// f16: the selector taking, from the x words 2j (lo: halves 0, 1 of group
/// j) and 2j+1 (hi: halves 2, 3), the two halves the values word j (two
/// kept halves, ascending) multiplies: `nibble` = group j's metadata.
QCC_HOST_DEVICE inline u32 f16GroupSelector(u32 nibble) {
  const u32 a = 2u * (nibble & 3u), b = 2u * ((nibble >> 2) & 3u);
  return a | ((a + 1u) << 4) | (b << 8) | ((b + 1u) << 12);
}

/// s8: the four x words the values word q multiplies (after prmt), for the
/// 32 k of metadata word `meta`: x[2q], x[2q+1] are the x words of groups
/// 2q, 2q+1.
QCC_HOST_DEVICE inline u32 s8PickX(const u32 *x, u32 meta, int q) {
  return bytePerm(x[2 * q], x[2 * q + 1], s8PairSelector((meta >> (8 * q)) & 0xFFu));
}

/// f16: the two x halves (one word) the values word j multiplies.
QCC_HOST_DEVICE inline u32 f16PickX(const u32 *x, u32 meta, int j) {
  return bytePerm(x[2 * j], x[2 * j + 1], f16GroupSelector((meta >> (4 * j)) & 0xFu));
}

} // namespace sparse_fragment
} // namespace qcc

#endif // QCC_KERNELS_SPARSE_FRAGMENT_H
