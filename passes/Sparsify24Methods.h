//===- Sparsify24Methods.h - choosing and compensating 2:4 masks -*- C++ -*-===//
//
// The numerics of the sparsify-2-4 pass (docs/SPARSITY.md), free of MLIR so
// that unit tests call them on plain arrays. Each takes a row-major weight
// W [n, k] (k a multiple of 4) in double and returns it pruned: in every
// group of four consecutive k at most two entries are nonzero (exactly the
// two kept ones; a kept weight may itself be zero). Ties keep the lower k.
//
//   magnitude  keep the two largest |w_ij|
//   wanda      keep the two largest |w_ij| * ||X_j|| (Sun et al., 2023)
//   sparsegpt  SparseGPT (Frantar & Alistarh, 2023): optimal brain surgeon
//              with the calibration Hessian H = X^T X; the mask of each
//              group is chosen from w^2 / diag(U)^2 at the group's first
//              column (U: the upper Cholesky factor of (H + damp I)^-1) and
//              the weights not yet visited are updated to compensate for
//              each pruned one, in blocks of columns with lazy updates.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_PASSES_SPARSIFY24METHODS_H
#define QCC_PASSES_SPARSIFY24METHODS_H

#include "passes/InverseHessian.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace qcc::sparsify24 {

/// Keeps the two largest of `score` per group (score [n, k] like w); zeros
/// the other two entries of `w`.
void keepTopTwo(std::vector<double> &w, const std::vector<double> &score,
                int64_t n, int64_t k);

std::vector<double> pruneMagnitude(std::vector<double> w, int64_t n,
                                   int64_t k);
/// `norms` [k]: the per-input-channel L2 norms ||X_j||.
std::vector<double> pruneWanda(std::vector<double> w, int64_t n, int64_t k,
                               const std::vector<double> &norms);

/// The OBS factor SparseGPT shares with GPTQ (passes/InverseHessian.h).
using obs::factorInverseHessian;
using obs::InverseHessian;

/// SparseGPT 2:4 on w [n, k] with `hinv` (blockSize: columns per lazy
/// batch, a multiple of 4).
std::vector<double> pruneSparseGpt(std::vector<double> w, int64_t n,
                                   int64_t k, const InverseHessian &hinv,
                                   int64_t blockSize = 128);

} // namespace qcc::sparsify24

#endif // QCC_PASSES_SPARSIFY24METHODS_H
