// gemv_bench.cu - the decode GEMVs (gemv_i8 / gemv_f16, gemm_core.cuh's
// gemv_mainloop) on a GPU, for several GemvConfig choices, at issue 12's 1B
// LLaMA shapes. Needs a GPU and nvcc, no LLVM (scripts/gpu_bundle.sh builds
// it here and run.sh runs it there):
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I<dir holding qcc/ -> codegen/kernels> \
//        bench/gemv_bench.cu -o gemv_bench && ./gemv_bench
//
// 1. Correctness of every config: int32 outputs (StoreI32) equal the CPU's
//    exactly, f16 within 1e-3 relative (f32 accumulation of f16 products in
//    a different order), at a K with a partial last chunk and an N that is
//    not a multiple of the block, with M = 1, 8 and 20 (M > MaxM: row
//    chunks over grid.y, as the emitter's wrapper launches them).
// 2. Speed (M = 1, 8, 32): each (config, shape, M) as a CUDA graph of 64 launches over
//    distinct weights (256 MB and more, so L2 holds none of it), median of 7
//    replays; and one whole decode step's GEMVs (16 layers of q, k, v, o,
//    gate, up, down plus the LM head) in one graph. GB/s counts weight bytes
//    only, against a 1 GiB device-to-device copy measured in the same run.
// 3. The f16 GEMV over f32 activations (rounded to f16 as they are loaded,
//    what the emitter's decode GEMV of an f32 linear does instead of a cast
//    launch): bit for bit the f16 GEMV over the activations rounded first.
// 4. Launch modes of one decode step's GEMVs (graph of 113 launches): plain
//    stream order; programmatic dependent launch (every kernel starts with
//    qcc::wait_for_prior_grids, as the emitted ones do); and PDL with each
//    block's weight rows prefetched into L2 before the wait
//    (gemv_prefetch_weights).
// Every timing line is also printed as CSV ("tune,..."), the raw material
// of a tuning table.
#include "qcc/gemm_f16.cuh"
#include "qcc/gemv_i8.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t err_ = (x);                                                    \
    if (err_ != cudaSuccess) {                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,           \
                   cudaGetErrorString(err_));                                  \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)

// Row chunk blockIdx.y of M rows, as the emitter's wrapper launches a decode
// GEMV (codegen/Emitter.cpp): its first row and how many rows it has.
template <class Cfg> struct RowChunk {
  int m0, rows;
  __device__ RowChunk(int M)
      : m0(blockIdx.y * Cfg::kMaxM),
        rows(M - m0 < Cfg::kMaxM ? M - m0 : Cfg::kMaxM) {}
};

// How a kernel starts: plain (kPlain: the wait is a no-op when launched
// without the attribute), waiting for the grids before it (kPdl, launched
// with programmatic stream serialization), or prefetching its weights into
// L2 first (kPdlPrefetch).
enum LaunchMode { kPlain, kPdl, kPdlPrefetch };
const char *const kModeNames[] = {"plain", "pdl", "pdl+prefetch"};
template <class Cfg, int Mode, class Element>
__device__ void enter(const Element *w, int N, int K) {
  if (Mode == kPdlPrefetch)
    qcc::gemv_prefetch_weights<Cfg>(w, N, K);
  qcc::wait_for_prior_grids();
}

