//===- CpuQuantKernels.cpp - qcc.quantize and qcc.qlinear on the CPU ------===//
//
// docs/QUANTIZATION.md section 3, written to be obviously right:
//   quantize  one scale (and zero point) per row of K values (per_token) or
//             for the whole tensor (per_tensor), or the static `scale`;
//   qlinear   int32 accumulation of i8 x i8 (exact), then the float epilogue
//             float(acc - zp * wsum[n]) * (xs * ws[n]) + bias[n], in that
//             order, each step rounded to float32.
// The element rules (rounding, scales, the dequantization) are those of
// format/device/numerics.h, which the CUDA kernels use too (on the fast
// path, symmetric quantize runs them 16 values at a time with AVX-512F where
// the CPU has it, bit for bit). This file is
// compiled with -ffp-contract=off (runtime/cpu/CMakeLists.txt) so that the
// epilogue's multiply and add are never fused into one FMA: the CUDA kernels
// and the tests apply the same two roundings.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuQuantKernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "runtime/cpu/X86Intrinsics.h"
#define QCC_HAVE_AVX512_QUANTIZE 1
#endif

using namespace qcc::rt;

namespace {

[[noreturn]] void fail(const std::string &why) {
  throw std::runtime_error(why);
}

const Tensor &need(const Operands &ops, size_t i, const char *what) {
  if (i >= ops.size() || !ops[i])
    fail(std::string("missing operand '") + what + "'");
  return *ops[i];
}

void requireType(const Tensor &t, DType d, const char *what) {
  if (t.dtype() != d)
    fail(std::string(what) + " must be " + dtypeName(d) + ", got " +
         dtypeName(t.dtype()));
}

/// Rows of K values: all dims but the last.
int64_t rowsOf(const Tensor &x) {
  int64_t m = 1;
  for (int64_t d = 0; d + 1 < x.rank(); ++d)
    m *= x.dim(d);
  return m;
}

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

/// Quantizes n values of `in` with one scale / zero point into `out`.
void quantizeGroup(const float *in, int64_t n, bool asymmetric, bool isStatic,
                   float staticScale, int8_t *out, float &scale, int32_t &zp) {
  if (!asymmetric) {
#ifdef QCC_HAVE_AVX512_QUANTIZE
    if (haveAvx512Quantize()) {
      quantizeSymmetricAvx512(in, n, isStatic, staticScale, out, scale);
      zp = 0;
      return;
    }
#endif
    if (isStatic) {
      scale = staticScale;
    } else {
      float absmax = 0.0f;
      for (int64_t i = 0; i < n; ++i)
        if (std::fabs(in[i]) > absmax)
          absmax = std::fabs(in[i]);
      scale = qcc::numerics::symmetricScale(absmax);
    }
    zp = 0;
    for (int64_t i = 0; i < n; ++i)
      out[i] = quantizeSymmetric(in[i], scale);
    return;
  }
  float mn = 0.0f, mx = 0.0f; // min <= 0 <= max
  for (int64_t i = 0; i < n; ++i) {
    if (in[i] < mn)
      mn = in[i];
    if (in[i] > mx)
      mx = in[i];
  }
  scale = qcc::numerics::asymmetricScale(mn, mx);
  zp = qcc::numerics::asymmetricZeroPoint(mn, scale);
  for (int64_t i = 0; i < n; ++i)
    out[i] = qcc::numerics::quantizeAsymmetric(in[i], scale, zp);
}

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

std::vector<int64_t> qcc::rt::outlierColumns(const Attrs &attrs, int64_t K) {
  std::vector<int64_t> cols = attrs.ints("outlier_columns");
  std::string why = format::outlierColumnsError(cols, K);
  if (!why.empty())
    fail(why);
  return cols;
}

std::vector<Tensor> qcc::rt::quantizeKernel(const Attrs &attrs,
                                            const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  requireType(x, DType::F32, "input");
  if (x.rank() < 1)
    fail("quantize input must have rank >= 1, got " + shapeString(x.shape()));
  std::string gran = attrs.s("granularity", "");
  if (gran != "per_token" && gran != "per_tensor")
    fail("quantize granularity '" + gran +
         "' is not per_token or per_tensor");
  bool asymmetric = attrs.has("asymmetric") && attrs.b("asymmetric");
  bool isStatic = attrs.has("scale");
  float staticScale = 0.0f;
  if (isStatic) {
    staticScale = (float)attrs.f("scale");
    if (!std::isfinite(staticScale) || staticScale <= 0.0f)
      fail("quantize static scale must be finite and positive, got " +
           std::to_string(staticScale));
    if (asymmetric)
      fail("quantize: a static scale is symmetric only (asymmetric has no "
           "static zero point)");
  }
  bool perToken = gran == "per_token";
  int64_t K = x.dim(-1), M = rowsOf(x);
  Shape sshape = {1};
  if (perToken) {
    sshape = x.shape();
    sshape.back() = 1;
  }
  Tensor q(DType::I8, x.shape()), s(DType::F32, sshape), z(DType::I32, sshape);
  const float *X = x.data<float>();
  // Outlier columns (the LLM.int8()-style fallback) are read as 0: quantize
  // a copy with them zeroed.
  std::vector<float> masked;
  if (attrs.has("outlier_columns")) {
    std::vector<int64_t> cols = outlierColumns(attrs, K);
    masked.assign(X, X + x.numel());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t c : cols)
        masked[m * K + c] = 0.0f;
    X = masked.data();
  }
  int8_t *Q = q.data<int8_t>();
  float *S = s.data<float>();
  int32_t *Z = z.data<int32_t>();
  if (perToken) {
    for (int64_t m = 0; m < M; ++m)
      quantizeGroup(X + m * K, K, asymmetric, isStatic, staticScale, Q + m * K,
                    S[m], Z[m]);
  } else {
    quantizeGroup(X, x.numel(), asymmetric, isStatic, staticScale, Q, S[0],
                  Z[0]);
  }
  return {std::move(q), std::move(s), std::move(z)};
}

