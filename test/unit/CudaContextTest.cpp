//===- CudaContextTest.cpp - the driver layer of the CUDA backend ---------===//
//
// Without a driver: loading fails with one clear reason (every machine).
// On the libcuda stand-in (test/fake/FakeCudaDriver.cpp): the copy stream's
// ordering by events, and the stand-in catching each missing order (it
// checks what a GPU would run concurrently).
// With a GPU (suite CudaContextGpu, skipped saying why otherwise): memory,
// a PTX module JIT-compiled by the driver, launches, strided copies, graph
// capture and replay, the copy stream, and out-of-memory as an error.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaContext.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
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

#ifdef QCC_FAKE_CUDA_LIB
/// The stand-in's violations so far (its `fake_cuda_violations`).
long standInViolations() {
  void *h = dlopen(QCC_FAKE_CUDA_LIB, RTLD_NOW | RTLD_NOLOAD);
  auto count = h ? reinterpret_cast<long (*)()>(dlsym(h, "fake_cuda_violations"))
                 : nullptr;
  long n = count ? count() : -1;
  if (h)
    dlclose(h);
  return n;
}

// The copy stream against the compute stream, each way: a read of a copy's
// destination must wait for the copy's event; a copy over a buffer must wait
// for the compute stream's last use of it; a free must follow the host's
// wait. Each missing order is one violation, each present one none.
TEST(CudaStreamsOnTheStandIn, EventsOrderTheCopyStream) {
  setenv("QCC_CUDA_DRIVER", QCC_FAKE_CUDA_LIB, 1);
  std::string why;
  std::shared_ptr<CudaDriver> driver = CudaDriver::load(why);
  unsetenv("QCC_CUDA_DRIVER");
  ASSERT_TRUE(driver) << why;
  CudaContext ctx(driver, 0);
  ASSERT_GE(standInViolations(), 0) << "the stand-in is not loaded";
  const size_t n = 4096;
  auto *pinned = static_cast<unsigned char *>(ctx.allocPinned(n));
  std::memset(pinned, 7, n);
  EXPECT_EQ(ctx.pinnedBytes(), n);
  DevicePtr weight = ctx.alloc(n), out = ctx.alloc(n);
  CudaContext::Event copied = ctx.createEvent(), used = ctx.createEvent();

  // Read after the copy: ordered by its event.
  long before = standInViolations();
  ctx.uploadOnCopyStream(weight, pinned, n, nullptr, copied);
  ctx.streamWaits(copied);
  ctx.copy(out, weight, n);
  std::vector<unsigned char> back(n);
  ctx.download(back.data(), out, n);
  EXPECT_EQ(back[n - 1], 7);
  EXPECT_EQ(standInViolations(), before);
  // ... and without the wait.
  ctx.uploadOnCopyStream(weight, pinned, n, nullptr, copied);
  EXPECT_THROW(ctx.copy(out, weight, n), std::runtime_error);
  EXPECT_EQ(standInViolations(), before + 1);
  ctx.synchronizeAll("test");

  // A copy over a buffer the compute stream read: after its event only.
  ctx.copy(out, weight, n);
  EXPECT_THROW(ctx.uploadOnCopyStream(weight, pinned, n, nullptr, copied),
               std::runtime_error);
  EXPECT_EQ(standInViolations(), before + 2);
  ctx.copy(out, weight, n);
  ctx.recordEvent(used);
  ctx.uploadOnCopyStream(weight, pinned, n, used, copied);
  EXPECT_EQ(standInViolations(), before + 2);

  // A free while the copy may run (the host waited for neither stream); then
  // the wait, and the free.
  ctx.free(weight); // counted, not thrown: a free's result is not useful
  EXPECT_EQ(standInViolations(), before + 3);
  ctx.hostWaits(copied);
  ctx.synchronize("test");
  ctx.free(weight);
  ctx.free(out);
  ctx.freePinned(pinned);
  EXPECT_EQ(ctx.pinnedBytes(), 0u);
  EXPECT_EQ(standInViolations(), before + 3);
  ctx.destroyEvent(copied);
  ctx.destroyEvent(used);
  if (void *h = dlopen(QCC_FAKE_CUDA_LIB, RTLD_NOW | RTLD_NOLOAD)) {
    if (auto said = reinterpret_cast<void (*)(long)>(
            dlsym(h, "fake_cuda_expected_violations")))
      said(3); // its exit line says so
    dlclose(h);
  }
}
#endif

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

  // The copy stream: page-locked memory copied while the compute stream
  // adds one, ordered by events both ways.
  auto *pinned = static_cast<float *>(ctx.allocPinned(n * sizeof(float)));
  for (unsigned i = 0; i < n; ++i)
    pinned[i] = (float)(2 * i);
  auto copied = ctx.createEvent(), used = ctx.createEvent();
  ctx.launch(f, {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, args, "add_one");
  ctx.recordEvent(used);
  ctx.uploadOnCopyStream(d, pinned, n * sizeof(float), used, copied);
  ctx.streamWaits(copied);
  ctx.launch(f, {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, args, "add_one");
  ctx.download(out.data(), d, n * sizeof(float));
  for (unsigned i = 0; i < n; ++i)
    ASSERT_EQ(out[i], (float)(2 * i) + 1) << i;
  ctx.synchronizeAll("test");
  ctx.destroyEvent(copied);
  ctx.destroyEvent(used);
  ctx.freePinned(pinned);
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