// The epilogues the artifacts use for these GEMVs (per-token x per-channel
// dequantization into f32; f16 straight to f32), and StoreI32 for the exact
// check.
template <class Cfg, int Mode = kPlain>
__global__ void __launch_bounds__(Cfg::kThreads)
    gemvI8Dequant(const qcc::int8_t *x, const qcc::int8_t *w, const float *xs,
                  const float *ws, const qcc::int32_t *wsum, float *y, int M,
                  int N, int K) {
  enter<Cfg, Mode>(w, N, K);
  RowChunk<Cfg> r(M);
  qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::StoreF32> epi(
      qcc::DequantPerTokenPerChannel{xs + r.m0, 1, nullptr, 0, ws, wsum},
      qcc::StoreF32{y + (long long)r.m0 * N, N});
  qcc::GemmParams<qcc::int8_t> p = {x + (long long)r.m0 * K, w, r.rows, N, K};
  qcc::gemv_i8<Cfg>(p, epi);
}
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads)
    gemvI8Exact(const qcc::int8_t *x, const qcc::int8_t *w, qcc::int32_t *y,
                int M, int N, int K) {
  RowChunk<Cfg> r(M);
  qcc::Chain<qcc::StoreI32> epi(qcc::StoreI32{y + (long long)r.m0 * N, N});
  qcc::GemmParams<qcc::int8_t> p = {x + (long long)r.m0 * K, w, r.rows, N, K};
  qcc::gemv_i8<Cfg>(p, epi);
}
// AElement __half: f16 activations; float: f32 ones rounded on load.
template <class Cfg, int Mode = kPlain, class AElement = __half>
__global__ void __launch_bounds__(Cfg::kThreads)
    gemvF16(const AElement *x, const __half *w, float *y, int M, int N, int K) {
  enter<Cfg, Mode>(w, N, K);
  RowChunk<Cfg> r(M);
  qcc::Chain<qcc::StoreF32> epi(qcc::StoreF32{y + (long long)r.m0 * N, N});
  qcc::GemmParams<__half, AElement> p = {x + (long long)r.m0 * K, w, r.rows, N, K};
  qcc::gemv_f16<Cfg>(p, epi);
}

// Launches `kernel` on `st`, with programmatic stream serialization unless
// `mode` is kPlain.
template <class... Params, class... Args>
void launchMode(int mode, void (*kernel)(Params...), dim3 grid, unsigned threads,
                cudaStream_t st, Args... args) {
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(threads);
  config.stream = st;
  config.attrs = mode == kPlain ? nullptr : &attr;
  config.numAttrs = mode == kPlain ? 0 : 1;
  CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

struct Shape {
  const char *name;
  int N, K;
};
// One LLaMA layer of issue 12's 1B model (width 2048, GQA 32/8 heads of 64,
// SwiGLU 5632) and its LM head.
const Shape kLayer[] = {{"q", 2048, 2048},    {"k", 512, 2048},
                        {"v", 512, 2048},     {"o", 2048, 2048},
                        {"gate", 5632, 2048}, {"up", 5632, 2048},
                        {"down", 2048, 5632}};
const Shape kHead = {"lm_head", 32000, 2048};
// The other benchmark models' GEMV shapes, timed for the tuning CSV only:
// SmolLM2-135M (576 wide, 9 / 3 heads of 64, FFN 1536, vocab 49152) and
// Llama-3.2-1B (FFN 8192, vocab 128256; q, k, o as above).
const Shape kTuneOnly[] = {{"smol_q", 576, 576},       {"smol_kv", 192, 576},
                           {"smol_gate", 1536, 576},   {"smol_down", 576, 1536},
                           {"smol_head", 49152, 576},  {"l32_gate", 8192, 2048},
                           {"l32_down", 2048, 8192},   {"l32_head", 128256, 2048}};

// The largest K and N of any shape above (buffers are sized for them).
constexpr int kMaxK = 8192, kMaxN = 128256;

template <class Cfg> dim3 gridOf(int M, int N) {
  return dim3((N + Cfg::kBlockN - 1) / Cfg::kBlockN,
              (M + Cfg::kMaxM - 1) / Cfg::kMaxM);
}

// Median time (ms) of 7 replays of a graph of `launch(i)` for i < count.
float timeGraph(cudaStream_t st, int count, const std::function<void(int)> &launch) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < count; ++i)
    launch(i);
  CHECK(cudaStreamEndCapture(st, &g));
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  CHECK(cudaGraphLaunch(ge, st)); // warm-up
  CHECK(cudaStreamSynchronize(st));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < 7; ++r) {
    CHECK(cudaEventRecord(a, st));
    CHECK(cudaGraphLaunch(ge, st));
    CHECK(cudaEventRecord(b, st));
    CHECK(cudaEventSynchronize(b));
    float t;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return ms[3];
}

struct Bufs {
  char *w = nullptr; // weights, random
  size_t wBytes = 0;
  void *x = nullptr; // activations, random
  float *xs = nullptr, *ws = nullptr, *y = nullptr;
  qcc::int32_t *wsum = nullptr;
};

int failures = 0;

