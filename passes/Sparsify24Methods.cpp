//===- Sparsify24Methods.cpp - choosing and compensating 2:4 masks --------===//
#include "passes/Sparsify24Methods.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

using namespace qcc::sparsify24;

namespace {

/// The two positions of `score[0..4)` to keep: the largest two, the lower
/// index first on ties.
void topTwo(const double *score, bool keep[4]) {
  int order[4] = {0, 1, 2, 3};
  std::stable_sort(order, order + 4,
                   [&](int a, int b) { return score[a] > score[b]; });
  for (int t = 0; t < 4; ++t)
    keep[t] = false;
  keep[order[0]] = keep[order[1]] = true;
}

} // namespace

void qcc::sparsify24::keepTopTwo(std::vector<double> &w,
                                 const std::vector<double> &score, int64_t n,
                                 int64_t k) {
  assert(k % 4 == 0 && w.size() == (size_t)(n * k) && score.size() == w.size());
  bool keep[4];
  for (int64_t i = 0; i < n * k; i += 4) {
    topTwo(&score[i], keep);
    for (int t = 0; t < 4; ++t)
      if (!keep[t])
        w[i + t] = 0.0;
  }
}

std::vector<double> qcc::sparsify24::pruneMagnitude(std::vector<double> w,
                                                    int64_t n, int64_t k) {
  std::vector<double> score(w.size());
  for (size_t i = 0; i < w.size(); ++i)
    score[i] = std::abs(w[i]);
  keepTopTwo(w, score, n, k);
  return w;
}

std::vector<double>
qcc::sparsify24::pruneWanda(std::vector<double> w, int64_t n, int64_t k,
                            const std::vector<double> &norms) {
  assert(norms.size() == (size_t)k);
  std::vector<double> score(w.size());
  for (size_t i = 0; i < w.size(); ++i)
    score[i] = std::abs(w[i]) * norms[i % k];
  keepTopTwo(w, score, n, k);
  return w;
}

std::vector<double>
qcc::sparsify24::pruneSparseGpt(std::vector<double> w, int64_t n, int64_t k,
                                const InverseHessian &hinv,
                                int64_t blockSize) {
  assert(hinv.k == k && k % 4 == 0 && blockSize % 4 == 0);
  const std::vector<double> &U = hinv.U;
  std::vector<double> err((size_t)blockSize);
  // Each row's mask and updates depend on that row and U only.
  for (int64_t r = 0; r < n; ++r) {
    double *x = &w[r * k];
    for (int64_t j = 0; j < k; ++j)
      if (hinv.dead[j])
        x[j] = 0.0;
    bool keep[4] = {true, true, true, true};
    for (int64_t i1 = 0; i1 < k; i1 += blockSize) {
      int64_t i2 = std::min(k, i1 + blockSize);
      for (int64_t i = i1; i < i2; ++i) {
        if (i % 4 == 0) {
          double score[4];
          for (int t = 0; t < 4; ++t) {
            double d = U[(i + t) * k + i + t];
            score[t] = x[i + t] * x[i + t] / (d * d);
          }
          topTwo(score, keep);
        }
        err[i - i1] = obs::compensate(x, i, keep[i % 4] ? x[i] : 0.0, i2,
                                      hinv);
      }
      obs::compensateBatch(x, i1, i2, err.data(), hinv);
    }
  }
  return w;
}
