//===- Quantize.cpp - quantize --------------------------------------------===//
//
// W8A8: every qcc.linear with a constant weight becomes qcc.quantize of its
// input + qcc.qlinear with int8 per-output-channel weights quantized here at
// compile time (docs/QUANTIZATION.md, section 3). A 2:4 sparse weight
// (qcc.sparse_2_4 of constants) stays compressed, with int8 values. The
// outlier columns int8-fallback chose stay in float.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccConstants.h"
#include "dialects/QccAttrNames.h"
#include "dialects/QccOps.h"
#include "format/Quant.h"
#include "format/device/numerics.h"
#include "passes/PatternUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/Debug.h"

#include <cmath>

namespace qcc {
#define GEN_PASS_DEF_QUANTIZE
#include "passes/Passes.h.inc"
} // namespace qcc

using namespace mlir;
using namespace qcc;

#define DEBUG_TYPE "qcc-quantize"

namespace {

/// Symmetric per-output-channel int8 weights: `scale[n] = max|W[n,:]| / qmax`
/// (1 for an all-zero row), `q = clamp(round_half_even(W / scale), -qmax,
/// qmax)`, qmax = 127 from `weightQuant`.
struct QuantizedWeight {
  std::vector<int8_t> q;
  std::vector<float> scale;
  std::vector<int32_t> sum;
};

QuantizedWeight quantizeWeight(const std::vector<float> &w, int64_t n,
                               int64_t k, QuantAttr weightQuant) {
  const float qmax = weightQuant.getQMax();
  QuantizedWeight r{std::vector<int8_t>(w.size()), std::vector<float>(n),
                    std::vector<int32_t>(n)};
  for (int64_t i = 0; i < n; ++i) {
    float mx = 0;
    for (int64_t j = 0; j < k; ++j)
      mx = std::max(mx, std::abs(w[i * k + j]));
    float s = mx > 0 ? mx / qmax : 1.f;
    r.scale[i] = s;
    int32_t sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      // nearbyint rounds half to even in the default rounding mode.
      float q = std::nearbyint(w[i * k + j] / s);
      int8_t v = (int8_t)std::clamp(q, -qmax, qmax);
      r.q[i * k + j] = v;
      sum += v;
    }
    r.sum[i] = sum;
  }
  return r;
}

/// FP8 E4M3 per-output-channel weights: `scale[n] = max|W[n,:]| / 448`
/// (1 for an all-zero row), each weight e4m3(W / scale) (numerics.h), the
/// row sums 0 (an FP8 quantize has no zero point).
QuantizedWeight quantizeWeightFp8(const std::vector<float> &w, int64_t n,
                                  int64_t k) {
  QuantizedWeight r{std::vector<int8_t>(w.size()), std::vector<float>(n),
                    std::vector<int32_t>(n, 0)};
  for (int64_t i = 0; i < n; ++i) {
    float mx = 0;
    for (int64_t j = 0; j < k; ++j)
      mx = std::max(mx, std::abs(w[i * k + j]));
    float s = numerics::fp8Scale(mx);
    r.scale[i] = s;
    for (int64_t j = 0; j < k; ++j)
      r.q[i * k + j] = (int8_t)numerics::quantizeE4M3(w[i * k + j], s);
  }
  return r;
}

std::string weightName(Value w) { return blobName(getConstant(w), "weight"); }

struct QuantizePass : qcc::impl::QuantizeBase<QuantizePass> {
  using QuantizeBase::QuantizeBase;

  void runOnOperation() override {
    SmallVector<LinearOp> linears;
    getOperation().walk([&](LinearOp l) { linears.push_back(l); });
    for (LinearOp l : linears)
      if (failed(quantize(l)))
        return signalPassFailure();
    eraseDeadConstants(getOperation());
  }

  LogicalResult quantize(LinearOp l) {
    if (isRouterLinear(l)) {
      LLVM_DEBUG(llvm::dbgs() << "quantize: " << l.getLoc()
                              << ": MoE router, stays float\n");
      return success();
    }
    // A 2:4 sparse weight: its kept values are quantized, row by row as the
    // dense pruned row would be (the pruned zeros change neither the absmax
    // nor the sum), and the metadata is reused as it is.
    auto sparse = l.getWeight().getDefiningOp<Sparse24Op>();
    auto w = getF32Values(getConstant(sparse ? sparse.getValues()
                                             : l.getWeight()));
    if (sparse && !getConstant(sparse.getMeta()))
      w = std::nullopt;
    if (!w) {
      LLVM_DEBUG(llvm::dbgs() << "quantize: " << l.getLoc()
                              << ": computed weight, stays float\n");
      return success();
    }
    auto wt = l.getWeight().getType();
    int64_t n = wt.getDimSize(0), k = wt.getDimSize(1);
    // Outlier columns (int8-fallback): they leave the int8 weight, zeroed
    // before its scales and sums, for a float slice [n, columns].
    std::vector<int64_t> outliers;
    if (auto cols = l->getAttrOfType<DenseI64ArrayAttr>(kOutlierColumnsAttr))
      outliers.assign(cols.asArrayRef().begin(), cols.asArrayRef().end());
    if (!outliers.empty() && sparse)
      return l.emitError("quantize: outlier columns and a 2:4 sparse weight "
                         "do not mix");
    if (fp8 && sparse)
      return l.emitError("quantize: FP8 weights are dense (no 2:4 form); "
                         "drop --sparsity or use --quant=w8a8");
    if (fp8 && asymmetric)
      return l.emitError("quantize: FP8 activations are symmetric; drop "
                         "--asymmetric");
    if (std::string why = format::outlierColumnsError(outliers, k);
        !why.empty())
      return l.emitError("quantize: ") << why;
    std::vector<float> outlierWeight;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c : outliers) {
        outlierWeight.push_back((*w)[i * k + c]);
        (*w)[i * k + c] = 0;
      }
    OpBuilder b(l);
    Location loc = l.getLoc();
    auto inType = l.getInput().getType();

