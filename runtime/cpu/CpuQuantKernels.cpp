//===- CpuQuantKernels.cpp - quantize and qlinear on the CPU backend ------===//
//
// The reference rules (runtime/reference/QuantKernels.h), faster: on the fast
// path, symmetric quantize runs them 16 values at a time with AVX-512F where
// the CPU has it, bit for bit; the dense qlinear spreads its elements over
// the pool. Compiled with -ffp-contract=off (runtime/cpu/CMakeLists.txt), as
// the reference.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuQuantKernels.h"

#include "runtime/cpu/CpuChunkPool.h"
#include "runtime/cpu/CpuKernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "runtime/cpu/CpuE4M3.h"
#include "runtime/cpu/X86Intrinsics.h"
#define QCC_HAVE_AVX512_QUANTIZE 1
#endif

using namespace qcc::rt;

namespace {

#ifdef QCC_HAVE_AVX512_QUANTIZE
/// out[i] = quantizeSymmetric(in[i], scales ? scales[i] : scale), 16 values
/// at a time, bit for bit: an IEEE division, roundscale to nearest even
/// (integral and NaN values pass through, as roundHalfEven), the clamp, and
/// NaN quantized as 0.
__attribute__((target("avx512f"))) void
quantizeWithScalesAvx512(const float *in, int64_t n, const float *scales,
                         float scale, int8_t *out) {
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = firstLanes(n - i);
    // Masked-off lanes divide 0 by 1, not by a scale past the end.
    __m512 s = scales ? _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), m,
                                             scales + i)
                      : _mm512_set1_ps(scale);
    __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(m, in + i), s);
    __m512 r = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT |
                                           _MM_FROUND_NO_EXC);
    r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),
                           _mm512_setzero_ps());
    _mm512_mask_cvtepi32_storeu_epi8(out + i, m, _mm512_cvtps_epi32(r));
  }
}

/// The symmetric rule of quantizeGroup with AVX-512F, 16 values at a time,
/// bit for bit (Int8GemmTest checks NaN, infinities, ties and huge values):
/// the same abs-max (max_ps returns its second operand when one is NaN, as
/// the scalar comparison skips NaN), the scalar symmetricScale, an IEEE
/// division, roundscale to nearest even (integral and NaN values pass
/// through, as roundHalfEven), the clamp, and NaN quantized as 0.
__attribute__((target("avx512f"))) void
quantizeSymmetricAvx512(const float *in, int64_t n, bool isStatic,
                        float staticScale, int8_t *out, float &scale) {
  if (isStatic) {
    scale = staticScale;
  } else {
    __m512 mx = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
      __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(firstLanes(n - i), in + i));
      mx = _mm512_max_ps(v, mx);
    }
    scale = qcc::numerics::symmetricScale(_mm512_reduce_max_ps(mx));
  }
  quantizeWithScalesAvx512(in, n, nullptr, scale, out);
}

bool haveAvx512Quantize() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has && cpuKernelPath() == CpuKernelPath::Fast;
}
#endif

} // namespace

void qcc::rt::quantizeSymmetricRow(const float *in, int64_t n,
                                   const float *scales, float scale,
                                   int8_t *out) {
#ifdef QCC_HAVE_AVX512_QUANTIZE
  if (haveAvx512Quantize())
    return quantizeWithScalesAvx512(in, n, scales, scale, out);
#endif
  for (int64_t i = 0; i < n; ++i)
    out[i] = quantizeSymmetric(in[i], scales ? scales[i] : scale);
}

std::vector<Tensor> qcc::rt::quantizeKernel(const Attrs &attrs,
                                            const Operands &ops) {
  std::string to = attrs.s("to", "i8");
  if (to != "i8" && to != "f32") // FP8: the reference's rule
    return reference::quantizeKernel(attrs, ops);
#ifdef QCC_HAVE_AVX512_QUANTIZE
  if (haveAvx512Quantize())
    return reference::quantizeKernel(attrs, ops, quantizeSymmetricAvx512);
#endif
  return reference::quantizeKernel(attrs, ops);
}