template <class Cfg> void checkI8(const char *name, cudaStream_t st) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(-127, 127);
  for (int M : {1, 8, 20}) {
    const int N = 1000, K = 2064; // N % kBlockN != 0; K ends in a partial chunk
    std::vector<int8_t> x(size_t(M) * K), w(size_t(N) * K);
    for (auto &v : x) v = int8_t(d(rng));
    for (auto &v : w) v = int8_t(d(rng));
    int8_t *dx, *dw;
    qcc::int32_t *dy;
    CHECK(cudaMalloc(&dx, x.size()));
    CHECK(cudaMalloc(&dw, w.size()));
    CHECK(cudaMalloc(&dy, size_t(M) * N * 4));
    CHECK(cudaMemcpy(dx, x.data(), x.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dy, 0x7f, size_t(M) * N * 4)); // poison
    gemvI8Exact<Cfg><<<gridOf<Cfg>(M, N), Cfg::kThreads, 0, st>>>(dx, dw, dy, M, N, K);
    CHECK(cudaGetLastError());
    std::vector<qcc::int32_t> y(size_t(M) * N);
    CHECK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        int32_t ref = 0;
        for (int k = 0; k < K; ++k)
          ref += int32_t(x[size_t(m) * K + k]) * w[size_t(n) * K + k];
        bad += ref != y[size_t(m) * N + n];
      }
    std::printf("check %-28s M=%d: %s (%d of %d wrong)\n", name, M,
                bad ? "FAIL" : "exact", bad, M * N);
    failures += bad != 0;
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dw));
    CHECK(cudaFree(dy));
  }
}

template <class Cfg> void checkF16(const char *name, cudaStream_t st) {
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.f, 1.f);
  for (int M : {1, 8, 20}) {
    const int N = 1000, K = 2056;
    std::vector<__half> x(size_t(M) * K), w(size_t(N) * K);
    for (auto &v : x) v = __float2half(d(rng));
    for (auto &v : w) v = __float2half(d(rng) * 0.05f);
    __half *dx, *dw;
    float *dy;
    CHECK(cudaMalloc(&dx, x.size() * 2));
    CHECK(cudaMalloc(&dw, w.size() * 2));
    CHECK(cudaMalloc(&dy, size_t(M) * N * 4));
    CHECK(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dy, 0xff, size_t(M) * N * 4)); // NaN poison
    gemvF16<Cfg><<<gridOf<Cfg>(M, N), Cfg::kThreads, 0, st>>>(dx, dw, dy, M, N, K);
    CHECK(cudaGetLastError());
    std::vector<float> y(size_t(M) * N);
    CHECK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    bool nan = false;
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double ref = 0;
        for (int k = 0; k < K; ++k)
          ref += double(__half2float(x[size_t(m) * K + k])) *
                 __half2float(w[size_t(n) * K + k]);
        double got = y[size_t(m) * N + n];
        nan |= std::isnan(got);
        num += (got - ref) * (got - ref);
        den += ref * ref;
      }
    double rel = std::sqrt(num / den);
    bool ok = !nan && rel < 1e-3;
    std::printf("check %-28s M=%d: %s (rel err %.2e)\n", name, M,
                ok ? "ok" : "FAIL", rel);
    failures += !ok;
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dw));
    CHECK(cudaFree(dy));
  }
}

// f32 activations rounded on load == f16 activations rounded on the host
// (round to nearest even both), bit for bit, with PDL and the prefetch on.
template <class Cfg> void checkF16FromF32(const char *name, cudaStream_t st) {
  std::mt19937 rng(13);
  std::normal_distribution<float> d(0.f, 1.f);
  for (int M : {1, 8, 20}) {
    const int N = 1000, K = 2056;
    std::vector<float> x(size_t(M) * K);
    std::vector<__half> xh(x.size()), w(size_t(N) * K);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = d(rng);
      xh[i] = __float2half_rn(x[i]);
    }
    for (auto &v : w) v = __float2half(d(rng) * 0.05f);
    float *dx, *dy, *dyh;
    __half *dxh, *dw;
    CHECK(cudaMalloc(&dx, x.size() * 4));
    CHECK(cudaMalloc(&dxh, x.size() * 2));
    CHECK(cudaMalloc(&dw, w.size() * 2));
    CHECK(cudaMalloc(&dy, size_t(M) * N * 4));
    CHECK(cudaMalloc(&dyh, size_t(M) * N * 4));
    CHECK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dxh, xh.data(), xh.size() * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dy, 0xff, size_t(M) * N * 4)); // NaN poison
    CHECK(cudaMemset(dyh, 0xff, size_t(M) * N * 4));
    launchMode(kPdlPrefetch, gemvF16<Cfg, kPdlPrefetch, float>, gridOf<Cfg>(M, N),
               Cfg::kThreads, st, dx, dw, dy, M, N, K);
    launchMode(kPdl, gemvF16<Cfg, kPdl, __half>, gridOf<Cfg>(M, N), Cfg::kThreads,
               st, dxh, dw, dyh, M, N, K);
    CHECK(cudaStreamSynchronize(st));
    CHECK(cudaGetLastError());
    std::vector<float> y(size_t(M) * N), yh(y.size());
    CHECK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(yh.data(), dyh, yh.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (size_t i = 0; i < y.size(); ++i)
      bad += std::memcmp(&y[i], &yh[i], 4) != 0 || std::isnan(y[i]);
    std::printf("check %-28s M=%d: %s (%d of %d differ from the f16 GEMV)\n",
                name, M, bad ? "FAIL" : "exact", bad, M * N);
    failures += bad != 0;
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dxh));
    CHECK(cudaFree(dw));
    CHECK(cudaFree(dy));
    CHECK(cudaFree(dyh));
  }
}

