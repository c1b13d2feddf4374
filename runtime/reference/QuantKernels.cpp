//===- QuantKernels.cpp - qcc.quantize and qcc.qlinear, the reference -----===//
//
// docs/QUANTIZATION.md section 3, written to be obviously right:
//   quantize  one scale (and zero point) per row of K values (per_token) or
//             for the whole tensor (per_tensor), or the static `scale`;
//             to f32, each code read back: (q - zp) * scale (QDQ, W4A8);
//   qlinear   int32 accumulation of i8 x i8 (exact), then the float epilogue
//             float(acc - zp * wsum[n]) * (xs * ws[n]) + bias[n], in that
//             order, each step rounded to float32.
// The element rules (rounding, scales, the dequantization) are those of
// format/device/numerics.h, which the CUDA kernels use too. This file is
// compiled with -ffp-contract=off (runtime/reference/CMakeLists.txt) so that
// the epilogue's multiply and add are never fused into one FMA: the CUDA
// kernels and the tests apply the same two roundings.
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/QuantKernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

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

/// The abs-max of n values, NaN skipped (a comparison with NaN is false).
float absMax(const float *in, int64_t n) {
  float absmax = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    if (std::fabs(in[i]) > absmax)
      absmax = std::fabs(in[i]);
  return absmax;
}

/// Quantizes n values of `in` with one scale / zero point into `out`.
void quantizeGroup(const float *in, int64_t n, bool asymmetric, bool isStatic,
                   float staticScale, int8_t *out, float &scale, int32_t &zp,
                   QuantizeSymmetricGroup symmetric) {
  if (!asymmetric) {
    symmetric(in, n, isStatic, staticScale, out, scale);
    zp = 0;
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

void qcc::rt::reference::quantizeE4M3Group(const float *in, int64_t n,
                                           bool isStatic, float staticScale,
                                           uint8_t *out, float &scale) {
  scale = isStatic ? staticScale : qcc::numerics::fp8Scale(absMax(in, n));
  for (int64_t i = 0; i < n; ++i)
    out[i] = qcc::numerics::quantizeE4M3(in[i], scale);
}

void qcc::rt::reference::quantizeSymmetricGroup(const float *in, int64_t n,
                                                bool isStatic,
                                                float staticScale, int8_t *out,
                                                float &scale) {
  scale = isStatic ? staticScale
                   : qcc::numerics::symmetricScale(absMax(in, n));
  for (int64_t i = 0; i < n; ++i)
    out[i] = quantizeSymmetric(in[i], scale);
}

std::vector<int64_t> qcc::rt::outlierColumns(const Attrs &attrs, int64_t K) {
  std::vector<int64_t> cols = attrs.ints("outlier_columns");
  std::string why = format::outlierColumnsError(cols, K);
  if (!why.empty())
    fail(why);
  return cols;
}

std::vector<Tensor>
qcc::rt::reference::quantizeKernel(const Attrs &attrs, const Operands &ops,
                                   QuantizeSymmetricGroup symmetric) {
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
  std::string to = attrs.s("to", "i8");
  if (to != "i8" && to != "f8e4m3" && to != "f32")
    fail("quantize to '" + to + "': only i8, f8e4m3 and f32 (the i8 code "
         "read back)");
  const bool fp8 = to == "f8e4m3";
  if (fp8 && asymmetric)
    fail("quantize to f8e4m3 is symmetric only");
  bool perToken = gran == "per_token";
  int64_t K = x.dim(-1), M = rowsOf(x);
  Shape sshape = {1};
  if (perToken) {
    sshape = x.shape();
    sshape.back() = 1;
  }
  Tensor q(fp8 ? DType::F8E4M3 : DType::I8, x.shape()),
      s(DType::F32, sshape), z(DType::I32, sshape);
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
  if (fp8) { // zero points stay 0
    uint8_t *F = q.data<uint8_t>();
    for (int64_t g = 0, groups = perToken ? M : 1,
                 n = perToken ? K : x.numel();
         g < groups; ++g)
      quantizeE4M3Group(X + g * n, n, isStatic, staticScale, F + g * n, S[g]);
  } else if (perToken) {
    for (int64_t m = 0; m < M; ++m)
      quantizeGroup(X + m * K, K, asymmetric, isStatic, staticScale, Q + m * K,
                    S[m], Z[m], symmetric);
  } else {
    quantizeGroup(X, x.numel(), asymmetric, isStatic, staticScale, Q, S[0],
                  Z[0], symmetric);
  }
  if (to == "f32") { // QDQ: each code read back
    Tensor d(DType::F32, x.shape());
    float *D = d.data<float>();
    for (int64_t g = 0, groups = perToken ? M : 1,
                 n = perToken ? K : x.numel();
         g < groups; ++g)
      for (int64_t i = 0; i < n; ++i)
        D[g * n + i] = qcc::numerics::dequantizeCode(Q[g * n + i], Z[g], S[g]);
    return {std::move(d), std::move(s), std::move(z)};
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
  if (x.dtype() != DType::I8 && x.dtype() != DType::F8E4M3)
    fail(std::string("input must be i8 or f8e4m3, got ") +
         dtypeName(x.dtype()));
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
  e.x = reinterpret_cast<const int8_t *>(x.raw());
  e.fp8 = x.dtype() == DType::F8E4M3;
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

std::pair<const Tensor *, QLinearEpilogue>
qcc::rt::checkQLinear(const Attrs &attrs, const Operands &ops) {
  const Tensor &w = need(ops, 3, "weight");
  const Tensor &x = need(ops, 0, "input");
  if (w.dtype() != DType::I8 && w.dtype() != DType::F8E4M3)
    fail(std::string("weight must be i8 or f8e4m3, got ") +
         dtypeName(w.dtype()));
  if (w.dtype() != x.dtype())
    fail(std::string("qlinear input (") + dtypeName(x.dtype()) +
         ") and weight (" + dtypeName(w.dtype()) + ") must have one type");
  if (w.rank() != 2)
    fail("qlinear weight " + shapeString(w.shape()) + " must be [N, K]");
  return {&w, QLinearEpilogue::check(attrs, ops, w.dim(0), w.dim(1))};
}

std::vector<Tensor> qcc::rt::reference::qlinearKernel(const Attrs &attrs,
                                                      const Operands &ops) {
  std::pair<const Tensor *, QLinearEpilogue> checked = checkQLinear(attrs, ops);
  const Tensor *w = checked.first;
  const QLinearEpilogue &e = checked.second;
  Tensor r(DType::F32, e.resultShape);
  float *Y = r.data<float>();
  if (e.fp8) {
    const auto *W = static_cast<const uint8_t *>(w->raw());
    for (int64_t m = 0; m < e.M; ++m)
      for (int64_t n = 0; n < e.N; ++n)
        Y[m * e.N + n] = qlinearFp8Element(e, W, m, n);
    return {std::move(r)};
  }
  const int8_t *W = w->data<int8_t>();
  for (int64_t m = 0; m < e.M; ++m)
    for (int64_t n = 0; n < e.N; ++n)
      Y[m * e.N + n] = qlinearElement(e, W, m, n);
  return {std::move(r)};
}
