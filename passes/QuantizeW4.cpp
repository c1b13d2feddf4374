//===- QuantizeW4.cpp - quantize-w4 ---------------------------------------===//
//
// W4A16 (docs/QUANTIZATION.md, section 7): the block linears' constant float
// weights get int4 values per group (passes/QuantizeW4Methods.h) and are
// stored as qcc.weight_int4 of their packed form (format/Int4.h). W4A8
// (section 13) also reads their inputs as per-token int8 codes.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccAttrNames.h"
#include "dialects/QccConstants.h"
#include "dialects/QccOps.h"
#include "format/Int4.h"
#include "format/Quant.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"
#include "passes/QuantizeW4Methods.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "qcc-quantize-w4"

namespace qcc {
#define GEN_PASS_DEF_QUANTIZEW4
#include "passes/Passes.h.inc"
} // namespace qcc

using namespace mlir;
using namespace qcc;
namespace i4 = qcc::format::int4;

namespace {

struct QuantizeW4Pass : qcc::impl::QuantizeW4Base<QuantizeW4Pass> {
  using QuantizeW4Base::QuantizeW4Base;

  InverseHessianCache factors;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (blockSize <= 0) {
      fn.emitError("quantize-w4: block-size must be positive, not ")
          << (int64_t)blockSize;
      return signalPassFailure();
    }
    if (!(dampening > 0)) {
      fn.emitError("quantize-w4: dampening must be positive");
      return signalPassFailure();
    }
    if (std::string why = i4::groupSizeError(groupSize, groupSize);
        !why.empty()) {
      fn.emitError("quantize-w4: ") << why;
      return signalPassFailure();
    }
    if (actOrder && method != W4Method::Gptq) {
      fn.emitError("quantize-w4: act-order needs method gptq");
      return signalPassFailure();
    }
    auto layers = blockLayers(fn);
    SmallVector<LinearOp> linears;
    fn.walk([&](LinearOp l) { linears.push_back(l); });
    for (LinearOp l : linears) {
      if (layers.lookup(l) < 0 && !allLinears)
        continue;
      if (isRouterLinear(l)) // picks experts: stays float
        continue;
      if (failed(quantize(l)))
        return signalPassFailure();
    }
    for (LinearOp l : linears) {
      l->removeAttr(kInputGramAttr);
      l->removeAttr(kInputL2NormAttr);
    }
    eraseDeadConstants(fn);
  }

  LogicalResult quantize(LinearOp l) {
    std::string name = nodeName(l);
    std::string label = name.empty() ? std::string("a linear") : name;
    auto w = getF32Values(getConstant(l.getWeight()));
    if (!w) {
      l->emitRemark("quantize-w4: ")
          << label << " has a computed weight, stays float";
      return success();
    }
    auto wt = l.getWeight().getType();
    int64_t n = wt.getDimSize(0), k = wt.getDimSize(1);
    if (std::string why = i4::groupSizeError(k, groupSize); !why.empty()) {
      l->emitWarning("quantize-w4: ") << label << " stays float: " << why;
      return success();
    }
    std::vector<double> wd(w->begin(), w->end());
    w4::Int4Weight q;
    switch (method) {
    case W4Method::Rtn:
      q = w4::quantizeRtn(wd, n, k, groupSize, asymmetric);
      break;
    case W4Method::Gptq: {
      std::shared_ptr<obs::InverseHessian> hinv;
      std::vector<int32_t> perm;
      if (actOrder) {
        // The factor of the permuted Hessian: per linear input and order.
        auto H = inputGram(l, "quantize-w4", "gptq", label);
        if (!H)
          return failure();
        perm = w4::actOrder(*H, k);
        hinv = std::make_shared<obs::InverseHessian>();
        if (auto err = obs::factorInverseHessian(
                obs::permuteHessian(*H, k, perm), k, dampening, *hinv))
          return l.emitError("quantize-w4: ") << label << ": " << *err;
      } else {
        hinv = inverseHessianOf(l, "quantize-w4", "gptq", label, dampening,
                                factors);
        if (!hinv)
          return failure();
      }
      q = w4::quantizeGptq(wd, n, k, groupSize, *hinv, perm, blockSize,
                           asymmetric);
      break;
    }
    }
    LLVM_DEBUG(llvm::dbgs()
               << "quantize-w4: " << label << " " << n << "x" << k << "\n");
    OpBuilder b(l);
    Location loc = l.getLoc();
    std::string base = blobName(getConstant(l.getWeight()), "weight");
    std::vector<int8_t> packed((size_t)(n * i4::packedCols(k)));
    i4::pack(q.q.data(), n, k, packed.data());
    Value p = constantOf(b, loc, {n, i4::packedCols(k)}, b.getIntegerType(8),
                         packed, base + "_int4");
    Value s = constantOf(b, loc, {n, i4::scaleCols(k, groupSize)},
                         b.getF16Type(), q.scales, base + "_scales");
    Value perm;
    if (!q.perm.empty())
      perm = constantOf(b, loc, {k}, b.getI32Type(), q.perm, base + "_perm");
    Value offsets;
    if (!q.offsets.empty())
      offsets = constantOf(b, loc, {n, i4::scaleCols(k, groupSize)},
                           b.getF16Type(), q.offsets, base + "_offsets");
    Value wq = WeightInt4Op::create(b, loc, wt, p, s, perm, offsets,
                                    b.getI64IntegerAttr(groupSize));
    l.getWeightMutable().assign(wq);
    if (int8Activations)
      quantizeInput(b, l, label);
    return success();
  }

  /// W4A8: the input as its per-token int8 codes read back (QDQ).
  static void quantizeInput(OpBuilder &b, LinearOp l, llvm::StringRef label) {
    auto in = cast<RankedTensorType>(l.getInput().getType());
    if (!in.getElementType().isF32() || in.getRank() < 1) {
      l->emitWarning("quantize-w4: ")
          << label << " reads " << in
          << ", not f32: its activations stay float";
      return;
    }
    SmallVector<int64_t> scaleShape(in.getShape());
    scaleShape.back() = 1;
    auto quant = QuantAttr::get(b.getContext(), format::kQuantBits,
                                QuantScheme::Symmetric,
                                QuantGranularity::PerToken,
                                /*axis=*/std::nullopt);
    auto q = QuantizeOp::create(
        b, l.getLoc(), in, RankedTensorType::get(scaleShape, b.getF32Type()),
        RankedTensorType::get(scaleShape, b.getI32Type()), l.getInput(),
        quant, FloatAttr(), DenseI64ArrayAttr());
    l.getInputMutable().assign(q.getResult());
  }
};

} // namespace
