//===- CpuPeaks.cpp - this CPU's roofline, measured -----------------------===//
#include "runtime/cpu/CpuPeaks.h"

#include "runtime/cpu/CpuInt8Gemm.h"
#include "runtime/cpu/CpuKernels.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

using namespace qcc::rt;

namespace {

using Clock = std::chrono::steady_clock;

/// The best of `reps` timings of `fn`, in seconds.
template <class F> double bestOf(int reps, F &&fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    fn();
    best = std::min(best,
                    std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

/// STREAM-like copy (a = b: 8 bytes per element) and triad (a = b + s c:
/// 12 bytes), arrays far larger than any cache; the better of the two.
double measureBandwidth() {
  const int64_t n = int64_t(1) << 24; // 64 MiB per array
  std::vector<float> a(n), b(n), c(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    a[i] = 0.0f, b[i] = 1.0f, c[i] = 2.0f;
  float *pa = a.data(), *pb = b.data(), *pc = c.data();
  double copy = bestOf(4, [&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      pa[i] = pb[i];
  });
  double triad = bestOf(4, [&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      pa[i] = pb[i] + 3.0f * pc[i];
  });
  return std::max(8.0 * n / copy, 12.0 * n / triad);
}

/// The CPU backend's sgemm (OpenBLAS over the process's pool) at 1024^3.
double measureF32() {
  const int n = 1024;
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n);
  double secs = bestOf(3, [&] {
    sgemm(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
          c.data(), n);
  });
  return 2.0 * n * n * n / secs;
}

/// The CPU qlinear's int8 GEMM (runtime/cpu/CpuInt8Gemm.h, on the path the
/// kernel knob selects: packed for VNNI, else portable): 128 rows times a
/// 1024 x 1024 weight (1 MiB, cache-resident on most CPUs), so that it
/// measures compute, not memory.
double measureI8() {
  const int64_t m = 128, n = 1024, k = 1024;
  std::vector<int8_t> x(m * k), w(n * k);
  for (int64_t i = 0; i < m * k; ++i)
    x[i] = (int8_t)(i % 7 - 3);
  for (int64_t i = 0; i < n * k; ++i)
    w[i] = (int8_t)(i % 5 - 2);
  const std::optional<PackedI8Weight> packed =
      packForPath(w.data(), n, k, cpuKernelPath());
  std::vector<int32_t> c(m * n);
  double secs = bestOf(5, [&] {
    i8Gemm(x.data(), m, w.data(), packed ? &*packed : nullptr, n, k,
           c.data());
  });
  volatile int32_t sink = c[0];
  (void)sink;
  return 2.0 * m * n * k / secs;
}

} // namespace

const Peaks &qcc::rt::cpuPeaks() {
  static const Peaks peaks = [] {
    Peaks p;
    p.name = "CPU";
    p.bandwidth = measureBandwidth();
    p.i8 = measureI8();
    p.f32 = measureF32();
    p.f16 = p.f32; // the CPU backend computes f16 / bf16 in f32
    p.source = "measured here (copy/triad, sgemm, packed int8 GEMM)";
    return p;
  }();
  return peaks;
}

