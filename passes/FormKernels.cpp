//===- FormKernels.cpp - form-kernels -------------------------------------===//
//
// Groups ops into qcc.kernel regions, one per future GPU kernel: a GEMM with
// its epilogue chain (and the qcc.sparse_2_4 of a 2:4 weight), a norm with the per-token quantize of its output,
// attention with the rotary embeddings of its query and key, an embedding
// gather, a chain of elementwise ops, a mixture-of-experts router (softmax,
// top_k, renormalization). Shape glue stays outside.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccAttrNames.h"
#include "dialects/QccOps.h"
#include "passes/ConstEval.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "qcc-form-kernels"

namespace qcc {
#define GEN_PASS_DEF_FORMKERNELS
#include "passes/Passes.h.inc"
} // namespace qcc

using namespace mlir;
using namespace qcc;

namespace {

/// An op that may join an elementwise chain (the ElementwiseChain trait of
/// format/OpKinds.def).
bool isElementwise(Operation *op) {
  std::optional<format::OpKind> kind = runtimeOpKind(op);
  return kind && format::joinsElementwiseChain(*kind);
}

/// The only user of `op`'s single result, if it has exactly one use.
Operation *soleUser(Operation *op) {
  if (op->getNumResults() != 1 || !op->getResult(0).hasOneUse())
    return nullptr;
  return *op->getResult(0).getUsers().begin();
}

class Former {
public:
  explicit Former(func::FuncOp fn) : fn(fn) {}

  void run() {
    SmallVector<Operation *> ops;
    fn.walk([&](Operation *op) {
      if (op->getParentOp() == fn.getOperation())
        ops.push_back(op);
    });
    // Anchors first, so that they take their epilogues and prologues.
    for (Operation *op : ops)
      if (isa<QLinearOp, LinearOp>(op))
        formGemm(op);
    if (auto tokens = fn->getAttrOfType<IntegerAttr>(kTokensPerRowAttr);
        tokens && tokens.getInt() == 1)
      groupSiblingGemvs();
    for (Operation *op : ops)
      if (isa<QuantizeOp>(op) && !claimed.contains(op) && !runsOnHost(op))
        formNormQuantize(op);
    for (Operation *op : ops)
      if (isa<AttentionOp, KvAttentionOp>(op))
        formAttention(op);
    for (Operation *op : ops)
      if (auto softmax = dyn_cast<SoftmaxOp>(op); softmax && !claimed.contains(op))
        formRouter(softmax);
    for (Operation *op : ops) {
      if (claimed.contains(op))
        continue;
      if (isa<EmbeddingOp>(op))
        form({op}, KernelKind::Embedding);
      else if (isa<MoeOp>(op))
        form({op}, KernelKind::Moe);
      else if (isa<LayerNormOp, RmsNormOp>(op))
        form({op}, KernelKind::Norm);
      else if (isa<HadamardOp>(op))
        form({op}, KernelKind::Hadamard);
      else if (isa<QuantizeOp>(op) && runsOnHost(op))
        decline(op, "no GPU kernel writes FP8 codes or int8 codes read back "
                    "(W4A8) yet: it runs on the host");
      else if (isa<QuantizeOp>(op))
        form({op}, KernelKind::Quantize);
      else if (isElementwise(op))
        formElementwise(op);
    }
    for (auto &[group, kind] : groups)
      outline(group, kind);
  }

private:
  void form(SmallVector<Operation *> group, KernelKind kind) {
    LLVM_DEBUG(llvm::dbgs() << "form-kernels: " << qcc::format::spelling(kind) << " of "
                            << group.size() << " op(s) at "
                            << group.back()->getLoc() << "\n");
    for (Operation *op : group)
      claimed.insert(op);
    groups.emplace_back(std::move(group), kind);
  }

  /// A remark on `op` saying why it stays out of a kernel it could join
  /// (qcc-opt shows it; the qcc driver drops remarks).
  static void decline(Operation *op, const llvm::Twine &why) {
    LLVM_DEBUG(llvm::dbgs() << "form-kernels: not fused: " << op->getName()
                            << " at " << op->getLoc() << ": " << why << "\n");
    op->emitRemark("form-kernels: ") << op->getName() << " not fused: " << why;
  }

  /// Remarks on the epilogue ops (activation, add) reading `last` that
  /// cannot join its GEMM because `last` has other users.
  static void declineEpilogue(Operation *last) {
    if (soleUser(last))
      return;
    Type type = last->getResult(0).getType();
    for (Operation *u : last->getUsers())
      if (isa<GeluOp, SiluOp>(u) ||
          (isa<AddOp>(u) && u->getResult(0).getType() == type))
        decline(u, "the GEMM result it reads has other users");
  }

