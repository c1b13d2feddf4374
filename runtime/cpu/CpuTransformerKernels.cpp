//===- CpuTransformerKernels.cpp - the transformer ops, fast --------------===//
//
// The CPU backend's linear, layer_norm, rms_norm, gelu, silu, softmax,
// attention and moe where the profile shows time: they thread and vectorize
// (the fast and portable paths), with the reference's operand checks and
// per-row formulas (runtime/reference/ReferenceInternal.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuKernelsInternal.h"

#include "runtime/cpu/CpuF32Gemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "runtime/cpu/X86Intrinsics.h"
#define QCC_HAVE_AVX512_ATTENTION 1
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

using namespace qcc::rt;
using namespace qcc::rt::cpukernels;

namespace qcc::rt::cpukernels {

/// GELU (exact form) over n floats, in place, with the rational erf:
/// compiled for AVX-512 and AVX2 besides the baseline (the loop vectorizes;
/// the libm's erff does not), picked at load by the CPU.
__attribute__((target_clones("avx512f", "avx2", "default"))) void
geluRationalInPlace(float *v, int64_t n, int64_t ld, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    float *row = v + r * ld;
    for (int64_t i = 0; i < n; ++i)
      row[i] = qcc::numerics::geluErfWith(row[i], qcc::numerics::RationalErf());
  }
}

std::vector<Tensor> linearK(const Operands &ops, const LinearEpilogue &epi,
                            const PackedF32Weight *packed) {
  if (cpuKernelPath() == CpuKernelPath::Reference)
    return reference::linear(ops, epi);
  LinearArgs a = checkLinear(ops, epi);
  const Tensor &x = a.x, *bias = a.bias;
  const int64_t M = a.M, N = a.N, K = a.K;
  Tensor r = std::move(a.out);
  float *y = r.data<float>();

  // Fast: bias and the epilogue in one pass over each block of the output
  // as its thread finishes it (the kernel plan's GEMM + epilogue region).
  const float *b = bias ? bias->data<float>() : nullptr;
  auto epilogue = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    if (b)
      for (int64_t m = m0; m < m1; ++m)
        for (int64_t n = n0; n < n1; ++n)
          y[m * N + n] += b[n];
    applyLinearEpilogue(epi, y, N, m0, m1 - m0, n0, n1 - n0);
  };
  if (packed && packed->n == N && packed->k == K) {
    f32GemmThen(x.data<float>(), K, M, *packed, y, N, epilogue);
    return {std::move(r)};
  }
  // A weight the session did not pack (computed at run time, e.g. widened
  // from f16): packed here, so that every linear runs the same kernel and a
  // row's sums do not depend on M (BLAS picks its blocking by shape; batch
  // invariance, docs/SERVING.md). Without AVX-512, BLAS.
  if (std::optional<PackedF32Weight> p = packLinearWeight(a.w.data<float>(), N, K))
    f32GemmThen(x.data<float>(), K, M, *p, y, N, epilogue);
  else
    sgemmThen(false, true, M, N, K, 1.0f, x.data<float>(), K,
              a.w.data<float>(), K, 0.0f, y, N, epilogue);
  return {std::move(r)};
}

/// layer_norm on the fast path: rows spread over the pool when large, each
/// row's sums in vector lanes (double sums in another order than the
/// reference's), the same formula per element.
std::vector<Tensor> layerNormFast(const Attrs &attrs, const Operands &ops) {
  NormArgs a = checkNorm(attrs, ops, true);
  const int64_t D = a.D;
  bool threaded = a.rows > 1 && a.rows * D >= (1 << 20);
#pragma omp parallel for schedule(static) if (threaded)
  for (int64_t row = 0; row < a.rows; ++row) {
    const float *v = a.in + row * D;
    double mean = 0, var = 0;
#pragma omp simd reduction(+ : mean)
    for (int64_t d = 0; d < D; ++d)
      mean += v[d];
    mean /= (double)D;
#pragma omp simd reduction(+ : var)
    for (int64_t d = 0; d < D; ++d) // two-pass: no cancellation
      var += (v[d] - mean) * (v[d] - mean);
    var /= (double)D;
    layerNormRow(a, row, mean, var);
  }
  return {std::move(a.out)};
}

