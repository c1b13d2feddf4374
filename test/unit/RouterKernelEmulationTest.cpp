//===- RouterKernelEmulationTest.cpp - router.cuh on the host vs the CPU --===//
//
// The router kernel (codegen/kernels/router.cuh: softmax, top_k and the
// renormalization of a mixture-of-experts router, one warp per row) runs on
// the host under the CUDA emulation (cuda-emulation/CudaEmulation.h; warp
// shuffles through a slot per thread) with the emitter's 4 warps per CTA,
// against the CPU kernels the region's ops run (runCpuKernel of softmax,
// top_k, reduce_sum, div). Expert counts that are not multiples of 32 (4, 8,
// 60, 128: one to four per lane), k from 1 to 8, a row count that leaves a
// CTA's last warps idle, tied logits (the lower index first), a row of -inf
// (zeros, ids 0..k-1) and a NaN (first, as top_k orders it). Ids must be
// the CPU's exactly; gates within 4 ulp relative (the host's exp is the same
// function here, so the only difference is the order of the double sum:
// seen 0).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuKernels.h"

#include "CudaEmulation.h"
#include "codegen/kernels/router.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace qcc::rt;
using nlohmann::json;

namespace {

constexpr int kWarps = 4; // EmitMoe.cpp's emitRouter

template <int E, int K, bool Renormalize>
void checkRouter(int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-4, 4);
  Tensor logits(DType::F32, {rows, E});
  float *l = logits.data<float>();
  for (int64_t i = 0; i < logits.numel(); ++i)
    l[i] = d(rng);
  // Row 0: ties (expert 1 and 3 equal, the largest); row 1: all -inf; row
  // 2: a NaN at the last expert.
  if (rows > 0 && E >= 4) {
    l[1] = l[3] = 9.0f;
  }
  if (rows > 1)
    for (int e = 0; e < E; ++e)
      l[E + e] = -INFINITY;
  if (rows > 2)
    l[2 * E + E - 1] = NAN;

  std::vector<float> gates((size_t)rows * K, -7.0f);
  std::vector<long long> ids((size_t)rows * K, -7);
  constexpr int perLane = (E + 31) / 32;
  qcc::emu::launch({(unsigned)qcc::RouterLaunch<kWarps>::gridX(rows), 1, 1},
                   qcc::RouterLaunch<kWarps>::kBlockThreads, [&] {
                     qcc::routerRow<kWarps, E, K, perLane, Renormalize>(
                         l, gates.data(), ids.data(), rows);
                   });

  Tensor k(DType::I64, {1});
  k.data<int64_t>()[0] = K;
  Tensor p = runCpuKernel(OpKind::Softmax, Attrs(json{{"axis", 1}}), {&logits})[0];
  std::vector<Tensor> top =
      runCpuKernel(OpKind::TopK, Attrs(json{{"axis", 1}}), {&p, &k});
  Tensor want = top[0];
  if (Renormalize) {
    Tensor sum = runCpuKernel(OpKind::ReduceSum,
                              Attrs(json{{"axes", {1}}, {"keepdims", true}}),
                              {&top[0]})[0];
    want = runCpuKernel(OpKind::Div, Attrs(json::object()), {&top[0], &sum})[0];
  }
  for (int64_t i = 0; i < rows * K; ++i) {
    ASSERT_EQ(ids[(size_t)i], top[1].data<int64_t>()[i])
        << "E " << E << " K " << K << " row " << i / K << " slot " << i % K;
    float w = want.data<float>()[i], g = gates[(size_t)i];
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << "row " << i / K;
      continue;
    }
    EXPECT_NEAR(g, w, 4 * std::ldexp(std::max(std::fabs(w), 1e-30f), -23))
        << "E " << E << " K " << K << " row " << i / K << " slot " << i % K;
  }
}

} // namespace

TEST(RouterKernelEmulation, MixtralTop2Renormalized) {
  checkRouter<8, 2, true>(/*rows=*/13, 1); // 4 CTAs, the last with 1 row
}

TEST(RouterKernelEmulation, FewExpertsTop1) { checkRouter<4, 1, true>(6, 2); }

TEST(RouterKernelEmulation, QwenMoeTop4Plain) {
  checkRouter<60, 4, false>(/*rows=*/9, 3); // two experts per lane
}

TEST(RouterKernelEmulation, WideTop8) { checkRouter<128, 8, true>(5, 4); }