  /// Why gemm_w4 (codegen/kernels/gemv_w4.cuh) cannot run linear `l` of the
  /// packed int4 weight `w`, or "" when it can.
  static std::string gemmW4Refusal(LinearOp l, WeightInt4Op w) {
    if (w.getPerm())
      return "its qcc.weight_int4 is act-ordered (gemm_w4 does not gather "
             "the input's columns yet)";
    int64_t k = w.getType().getDimSize(1);
    if (k % 32 != 0 || w.getGroupSize() % 32 != 0)
      return "gemm_w4 needs K and the group size to be multiples of 32";
    Type xt = l.getInput().getType().getElementType();
    if (!xt.isF32() && !xt.isF16())
      return "gemm_w4 reads f32 or f16 activations";
    if (soleUser(w) != l.getOperation())
      return "its qcc.weight_int4 has other users";
    return "";
  }

  /// Quantized ops no GPU kernel computes yet, which stay out of every
  /// region and run on the host (correct, not fast): FP8 W8A8 (f8E4M3FN
  /// quantize / qlinear; wgmma's FP8 GEMMs are the prefill issue's Hopper
  /// templates) and W4A8's quantize with an f32 result (the quantize
  /// template writes int8 codes).
  static bool runsOnHost(Operation *op) {
    if (auto q = dyn_cast<QLinearOp>(op))
      return !q.getWeight().getType().getElementType().isInteger(8);
    if (auto q = dyn_cast<QuantizeOp>(op))
      return !q.getResult().getType().getElementType().isInteger(8);
    return false;
  }

  /// GEMM + activation + product + residual add.
  void formGemm(Operation *gemm) {
    if (runsOnHost(gemm))
      return decline(gemm, "FP8 has no GPU kernel yet: it runs on the host");
    // W4A16: the weight_int4 joins the region (packed weight, scales and
    // offsets enter as operands); a linear gemm_w4 cannot run stays out of
    // every region and runs on the host.
    WeightInt4Op int4;
    if (auto l = dyn_cast<LinearOp>(gemm))
      if ((int4 = l.getWeight().getDefiningOp<WeightInt4Op>()))
        if (std::string why = gemmW4Refusal(l, int4); !why.empty())
          return decline(gemm, why + ": it runs on the host");
    SmallVector<Operation *> group = {gemm};
    Operation *last = gemm;
    // An epilogue op joins one region: two GEMMs summed by one add (parallel
    // attention + MLP blocks) give it to the first, the second declines.
    auto joins = [&](Operation *u) {
      if (!claimed.contains(u))
        return true;
      decline(u, "it joined another GEMM's region");
      return false;
    };
    if (Operation *u = soleUser(last);
        u && isa<GeluOp, SiluOp>(u) && joins(u)) {
      group.push_back(u);
      last = u;
    }
    // A product with a tensor of the same shape (SwiGLU's silu(gate) * up):
    // the GEMM multiplies as it stores, without an elementwise launch.
    if (Operation *u = soleUser(last);
        u && isa<MulOp>(u) &&
        u->getOperand(0).getType() == u->getOperand(1).getType() &&
        u->getResult(0).getType() == last->getResult(0).getType() &&
        joins(u)) {
      group.push_back(u);
      last = u;
    }
    if (Operation *u = soleUser(last);
        u && isa<AddOp>(u) &&
        u->getResult(0).getType() == last->getResult(0).getType() &&
        joins(u)) {
      group.push_back(u); // residual: the other operand has the same shape
      last = u;
    }
    declineEpilogue(last);
    // A 2:4 weight: its qcc.sparse_2_4 joins the region, so the values and
    // metadata enter as operands and the sparse GEMM reads them directly.
    // Shared with other users, it stays outside and the GEMM is dense.
    bool sparse = false;
    Value weight = isa<QLinearOp>(gemm) ? cast<QLinearOp>(gemm).getWeight()
                                        : cast<LinearOp>(gemm).getWeight();
    if (auto w = weight.getDefiningOp<Sparse24Op>()) {
      if (soleUser(w) == gemm && !claimed.contains(w)) {
        group.insert(group.begin(), w);
        sparse = true;
      } else if (sharedSparse.insert(w).second) { // one remark per weight
        decline(w, "its dense weight has other users");
      }
    }
    if (int4) {
      group.insert(group.begin(), int4);
      return form(group, KernelKind::GemmW4);
    }
    bool i8 = isa<QLinearOp>(gemm);
    bool mixed = i8 && cast<QLinearOp>(gemm).getOutlierInput();
    form(group, mixed    ? KernelKind::GemmI8Mixed
                : sparse ? (i8 ? KernelKind::GemmI8Sp : KernelKind::GemmF16Sp)
                         : (i8 ? KernelKind::GemmI8 : KernelKind::GemmF16));
  }

