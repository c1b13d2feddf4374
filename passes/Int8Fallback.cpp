//===- Int8Fallback.cpp - int8-fallback -----------------------------------===//
//
// LLM.int8()-style decomposition (Dettmers et al., 2022), chosen from
// calibration: the input columns of a linear whose calibrated activation
// absmax, or whose weight column absmax, stands far above the median are
// kept in float when that lowers the linear's W8A8 output error on the
// calibration rows (docs/QUANTIZATION.md, section 3). This pass only chooses (`qcc.outlier_columns` on the qcc.linear);
// quantize carries the choice out.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccAttrNames.h"
#include "dialects/QccConstants.h"
#include "dialects/QccOps.h"
#include "passes/PatternUtils.h"
#include "passes/Passes.h"
#include "passes/W8A8Error.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/Debug.h"

#include <algorithm>
#include <iomanip>
#include <numeric>
#include <sstream>

namespace qcc {
#define GEN_PASS_DEF_INT8FALLBACK
#include "passes/Passes.h.inc"
} // namespace qcc

using namespace mlir;
using namespace qcc;

#define DEBUG_TYPE "qcc-int8-fallback"

namespace {

/// Output channels measured per linear: per-output-channel weight scales
/// make each channel's error independent of the others, so an even stride
/// of 256 estimates the whole (smooth-quant's alpha search does the same).
constexpr int64_t kMaxOutputs = 256;

struct Int8FallbackPass : qcc::impl::Int8FallbackBase<Int8FallbackPass> {
  using Int8FallbackBase::Int8FallbackBase;

  void runOnOperation() override {
    if (outlierRatio <= 1 || maxFraction <= 0 || maxFraction > 1 ||
        errorThreshold < 0) {
      getOperation().emitError("int8-fallback: needs outlier-ratio > 1, "
                               "max-fraction in (0, 1] and error-threshold "
                               ">= 0");
      return signalPassFailure();
    }
    getOperation().walk([&](LinearOp l) {
      choose(l);
      l->removeAttr(kInputSamplesAttr); // they go no further
    });
    if (report && measured > 0) {
      std::ostringstream os;
      os << std::setprecision(3) << "int8-fallback: " << chosen << " of "
         << measured << " linears keep float columns; the largest outlier "
         << "ratio (max / median absmax, after smoothing) is " << worstRatio
         << "x (" << worstName << ")";
      llvm::errs() << os.str() << "\n";
    }
  }

  // For the report: linears with statistics, those that fall back, and the
  // largest outlier ratio among them.
  int measured = 0, chosen = 0;
  double worstRatio = 0;
  std::string worstName;

  void decline(LinearOp l, const llvm::Twine &why) {
    LLVM_DEBUG(llvm::dbgs() << "int8-fallback: " << l.getLoc() << ": " << why
                            << "\n");
    l->emitRemark("int8-fallback: no outlier columns: ") << why;
  }

  /// Each column's absmax over the median column's.
  static std::vector<double> overMedian(const std::vector<float> &absmax) {
    std::vector<float> sorted(absmax);
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2,
                     sorted.end());
    double med = std::max(sorted[sorted.size() / 2], 1e-30f);
    std::vector<double> r;
    for (float v : absmax)
      r.push_back(v / med);
    return r;
  }

  /// The candidate columns: those whose activation absmax or weight column
  /// absmax (max_n |W[n, j]|) exceeds outlierRatio times the median column's
  /// (smoothing moves an outlier between the two: at a high alpha it sits in
  /// the weight, where it coarsens every output channel's scale), the
  /// largest first, at most max(1, maxFraction * K); returned ascending.
  std::vector<int64_t> candidates(const std::vector<float> &absmax,
                                  const std::vector<float> &wmax) {
    std::vector<double> xr = overMedian(absmax), wr = overMedian(wmax), score;
    std::vector<int64_t> cols;
    for (size_t j = 0; j < absmax.size(); ++j) {
      score.push_back(std::max(xr[j], wr[j]));
      if (score[j] > outlierRatio)
        cols.push_back((int64_t)j);
    }
    std::stable_sort(cols.begin(), cols.end(), [&](int64_t a, int64_t b) {
      return score[a] > score[b];
    });
    size_t most = std::max<size_t>(1, (size_t)(maxFraction * absmax.size()));
    if (cols.size() > most)
      cols.resize(most);
    std::sort(cols.begin(), cols.end());
    return cols;
  }