// Time config Cfg on every shape and on one decode step; f16 when F16.
template <class Cfg, bool F16>
void timeConfig(const char *name, Bufs &b, cudaStream_t st, double copyGBs) {
  const int elem = F16 ? 2 : 1;
  auto launch = [&](int M, int N, int K, size_t off) {
    if constexpr (F16)
      gemvF16<Cfg><<<gridOf<Cfg>(M, N), Cfg::kThreads, 0, st>>>(
          (const __half *)b.x, (const __half *)(b.w + off), b.y, M, N, K);
    else
      gemvI8Dequant<Cfg><<<gridOf<Cfg>(M, N), Cfg::kThreads, 0, st>>>(
          (const qcc::int8_t *)b.x, (const qcc::int8_t *)(b.w + off), b.xs,
          b.ws, b.wsum, b.y, M, N, K);
  };
  for (int M : {1, 8, 32}) {
    std::string line;
    std::vector<Shape> shapes(std::begin(kLayer), std::end(kLayer));
    shapes.push_back(kHead);
    shapes.insert(shapes.end(), std::begin(kTuneOnly), std::end(kTuneOnly));
    for (const Shape &s : shapes) {
      if (s.name[0] == 'v' || s.name[0] == 'u') // same shapes as k, gate
        continue;
      const bool tuneOnly = &s - shapes.data() > (int)std::size(kLayer);
      size_t bytes = size_t(s.N) * s.K * elem;
      int count = int(std::min<size_t>(64, b.wBytes / bytes));
      float ms = timeGraph(st, count, [&](int i) { launch(M, s.N, s.K, bytes * i); });
      double us = ms * 1e3 / count, gbs = bytes / (us * 1e3);
      char buf[96];
      std::snprintf(buf, sizeof buf, " %s %5.1fus %4.0f%%", s.name, us,
                    100 * gbs / copyGBs);
      if (!tuneOnly)
        line += buf;
      std::printf("tune,%s,%s,%d,%s,%d,%d,%.2f\n", F16 ? "f16" : "int8", name,
                  M, s.name, s.N, s.K, us);
    }
    // One decode step: 16 layers' GEMVs over distinct weights, then the head.
    size_t layerBytes = 0;
    for (const Shape &s : kLayer)
      layerBytes += size_t(s.N) * s.K * elem;
    size_t headBytes = size_t(kHead.N) * kHead.K * elem;
    size_t stepBytes = 16 * layerBytes + headBytes;
    float ms = timeGraph(st, 1, [&](int) {
      size_t off = 0;
      for (int l = 0; l < 16; ++l)
        for (const Shape &s : kLayer) {
          launch(M, s.N, s.K, off);
          off += size_t(s.N) * s.K * elem;
        }
      launch(M, kHead.N, kHead.K, off);
    });
    double gbs = stepBytes / (ms * 1e6);
    std::printf("%-7s %-26s M=%d step %6.3f ms %6.0f GB/s %3.0f%% |%s\n",
                F16 ? "f16" : "int8", name, M, ms, gbs, 100 * gbs / copyGBs,
                line.c_str());
    std::printf("tune,%s,%s,%d,step,0,0,%.2f\n", F16 ? "f16" : "int8", name,
                M, ms * 1e3);
  }
}

