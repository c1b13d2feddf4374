//===- Rotation.h - the orthogonal rotations of QuaRot, shared --*- C++ -*-===//
//
// The one definition of the orthogonal matrix Q that rotate-residual folds
// into a model's weights (QuaRot, Ashkboos et al. 2024; docs/QUANTIZATION.md
// section 10). Q spreads an activation's outlier channels over all channels,
// so that int8 (or fp8) per-token scales stop being set by a few of them.
//
// For a width d = n * m with n the largest power of two dividing d and m odd:
//
//   Q = diag(s) (H_n / sqrt(n)  (x)  C_m)
//
// with s a +-1 vector from `seed` (splitmix64), H_n the Sylvester Hadamard
// matrix and C_m the orthonormal DCT-II matrix (C_1 = [1]): QuaRot's
// randomized Hadamard where d is a power of two, and for the other widths
// (SmolLM2's 576 = 64 * 9) a Kronecker product with a small dense orthogonal
// factor, as QuaRot does with its stored H_12, H_20, ... (any orthogonal
// factor keeps the rotation exact; the DCT needs no table).
//
// `rotateRow` computes x Q for a row x of d values, in O(d (log n + m)): an
// index i = p * m + q, the row read as X [n, m], becomes (H_n X C_m) after
// the sign flips. Q Q^T = I, so rotating a value and the weights that read
// it leaves the model's function unchanged in exact arithmetic.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_ROTATION_H
#define QCC_FORMAT_ROTATION_H

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace qcc::format {

class Rotation {
public:
  /// The largest odd factor of a width: the DCT factor costs m^2 doubles
  /// and m multiply-adds per value, so a width such as 4095 (m = 4095) has
  /// no fast rotation and is refused. Real widths have small odd factors
  /// (576 = 64 x 9, 11008 = 256 x 43, 14336 = 2048 x 7).
  static constexpr int64_t kMaxOddFactor = 255;

  /// Why `d` cannot be a rotation's width ("" when it can): d >= 1 with an
  /// odd factor of at most kMaxOddFactor. The compiler's verifier and the
  /// runtime's check both use it.
  static std::string widthError(int64_t d);

  /// The rotation of width `d` (widthError(d) empty) from `seed`.
  Rotation(int64_t d, uint64_t seed);

  int64_t width() const { return n_ * m_; }
  /// The power-of-two and the odd factor of the width.
  int64_t hadamardSize() const { return n_; }
  int64_t oddSize() const { return m_; }

  /// row <- row Q; row.size() == width().
  void rotateRow(std::span<double> row) const;

  /// Q itself, [d, d] row-major (for tests; d^2 values).
  std::vector<double> matrix() const;

private:
  int64_t n_, m_;
  std::vector<double> signs_; // [d]
  std::vector<double> dct_;   // [m, m]: dct_[q * m + k] = C[k][q]
};

} // namespace qcc::format

#endif // QCC_FORMAT_ROTATION_H
