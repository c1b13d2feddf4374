//===- HadamardKernelEmulationTest.cpp - hadamard.cuh on the host vs Q ----===//
//
// The online rotation's kernel (codegen/kernels/hadamard.cuh, one CTA per
// row, the emitter's 256 threads) runs on the host under the CUDA emulation
// (cuda-emulation/CudaEmulation.h), against the rows times the dense Q of
// format/Rotation.h in double, for widths with and without an odd factor
// (64 = 64 x 1, 24 = 8 x 3, 1536 = 512 x 3, SmolLM2's MLP) and a grid
// smaller than the rows (rows strided by gridDim.x). Tolerance: 1e-5 of the
// row's largest value (f32 butterflies and DCT sums over log2(N) + M terms;
// seen below 1e-6).
//
//===----------------------------------------------------------------------===//
#include "CudaEmulation.h"
#include "codegen/kernels/hadamard.cuh"
#include "format/Rotation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace {

template <int N, int M>
void checkHadamard(int rows, unsigned grid, unsigned long long seedValue) {
  constexpr int K = N * M;
  std::mt19937 rng(K);
  std::uniform_real_distribution<float> d(-3, 3);
  std::vector<float> in((size_t)rows * K), out((size_t)rows * K, -7.0f);
  for (float &v : in)
    v = d(rng);
  // Row 0: one outlier channel, as an MLP activation has.
  in[5] = 300.0f;
  constexpr unsigned long long kSeed = 11;
  ASSERT_EQ(seedValue, kSeed);
  qcc::emu::launch({grid, 1, 1}, 256, [&] {
    qcc::hadamard_rows<256, N, M, kSeed>(in.data(), out.data(), rows);
  });
  qcc::format::Rotation rotation(K, kSeed);
  for (int r = 0; r < rows; ++r) {
    std::vector<double> want(in.begin() + (size_t)r * K,
                             in.begin() + (size_t)(r + 1) * K);
    rotation.rotateRow(want);
    double scale = 0;
    for (double v : want)
      scale = std::max(scale, std::fabs(v));
    for (int i = 0; i < K; ++i)
      ASSERT_NEAR(out[(size_t)r * K + i], want[i], 1e-5 * scale)
          << "K " << K << " row " << r << " index " << i;
  }
}

TEST(HadamardKernelEmulation, MatchesTheRotation) {
  checkHadamard<64, 1>(3, 3, 11);
  checkHadamard<8, 3>(5, 2, 11);
  checkHadamard<512, 3>(2, 1, 11);
}

} // namespace
