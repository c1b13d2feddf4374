//===- SmoothQuant.cpp - smooth-quant -------------------------------------===//
//
// SmoothQuant (Xiao et al., 2023): migrate activation outliers into the
// weights with a per-input-channel factor s, folded for free into the norm
// that produces the activations (docs/QUANTIZATION.md, section 2).
//
//===----------------------------------------------------------------------===//
#include "dialects/QccConstants.h"
#include "dialects/QccAttrNames.h"
#include "dialects/QccOps.h"
#include "passes/PatternUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Debug.h"

#include <cmath>
#include <cstring>

#define DEBUG_TYPE "qcc-smooth-quant"

namespace qcc {
#define GEN_PASS_DEF_SMOOTHQUANT
#include "passes/Passes.h.inc"
} // namespace qcc

using namespace mlir;
using namespace qcc;

namespace {

/// Keeps s finite where a channel never fires or a weight column is zero.
constexpr float kEps = 1e-5f;

std::optional<std::vector<float>> absmaxOf(LinearOp l) {
  auto attr = l->getAttrOfType<DenseElementsAttr>(qcc::kInputAbsmaxAttr);
  if (!attr || !attr.getElementType().isF32())
    return std::nullopt;
  return std::vector<float>(attr.getValues<float>().begin(),
                            attr.getValues<float>().end());
}

/// A new constant of float `type` (f32, or f16/bf16: the weight keeps its
/// storage type, rounded to nearest even) holding `values`, named after
/// `hint`.
Value f32Constant(OpBuilder &b, Location loc, RankedTensorType type,
                  const std::vector<float> &values, StringRef hint) {
  return ConstantOp::create(b, loc, makeFloatElements(type, values, hint));
}

std::string nameOf(Value v, StringRef suffix) {
  return blobName(getConstant(v), "norm") + suffix.str();
}

struct SmoothQuantPass : qcc::impl::SmoothQuantBase<SmoothQuantPass> {
  using SmoothQuantBase::SmoothQuantBase;

  void runOnOperation() override {
    if (alpha < 0 || alpha > 1) {
      getOperation().emitError("smooth-quant: alpha must be in [0, 1], not ")
          << alpha;
      return signalPassFailure();
    }
    SmallVector<Operation *> norms;
    getOperation().walk([&](Operation *op) {
      if (isa<LayerNormOp, RmsNormOp>(op))
        norms.push_back(op);
    });
    for (Operation *norm : norms)
      smooth(norm);
    eraseDeadConstants(getOperation());
  }

  /// A remark on `norm` saying why its group is left unsmoothed (qcc-opt
  /// shows it; the qcc driver drops remarks).
  void decline(Operation *norm, const llvm::Twine &why) {
    LLVM_DEBUG(llvm::dbgs() << "smooth-quant: skip " << norm->getName() << " at "
                            << norm->getLoc() << ": " << why << "\n");
    norm->emitRemark("smooth-quant: ")
        << norm->getName() << " not smoothed: " << why;
  }

  /// qcc.input_gram H -> H_ij / (s_i s_j) and qcc.input_l2norm n -> n_j / s_j
  /// on `l`, when present and as wide as `s`.
  static void rescaleStatistics(LinearOp l, const std::vector<float> &s,
                                llvm::DenseMap<Attribute, Attribute> &grams) {
    size_t k = s.size();
    if (auto norms = l->getAttrOfType<DenseElementsAttr>(kInputL2NormAttr);
        norms && norms.getElementType().isF32() &&
        norms.getNumElements() == (int64_t)k) {
      std::vector<float> v(norms.getValues<float>().begin(),
                           norms.getValues<float>().end());
      for (size_t j = 0; j < k; ++j)
        v[j] /= s[j];
      l->setAttr(kInputL2NormAttr,
                 DenseElementsAttr::get(norms.getType(), ArrayRef<float>(v)));
    }
    auto gram = l->getAttrOfType<ElementsAttr>(kInputGramAttr);
    if (!gram)
      return;
    auto type = cast<RankedTensorType>(gram.getType());
    if (!type.getElementType().isF64() ||
        type.getNumElements() != (int64_t)(k * k))
      return;
    Attribute &done = grams[gram];
    if (!done) {
      auto bytes = getBytes(gram);
      if (!bytes)
        return;
      std::vector<double> H(k * k);
      std::memcpy(H.data(), bytes->data(), H.size() * sizeof(double));
      for (size_t i = 0; i < k; ++i)
        for (size_t j = 0; j < k; ++j)
          H[i * k + j] /= (double)s[i] * (double)s[j];
      done = makeElements(
          type,
          ArrayRef<char>(reinterpret_cast<const char *>(H.data()),
                         H.size() * sizeof(double)),
          blobName(gram, "gram") + "_smoothed");
    }
    l->setAttr(kInputGramAttr, done);
  }

