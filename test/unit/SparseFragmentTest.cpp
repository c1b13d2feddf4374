//===- SparseFragmentTest.cpp - the sparse GEMM's index arithmetic on the CPU //
//
// gemm_sp.cuh cannot run here, but everything in it that could misread the
// 2:4 layout can: the metadata register each lane builds from the row-major
// words (codegen/kernels/sparse_fragment.h, the functions the kernel calls)
// and the byte permutes of the sparse GEMV. A random 2:4 weight is
// compressed with format/Sparse24.h; for every lane the test gathers the
// values / x fragments the mainloop's loads give (PTX ISA fragment layouts)
// and the metadata register from sparse_fragment.h, then runs an emulation
// of mma.sp written from the PTX ISA's fragment layouts and, for which
// lane's which bits name which group's kept positions, the layout measured
// on an H100 (test/e2e/mma_sp_layout.cu), and compares
// the accumulators with the dense GEMM on the decompressed weight. Edge
// shapes: N and M not multiples of the tile (zero-filled rows), K an odd
// multiple of 32 (the int8 m16n8k64 step reading a zero-filled half).
//
//===----------------------------------------------------------------------===//
#include "codegen/kernels/sparse_fragment.h"
#include "format/Sparse24.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace {

namespace sf = qcc::sparse_fragment;
namespace sp = qcc::format::sparse24;

/// A random 2:4 [n, k] int8 weight (values in [-100, 100], never 0 where
/// kept, so a wrong position shows), its compressed form and a random x.
struct Problem {
  int64_t M, N, K;
  std::vector<int8_t> dense, values, x;
  std::vector<int32_t> meta;
  Problem(int64_t m, int64_t n, int64_t k, unsigned seed) : M(m), N(n), K(k) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> val(1, 100), pos(0, 3);
    dense.assign(N * K, 0);
    for (int64_t r = 0; r < N; ++r)
      for (int64_t g = 0; g < K / 4; ++g) {
        int a = pos(rng), b = pos(rng);
        while (b == a)
          b = pos(rng);
        for (int p : {a, b})
          dense[r * K + 4 * g + p] = (int8_t)(rng() & 1 ? val(rng) : -val(rng));
      }
    values.resize(N * sp::valuesCols(K));
    meta.resize(N * sp::metaCols(K));
    auto err = sp::compress(dense.data(), N, K, 1, values.data(), meta.data());
    if (err)
      ADD_FAILURE() << *err;
    x.resize(M * K);
    for (auto &v : x)
      v = (int8_t)(val(rng) - 50);
  }
  int32_t reference(int64_t m, int64_t n) const {
    int32_t s = 0;
    for (int64_t k = 0; k < K; ++k)
      s += (int32_t)x[m * K + k] * dense[n * K + k];
    return s;
  }
  // Reads as the zero-filled cp.async loads do.
  int32_t valueAt(int64_t n, int64_t c) const {
    return n < N && c < K / 2 ? values[n * (K / 2) + c] : 0;
  }
  int32_t xAt(int64_t m, int64_t k) const {
    return m < M && k < K ? x[m * K + k] : 0;
  }
  uint32_t metaWordAt(int64_t n, int64_t w) const {
    return n < N && w < K / 32 ? (uint32_t)meta[n * (K / 32) + w] : 0u;
  }
};

