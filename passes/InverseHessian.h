//===- InverseHessian.h - the OBS inverse-Hessian factor ---------*- C++
//-*-===//
//
// What the optimal-brain-surgeon methods (SparseGPT,
// passes/Sparsify24Methods.h; GPTQ, passes/QuantizeW4Methods.h) need of a
// linear input's calibration Hessian H = X^T X, computed once per input
// (linears reading one value share it), free of MLIR so that unit tests call it
// on plain arrays. Both methods visit the columns of a weight row left to
// right; when column i is fixed to q, its error e = (w_i - q) / U_ii is
// compensated on the later columns, w_j -= e * U_ij (j > i): `compensate` is
// that one formula.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_PASSES_INVERSEHESSIAN_H
#define QCC_PASSES_INVERSEHESSIAN_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace qcc::obs {

/// U upper triangular [k, k] with U^T U = (H + damp I)^-1, damp =
/// dampening * mean(diag H), and the dead input channels (H_jj == 0: never
/// active; the methods zero their weights first).
struct InverseHessian {
  int64_t k = 0;
  std::vector<double> U;
  std::vector<char> dead;
};

/// Factors `H` [k, k] (symmetric). Fails, saying why, if it is not positive
/// definite even after dampening (a few tries with 10x more).
std::optional<std::string> factorInverseHessian(std::vector<double> H,
                                                int64_t k, double dampening,
                                                InverseHessian &out);

/// OBS's update for fixing column i of row `x` to `q`: returns the scaled
/// error e = (x[i] - q) / U_ii, sets x[i] = q and applies x[j] -= e * U_ij to
/// the columns j in [i + 1, end) (the rest of the lazy batch; the columns
/// after it take e later through `compensateBatch`).
double compensate(double *x, int64_t i, double q, int64_t end,
                  const InverseHessian &hinv);

/// The lazy batch: the columns [end, k) of row `x` take the errors `err` of
/// the batch's columns [begin, end) at once.
void compensateBatch(double *x, int64_t begin, int64_t end, const double *err,
                     const InverseHessian &hinv);

/// (H[perm][:, perm]): the Hessian of the inputs reordered by `perm`
/// (stored column j is input column perm[j]).
std::vector<double> permuteHessian(const std::vector<double> &H, int64_t k,
                                   const std::vector<int32_t> &perm);

} // namespace qcc::obs

#endif // QCC_PASSES_INVERSEHESSIAN_H
