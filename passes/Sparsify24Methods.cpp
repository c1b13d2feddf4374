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

/// Lower Cholesky factor of a [k, k] in place (upper triangle left as is);
/// false on a non-positive pivot.
bool cholesky(std::vector<double> &a, int64_t k) {
  for (int64_t j = 0; j < k; ++j) {
    double *rj = &a[j * k];
    double d = rj[j];
    for (int64_t m = 0; m < j; ++m)
      d -= rj[m] * rj[m];
    if (!(d > 0.0) || !std::isfinite(d))
      return false;
    d = std::sqrt(d);
    rj[j] = d;
    for (int64_t i = j + 1; i < k; ++i) {
      double *ri = &a[i * k];
      double s = ri[j];
      for (int64_t m = 0; m < j; ++m)
        s -= ri[m] * rj[m];
      ri[j] = s / d;
    }
  }
  return true;
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

std::optional<std::string>
qcc::sparsify24::factorInverseHessian(std::vector<double> H, int64_t k,
                                      double dampening, InverseHessian &out) {
  assert(H.size() == (size_t)(k * k));
  out.k = k;
  out.dead.assign((size_t)k, 0);
  double mean = 0;
  for (int64_t j = 0; j < k; ++j) {
    if (H[j * k + j] == 0.0) {
      out.dead[j] = 1;
      H[j * k + j] = 1.0;
    }
    mean += H[j * k + j];
  }
  mean /= (double)std::max<int64_t>(k, 1);
  std::vector<double> L;
  double damp = dampening * mean;
  bool ok = false;
  for (int attempt = 0; attempt < 5 && !ok; ++attempt, damp *= 10) {
    L = H;
    for (int64_t j = 0; j < k; ++j)
      L[j * k + j] += damp;
    ok = cholesky(L, k);
  }
  if (!ok)
    return std::string("the calibration Hessian is not positive definite "
                       "even with dampening");
  // Rows of inv(L)^T: Ti[c][i] = inv(L)[i][c] for i >= c (contiguous dots).
  std::vector<double> Ti((size_t)(k * k), 0.0);
  for (int64_t c = 0; c < k; ++c) {
    double *t = &Ti[c * k];
    t[c] = 1.0 / L[c * k + c];
    for (int64_t i = c + 1; i < k; ++i) {
      const double *li = &L[i * k];
      double s = 0;
      for (int64_t m = c; m < i; ++m)
        s += li[m] * t[m];
      t[i] = -s / li[i];
    }
  }
  // H^-1 = inv(L)^T inv(L): [i][j] = sum_{m >= max(i, j)} Ti[i][m] Ti[j][m].
  std::vector<double> Hinv((size_t)(k * k));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      const double *a = &Ti[i * k], *b = &Ti[j * k];
      double s = 0;
      for (int64_t m = i; m < k; ++m)
        s += a[m] * b[m];
      Hinv[i * k + j] = Hinv[j * k + i] = s;
    }
  if (!cholesky(Hinv, k))
    return std::string("the inverse calibration Hessian is not positive "
                       "definite (ill-conditioned statistics)");
  out.U.assign((size_t)(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j <= i; ++j)
      out.U[j * k + i] = Hinv[i * k + j]; // U = lower factor transposed
  return std::nullopt;
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
        double q = keep[i % 4] ? x[i] : 0.0;
        double e = (x[i] - q) / U[i * k + i];
        x[i] = q;
        const double *u = &U[i * k];
        for (int64_t j = i + 1; j < i2; ++j)
          x[j] -= e * u[j];
        err[i - i1] = e;
      }
      // The lazy batch: the columns after the block see its errors at once.
      for (int64_t i = i1; i < i2; ++i) {
        double e = err[i - i1];
        if (e == 0.0)
          continue;
        const double *u = &U[i * k];
        for (int64_t j = i2; j < k; ++j)
          x[j] -= e * u[j];
      }
    }
  }
  return w;
}
