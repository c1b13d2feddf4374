//===- TabulatePositions.cpp - tabulate-positions -------------------------===//
//
// Values of the `positions` input alone (a Hugging Face export's rotary cos
// and sin) become rows of a compile-time table read with qcc.embedding, so a
// decode step runs a gather kernel instead of host nodes (issue 34: nothing
// on the host per step). Candidates are checked on sample positions with the
// CPU reference kernels, as raise-moe checks its masks: the table is exactly
// what the CPU would compute, row by row.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccAttrNames.h"
#include "dialects/QccDialect.h"
#include "dialects/QccOps.h"
#include "dialects/QccRuntimeAttrs.h"
#include "passes/ConstEval.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <cstring>

namespace qcc {
#define GEN_PASS_DEF_TABULATEPOSITIONS
#include "passes/Passes.h.inc"
} // namespace qcc

#define DEBUG_TYPE "tabulate-positions"

using namespace mlir;
using namespace qcc;

namespace {

/// Tables above this many elements are not made (64 MiB of f32 for two).
constexpr int64_t kMaxTableElements = int64_t(1) << 22;

/// The entry point's `positions` argument ([B, S] int64), if it has one.
BlockArgument positionsArgument(func::FuncOp fn) {
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    auto name = fn.getArgAttrOfType<StringAttr>(i, "qcc.name");
    auto type = dyn_cast<RankedTensorType>(fn.getArgument(i).getType());
    if (name && name.getValue() == "positions" && type &&
        type.getRank() == 2 && type.getElementType().isInteger(64))
      return fn.getArgument(i);
  }
  return nullptr;
}

rt::Tensor positionTensor(rt::Shape shape, ArrayRef<int64_t> values) {
  rt::Tensor t(rt::DType::I64, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<int64_t>()[i] = values[i];
  return t;
}

/// `v` evaluated with `positions` bound to `sample`.
FailureOr<rt::Tensor> evaluateAt(Value v, Value positions,
                                 const rt::Tensor &sample) {
  SampleEvaluator eval;
  eval.bind(positions, sample);
  return eval.eval(v);
}

/// The [P, D] table of `v` over positions 0 .. P-1, when v is one row per
/// position: its evaluation on [[0 .. P-1]] has shape [1, P, D], and on a
/// [2, 3] batch of other positions it is those rows of the table, bit for
/// bit. Else failure, with the reason in `why`.
FailureOr<rt::Tensor> tabulate(Value v, Value positions, int64_t P,
                               std::string &why) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t D = type.getShape().back();
  std::vector<int64_t> all(P);
  for (int64_t p = 0; p < P; ++p)
    all[p] = p;
  auto table = evaluateAt(v, positions, positionTensor({1, P}, all));
  if (failed(table)) {
    why = "it cannot be evaluated from the positions alone";
    return failure();
  }
  if (table->dtype() != rt::DType::F32 ||
      table->shape() != rt::Shape{1, P, D}) {
    why = "it is not one row per position";
    return failure();
  }
  // Positions in another order and batch shape: the ends, repeats, and a
  // few in between.
  std::vector<int64_t> sample = {P - 1, 0, P / 2, 1 % P, P - 1, (P / 3 + 5) % P};
  auto rows = evaluateAt(v, positions, positionTensor({2, 3}, sample));
  if (failed(rows) || rows->dtype() != rt::DType::F32 ||
      rows->shape() != rt::Shape{2, 3, D}) {
    why = "it is not one row per position on a [2, 3] batch";
    return failure();
  }
  const float *t = table->data<float>(), *r = rows->data<float>();
  for (size_t i = 0; i < sample.size(); ++i)
    if (std::memcmp(r + i * D, t + sample[i] * D, D * sizeof(float)) != 0) {
      why = "its row of a position depends on the other positions";
      return failure();
    }
  rt::Tensor out(rt::DType::F32, rt::Shape{P, D});
  std::memcpy(out.data<float>(), t, P * D * sizeof(float));
  return out;
}

struct TabulatePositionsPass
    : qcc::impl::TabulatePositionsBase<TabulatePositionsPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    BlockArgument positions = positionsArgument(fn);
    auto module = fn->getParentOfType<ModuleOp>();
    auto kv = module ? module->getAttrOfType<DictionaryAttr>(kKvCacheAttr)
                     : DictionaryAttr();
    if (!positions || !kv)
      return;
    auto config = kvCacheConfig(kv);
    if (!config) {
      llvm::consumeError(config.takeError()); // kv-cache-layout's to report
      return;
    }
    int64_t P = config->maxPositions;
    Block &body = fn.getBody().front();

    // The ops computed from the positions and constants alone, in order.
    llvm::SetVector<Operation *> derived;
    llvm::DenseSet<Value> fromPositions = {positions};
    for (Operation &op : body) {
      if (isa<ConstantOp>(op) || op.getNumRegions() != 0 ||
          !isa<QccDialect>(op.getDialect()) || op.getNumResults() == 0)
        continue;
      bool any = false, only = true;
      for (Value o : op.getOperands()) {
        if (fromPositions.contains(o))
          any = true;
        else if (!o.getDefiningOp<ConstantOp>())
          only = false;
      }
      if (!any || !only)
        continue;
      derived.insert(&op);
      for (Value r : op.getResults())
        fromPositions.insert(r);
    }

    // Candidates: [B, S, D] f32 values of those ops read outside them.
    SmallVector<Value> candidates;
    for (Operation *op : derived)
      for (Value r : op->getResults()) {
        auto t = dyn_cast<RankedTensorType>(r.getType());
        if (!t || t.getRank() != 3 || !t.getElementType().isF32() ||
            ShapedType::isDynamic(t.getShape().back()))
          continue;
        if (llvm::any_of(r.getUsers(), [&](Operation *u) {
              return !derived.contains(u);
            }))
          candidates.push_back(r);
      }

    OpBuilder b(fn.getContext());
    for (Value v : candidates) {
      int64_t D = cast<RankedTensorType>(v.getType()).getShape().back();
      if (P <= 0 || D <= 0 || P > kMaxTableElements / D)
        continue;
      std::string why;
      auto table = tabulate(v, positions, P, why);
      if (failed(table)) {
        LLVM_DEBUG(llvm::dbgs() << "tabulate-positions: " << v.getLoc()
                                << " stays: " << why << "\n");
        continue;
      }
      auto tableType = RankedTensorType::get({P, D}, b.getF32Type());
      b.setInsertionPointToStart(&body);
      Value constant = ConstantOp::create(
          b, v.getLoc(),
          DenseElementsAttr::get(
              tableType, ArrayRef<float>(table->data<float>(), P * D)));
      b.setInsertionPointAfter(v.getDefiningOp());
      Value rows = EmbeddingOp::create(b, v.getLoc(), v.getType(), constant,
                                       positions);
      v.replaceUsesWithIf(rows, [&](OpOperand &use) {
        return !derived.contains(use.getOwner());
      });
      LLVM_DEBUG(llvm::dbgs() << "tabulate-positions: " << v.getLoc()
                              << " is a [" << P << ", " << D << "] table\n");
    }
    // What only the replaced values used.
    for (Operation *op : llvm::reverse(derived))
      if (op->use_empty())
        op->erase();
  }
};

} // namespace