  /// Decode: plain dense GEMMs (no epilogue op) over the same input (q, k
  /// and v of one normed, quantized row) become one grouped GEMV launch,
  /// each member with its own blocks. The region goes where the first
  /// member was, so its operands must all be defined before it.
  void groupSiblingGemvs() {
    // The input a plain dense GEMM group reads, as a key: the activation
    // and, for int8, its scale and zero point.
    auto key = [](const std::pair<SmallVector<Operation *>, KernelKind> &g)
        -> std::optional<std::tuple<Value, Value, Value>> {
      if (g.first.size() != 1 ||
          (g.second != KernelKind::GemmI8 && g.second != KernelKind::GemmF16))
        return std::nullopt;
      if (auto q = dyn_cast<QLinearOp>(g.first[0]))
        return std::make_tuple(q.getInput(), q.getInputScale(),
                               q.getInputZeroPoint());
      if (auto l = dyn_cast<LinearOp>(g.first[0]))
        return std::make_tuple(l.getInput(), Value(), Value());
      return std::nullopt;
    };
    std::vector<std::pair<SmallVector<Operation *>, KernelKind>> merged;
    std::vector<bool> taken(groups.size(), false);
    for (size_t i = 0; i < groups.size(); ++i) {
      if (taken[i])
        continue;
      auto k = key(groups[i]);
      SmallVector<size_t> members = {i};
      if (k)
        for (size_t j = i + 1; j < groups.size(); ++j)
          if (!taken[j] && groups[j].second == groups[i].second &&
              key(groups[j]) == k)
            members.push_back(j);
      if (members.size() > 1 && operandsPrecede(groups, members)) {
        SmallVector<Operation *> ops;
        for (size_t m : members) {
          ops.push_back(groups[m].first[0]);
          taken[m] = true;
        }
        llvm::sort(ops, [](Operation *a, Operation *b) {
          return a->isBeforeInBlock(b);
        });
        LLVM_DEBUG(llvm::dbgs() << "form-kernels: " << ops.size()
                                << " sibling GEMVs grouped at "
                                << ops.front()->getLoc() << "\n");
        merged.emplace_back(std::move(ops), groups[i].second);
        atFront.insert(merged.back().first.front());
        continue;
      }
      taken[i] = true;
      merged.push_back(std::move(groups[i]));
    }
    groups = std::move(merged);
  }

  /// Whether every operand of the groups `members` is defined before the
  /// first of their GEMMs (a block argument, or an op earlier in the block).
  static bool operandsPrecede(
      const std::vector<std::pair<SmallVector<Operation *>, KernelKind>> &groups,
      ArrayRef<size_t> members) {
    Operation *first = groups[members[0]].first[0];
    for (size_t m : members)
      if (groups[m].first[0]->isBeforeInBlock(first))
        first = groups[m].first[0];
    for (size_t m : members)
      for (Value v : groups[m].first[0]->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (def && def->getBlock() == first->getBlock() &&
            !def->isBeforeInBlock(first))
          return false;
      }
    return true;
  }

  /// norm + the per-token quantize of its output (scale computed in-kernel).
  void formNormQuantize(Operation *quantize) {
    Operation *norm = quantize->getOperand(0).getDefiningOp();
    if (!norm || !isa<LayerNormOp, RmsNormOp>(norm) || claimed.contains(norm))
      return;
    // The exporters' shape arithmetic reads the normed value's shape (a
    // Hugging Face LLaMA's view of q, k and v): the norm's input has the
    // same one, so such a read does not keep the normed value alive.
    Value normed = norm->getResult(0), in = norm->getOperand(0);
    if (in.getType() == normed.getType())
      for (OpOperand &use : llvm::make_early_inc_range(normed.getUses()))
        if (isa<ShapeOp>(use.getOwner()))
          use.set(in);
    if (soleUser(norm) != quantize)
      return decline(quantize, "the " + norm->getName().getStringRef() +
                                   " it quantizes has other users");
    form({norm, quantize}, KernelKind::NormQuantize);
  }

  /// attention + the rotary embeddings of its query and key.
  void formAttention(Operation *attention) {
    SmallVector<Operation *> group;
    for (unsigned i : {0u, 1u})
      if (auto rot = attention->getOperand(i).getDefiningOp<RotaryOp>()) {
        if (!claimed.contains(rot) && soleUser(rot) == attention)
          group.push_back(rot);
        else
          decline(rot, "its result has users besides the attention");
      }
    group.push_back(attention);
    form(group, KernelKind::Attention);
  }

