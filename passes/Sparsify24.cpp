//===- Sparsify24.cpp - sparsify-2-4 --------------------------------------===//
//
// 2:4 structured sparsity (docs/SPARSITY.md): the block linears' constant
// weights are pruned (passes/Sparsify24Methods.h) and stored as
// qcc.sparse_2_4 of their compressed form (format/Sparse24.h).
//
//===----------------------------------------------------------------------===//
#include "dialects/QccAttrNames.h"
#include "dialects/QccConstants.h"
#include "dialects/QccOps.h"
#include "format/Sparse24.h"
#include "passes/PatternUtils.h"
#include "passes/Passes.h"
#include "passes/Sparsify24Methods.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/GlobPattern.h"

#include <cstring>

#define DEBUG_TYPE "qcc-sparsify-2-4"

namespace qcc {
#define GEN_PASS_DEF_SPARSIFY24
#include "passes/Passes.h.inc"
} // namespace qcc

using namespace mlir;
using namespace qcc;
namespace s24 = qcc::format::sparse24;

namespace {

std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

struct Sparsify24Pass : qcc::impl::Sparsify24Base<Sparsify24Pass> {
  using Sparsify24Base::Sparsify24Base;

  /// Inverse-Hessian factors by Gram attribute (q/k/v share one).
  InverseHessianCache factors;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (blockSize <= 0 || blockSize % 4 != 0) {
      fn.emitError("sparsify-2-4: block-size must be a positive multiple of "
                   "4, not ")
          << (int64_t)blockSize;
      return signalPassFailure();
    }
    if (!(dampening > 0)) {
      fn.emitError("sparsify-2-4: dampening must be positive");
      return signalPassFailure();
    }
    std::vector<llvm::GlobPattern> globs;
    std::vector<int64_t> layers;
    for (const std::string &e : exclude) {
      int64_t layer;
      if (!StringRef(e).getAsInteger(10, layer)) {
        layers.push_back(layer);
        continue;
      }
      auto g = llvm::GlobPattern::create(e);
      if (!g) {
        fn.emitError("sparsify-2-4: bad exclude pattern '")
            << e << "': " << llvm::toString(g.takeError());
        return signalPassFailure();
      }
      globs.push_back(std::move(*g));
    }
    auto placement = blockLayers(fn);
    SmallVector<LinearOp> linears;
    fn.walk([&](LinearOp l) { linears.push_back(l); });
    for (LinearOp l : linears) {
      int64_t layer = placement.lookup(l);
      if (layer < 0 && !allLinears)
        continue;
      if (isRouterLinear(l)) // picks experts: stays dense
        continue;
      std::string name = nodeName(l);
      std::string weightName = blobName(getConstant(l.getWeight()), "");
      if (llvm::is_contained(layers, layer) ||
          llvm::any_of(globs, [&](const llvm::GlobPattern &g) {
            return (!name.empty() && g.match(name)) ||
                   (!weightName.empty() && g.match(weightName));
          })) {
        l->emitRemark("sparsify-2-4: ")
            << (name.empty() ? "a linear" : name) << " excluded, stays dense";
        continue;
      }
      if (failed(sparsify(l, name)))
        return signalPassFailure();
    }
    for (LinearOp l : linears) {
      l->removeAttr(kInputGramAttr);
      l->removeAttr(kInputL2NormAttr);
    }
    eraseDeadConstants(fn);
  }

  LogicalResult sparsify(LinearOp l, StringRef name) {
    std::string label = name.empty() ? std::string("a linear") : name.str();
    auto wt = l.getWeight().getType();
    auto w = getF32Values(getConstant(l.getWeight()));
    if (!w) {
      l->emitRemark("sparsify-2-4: ")
          << label << " has a computed weight, stays dense";
      return success();
    }
    int64_t n = wt.getDimSize(0), k = wt.getDimSize(1);
    if (k % s24::kKAlignment != 0) {
      l->emitWarning("sparsify-2-4: ")
          << label << " stays dense: K = " << k << " is not a multiple of "
          << s24::kKAlignment;
      return success();
    }
    std::vector<double> wd = toDouble(*w), pruned;
    switch (method) {
    case PruneMethod::Magnitude:
      pruned = sparsify24::pruneMagnitude(std::move(wd), n, k);
      break;
    case PruneMethod::Wanda: {
      auto norms = l->getAttrOfType<DenseElementsAttr>(kInputL2NormAttr);
      if (!norms || !norms.getElementType().isF32() ||
          norms.getNumElements() != k)
        return l.emitError("sparsify-2-4: wanda needs the input's L2 norms "
                           "(qcc.input_l2norm, f32 [")
               << k << "]) on " << label << " (calibrate)";
      std::vector<double> nd(norms.getValues<float>().begin(),
                             norms.getValues<float>().end());
      pruned = sparsify24::pruneWanda(std::move(wd), n, k, nd);
      break;
    }
    case PruneMethod::SparseGpt: {
      auto hinv = inverseHessianOf(l, "sparsify-2-4", "sparsegpt", label,
                                   dampening, factors);
      if (!hinv)
        return failure();
      pruned = sparsify24::pruneSparseGpt(std::move(wd), n, k, *hinv,
                                          blockSize);
      break;
    }
    }
    LLVM_DEBUG(llvm::dbgs() << "sparsify-2-4: " << label << " " << n << "x"
                            << k << "\n");
    return replaceWeight(l, std::vector<float>(pruned.begin(), pruned.end()),
                         label);
  }

  /// The weight of `l` becomes qcc.sparse_2_4 of the compressed `pruned`.
  LogicalResult replaceWeight(LinearOp l, const std::vector<float> &pruned,
                              StringRef label) {
    auto wt = cast<RankedTensorType>(l.getWeight().getType());
    int64_t n = wt.getDimSize(0), k = wt.getDimSize(1);
    std::string base = blobName(getConstant(l.getWeight()), "weight");
    // Compressed in f32; the values then take the weight's element type
    // (f16 / bf16 stay so, rounded to nearest even).
    std::vector<float> values((size_t)(n * s24::valuesCols(k)));
    std::vector<int32_t> meta((size_t)(n * s24::metaCols(k)));
    if (auto err = s24::compress(pruned.data(), n, k, sizeof(float),
                                 values.data(), meta.data()))
      return l.emitError("sparsify-2-4: ") << label << ": " << *err;
    Type et = wt.getElementType();
    OpBuilder b(l);
    Location loc = l.getLoc();
    auto valuesType = RankedTensorType::get({n, s24::valuesCols(k)}, et);
    auto metaType =
        RankedTensorType::get({n, s24::metaCols(k)}, b.getI32Type());
    Value v = ConstantOp::create(
        b, loc, makeFloatElements(valuesType, values, base + "_values"));
    Value m = ConstantOp::create(
        b, loc,
        makeElements(metaType,
                     ArrayRef<char>(reinterpret_cast<const char *>(meta.data()),
                                    meta.size() * sizeof(int32_t)),
                     base + "_meta"));
    Value s = Sparse24Op::create(b, loc, wt, v, m);
    l.getWeightMutable().assign(s);
    return success();
  }
};

} // namespace