/// One mma.sp of the 16-row weight tile n0 and 8-token tile m0 at dense k0,
/// for element width `ElemBytes` (1: m16n8k64 s8; 2: m16n8k32 f16, values
/// emulated as integers): adds to d[lane][4] (C fragment layout).
template <int ElemBytes>
void emulateMmaSp(const Problem &p, int64_t n0, int64_t m0, int64_t k0,
                  int64_t (&d)[32][4]) {
  constexpr int kMmaK = 64 / ElemBytes;            // dense k per instruction
  constexpr int kPerReg = 4 / ElemBytes;           // elements per register
  constexpr int kWordsPerMma = kMmaK / 32;
  // What each lane holds, as the mainloop's loads give it.
  int32_t a[32][4][4] = {}, b[32][4][4] = {};
  uint32_t e[32];
  for (int lane = 0; lane < 32; ++lane) {
    int g = lane / 4, t = lane % 4;
    for (int r = 0; r < 4; ++r)
      for (int i = 0; i < kPerReg; ++i) {
        // A (values, compressed columns): rows g / g+8, 16 bytes apart.
        int row = g + 8 * (r & 1);
        int ccol = kPerReg * t + i + (16 / ElemBytes) * (r >> 1);
        a[lane][r][i] = p.valueAt(n0 + row, k0 / 2 + ccol);
        // B (x): k = 16 bytes per register, 4 bytes per lane.
        int k = (16 / ElemBytes) * r + kPerReg * t + i;
        b[lane][r][i] = p.xAt(m0 + g, k0 + k);
      }
    // The tile's metadata rows g and g+8 from this instruction's words on
    // (the kernel's shared-memory rows, read at step 0 here).
    uint32_t rowG[kWordsPerMma], rowG8[kWordsPerMma];
    for (int w = 0; w < kWordsPerMma; ++w) {
      rowG[w] = p.metaWordAt(n0 + g, k0 / 32 + w);
      rowG8[w] = p.metaWordAt(n0 + g + 8, k0 / 32 + w);
    }
    e[lane] = sf::metaRegister<kWordsPerMma>(rowG, rowG8, 0, lane);
  }
  // The instruction: compressed column c of row r is slot c % 2 of group
  // c / 2; slot s is bits 2s, 2s+1 of the group's nibble, which lies (as
  // measured on an H100 by test/e2e/mma_sp_layout.cu, docs/GPU_NOTES.md):
  //   f16 m16n8k32: in lane 4 (r % 8) + group / 4, bits 4 (group % 4), +16
  //     for rows 8-15;
  //   s8 m16n8k64: in lane 4 (r % 8) + 2 (group / 8) + r / 8, bits
  //     4 (group % 8).
  for (int col = 0; col < 8; ++col)
    for (int row = 0; row < 16; ++row) {
      int64_t sum = 0;
      for (int c = 0; c < kMmaK / 2; ++c) {
        // Who holds A[row][c]: register r, element i of lane 4g + t.
        int blk = c / (16 / ElemBytes), within = c % (16 / ElemBytes);
        int aLane = 4 * (row % 8) + within / kPerReg;
        int av = a[aLane][(row / 8) + 2 * blk][within % kPerReg];
        int group = c / 2, slot = c % 2;
        uint32_t nib =
            ElemBytes == 2
                ? (e[4 * (row % 8) + group / 4] >>
                   (4 * (group % 4) + 16 * (row / 8))) & 0xF
                : (e[4 * (row % 8) + 2 * (group / 8) + row / 8] >>
                   (4 * (group % 8))) & 0xF;
        EXPECT_LT(nib & 3, (nib >> 2) & 3) << "invalid metadata reaches mma.sp";
        int k = 4 * group + (int)((nib >> (2 * slot)) & 3);
        // Who holds B[k][col].
        int bReg = k / (16 / ElemBytes), bWithin = k % (16 / ElemBytes);
        int bv = b[4 * col + bWithin / kPerReg][bReg][bWithin % kPerReg];
        sum += (int64_t)av * bv;
      }
      // C fragment: c[0], c[1] row g cols 2t, 2t+1; c[2], c[3] row g+8.
      int lane = 4 * (row % 8) + col / 2;
      d[lane][2 * (row / 8) + col % 2] += sum;
    }
}

template <int ElemBytes> void checkGemm(int64_t M, int64_t N, int64_t K) {
  SCOPED_TRACE("M " + std::to_string(M) + " N " + std::to_string(N) + " K " +
               std::to_string(K) + " elem bytes " + std::to_string(ElemBytes));
  Problem p(M, N, K, unsigned(M * 7 + N * 13 + K));
  constexpr int kMmaK = 64 / ElemBytes;
  for (int64_t n0 = 0; n0 < N; n0 += 16)
    for (int64_t m0 = 0; m0 < M; m0 += 8) {
      int64_t d[32][4] = {};
      // The K loop of the mainloop (BlockK tiles padded past K).
      for (int64_t k0 = 0; k0 < (K + 127) / 128 * 128; k0 += kMmaK)
        emulateMmaSp<ElemBytes>(p, n0, m0, k0, d);
      for (int lane = 0; lane < 32; ++lane)
        for (int q = 0; q < 4; ++q) {
          int64_t n = n0 + lane / 4 + 8 * (q / 2), m = m0 + 2 * (lane % 4) + q % 2;
          if (n < N && m < M) {
            ASSERT_EQ(d[lane][q], p.reference(m, n)) << "m " << m << " n " << n;
          }
        }
    }
}

TEST(SparseFragmentTest, MmaSpS8MatchesDense) {
  checkGemm<1>(16, 32, 128);
  checkGemm<1>(8, 16, 256);
  checkGemm<1>(13, 40, 96); // K an odd multiple of 32; M, N ragged
  checkGemm<1>(3, 16, 32);
}

TEST(SparseFragmentTest, MmaSpF16MatchesDense) {
  checkGemm<2>(16, 32, 128);
  checkGemm<2>(13, 40, 96);
  checkGemm<2>(5, 16, 32);
}

