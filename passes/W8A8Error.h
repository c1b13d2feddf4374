//===- W8A8Error.h - W8A8 output error on calibration rows ------*- C++ -*-===//
//
// The measure smooth-quant's alpha search and int8-fallback's choice share
// (docs/QUANTIZATION.md, sections 2 and 3), free of MLIR so that unit tests
// call it on plain arrays: on calibration rows X [R, K] and weight rows
// W [n, K] (row-major f32),
//
//   error = ||Y_q - X W^T||^2 with  Y_q = Q(X') Q(W')^T + X_F W_F^T
//
// where Q is symmetric int8 fake quantization per row (per token for X, per
// output channel for W) with the element rule of format/device/numerics.h,
// F the float (outlier) columns, X' and W' X and W with the columns F
// zeroed, and X_F, W_F those columns alone. With no F it is plain W8A8.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_PASSES_W8A8ERROR_H
#define QCC_PASSES_W8A8ERROR_H

#include <cstdint>
#include <vector>

namespace qcc::w8a8 {

/// max / median of a channel absmax list (0 when empty, infinity when the
/// median is 0): how far the largest channel stands out.
double outlierRatio(std::vector<float> absmax);

/// x [R, K] times w [n, K] transposed: [R, n].
std::vector<float> matmulT(const std::vector<float> &x,
                           const std::vector<float> &w, int64_t R, int64_t n,
                           int64_t K);

/// Symmetric int8 fake quantization of each row of m [rows, K] in place.
void fakeQuantizeRows(std::vector<float> &m, int64_t K);

/// Squared error and squared reference norm of one linear's output.
struct OutputError {
  double error = 0, reference = 0;
  double relative() const { return reference > 0 ? error / reference : 0; }
};

/// The error above for x [R, K], w [n, K] and the exact output y = x w^T
/// [R, n], with `floatColumns` (ascending, in [0, K)) kept in float.
OutputError outputError(const std::vector<float> &x,
                        const std::vector<float> &w,
                        const std::vector<float> &y, int64_t R, int64_t n,
                        int64_t K, const std::vector<int64_t> &floatColumns);

} // namespace qcc::w8a8

#endif // QCC_PASSES_W8A8ERROR_H