QLinearEpilogue QLinearEpilogue::check(const Attrs &attrs,
                                       const Operands &ops, int64_t N,
                                       int64_t K) {
  const Tensor &x = need(ops, 0, "input"), &xs = need(ops, 1, "input_scale"),
               &xz = need(ops, 2, "input_zero_point"),
               &ws = need(ops, 4, "weight_scale"),
               &wsum = need(ops, 5, "weight_sum");
  // Operands 6.. are [bias] and, with outlier columns, outlier_input and
  // outlier_weight.
  const bool outliers = attrs.has("outlier_columns");
  const size_t fixed = outliers ? 8 : 6;
  if (ops.size() != fixed && ops.size() != fixed + 1)
    fail("qlinear takes " + std::to_string(fixed) + " or " +
         std::to_string(fixed + 1) + " operands" +
         (outliers ? " with outlier_columns" : "") + ", not " +
         std::to_string(ops.size()));
  const Tensor *bias = ops.size() == fixed + 1 ? ops[6] : nullptr;
  requireType(x, DType::I8, "input");
  requireType(xs, DType::F32, "input_scale");
  requireType(xz, DType::I32, "input_zero_point");
  requireType(ws, DType::F32, "weight_scale");
  requireType(wsum, DType::I32, "weight_sum");
  if (x.rank() < 1 || x.dim(-1) != K)
    fail("qlinear input " + shapeString(x.shape()) + " and weight [" +
         std::to_string(N) + ", " + std::to_string(K) +
         "] do not match (weight must be [N, K] with K the input's last dim)");
  // |sum_k (xq - zp) * wq| <= 255 * 127 * K must fit int32.
  if (K > 65535)
    fail("qlinear K = " + std::to_string(K) +
         " exceeds 65535 (int32 accumulation would overflow)");
  for (auto [t, n] : {std::pair{&ws, "weight_scale"}, {&wsum, "weight_sum"}})
    if (t->rank() != 1 || t->dim(0) != N)
      fail(std::string("qlinear ") + n + " " + shapeString(t->shape()) +
           " must be [" + std::to_string(N) + "]");
  // Per token: [..., 1] matching the input's rows; per tensor: one value.
  auto perRow = [&](const Tensor &t, const char *what) {
    if (t.numel() == 1)
      return false;
    Shape want = x.shape();
    want.back() = 1;
    if (t.shape() != want)
      fail(std::string("qlinear ") + what + " " + shapeString(t.shape()) +
           " must be " + shapeString(want) + " (per token) or [1]");
    return true;
  };
  QLinearEpilogue e;
  e.rowScale = perRow(xs, "input_scale");
  e.rowZero = perRow(xz, "input_zero_point");
  if (bias) {
    requireType(*bias, DType::F32, "bias");
    if (bias->rank() != 1 || bias->dim(0) != N)
      fail("qlinear bias " + shapeString(bias->shape()) + " must be [" +
           std::to_string(N) + "]");
    e.bias = bias->data<float>();
  }
  e.M = rowsOf(x);
  e.N = N;
  e.K = K;
  e.resultShape = x.shape();
  e.resultShape.back() = N;
  e.x = x.data<int8_t>();
  e.xScale = xs.data<float>();
  e.wScale = ws.data<float>();
  e.xZero = xz.data<int32_t>();
  e.wSum = wsum.data<int32_t>();
  if (outliers) {
    const Tensor &xf = need(ops, ops.size() - 2, "outlier_input"),
                 &wf = need(ops, ops.size() - 1, "outlier_weight");
    requireType(xf, DType::F32, "outlier_input");
    requireType(wf, DType::F32, "outlier_weight");
    e.outlierColumns = qcc::rt::outlierColumns(attrs, K);
    int64_t n = (int64_t)e.outlierColumns.size();
    if (xf.shape() != x.shape())
      fail("qlinear outlier_input " + shapeString(xf.shape()) +
           " must have the input's shape " + shapeString(x.shape()));
    if (wf.rank() != 2 || wf.dim(0) != N || wf.dim(1) != n)
      fail("qlinear outlier_weight " + shapeString(wf.shape()) + " must be [" +
           std::to_string(N) + ", " + std::to_string(n) + "]");
    e.outlierInput = xf.data<float>();
    e.outlierWeight = wf.data<float>();
  }
  return e;
}