std::vector<Tensor> rmsNormFast(const Attrs &attrs, const Operands &ops) {
  NormArgs a = checkNorm(attrs, ops, false);
  for (int64_t row = 0; row < a.rows; ++row) {
    const float *v = a.in + row * a.D;
    double ss = 0; // in vector lanes, as layer_norm
#pragma omp simd reduction(+ : ss)
    for (int64_t d = 0; d < a.D; ++d)
      ss += (double)v[d] * v[d];
    rmsNormRow(a, row, ss / (double)a.D);
  }
  return {std::move(a.out)};
}

std::vector<Tensor> hadamardFast(const Attrs &attrs, const Operands &ops) {
  HadamardArgs a = checkHadamard(attrs, ops);
#pragma omp parallel if (a.rows * a.K >= (1 << 14))
  {
    std::vector<double> scratch;
#pragma omp for schedule(static)
    for (int64_t row = 0; row < a.rows; ++row)
      hadamardRow(a, row, scratch);
  }
  return {std::move(a.out)};
}

std::vector<Tensor> moeFast(const Attrs &attrs, const Operands &ops) {
  return moeK(attrs, ops, [](const Tensor &rows, const Tensor &w) {
    return std::move(linearK({&rows, &w}, {})[0]);
  });
}

/// gelu (exact) on the fast path: the rational erf (within 4.7e-7 of the
/// libm's, numerics::rationalErf), vectorized, over the pool when large.
std::vector<Tensor> geluFast(const Attrs &attrs, const Operands &ops) {
  if (attrs.s("approximate", "none") == "tanh")
    return threadedUnaryF32(OpKind::Gelu, ops, [](float x) {
      return qcc::numerics::geluTanh(x);
    });
  if (attrs.s("approximate", "none") != "none")
    return geluK(attrs, ops); // the reference's error
  const Tensor &x = need(ops, 0, "input");
  requireF32(x, "input");
  Tensor r(DType::F32, x.shape());
  const float *in = x.data<float>();
  float *v = r.data<float>();
  int64_t n = r.numel(), block = 1 << 14;
#pragma omp parallel for schedule(static) if (n >= 2 * block)
  for (int64_t i = 0; i < n; i += block) {
    std::memcpy(v + i, in + i, std::min(block, n - i) * sizeof(float));
    geluRationalInPlace(v + i, std::min(block, n - i), 0, 1);
  }
  return {std::move(r)};
}

#ifdef QCC_HAVE_AVX512_ATTENTION
/// glibc's libmvec expf, 16 lanes (AVX-512): within 2.6 ulp of exp over
/// [-104, 0] (measured on every 7th float; std::exp's expf: 0.5).
/// (Declared with its target: clang refuses a 512-bit argument otherwise.)
extern "C" __attribute__((target("avx512f"))) __m512 _ZGVeN16v_expf(__m512);

/// exp of 16 floats by libmvec, 0 where x < -87.3 (exp(x) < FLT_MIN: a
/// subnormal or 0; -inf: a masked key or a row's tail lanes). libmvec
/// computes such lanes again one at a time with the scalar expf: 4% of
/// SmolLM2's prefill at 512 tokens, whose causal rows all end in a tail.
__attribute__((target("avx512f"))) inline __m512 expNormal(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3f);
  // NaN compares "not less" and stays NaN through max(lo, x).
  __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ);
  return _mm512_maskz_mov_ps(keep, _ZGVeN16v_expf(_mm512_max_ps(lo, x)));
}

