//===- Rotation.cpp - the orthogonal rotations of QuaRot ------------------===//
#include "format/Rotation.h"

#include <cassert>
#include <cmath>
#include <numbers>

using namespace qcc::format;

namespace {

/// splitmix64 (Steele et al.): a fixed, portable sequence, so a seed gives
/// the same rotation with every compiler and standard library.
uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

} // namespace

std::string Rotation::widthError(int64_t d) {
  if (d < 1)
    return "a rotation needs a width of at least 1, not " + std::to_string(d);
  int64_t m = d;
  while (m % 2 == 0)
    m /= 2;
  if (m > kMaxOddFactor)
    return "width " + std::to_string(d) + " = " + std::to_string(d / m) +
           " x " + std::to_string(m) + " has an odd factor above " +
           std::to_string(kMaxOddFactor) + " (no fast rotation)";
  return "";
}

Rotation::Rotation(int64_t d, uint64_t seed) : n_(1), m_(d) {
  assert(widthError(d).empty() && "a width with a fast rotation");
  while (m_ % 2 == 0) {
    m_ /= 2;
    n_ *= 2;
  }
  signs_.resize(d);
  uint64_t state = seed;
  for (double &s : signs_)
    s = (splitmix64(state) >> 63) ? -1.0 : 1.0;
  // Orthonormal DCT-II: C[k][j] = a_k cos(pi (j + 1/2) k / m), a_0 =
  // sqrt(1/m), a_k = sqrt(2/m). Stored transposed for the row product.
  dct_.resize(m_ * m_);
  for (int64_t k = 0; k < m_; ++k)
    for (int64_t j = 0; j < m_; ++j)
      dct_[j * m_ + k] =
          std::sqrt((k == 0 ? 1.0 : 2.0) / m_) *
          std::cos(std::numbers::pi * (j + 0.5) * k / m_);
}

void Rotation::rotateRow(std::span<double> row) const {
  assert((int64_t)row.size() == width() && "row of the rotation's width");
  for (size_t i = 0; i < row.size(); ++i)
    row[i] *= signs_[i];
  // H_n along p (stride m), unnormalized butterflies, then 1/sqrt(n).
  for (int64_t h = 1; h < n_; h *= 2)
    for (int64_t p = 0; p < n_; p += 2 * h)
      for (int64_t j = p; j < p + h; ++j)
        for (int64_t q = 0; q < m_; ++q) {
          double a = row[j * m_ + q], b = row[(j + h) * m_ + q];
          row[j * m_ + q] = a + b;
          row[(j + h) * m_ + q] = a - b;
        }
  double norm = 1.0 / std::sqrt((double)n_);
  std::vector<double> tmp(m_);
  for (int64_t p = 0; p < n_; ++p) {
    double *x = &row[p * m_];
    for (int64_t k = 0; k < m_; ++k) {
      double acc = 0;
      for (int64_t q = 0; q < m_; ++q)
        acc += x[q] * dct_[q * m_ + k];
      tmp[k] = acc * norm;
    }
    std::copy(tmp.begin(), tmp.end(), x);
  }
}

std::vector<double> Rotation::matrix() const {
  int64_t d = width();
  std::vector<double> q(d * d);
  std::vector<double> e(d);
  for (int64_t i = 0; i < d; ++i) {
    std::fill(e.begin(), e.end(), 0.0);
    e[i] = 1;
    rotateRow(e); // row i of Q = e_i Q
    std::copy(e.begin(), e.end(), q.begin() + i * d);
  }
  return q;
}