std::vector<float> QLinearEpilogue::gatherOutliers() const {
  const int64_t n = (int64_t)outlierColumns.size();
  std::vector<float> g((size_t)(M * n));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < n; ++j)
      g[m * n + j] = outlierInput[m * K + outlierColumns[j]];
  return g;
}

std::vector<Tensor> qcc::rt::qlinearKernel(const Attrs &attrs,
                                           const Operands &ops) {
  const Tensor &w = need(ops, 3, "weight");
  requireType(w, DType::I8, "weight");
  if (w.rank() != 2)
    fail("qlinear weight " + shapeString(w.shape()) + " must be [N, K]");
  const QLinearEpilogue e =
      QLinearEpilogue::check(attrs, ops, w.dim(0), w.dim(1));
  const int64_t M = e.M, N = e.N, K = e.K;
  const int64_t nOut = (int64_t)e.outlierColumns.size();
  Tensor r(DType::F32, e.resultShape);
  const int8_t *X = e.x, *W = w.data<int8_t>();
  float *Y = r.data<float>();
#pragma omp parallel for collapse(2) schedule(static) if (M * N * K > kQLinearParallelWork)
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const int8_t *xr = X + m * K, *wr = W + n * K;
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += (int32_t)xr[k] * (int32_t)wr[k];
      // The float part: the outlier columns, one row by one column.
      float f = 0.0f;
      for (int64_t j = 0; j < nOut; ++j)
        f = qcc::numerics::fadd(
            f, qcc::numerics::fmul(
                   e.outlierInput[m * K + e.outlierColumns[j]],
                   e.outlierWeight[n * nOut + j]));
      Y[m * N + n] = e(acc, m, n, f);
    }
  return {std::move(r)};
}
