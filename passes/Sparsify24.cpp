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

/// The name a linear is known by: its location's name (the ONNX node).
std::string nodeName(Operation *op) {
  std::string name;
  op->getLoc()->walk([&](Location l) {
    if (auto n = dyn_cast<NameLoc>(l)) {
      name = n.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return name;
}

/// Where each linear sits: its transformer block (counted by attention
/// ops), or none (before the first block, or the LM head).
struct Placement {
  int64_t layer = -1; ///< -1: outside the blocks
};

bool isBlockOp(Operation *op) {
  return isa<AttentionOp, LayerNormOp, RmsNormOp>(op);
}

/// Whether `linear`'s result reaches an attention op through glue only (no
/// other linear or norm on the way): a q/k/v projection of the next block.
bool feedsAttention(LinearOp linear) {
  SmallVector<Operation *> work(linear->getUsers().begin(),
                                linear->getUsers().end());
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!seen.insert(op).second)
      continue;
    if (isa<AttentionOp>(op))
      return true;
    if (isa<LinearOp, LayerNormOp, RmsNormOp>(op))
      continue;
    for (Operation *u : op->getUsers())
      work.push_back(u);
  }
  return false;
}

llvm::DenseMap<Operation *, Placement> placeLinears(func::FuncOp fn) {
  // Ops from which an attention or a norm is reachable: the last block's
  // down projection reaches the final norm, the LM head nothing.
  llvm::DenseSet<Operation *> reachesBlock;
  SmallVector<Operation *> ops;
  fn.walk([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : llvm::reverse(ops)) {
    bool r = isBlockOp(op);
    for (Operation *u : op->getUsers())
      r = r || reachesBlock.contains(u);
    if (r)
      reachesBlock.insert(op);
  }
  llvm::DenseMap<Operation *, Placement> out;
  int64_t attentions = 0;
  for (Operation *op : ops) {
    if (isa<AttentionOp>(op))
      ++attentions;
    auto l = dyn_cast<LinearOp>(op);
    if (!l)
      continue;
    int64_t layer = feedsAttention(l) ? attentions : attentions - 1;
    out[op].layer = reachesBlock.contains(op) ? layer : -1;
  }
  return out;
}

std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

struct Sparsify24Pass : qcc::impl::Sparsify24Base<Sparsify24Pass> {
  using Sparsify24Base::Sparsify24Base;

  /// Inverse-Hessian factors by Gram attribute (q/k/v share one).
  llvm::DenseMap<Attribute, std::shared_ptr<sparsify24::InverseHessian>>
      factors;

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
    auto placement = placeLinears(fn);
    SmallVector<LinearOp> linears;
    fn.walk([&](LinearOp l) { linears.push_back(l); });
    for (LinearOp l : linears) {
      int64_t layer = placement.lookup(l).layer;
      if (layer < 0 && !allLinears)
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
      auto hinv = factorFor(l, label, k);
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

  /// SparseGPT's factor of the linear's Gram matrix (computed once per
  /// matrix); null after an error on `l`.
  std::shared_ptr<sparsify24::InverseHessian>
  factorFor(LinearOp l, StringRef label, int64_t k) {
    auto gram = l->getAttrOfType<ElementsAttr>(kInputGramAttr);
    auto type = gram ? cast<ShapedType>(gram.getType()) : ShapedType();
    if (!gram || !type.getElementType().isF64() || type.getRank() != 2 ||
        type.getDimSize(0) != k || type.getDimSize(1) != k) {
      l.emitError("sparsify-2-4: sparsegpt needs the input's Gram matrix "
                  "(qcc.input_gram, f64 [")
          << k << ", " << k << "]) on " << label << " (calibrate)";
      return nullptr;
    }
    if (auto it = factors.find(gram); it != factors.end())
      return it->second;
    auto bytes = getBytes(gram);
    if (!bytes) {
      l.emitError("sparsify-2-4: the Gram matrix of ")
          << label << " has no data";
      return nullptr;
    }
    std::vector<double> H((size_t)(k * k));
    std::memcpy(H.data(), bytes->data(), H.size() * sizeof(double));
    auto f = std::make_shared<sparsify24::InverseHessian>();
    if (auto err = sparsify24::factorInverseHessian(std::move(H), k,
                                                    dampening, *f)) {
      l.emitError("sparsify-2-4: ") << label << ": " << *err;
      return nullptr;
    }
    factors[gram] = f;
    return f;
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
