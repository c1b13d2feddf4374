//===- ObsTestData.h - calibration-like data for the OBS tests -*- C++ -*-===//
//
// Inputs with correlated channels, their Gram matrix and the reconstruction
// error that SparseGPT (Sparsify24Test) and GPTQ (QuantizeW4Test) minimize.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_TEST_UNIT_OBSTESTDATA_H
#define QCC_TEST_UNIT_OBSTESTDATA_H

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace qcc::obstest {

/// X [t, k]: t tokens whose channels mix `k / 4` latent factors (strongly
/// correlated channels, as in transformer activations) plus a little noise,
/// with per-channel scales spread over two orders of magnitude.
inline std::vector<double> correlatedInputs(int64_t t, int64_t k,
                                            std::mt19937 &rng) {
  std::normal_distribution<double> g(0.0, 1.0);
  int64_t f = k / 4;
  std::vector<double> mix((size_t)(f * k)), scale((size_t)k);
  for (double &m : mix)
    m = g(rng);
  for (int64_t j = 0; j < k; ++j)
    scale[j] = std::exp(g(rng));
  std::vector<double> x((size_t)(t * k));
  std::vector<double> z((size_t)f);
  for (int64_t r = 0; r < t; ++r) {
    for (double &v : z)
      v = g(rng);
    for (int64_t j = 0; j < k; ++j) {
      double s = 0.1 * g(rng);
      for (int64_t i = 0; i < f; ++i)
        s += z[i] * mix[i * k + j];
      x[r * k + j] = s * scale[j];
    }
  }
  return x;
}

inline std::vector<double> gram(const std::vector<double> &x, int64_t t,
                                int64_t k) {
  std::vector<double> h((size_t)(k * k), 0.0);
  for (int64_t r = 0; r < t; ++r)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j)
        h[i * k + j] += x[r * k + i] * x[r * k + j];
  return h;
}

/// ||(W - P) X^T||_F^2 = sum over rows of d^T H d, d = w - p.
inline double reconstructionError(const std::vector<double> &w,
                                  const std::vector<double> &p,
                                  const std::vector<double> &h, int64_t n,
                                  int64_t k) {
  double e = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j)
        e += (w[r * k + i] - p[r * k + i]) * h[i * k + j] *
             (w[r * k + j] - p[r * k + j]);
  return e;
}

} // namespace qcc::obstest

#endif // QCC_TEST_UNIT_OBSTESTDATA_H
