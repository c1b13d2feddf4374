//===- CudaContextTest.cpp - the driver layer of the CUDA backend ---------===//
//
// Without a driver: loading fails with one clear reason (every machine).
// With a GPU (suite CudaContextGpu, skipped saying why otherwise): memory,
// a PTX module JIT-compiled by the driver, launches, strided copies, graph
// capture and replay, and out-of-memory as an error.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaContext.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

using namespace qcc::rt;

namespace {

TEST(CudaDriver, MissingDriverIsOneReason) {
  const char *old = std::getenv("QCC_CUDA_DRIVER");
  std::string saved = old ? old : "";
  setenv("QCC_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  std::string why;
  auto d = CudaDriver::load(why);
  if (old)
    setenv("QCC_CUDA_DRIVER", saved.c_str(), 1);
  else
    unsetenv("QCC_CUDA_DRIVER");
  EXPECT_EQ(d, nullptr);
  EXPECT_EQ(why, "no CUDA driver (/nonexistent/libcuda.so.1 not found)");
}

// y[i] += 1 for i < n (hand-written PTX: no NVRTC needed in this test).
const char kAddOnePtx[] = R"(.version 7.0
.target sm_80
.address_size 64
.visible .entry add_one(.param .u64 p, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4];
  add.f32 %f2, %f1, 0f3F800000;
  st.global.f32 [%rd4], %f2;
DONE:
  ret;
}
)";

TEST(CudaContextGpu, MemoryLaunchesGraphs) {
  std::string why;
  std::shared_ptr<CudaDriver> driver = CudaDriver::load(why);
  if (!driver)
    GTEST_SKIP() << "no GPU: " << why;
  CudaContext ctx(driver, 0);
  const unsigned n = 1000;
  std::vector<float> host(n);
  for (unsigned i = 0; i < n; ++i)
    host[i] = (float)i;
  DevicePtr d = ctx.alloc(n * sizeof(float));
  ctx.upload(d, host.data(), n * sizeof(float));
  auto m = ctx.loadModule(kAddOnePtx, "add_one (ptx)");
  auto f = ctx.function(m, "add_one");
  unsigned count = n;
  void *args[] = {&d, &count};
  ctx.launch(f, {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, args, "add_one");
  std::vector<float> out(n);
  ctx.download(out.data(), d, n * sizeof(float));
  for (unsigned i = 0; i < n; ++i)
    ASSERT_EQ(out[i], (float)i + 1) << i;

  // Captured once, replayed twice: +2.
  ctx.beginCapture();
  ctx.launch(f, {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, args, "add_one");
  auto g = ctx.endCapture();
  ctx.replay(g);
  ctx.replay(g);
  ctx.download(out.data(), d, n * sizeof(float));
  for (unsigned i = 0; i < n; ++i)
    ASSERT_EQ(out[i], (float)i + 3) << i;
  ctx.destroy(g);

  // Columns [2, 5) of a 10 x 8 matrix of floats.
  DevicePtr col = ctx.alloc(10 * 3 * sizeof(float));
  ctx.copy2D(col, 3 * sizeof(float), d + 2 * sizeof(float), 8 * sizeof(float),
             3 * sizeof(float), 10);
  std::vector<float> cols(30);
  ctx.download(cols.data(), col, cols.size() * sizeof(float));
  for (int r = 0; r < 10; ++r)
    for (int c = 0; c < 3; ++c)
      ASSERT_EQ(cols[r * 3 + c], (float)(r * 8 + 2 + c) + 3);
  ctx.free(col);
  ctx.free(d);

  try {
    ctx.alloc(size_t(1) << 50);
    FAIL() << "a 1 PiB allocation succeeded";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("out of GPU memory"),
              std::string::npos)
        << e.what();
  }
  try {
    ctx.function(m, "no_such_kernel");
    FAIL() << "found a kernel that does not exist";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("no_such_kernel"), std::string::npos);
  }
}

} // namespace