  /// A mixture-of-experts router (router.cuh): a softmax over the last axis
  /// read only by a top_k of the largest along it, of a static k; with the
  /// renormalization when the top-k values are read only by their sum over
  /// the last axis (kept) and the division by it. Anything else stays out.
  void formRouter(SoftmaxOp softmax) {
    auto type = softmax.getType();
    int64_t rank = type.getRank(), axis = softmax.getAxis();
    if (rank < 1 || (axis != rank - 1 && axis != -1))
      return;
    auto topk = dyn_cast_or_null<TopKOp>(soleUser(softmax));
    if (!topk || claimed.contains(topk) || !topk.getLargest() ||
        (topk.getAxis() != rank - 1 && topk.getAxis() != -1) ||
        ShapedType::isDynamic(topk.getValues().getType().getShape().back()))
      return;
    SmallVector<Operation *> group = {softmax, topk};
    // The renormalization: values / reduce_sum(values, last axis, kept).
    Value values = topk.getValues();
    ReduceSumOp sum;
    DivOp div;
    for (Operation *u : values.getUsers()) {
      if (auto r = dyn_cast<ReduceSumOp>(u))
        sum = r;
      else if (auto d = dyn_cast<DivOp>(u))
        div = d;
    }
    bool renorm =
        sum && div && llvm::range_size(values.getUsers()) == 2 &&
        sum.getKeepdims() && sum.getAxes().size() == 1 &&
        (sum.getAxes()[0] == rank - 1 || sum.getAxes()[0] == -1) &&
        sum.getResult().hasOneUse() && div.getLhs() == values &&
        div.getRhs() == sum.getResult() && div.getType() == values.getType() &&
        !claimed.contains(sum) && !claimed.contains(div);
    if (renorm) {
      group.push_back(sum);
      group.push_back(div);
    }
    topk->setAttr(kStaticTopKAttr,
                  IntegerAttr::get(IntegerType::get(topk.getContext(), 64),
                                   topk.getValues().getType().getShape().back()));
    form(group, KernelKind::Router);
  }

  /// A chain of elementwise ops, each the only user of the previous.
  void formElementwise(Operation *first) {
    SmallVector<Operation *> group = {first};
    Operation *last = first;
    while (Operation *u = soleUser(last)) {
      if (!isElementwise(u) || claimed.contains(u))
        break;
      group.push_back(u);
      last = u;
    }
    form(group, KernelKind::Elementwise);
  }

  /// Moves `group` (in program order, results used outside only from ops
  /// that no other group op follows... see form*) into a qcc.kernel placed
  /// at its last op.
  void outline(ArrayRef<Operation *> group, KernelKind kind) {
    llvm::SmallPtrSet<Operation *, 8> members(group.begin(), group.end());
    llvm::SetVector<Value> inputs;
    SmallVector<Value> outputs;
    for (Operation *op : group) {
      for (Value v : op->getOperands())
        if (!members.contains(v.getDefiningOp()))
          inputs.insert(v);
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation *u) {
              return !members.contains(u);
            }))
          outputs.push_back(r);
    }
    // A grouped GEMV goes where its first member was (its members' users may
    // come before the last member); every other group at its last op.
    OpBuilder b(atFront.contains(group.front()) ? group.front() : group.back());
    std::string name = ("k" + Twine(counter++)).str();
    auto kernel = KernelOp::create(
        b, group.back()->getLoc(), ValueRange(outputs).getTypes(),
        inputs.getArrayRef(), kind, b.getStringAttr(name));
    Block *body = new Block();
    kernel.getBody().push_back(body);
    IRMapping map;
    for (Value in : inputs)
      map.map(in, body->addArgument(in.getType(), in.getLoc()));
    OpBuilder inner = OpBuilder::atBlockEnd(body);
    for (Operation *op : group)
      inner.clone(*op, map);
    SmallVector<Value> yielded;
    for (Value out : outputs)
      yielded.push_back(map.lookup(out));
    YieldOp::create(inner, kernel.getLoc(), yielded);
    for (auto [out, res] : llvm::zip(outputs, kernel.getResults()))
      out.replaceUsesWithIf(res, [&](OpOperand &use) {
        return !members.contains(use.getOwner());
      });
    for (Operation *op : llvm::reverse(group))
      op->erase();
  }

  func::FuncOp fn;
  llvm::SmallPtrSet<Operation *, 32> claimed;
  llvm::SmallPtrSet<Operation *, 4> sharedSparse;
  llvm::SmallPtrSet<Operation *, 8> atFront; // grouped GEMVs' first members
  std::vector<std::pair<SmallVector<Operation *>, KernelKind>> groups;
  int counter = 0;
};

struct FormKernelsPass : qcc::impl::FormKernelsBase<FormKernelsPass> {
  void runOnOperation() override { Former(getOperation()).run(); }
};

} // namespace