    bool perToken = activations == ActivationQuant::PerToken;
    auto quant = QuantAttr::get(
        b.getContext(), format::kQuantBits,
        asymmetric ? QuantScheme::Asymmetric : QuantScheme::Symmetric,
        perToken ? QuantGranularity::PerToken : QuantGranularity::PerTensor,
        /*axis=*/std::nullopt);
    FloatAttr staticScale;
    if (activations == ActivationQuant::Static) {
      auto absmax = l->getAttrOfType<DenseElementsAttr>(qcc::kInputAbsmaxAttr);
      if (!absmax)
        return l.emitError("quantize: static activation scales need "
                           "calibration statistics (qcc.input_absmax)");
      // The columns read as 0 take no part.
      float mx = 0;
      int64_t c = 0;
      for (float v : absmax.getValues<float>())
        if (!llvm::is_contained(outliers, c++))
          mx = std::max(mx, v);
      staticScale = b.getF32FloatAttr(
          fp8 ? numerics::fp8Scale(mx) : (mx > 0 ? mx / quant.getQMax() : 1.f));
      if (asymmetric)
        return l.emitError("quantize: static scales are symmetric; drop "
                           "--asymmetric or use dynamic activations");
    }
    SmallVector<int64_t> scaleShape = {1};
    if (perToken) {
      scaleShape.assign(inType.getShape().begin(), inType.getShape().end());
      scaleShape.back() = 1;
    }
    LLVM_DEBUG(llvm::dbgs() << "quantize: " << loc << ": weight " << n << "x"
                            << k << ", activations " << quant << "\n");
    auto i32 = b.getI32Type();
    Type i8 = fp8 ? Type(b.getType<Float8E4M3FNType>())
                  : Type(b.getIntegerType(8));
    auto q = QuantizeOp::create(
        b, loc, RankedTensorType::get(inType.getShape(), i8),
        RankedTensorType::get(scaleShape, b.getF32Type()),
        RankedTensorType::get(scaleShape, i32), l.getInput(),
        quant, staticScale,
        outliers.empty() ? DenseI64ArrayAttr()
                         : b.getDenseI64ArrayAttr(outliers));

    // The quantized array: the dense weight [n, k] or the values [n, k/2].
    int64_t qk = sparse ? sparse.getValues().getType().getDimSize(1) : k;
    QuantizedWeight qw =
        fp8 ? quantizeWeightFp8(*w, n, qk)
            : quantizeWeight(*w, n, qk,
                             QuantAttr::get(b.getContext(), format::kQuantBits,
                                            QuantScheme::Symmetric,
                                            QuantGranularity::PerChannel,
                                            /*axis=*/0));
    std::string name =
        weightName(sparse ? sparse.getValues() : l.getWeight());
    Value wq = constantOf(b, loc, {n, qk}, i8, qw.q,
                          name + (fp8 ? "_f8" : "_i8"));
    if (sparse)
      wq = Sparse24Op::create(b, loc, RankedTensorType::get({n, k}, i8), wq,
                              sparse.getMeta());
    Value ws = constantOf(b, loc, {n}, b.getF32Type(), qw.scale,
                          name + "_scale");
    Value wsum = constantOf(b, loc, {n}, i32, qw.sum, name + "_sum");
    Value outlierInput, outlierSlice;
    if (!outliers.empty()) {
      outlierInput = l.getInput();
      outlierSlice = constantOf(b, loc, {n, (int64_t)outliers.size()},
                                b.getF32Type(), outlierWeight,
                                name + "_outliers");
    }
    auto ql = QLinearOp::create(
        b, loc, l.getType(), q.getResult(), q.getScaleOut(),
        q.getZeroPoint(), wq, ws, wsum, l.getBias(), outlierInput,
        outlierSlice,
        outliers.empty() ? DenseI64ArrayAttr()
                         : b.getDenseI64ArrayAttr(outliers));
    l.replaceAllUsesWith(ql.getResult());
    l.erase();
    if (sparse && sparse->use_empty())
      sparse.erase(); // the float values go with it (eraseDeadConstants)
    return success();
  }
};

} // namespace