TEST(SparseFragmentTest, ZeroFilledMetadataIsValid) {
  // Rows past N and words past K are zero-filled; mma.sp sees 0x4 (0, 1).
  const uint32_t zero[2] = {0, 0};
  for (int lane = 0; lane < 4; ++lane) {
    for (uint32_t r : {sf::metaRegister<1>(zero, zero, 0, lane),
                       sf::metaRegister<2>(zero, zero, 0, lane)}) {
      EXPECT_EQ(r, 0x44444444u);
      for (int i = 0; i < 8; ++i)
        EXPECT_TRUE(sp::validNibble((r >> (4 * i)) & 0xF));
    }
  }
  // f16: halves of rows g, g+8; s8: whole words, the zero one replaced.
  const uint32_t g[2] = {0x9D8E4CE9u, 0u}, g8[2] = {0u, 0x8888CCCCu};
  EXPECT_EQ(sf::metaRegister<1>(g, g8, 0, 0), 0x44444CE9u);
  EXPECT_EQ(sf::metaRegister<1>(g, g8, 0, 1), 0x44449D8Eu);
  EXPECT_EQ(sf::metaRegister<2>(g, g8, 0, 0), 0x9D8E4CE9u);
  EXPECT_EQ(sf::metaRegister<2>(g, g8, 0, 1), 0x44444444u);
  EXPECT_EQ(sf::metaRegister<2>(g, g8, 0, 2), 0x44444444u);
  EXPECT_EQ(sf::metaRegister<2>(g, g8, 0, 3), 0x8888CCCCu);
}

TEST(SparseFragmentTest, BytePermMatchesPtx) {
  // prmt.b32 default mode: byte i of the result is byte s[4i+2:4i] of
  // {hi, lo}.
  EXPECT_EQ(sf::bytePerm(0x33221100u, 0x77665544u, 0x3210u), 0x33221100u);
  EXPECT_EQ(sf::bytePerm(0x33221100u, 0x77665544u, 0x7654u), 0x77665544u);
  EXPECT_EQ(sf::bytePerm(0x33221100u, 0x77665544u, 0x4701u), 0x44770011u);
}

uint32_t word(const int8_t *p) {
  return (uint32_t)(uint8_t)p[0] | (uint32_t)(uint8_t)p[1] << 8 |
         (uint32_t)(uint8_t)p[2] << 16 | (uint32_t)(uint8_t)p[3] << 24;
}

TEST(SparseFragmentTest, GemvS8MatchesDense) {
  // The GEMV's lane step (gemm_sp.cuh SpDotS8): 32 k = one metadata word, 4
  // values words, 8 x words; dp4a emulated.
  Problem p(3, 8, 256, 5);
  for (int64_t m = 0; m < p.M; ++m)
    for (int64_t n = 0; n < p.N; ++n) {
      int32_t acc = 0;
      for (int64_t w = 0; w < p.K / 32; ++w) {
        uint32_t x[8], v[4];
        for (int i = 0; i < 8; ++i)
          x[i] = word(&p.x[m * p.K + 32 * w + 4 * i]);
        for (int i = 0; i < 4; ++i)
          v[i] = word(&p.values[n * (p.K / 2) + 16 * w + 4 * i]);
        uint32_t meta = (uint32_t)p.meta[n * (p.K / 32) + w];
        for (int q = 0; q < 4; ++q) {
          uint32_t xs = sf::s8PickX(x, meta, q);
          for (int b = 0; b < 4; ++b)
            acc += (int8_t)(v[q] >> (8 * b)) * (int8_t)(xs >> (8 * b));
        }
      }
      ASSERT_EQ(acc, p.reference(m, n)) << "m " << m << " n " << n;
    }
}

TEST(SparseFragmentTest, GemvF16PicksKeptPositions) {
  // SpDotF16: values word j (two kept halves of group j) meets the halves
  // f16PickX takes from x words 2j, 2j+1. Halves as 16-bit tags k + 1.
  Problem p(1, 4, 64, 9);
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t w = 0; w < p.K / 32; ++w) {
      uint32_t x[16];
      for (int i = 0; i < 16; ++i) {
        uint32_t k = (uint32_t)(32 * w + 2 * i);
        x[i] = (k + 1) | (k + 2) << 16;
      }
      uint32_t meta = (uint32_t)p.meta[n * (p.K / 32) + w];
      for (int j = 0; j < 8; ++j) {
        uint32_t picked = sf::f16PickX(x, meta, j);
        int first, second;
        sp::keptPositions(&p.meta[n * (p.K / 32)], 8 * w + j, first, second);
        EXPECT_EQ(picked & 0xFFFF, (uint32_t)(32 * w + 4 * j + first + 1));
        EXPECT_EQ(picked >> 16, (uint32_t)(32 * w + 4 * j + second + 1));
      }
    }
}

} // namespace