// One decode step's 113 GEMVs in one graph, in each launch mode, config Cfg
// (F16: f16 weights over f32 activations, as an f32 model's decode runs).
template <class Cfg, bool F16>
void timeModes(const char *name, Bufs &b, cudaStream_t st, double copyGBs, int M) {
  const int elem = F16 ? 2 : 1;
  size_t layerBytes = 0;
  for (const Shape &s : kLayer)
    layerBytes += size_t(s.N) * s.K * elem;
  size_t stepBytes = 16 * layerBytes + size_t(kHead.N) * kHead.K * elem;
  std::string line;
  for (int mode : {kPlain, kPdl, kPdlPrefetch}) {
    auto launch = [&](int N, int K, size_t off) {
      dim3 g = gridOf<Cfg>(M, N);
      if constexpr (F16) {
        auto k = mode == kPlain ? gemvF16<Cfg, kPlain, float>
                 : mode == kPdl ? gemvF16<Cfg, kPdl, float>
                                : gemvF16<Cfg, kPdlPrefetch, float>;
        launchMode(mode, k, g, Cfg::kThreads, st, (const float *)b.x,
                   (const __half *)(b.w + off), b.y, M, N, K);
      } else {
        auto k = mode == kPlain ? gemvI8Dequant<Cfg, kPlain>
                 : mode == kPdl ? gemvI8Dequant<Cfg, kPdl>
                                : gemvI8Dequant<Cfg, kPdlPrefetch>;
        launchMode(mode, k, g, Cfg::kThreads, st, (const qcc::int8_t *)b.x,
                   (const qcc::int8_t *)(b.w + off), (const float *)b.xs,
                   (const float *)b.ws, (const qcc::int32_t *)b.wsum, b.y, M, N, K);
      }
    };
    float ms = timeGraph(st, 1, [&](int) {
      size_t off = 0;
      for (int l = 0; l < 16; ++l)
        for (const Shape &s : kLayer) {
          launch(s.N, s.K, off);
          off += size_t(s.N) * s.K * elem;
        }
      launch(kHead.N, kHead.K, off);
    });
    double gbs = stepBytes / (ms * 1e6);
    char buf[96];
    std::snprintf(buf, sizeof buf, " %s %6.3f ms %3.0f%%", kModeNames[mode], ms,
                  100 * gbs / copyGBs);
    line += buf;
    std::printf("tune,%s-step-%s,%s,%d,step,0,0,%.2f\n", F16 ? "f16xf32" : "int8",
                kModeNames[mode], name, M, ms * 1e3);
  }
  std::printf("modes %-7s %-14s M=%-2d |%s\n", F16 ? "f16xf32" : "int8", name, M,
              line.c_str());
}