namespace {

#ifdef QCC_HAVE_AVX512_QUANTIZE
/// acc[m * N + n] for weight rows [n0, n1) and M input rows (M <= 8):
/// 16 weight codes decoded at a time (loadE4M3x16, exact) and multiplied into
/// 16 lanes per input row, the lanes then added, then the K % 16 tail.
__attribute__((target("avx512f"))) void
fp8RowsAvx512(const float *x, int64_t M, const uint8_t *wc, int64_t n0,
              int64_t n1, int64_t N, int64_t K, float *acc) {
  const int64_t K16 = K - K % 16;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t *w = wc + n * K;
    __m512 s[8];
    for (int64_t m = 0; m < M; ++m)
      s[m] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K16; k += 16) {
      __m512 wv = loadE4M3x16(w + k);
      for (int64_t m = 0; m < M; ++m)
        s[m] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + m * K + k), s[m]);
    }
    for (int64_t m = 0; m < M; ++m) {
      float sum = _mm512_reduce_add_ps(s[m]);
      for (int64_t k = K16; k < K; ++k)
        sum += e4m3Values()[w[k]] * x[m * K + k];
      acc[m * N + n] = sum;
    }
  }
}
#endif

/// FP8 qlinear on the fast path: the E4M3 codes decoded to f32 (exact), the
/// products summed in f32 in the fast path's own order, then the epilogue.
/// Decode-sized calls (up to 8 rows, AVX-512) read each weight code once,
/// decoded in registers; larger ones decode the weight by a table and run
/// the float GEMM (sgemm). The reference sums in ascending k; they differ by
/// summation order only.
std::vector<Tensor> fp8QLinear(const Tensor &w, const QLinearEpilogue &e) {
  const float *decode = e4m3Values();
  const int64_t M = e.M, N = e.N, K = e.K;
  std::vector<float> x((size_t)(M * K)), acc((size_t)(M * N));
  const auto *xc = reinterpret_cast<const uint8_t *>(e.x);
  const auto *wc = static_cast<const uint8_t *>(w.raw());
  for (int64_t i = 0; i < M * K; ++i)
    x[i] = decode[xc[i]];
  bool gemv = false;
#ifdef QCC_HAVE_AVX512_QUANTIZE
  gemv = M <= 8 && haveAvx512Quantize();
  if (gemv) {
    // About four chunks of rows per thread where the work pays for it.
    const int64_t work = M * N * K,
                  chunks = chunkPoolFits(M, work) ? 4 * cpuThreads() : 1,
                  per = std::max<int64_t>(1, (N + chunks - 1) / chunks);
    parallelChunks((N + per - 1) / per, [&](int64_t c) {
      fp8RowsAvx512(x.data(), M, wc, c * per, std::min(N, (c + 1) * per), N,
                    K, acc.data());
    });
  }
#endif
  if (!gemv) {
    std::vector<float> wf((size_t)(N * K));
#pragma omp parallel for schedule(static) if (N * K >= (1 << 16))
    for (int64_t i = 0; i < N * K; ++i)
      wf[i] = decode[wc[i]];
    sgemm(false, true, M, N, K, 1.0f, x.data(), K, wf.data(), K, 0.0f,
          acc.data(), N);
  }
  Tensor r = Tensor::uninitialized(DType::F32, e.resultShape); // all set
  float *Y = r.data<float>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      Y[m * N + n] = e.fp8Result(acc[m * N + n], m, n, outlierSum(e, m, n));
  return {std::move(r)};
}

} // namespace

std::vector<Tensor> qcc::rt::qlinearKernel(const Attrs &attrs,
                                           const Operands &ops) {
  if (cpuKernelPath() == CpuKernelPath::Reference)
    return reference::qlinearKernel(attrs, ops);
  if (ops.size() > 0 && ops[0] && ops[0]->dtype() == DType::F8E4M3) {
    std::pair<const Tensor *, QLinearEpilogue> fp8 = checkQLinear(attrs, ops);
    return fp8QLinear(*fp8.first, fp8.second);
  }
  // (No structured binding: clang 14 cannot capture one in an OpenMP
  // region or a lambda.)
  std::pair<const Tensor *, QLinearEpilogue> checked = checkQLinear(attrs, ops);
  const Tensor *w = checked.first;
  const QLinearEpilogue &e = checked.second;
  const int64_t M = e.M, N = e.N, K = e.K;
  Tensor r(DType::F32, e.resultShape);
  const int8_t *W = w->data<int8_t>();
  float *Y = r.data<float>();
#pragma omp parallel for collapse(2) schedule(static) if (M * N * K > kQLinearParallelWork)
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      Y[m * N + n] = qlinearElement(e, W, m, n);
  return {std::move(r)};
}