  /// Smooths the linears that read `norm`, if every user is one with stats.
  void smooth(Operation *norm) {
    Value out = norm->getResult(0);
    SmallVector<LinearOp> group;
    for (Operation *user : out.getUsers()) {
      // Any other consumer would see the smoothed values.
      auto l = dyn_cast<LinearOp>(user);
      if (!l || l.getInput() != out)
        return decline(norm, "its result is also used by " +
                                 user->getName().getStringRef());
      if (!absmaxOf(l))
        return decline(norm, "a qcc.linear reading it has no calibration "
                             "statistics (qcc.input_absmax)");
      if (!getF32Values(getConstant(l.getWeight())))
        return decline(norm, "a qcc.linear reading it has a computed weight");
      group.push_back(l);
    }
    if (group.empty())
      return; // nothing reads it: nothing to smooth
    Value gammaV = norm->getOperand(1);
    Value betaV = isa<LayerNormOp>(norm) && norm->getNumOperands() > 2
                      ? norm->getOperand(2)
                      : Value();
    auto gamma = getF32Values(getConstant(gammaV));
    std::optional<std::vector<float>> beta;
    if (betaV && !(beta = getF32Values(getConstant(betaV))))
      return decline(norm, "its beta is not a constant");
    if (!gamma)
      return decline(norm, "its gamma is not a constant");
    size_t k = gamma->size();

    // max over the group of the activation and weight column absmax.
    std::vector<float> act(k, 0.f), wmax(k, 0.f);
    std::vector<std::vector<float>> weights;
    for (LinearOp l : group) {
      auto a = *absmaxOf(l);
      auto w = *getF32Values(getConstant(l.getWeight()));
      if (a.size() != k || w.size() % k != 0)
        return decline(norm, "a qcc.linear's statistics or weight columns "
                             "do not match the norm's width");
      for (size_t j = 0; j < k; ++j)
        act[j] = std::max(act[j], a[j]);
      for (size_t i = 0; i < w.size(); ++i)
        wmax[i % k] = std::max(wmax[i % k], std::abs(w[i]));
      weights.push_back(std::move(w));
    }
    std::vector<float> s(k);
    for (size_t j = 0; j < k; ++j)
      s[j] = std::pow(std::max(act[j], kEps), (float)alpha) /
             std::pow(std::max(wmax[j], kEps), 1.f - (float)alpha);
    LLVM_DEBUG(llvm::dbgs() << "smooth-quant: smooth " << norm->getName()
                            << " at " << norm->getLoc() << " and "
                            << group.size() << " linear(s), " << k
                            << " channels, max s = "
                            << *llvm::max_element(s) << "\n");

    OpBuilder b(norm);
    Location loc = norm->getLoc();
    for (size_t j = 0; j < k; ++j)
      (*gamma)[j] /= s[j];
    norm->setOperand(1, f32Constant(b, loc,
                                    cast<RankedTensorType>(gammaV.getType()),
                                    *gamma, nameOf(gammaV, "_smoothed")));
    if (beta) {
      for (size_t j = 0; j < k; ++j)
        (*beta)[j] /= s[j];
      norm->setOperand(2, f32Constant(b, loc,
                                      cast<RankedTensorType>(betaV.getType()),
                                      *beta, nameOf(betaV, "_smoothed")));
    }
    // The pruning statistics describe the smoothed input X / s from now on
    // (one new Gram matrix per old one: q/k/v share theirs).
    llvm::DenseMap<Attribute, Attribute> rescaledGram;
    for (LinearOp l : group)
      rescaleStatistics(l, s, rescaledGram);
    for (auto [l, w] : llvm::zip(group, weights)) {
      for (size_t i = 0; i < w.size(); ++i)
        w[i] *= s[i % k];
      OpBuilder lb(l);
      Value wv = l.getWeight();
      l.getWeightMutable().assign(
          f32Constant(lb, l.getLoc(), cast<RankedTensorType>(wv.getType()), w,
                      nameOf(wv, "_smoothed")));
      auto a = *absmaxOf(l);
      for (size_t j = 0; j < k; ++j)
        a[j] /= s[j];
      l->setAttr(qcc::kInputAbsmaxAttr,
                 DenseElementsAttr::get(
                     RankedTensorType::get({(int64_t)k}, lb.getF32Type()),
                     ArrayRef<float>(a)));
    }
  }
};

} // namespace