#define I8(MaxM, W, C, S) qcc::GemvI8Config<MaxM, W, C, S>
#define F16(MaxM, W, C, S) qcc::GemvF16Config<MaxM, W, C, S>
#define NAME(MaxM, W, C, S) "<" #MaxM "," #W "," #C "," #S ">"

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("gemv_bench: %s, %d SMs, L2 %d MB\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20);
  cudaStream_t st;
  CHECK(cudaStreamCreate(&st));

#define CHECK_I8(MaxM, W, C, S) checkI8<I8(MaxM, W, C, S)>("int8 " NAME(MaxM, W, C, S), st)
#define CHECK_F16(MaxM, W, C, S) checkF16<F16(MaxM, W, C, S)>("f16 " NAME(MaxM, W, C, S), st)
  CHECK_I8(8, 4, 2, 1);
  CHECK_I8(8, 4, 2, 2);
  CHECK_I8(8, 4, 2, 4);
  CHECK_I8(8, 4, 1, 4);
  CHECK_I8(8, 8, 1, 4);
  CHECK_I8(8, 4, 4, 2);
  CHECK_I8(8, 4, 2, 8);
  CHECK_I8(8, 4, 4, 1);
  CHECK_I8(16, 4, 2, 2);
  CHECK_I8(32, 4, 2, 1);
  CHECK_I8(32, 4, 1, 2);
  CHECK_F16(8, 4, 2, 1);
  CHECK_F16(8, 4, 2, 4);
  CHECK_F16(8, 4, 1, 4);
  checkF16FromF32<F16(8, 4, 1, 4)>("f16 x f32 " NAME(8, 4, 1, 4), st);
  checkF16FromF32<F16(8, 4, 2, 1)>("f16 x f32 " NAME(8, 4, 2, 1), st);

  // The copy ceiling: 1 GiB device to device, bytes read + written.
  Bufs b;
  b.wBytes = size_t(2) << 30; // covers one f16 decode step (1.8 GB)
  CHECK(cudaMalloc(&b.w, b.wBytes));
  {
    std::vector<unsigned> host(1 << 20);
    std::mt19937 rng(3);
    for (auto &v : host) v = rng() & 0x3f3f3f3fu; // small f16s / int8s, never zero
    for (size_t off = 0; off < b.wBytes; off += host.size() * 4)
      CHECK(cudaMemcpy(b.w + off, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
  }
  char *c0;
  const size_t copyBytes = size_t(1) << 30;
  CHECK(cudaMalloc(&c0, copyBytes));
  float copyMs = timeGraph(st, 4, [&](int i) {
    CHECK(cudaMemcpyAsync(c0, b.w + (i % 2) * copyBytes / 2, copyBytes, cudaMemcpyDeviceToDevice, st));
  });
  double copyGBs = 4.0 * 2 * copyBytes / (copyMs * 1e6);
  std::printf("copy (1 GiB device to device, read + write): %.0f GB/s\n", copyGBs);
  CHECK(cudaFree(c0));

  CHECK(cudaMalloc(&b.x, 32 * kMaxK * 4)); // f32 activations for f16 x f32
  {
    // Never zeros: as f32 0.63, as f16 pairs 1.78, as int8 bytes 33 and 63.
    std::vector<unsigned> xv(32 * kMaxK, 0x3f213f21u);
    CHECK(cudaMemcpy(b.x, xv.data(), xv.size() * 4, cudaMemcpyHostToDevice));
  }
  CHECK(cudaMalloc(&b.xs, 32 * 4));
  CHECK(cudaMalloc(&b.ws, kMaxN * 4));
  CHECK(cudaMalloc(&b.wsum, kMaxN * 4));
  CHECK(cudaMalloc(&b.y, size_t(32) * kMaxN * 4));
  CHECK(cudaMemset(b.xs, 0, 32 * 4));
  CHECK(cudaMemset(b.ws, 0, kMaxN * 4));
  CHECK(cudaMemset(b.wsum, 0, kMaxN * 4));

  std::printf("per shape: time per launch and %% of the copy bandwidth (weight bytes only)\n");
#define TIME_I8(MaxM, W, C, S) timeConfig<I8(MaxM, W, C, S), false>(NAME(MaxM, W, C, S), b, st, copyGBs)
#define TIME_F16(MaxM, W, C, S) timeConfig<F16(MaxM, W, C, S), true>(NAME(MaxM, W, C, S), b, st, copyGBs)
  TIME_I8(8, 4, 2, 1);
  TIME_I8(8, 4, 2, 2);
  TIME_I8(8, 4, 2, 4);
  TIME_I8(8, 4, 1, 4);
  TIME_I8(8, 8, 1, 4);
  TIME_I8(8, 4, 4, 2);
  TIME_I8(8, 4, 2, 8);
  TIME_I8(8, 4, 4, 1);
  TIME_I8(16, 4, 2, 2);
  TIME_I8(32, 4, 2, 1);
  TIME_I8(32, 4, 1, 2);
  TIME_F16(8, 4, 2, 1);
  TIME_F16(8, 4, 2, 4);
  TIME_F16(8, 4, 1, 4);
  std::printf("launch modes: one decode step's 113 GEMVs (the emitter's configs by rows)\n");
  for (int M : {1, 8})
    timeModes<I8(8, 4, 1, 4), false>(NAME(8, 4, 1, 4), b, st, copyGBs, M);
  timeModes<I8(8, 4, 2, 1), false>(NAME(8, 4, 2, 1), b, st, copyGBs, 32);
  for (int M : {1, 8})
    timeModes<F16(8, 4, 1, 4), true>(NAME(8, 4, 1, 4), b, st, copyGBs, M);
  timeModes<F16(8, 4, 2, 1), true>(NAME(8, 4, 2, 1), b, st, copyGBs, 32);
  std::printf("gemv_bench: %d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