/// reference::softmaxRow of a contiguous row on the fast path: the same max,
/// all-masked convention and double sums, with exp 16 values at a time.
/// The low and high 8 lanes of x as doubles.
__attribute__((target("avx512f"))) inline __m512d lowHalfPd(__m512 x) {
  return _mm512_cvtps_pd(_mm512_castps512_ps256(x));
}
__attribute__((target("avx512f"))) inline __m512d highHalfPd(__m512 x) {
  return _mm512_cvtps_pd(
      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
}

__attribute__((target("avx512f"))) void softmaxRowAvx512(float *v,
                                                          int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  auto tail = [&](int64_t i) { return firstLanes(n - i); };
  __m512 mx = ninf;
  for (int64_t i = 0; i < n; i += 16)
    mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(ninf, tail(i), v + i));
  const float m = _mm512_reduce_max_ps(mx);
  if (m == -std::numeric_limits<float>::infinity()) {
    std::fill(v, v + n, 0.0f);
    return;
  }
  const __m512 mv = _mm512_set1_ps(m);
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) { // lanes past n: exp(-inf) = 0
    __m512 e =
        expNormal(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, tail(i), v + i), mv));
    _mm512_mask_storeu_ps(v + i, tail(i), e);
    s0 = _mm512_add_pd(s0, lowHalfPd(e));
    s1 = _mm512_add_pd(s1, highHalfPd(e));
  }
  // e / sum as e * (1 / sum) in double: within an ulp of double before
  // the rounding to float (a double division per element was most of this
  // loop's time).
  const __m512d inv =
      _mm512_set1_pd(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)));
  for (int64_t i = 0; i < n; i += 16) {
    __m512 e = _mm512_maskz_loadu_ps(tail(i), v + i);
    __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(lowHalfPd(e), inv)),
           hi = _mm512_cvtpd_ps(_mm512_mul_pd(highHalfPd(e), inv));
    __m512 r = _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi),
        1));
    _mm512_mask_storeu_ps(v + i, tail(i), r);
  }
}
#endif

#ifdef QCC_HAVE_AVX512_ATTENTION
/// silu (numerics::silu: x / (1 + exp(-x)), one division) of n floats on
/// the fast path, exp 16 at a time by libmvec: the scalar loop's libm expf
/// was 5% of SmolLM2's float prefill.
__attribute__((target("avx512f"))) void siluAvx512(const float *x, float *y,
                                                   int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = firstLanes(n - i);
    __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    __m512 e = expNormal(_mm512_sub_ps(_mm512_setzero_ps(), v));
    _mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(v, _mm512_add_ps(one, e)));
  }
}
#endif

std::vector<Tensor> siluFast(const Operands &ops) {
#ifdef QCC_HAVE_AVX512_ATTENTION
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  const Tensor &x = need(ops, 0, "input");
  if (avx512 && x.dtype() == DType::F32 &&
      cpuKernelPath() == CpuKernelPath::Fast) {
    Tensor r = Tensor::uninitialized(DType::F32, x.shape());
    const int64_t n = x.numel(), chunk = 1 << 14; // 16 floats at a time
#pragma omp parallel for schedule(static) if (n >= (1 << 16))
    for (int64_t c = 0; c < n; c += chunk)
      siluAvx512(x.data<float>() + c, r.data<float>() + c,
                 std::min(chunk, n - c));
    return {std::move(r)};
  }
#endif
  return threadedUnaryF32(OpKind::Silu, ops,
                          [](float x) { return qcc::numerics::silu(x); });
}

/// silu in place over `rows` rows of `cols` floats, `ld` apart: siluFast's
/// values bit for bit (the same vector or scalar formula per element).
static void siluInPlace(float *y, int64_t cols, int64_t ld, int64_t rows) {
#ifdef QCC_HAVE_AVX512_ATTENTION
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512 && cpuKernelPath() == CpuKernelPath::Fast) {
    for (int64_t r = 0; r < rows; ++r)
      siluAvx512(y + r * ld, y + r * ld, cols);
    return;
  }
#endif
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      y[r * ld + c] = qcc::numerics::silu(y[r * ld + c]);
}

/// reference::softmaxRow, with a contiguous row on the fast path by
/// softmaxRowAvx512 (the same max, all-masked convention and double sums).
void softmaxRowFast(float *v, int64_t n, int64_t stride) {
#ifdef QCC_HAVE_AVX512_ATTENTION
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (stride == 1 && avx512 && cpuKernelPath() == CpuKernelPath::Fast)
    return softmaxRowAvx512(v, n);
#endif
  reference::softmaxRow(v, n, stride);
}