  void choose(LinearOp l) {
    auto absmaxAttr = l->getAttrOfType<DenseElementsAttr>(kInputAbsmaxAttr);
    if (!absmaxAttr || !absmaxAttr.getElementType().isF32())
      return decline(l, "no calibration statistics (qcc.input_absmax)");
    auto w = getF32Values(getConstant(l.getWeight()));
    if (!w)
      return decline(l, "its weight is not a dense constant");
    int64_t N = l.getWeight().getType().getDimSize(0),
            K = l.getWeight().getType().getDimSize(1);
    std::vector<float> absmax(absmaxAttr.getValues<float>().begin(),
                              absmaxAttr.getValues<float>().end());
    if ((int64_t)absmax.size() != K || K == 0)
      return decline(l, "its statistics do not match the weight's K");
    std::vector<float> wmax(K, 0.0f);
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < K; ++j)
        wmax[j] = std::max(wmax[j], std::abs((*w)[i * K + j]));
    ++measured;
    for (const std::vector<float> *v : {&absmax, &wmax})
      if (double r = w8a8::outlierRatio(*v); r > worstRatio) {
        worstRatio = r;
        worstName = locationName(l.getLoc()) +
                    (v == &absmax ? " activations" : " weight columns");
      }
    std::vector<int64_t> cols = candidates(absmax, wmax);
    if (cols.empty())
      return decline(l, "no column's absmax (activation or weight) exceeds "
                        "the outlier ratio");
    auto samples = l->getAttrOfType<ElementsAttr>(kInputSamplesAttr);
    auto sampleType =
        samples ? dyn_cast<RankedTensorType>(samples.getType()) : nullptr;
    auto x = samples ? getF32Values(samples) : std::nullopt;
    if (!x || sampleType.getRank() != 2 || sampleType.getDimSize(1) != K ||
        x->empty())
      return decline(l, "no calibration rows (qcc.input_samples) to "
                        "measure the error on");
    int64_t R = sampleType.getDimSize(0), n = std::min(N, kMaxOutputs);
    std::vector<float> rows;
    for (int64_t i = 0; i < n; ++i) {
      int64_t row = i * N / n;
      rows.insert(rows.end(), w->begin() + row * K, w->begin() + (row + 1) * K);
    }
    std::vector<float> y = w8a8::matmulT(*x, rows, R, n, K);
    double before = w8a8::outputError(*x, rows, y, R, n, K, {}).relative();
    double after = w8a8::outputError(*x, rows, y, R, n, K, cols).relative();
    if (before <= errorThreshold)
      return decline(l, "its W8A8 error is below the threshold");
    if (after >= before)
      return decline(l, "float outlier columns do not lower its error");
    l->setAttr(kOutlierColumnsAttr,
               DenseI64ArrayAttr::get(l.getContext(), cols));
    ++chosen;
    if (report) {
      std::ostringstream os;
      os << std::setprecision(3) << "int8-fallback: "
         << locationName(l.getLoc()) << ": " << cols.size() << " of " << K
         << " columns in float (outliers: activations "
         << w8a8::outlierRatio(absmax) << "x, weight columns "
         << w8a8::outlierRatio(wmax) << "x), W8A8 error " << 100 * before
         << "% -> " << 100 * after << "%";
      llvm::errs() << os.str() << "\n";
    }
  }
};

} // namespace
