//===- W8A8Error.cpp - W8A8 output error on calibration rows --------------===//
#include "passes/W8A8Error.h"

#include "format/device/numerics.h"

#include <algorithm>
#include <cmath>

using namespace qcc;

double w8a8::outlierRatio(std::vector<float> v) {
  if (v.empty())
    return 0;
  float mx = *std::max_element(v.begin(), v.end());
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  float med = v[v.size() / 2];
  return med > 0 ? mx / med : INFINITY;
}

std::vector<float> w8a8::matmulT(const std::vector<float> &x,
                                 const std::vector<float> &w, int64_t R,
                                 int64_t n, int64_t K) {
  // The loop over n is innermost so that it vectorizes.
  std::vector<float> wt((size_t)(K * n)), y((size_t)(R * n), 0.f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < K; ++k)
      wt[k * n + i] = w[i * K + k];
  for (int64_t r = 0; r < R; ++r) {
    float *yr = &y[r * n];
    for (int64_t k = 0; k < K; ++k) {
      float a = x[r * K + k];
      if (a == 0.f)
        continue;
      const float *wk = &wt[k * n];
      for (int64_t i = 0; i < n; ++i)
        yr[i] += a * wk[i];
    }
  }
  return y;
}

void w8a8::fakeQuantizeRows(std::vector<float> &m, int64_t K) {
  namespace num = qcc::numerics;
  for (size_t r = 0; r * K < m.size(); ++r) {
    float *v = &m[r * K];
    float mx = 0;
    for (int64_t k = 0; k < K; ++k)
      mx = std::max(mx, std::abs(v[k]));
    float scale = num::symmetricScale(mx);
    for (int64_t k = 0; k < K; ++k)
      v[k] = (float)num::quantizeSymmetric(v[k], scale) * scale;
  }
}

w8a8::OutputError w8a8::outputError(const std::vector<float> &x,
                                    const std::vector<float> &w,
                                    const std::vector<float> &y, int64_t R,
                                    int64_t n, int64_t K,
                                    const std::vector<int64_t> &floatColumns) {
  std::vector<float> xq(x), wq(w);
  for (int64_t c : floatColumns) {
    for (int64_t r = 0; r < R; ++r)
      xq[r * K + c] = 0;
    for (int64_t i = 0; i < n; ++i)
      wq[i * K + c] = 0;
  }
  fakeQuantizeRows(xq, K);
  fakeQuantizeRows(wq, K);
  std::vector<float> yq = matmulT(xq, wq, R, n, K);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c : floatColumns)
        yq[r * n + i] += x[r * K + c] * w[i * K + c];
  OutputError e;
  for (size_t i = 0; i < yq.size(); ++i) {
    double d = (double)yq[i] - y[i];
    e.error += d * d;
    e.reference += (double)y[i] * y[i];
  }
  return e;
}