/// The fast path: tasks of (batch, head, block of kQueryBlock queries), each
/// over only the keys its rows may see (attendRows).
void attentionFast(int64_t B, int64_t H, int64_t Hkv, int64_t Sq, int64_t Skv,
                   int64_t D, float scale, bool causal, int64_t window,
                   float softcap, const float *Q, const float *K,
                   const float *V, const float *M,
                   const std::vector<int64_t> &mst, float *O) {
  constexpr int64_t kQueryBlock = 32;
  int64_t blocks = (Sq + kQueryBlock - 1) / kQueryBlock, group = H / Hkv;
  int64_t tasks = B * H * blocks, off = Skv - Sq;
  // Each (batch, kv head)'s keys packed once for the score tiles, as a
  // linear's weight (every head of the group and query block reads them).
  std::vector<std::optional<PackedF32Weight>> packedK(
      Sq >= 4 && cpuHasAvx512F() ? B * Hkv : 0);
#pragma omp parallel if (tasks > 1 && B * H * Sq * Skv * D >= kParallelWork)
  {
    std::vector<float> scratch;
    std::array<int64_t, kQueryBlock> lo, hi;
#pragma omp for schedule(static)
    for (int64_t p = 0; p < (int64_t)packedK.size(); ++p)
      packedK[p] = packF32Weight(K + (p / Hkv) * Skv * Hkv * D + p % Hkv * D,
                                 Skv, D, Hkv * D);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      int64_t b = task / (H * blocks), h = task / blocks % H;
      int64_t i0 = task % blocks * kQueryBlock;
      int64_t R = std::min(kQueryBlock, Sq - i0), g = h / group;
      for (int64_t r = 0; r < R; ++r) {
        int64_t i = i0 + r; // sees keys (i + off - window, i + off]
        hi[r] = causal ? std::clamp<int64_t>(i + off + 1, 0, Skv) : Skv;
        lo[r] = window > 0 ? std::clamp<int64_t>(i + off - window + 1, 0, Skv)
                           : 0;
      }
      attendRows(R, D, Q + (b * Sq + i0) * H * D + h * D, H * D,
                 K + b * Skv * Hkv * D + g * D, Hkv * D,
                 V + b * Skv * Hkv * D + g * D, Hkv * D, scale, softcap,
                 lo.data(), hi.data(),
                 M ? M + b * mst[0] + h * mst[1] + i0 * mst[2] : nullptr,
                 M ? mst[2] : 0, M ? mst[3] : 0,
                 O + (b * Sq + i0) * H * D + h * D, H * D, scratch,
                 packedK.empty() || !packedK[b * Hkv + g]
                     ? nullptr
                     : &*packedK[b * Hkv + g]);
    }
  }
}

std::vector<Tensor> attentionFastK(const Attrs &attrs, const Operands &ops) {
  AttentionArgs a = checkAttention(attrs, ops);
  attentionFast(a.B, a.H, a.Hkv, a.Sq, a.Skv, a.D, a.scale, a.causal, a.window,
                a.softcap, a.Q, a.K, a.V, a.M, a.mst, a.out.data<float>());
  return {std::move(a.out)};
}

} // namespace qcc::rt::cpukernels

void qcc::rt::geluErfInPlace(float *y, int64_t cols, int64_t ld,
                             int64_t rows) {
  geluRationalInPlace(y, cols, ld, rows);
}

void qcc::rt::applyLinearEpilogue(const LinearEpilogue &epi, float *y,
                                  int64_t N, int64_t m0, int64_t rows,
                                  int64_t n0, int64_t cols) {
  float *block = y + m0 * N + n0;
  switch (epi.activation) {
  case LinearEpilogue::Activation::None: break;
  case LinearEpilogue::Activation::Gelu:
    geluRationalInPlace(block, cols, N, rows);
    break;
  case LinearEpilogue::Activation::Silu:
    siluInPlace(block, cols, N, rows);
    break;
  }
  const float *res = epi.residual ? epi.residual->data<float>() : nullptr;
  const float *fac = epi.factor ? epi.factor->data<float>() : nullptr;
  for (int64_t m = m0; m < m0 + rows; ++m) {
    if (res)
      for (int64_t n = n0; n < n0 + cols; ++n)
        y[m * N + n] += res[m * N + n];
    if (fac)
      for (int64_t n = n0; n < n0 + cols; ++n)
        y[m * N + n] *= fac[m * N + n];
  }
}

std::vector<Tensor>
qcc::rt::linearWithEpilogue(const Operands &ops,
                            const LinearEpilogue &epilogue,
                            const PackedF32Weight *packed) {
  return linearK(ops, epilogue, packed);
}
