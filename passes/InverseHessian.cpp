//===- InverseHessian.cpp - the OBS inverse-Hessian factor ----------------===//
#include "passes/InverseHessian.h"

#include <algorithm>
#include <cassert>
#include <cmath>

using namespace qcc::obs;

namespace {

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

std::optional<std::string> qcc::obs::factorInverseHessian(std::vector<double> H,
                                                          int64_t k,
                                                          double dampening,
                                                          InverseHessian &out) {
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

double qcc::obs::compensate(double *x, int64_t i, double q, int64_t end,
                            const InverseHessian &hinv) {
  const double *u = &hinv.U[i * hinv.k];
  double e = (x[i] - q) / u[i];
  x[i] = q;
  if (e != 0.0)
    for (int64_t j = i + 1; j < end; ++j)
      x[j] -= e * u[j];
  return e;
}

void qcc::obs::compensateBatch(double *x, int64_t begin, int64_t end,
                               const double *err, const InverseHessian &hinv) {
  const int64_t k = hinv.k;
  for (int64_t i = begin; i < end; ++i) {
    double e = err[i - begin];
    if (e == 0.0)
      continue;
    const double *u = &hinv.U[i * k];
    for (int64_t j = end; j < k; ++j)
      x[j] -= e * u[j];
  }
}

std::vector<double> qcc::obs::permuteHessian(const std::vector<double> &H,
                                             int64_t k,
                                             const std::vector<int32_t> &perm) {
  assert(H.size() == (size_t)(k * k) && perm.size() == (size_t)k);
  std::vector<double> P((size_t)(k * k));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j)
      P[i * k + j] = H[(int64_t)perm[i] * k + perm[j]];
  return P;
}
