//===- MoeKernelEmulationTest.cpp - moe.cuh on the host against moeK -----===//
//
// The moe kernel's four steps (codegen/kernels/moe.cuh) run on the host
// under the CUDA emulation (cuda-emulation/CudaEmulation.h: a host thread
// per CUDA thread, one CTA at a time, __syncthreads a barrier) with the
// emitter's configuration (MoeDefault) and launch grids, against the CPU
// kernel (runCpuKernel(Moe)). Sizes that are not multiples of the tiles (H
// = 80 for TileK 32 and TileN 64, I = 96, 37 tokens: 74 routes in chunks of
// 16), an expert no token picks, both activations kinds (gated SiLU, plain
// GELU-tanh), and an expert id out of range (error flag, no write outside
// the workspaces). Tolerance 1e-4 relative to max(1, |cpu|): the same float
// products summed in another order (K <= 160), and the O(1) outputs are
// gate-weighted sums of down projections whose terms reach ~50 (a bound of
// K * 50 * 2^-24 ~ 5e-4; seen: 1.7e-5). A wrong index or a missed tile
// moves an output by O(1).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuKernels.h"

#include "CudaEmulation.h"
#include "codegen/kernels/moe.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace qcc::rt;
using nlohmann::json;

namespace {

using Cfg = qcc::MoeDefault;

Tensor uniform(Shape shape, std::mt19937 &rng) {
  Tensor t(DType::F32, std::move(shape));
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = d(rng);
  return t;
}

/// The four launches as the emitter's record makes them (emitMoe).
template <bool Gated, qcc::MoeActivation Act>
std::vector<float> runMoeKernel(const Tensor &x, const Tensor &ids,
                                const Tensor &gates, const Tensor &up,
                                const Tensor &down, const Tensor *gate,
                                int &errorFlag) {
  const int T = (int)x.dim(0), H = (int)x.dim(1), k = (int)ids.dim(1),
            E = (int)up.dim(0), I = (int)up.dim(1), routes = T * k;
  std::vector<int> offsets(E + 1, -7), list(routes, -7);
  std::vector<float> h((size_t)routes * I, NAN), y((size_t)routes * H, NAN),
      out((size_t)T * H, NAN);
  // int64_t is long here, long long on the device: the same 8 bytes.
  const long long *id = reinterpret_cast<const long long *>(ids.data<int64_t>());
  const unsigned chunks = (unsigned)Cfg::gridRoutes(routes);
  qcc::emu::launch({1, 1, 1}, Cfg::kRouteThreads, [&] {
    qcc::moeRoutes<Cfg>(id, routes, E, offsets.data(), list.data(), &errorFlag);
  });
  qcc::emu::launch({(unsigned)Cfg::gridFeatures(I), (unsigned)E, chunks},
                   Cfg::kBlockThreads, [&] {
                     qcc::moeGroupedGemm<Cfg, Gated, Act, true, true>(
                         x.data<float>(), up.data<float>(),
                         gate ? gate->data<float>() : nullptr, offsets.data(),
                         list.data(), k, I, H, h.data());
                   });
  qcc::emu::launch({(unsigned)Cfg::gridFeatures(H), (unsigned)E, chunks},
                   Cfg::kBlockThreads, [&] {
                     qcc::moeGroupedGemm<Cfg, false, Act, false, false>(
                         h.data(), down.data<float>(), nullptr, offsets.data(),
                         list.data(), k, H, I, y.data());
                   });
  qcc::emu::launch({(unsigned)((T * H + Cfg::kCombineThreads - 1) /
                               Cfg::kCombineThreads),
                    1, 1},
                   Cfg::kCombineThreads, [&] {
                     qcc::moeCombine<Cfg>(y.data(), gates.data<float>(), id, E,
                                          T, k, H, out.data());
                   });
  return out;
}

struct Case {
  Tensor x, ids, gates, up, down, gate;
};

Case makeCase(int64_t T, int64_t H, int64_t I, int64_t E, int64_t k) {
  std::mt19937 rng(11);
  Case c{uniform({T, H}, rng),      Tensor(DType::I64, {T, k}),
         uniform({T, k}, rng),      uniform({E, I, H}, rng),
         uniform({E, H, I}, rng),   uniform({E, I, H}, rng)};
  // Token t's routes: experts (t + j) % (E - 1): expert E - 1 is never
  // picked (its CTAs must return without reading).
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j)
      c.ids.data<int64_t>()[t * k + j] = (t * 3 + j) % (E - 1);
  return c;
}

void expectNear(const std::vector<float> &got, const Tensor &want) {
  ASSERT_EQ((int64_t)got.size(), want.numel());
  for (size_t i = 0; i < got.size(); ++i) {
    float w = want.data<float>()[i];
    EXPECT_NEAR(got[i], w, 1e-4f * std::max(1.0f, std::fabs(w))) << "at " << i;
  }
}

} // namespace

TEST(MoeKernelEmulation, GatedSiluMatchesCpuKernel) {
  Case c = makeCase(/*T=*/37, /*H=*/80, /*I=*/96, /*E=*/5, /*k=*/2);
  int flag = 0;
  std::vector<float> got = runMoeKernel<true, qcc::MoeActivation::Silu>(
      c.x, c.ids, c.gates, c.up, c.down, &c.gate, flag);
  EXPECT_EQ(flag, 0);
  Tensor want = runCpuKernel(OpKind::Moe, Attrs(json{{"activation", "silu"}}),
                             {&c.x, &c.ids, &c.gates, &c.up, &c.down, &c.gate})[0];
  expectNear(got, want);
}

TEST(MoeKernelEmulation, PlainGeluTanhDecodeMatchesCpuKernel) {
  // Decode-sized: one token, top-1 of 3 experts.
  Case c = makeCase(/*T=*/1, /*H=*/64, /*I=*/160, /*E=*/3, /*k=*/1);
  int flag = 0;
  std::vector<float> got = runMoeKernel<false, qcc::MoeActivation::GeluTanh>(
      c.x, c.ids, c.gates, c.up, c.down, nullptr, flag);
  EXPECT_EQ(flag, 0);
  Tensor want =
      runCpuKernel(OpKind::Moe, Attrs(json{{"activation", "gelu_tanh"}}),
                   {&c.x, &c.ids, &c.gates, &c.up, &c.down, nullptr})[0];
  expectNear(got, want);
}

TEST(MoeKernelEmulation, ExpertIdOutOfRangeSetsTheFlag) {
  Case c = makeCase(/*T=*/3, /*H=*/32, /*I=*/32, /*E=*/3, /*k=*/2);
  c.ids.data<int64_t>()[3] = 3; // token 1's second route
  int flag = 0;
  std::vector<float> got = runMoeKernel<true, qcc::MoeActivation::Silu>(
      c.x, c.ids, c.gates, c.up, c.down, &c.gate, flag);
  EXPECT_EQ(flag, qcc::kDeviceErrorExpertId);
  // The other routes are computed as usual; the bad one adds nothing.
  for (float v : got)
    EXPECT_TRUE(std::isfinite(v));
}
