//===- RotationTest.cpp - format::Rotation (rotate-residual's Q) ----------===//
#include "format/Rotation.h"

#include <gtest/gtest.h>

#include <cmath>

using qcc::format::Rotation;

namespace {

// Q Q^T = I: products of a few hundred doubles, so 1e-12 is far above the
// rounding (~d * 1e-16) and far below any real defect.
TEST(Rotation, IsOrthogonalForEveryKindOfWidth) {
  for (int64_t d : {1, 2, 3, 12, 64, 96, 576, 768}) {
    Rotation r(d, /*seed=*/7);
    EXPECT_EQ(r.hadamardSize() * r.oddSize(), d);
    EXPECT_EQ(r.oddSize() % 2, 1) << d;
    std::vector<double> q = r.matrix();
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) {
        double dot = 0;
        for (int64_t k = 0; k < d; ++k)
          dot += q[i * d + k] * q[j * d + k];
        ASSERT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-12)
            << "d " << d << " (" << i << ", " << j << ")";
      }
  }
}

// Width 2, seed 0: signs [-1, 1], Q = diag(s) H_2 / sqrt(2) (the numbers
// test/passes/rotate-residual.mlir checks in the IR).
TEST(Rotation, SeedZeroWidthTwo) {
  std::vector<double> q = Rotation(2, 0).matrix();
  double h = 1 / std::sqrt(2.0);
  EXPECT_NEAR(q[0], -h, 1e-15);
  EXPECT_NEAR(q[1], -h, 1e-15);
  EXPECT_NEAR(q[2], h, 1e-15);
  EXPECT_NEAR(q[3], -h, 1e-15);
}

// An outlier channel is spread over all channels: QuaRot's point. With a
// power-of-two width every entry of Q is +-1/sqrt(d), so a one-hot row
// becomes flat.
TEST(Rotation, SpreadsAnOutlier) {
  Rotation r(64, 3);
  std::vector<double> x(64, 0.0);
  x[17] = 100;
  r.rotateRow(x);
  for (double v : x)
    EXPECT_NEAR(std::abs(v), 100 / 8.0, 1e-12);
}

// Seeds give different sign vectors, and the same seed the same matrix.
TEST(Rotation, SeedsAreDeterministic) {
  EXPECT_EQ(Rotation(576, 1).matrix(), Rotation(576, 1).matrix());
  EXPECT_NE(Rotation(576, 1).matrix(), Rotation(576, 2).matrix());
}

} // namespace
