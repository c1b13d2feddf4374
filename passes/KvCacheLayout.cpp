//===- KvCacheLayout.cpp - kv-cache-layout --------------------------------===//
//
// Turns a decoder's full-sequence `main` into the `prefill` and `decode`
// entry points of docs/KV_CACHE.md: attention becomes qcc.kv_attention (one
// layer index each) and the position ids that the exporter computed as
// range(0, seq) become a `positions` [B, S] input, so that every sequence of a
// batch can sit at its own offset in the cache.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccDialect.h"
#include "dialects/QccOps.h"
#include "passes/PatternUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace qcc {
#define GEN_PASS_DEF_KVCACHELAYOUT
#include "passes/Passes.h.inc"
} // namespace qcc

using namespace mlir;
using namespace qcc;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

RankedTensorType withShape(Type t, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape,
                               cast<RankedTensorType>(t).getElementType());
}

/// Rewrites the ops that consume position ids so that they carry a leading
/// batch dimension: `oldValue` ([S, ...], the same for every row) is replaced
/// by `newValue` ([B, S, ...], one row per sequence).
class PositionRebaser {
public:
  explicit PositionRebaser(OpBuilder &b) : b(b) {}

  LogicalResult rebase(Value oldValue, Value newValue) {
    // One visit per user: a user may consume the value twice (cat(f, f))
    // and is replaced as a whole.
    llvm::SetVector<Operation *> users(oldValue.getUsers().begin(),
                                       oldValue.getUsers().end());
    for (Operation *user : users)
      for (OpOperand &use : user->getOpOperands())
        if (use.get() == oldValue) {
          if (failed(rebaseUse(use, newValue)))
            return failure();
          break;
        }
    return success();
  }

private:
  LogicalResult rebaseUse(OpOperand &use, Value nv) {
    Operation *op = use.getOwner();
    auto nt = cast<RankedTensorType>(nv.getType());
    b.setInsertionPoint(op);
    Location loc = op->getLoc();
    auto batched = [&](Type resultType) {
      SmallVector<int64_t> shape = {nt.getDimSize(0)};
      llvm::append_range(shape, cast<RankedTensorType>(resultType).getShape());
      return withShape(resultType, shape);
    };

    // Terminal consumers accept per-row tables as they are.
    if (auto rot = dyn_cast<RotaryOp>(op)) {
      if (use.getOperandNumber() == 0)
        return op->emitError("kv-cache-layout: positions flow into the "
                             "rotated value itself");
      use.set(nv);
      return success();
    }
    if (auto emb = dyn_cast<EmbeddingOp>(op)) {
      if (use.getOperandNumber() != 1)
        return op->emitError("kv-cache-layout: positions used as a table");
      SmallVector<int64_t> shape(nt.getShape());
      shape.push_back(emb.getType().getShape().back());
      auto ne = EmbeddingOp::create(b, loc, withShape(emb.getType(), shape),
                                    emb.getTable(), nv);
      // The [B, S, E] result broadcasts wherever [1, S, E] did.
      emb.getResult().replaceAllUsesWith(ne.getResult());
      emb.erase();
      return success();
    }
    // unsqueeze(x, [0]) is the broadcast over the batch that now exists.
    if (auto un = dyn_cast<UnsqueezeOp>(op)) {
      SmallVector<int64_t> axes(un.getAxes());
      if (axes == SmallVector<int64_t>{0})
        return replaceAndContinue(op, nv);
      for (int64_t &a : axes)
        a = a < 0 ? a : a + 1;
      return replaceAndContinue(
          op, UnsqueezeOp::create(b, loc, batched(un.getType()), nv,
                                  b.getDenseI64ArrayAttr(axes)));
    }
    if (auto cast = dyn_cast<CastOp>(op))
      return replaceAndContinue(
          op, CastOp::create(b, loc, batched(cast.getType()), nv));
    if (isa<CosOp, SinOp, NegOp, ExpOp>(op)) {
      OperationState state(loc, op->getName());
      state.addOperands(nv);
      state.addTypes(batched(op->getResult(0).getType()));
      return replaceAndContinue(op, b.create(state)->getResult(0));
    }
    if (isa<MulOp, AddOp, SubOp, DivOp>(op)) {
      SmallVector<Value> operands(op->getOperands());
      operands[use.getOperandNumber()] = nv;
      auto shape = broadcastShapes(
          cast<RankedTensorType>(operands[0].getType()).getShape(),
          cast<RankedTensorType>(operands[1].getType()).getShape());
      if (failed(shape))
        return op->emitError("kv-cache-layout: cannot broadcast positions");
      OperationState state(loc, op->getName());
      state.addOperands(operands);
      state.addTypes(withShape(op->getResult(0).getType(), *shape));
      return replaceAndContinue(op, b.create(state)->getResult(0));
    }
    if (auto concat = dyn_cast<ConcatOp>(op)) {
      // Every input must be the same position-derived value (cat(f, f)).
      for (Value in : concat.getInputs())
        if (in != use.get())
          return op->emitError("kv-cache-layout: concat of positions with "
                               "other values is not supported");
      int64_t axis = concat.getAxis();
      SmallVector<Value> ins(concat.getInputs().size(), nv);
      return replaceAndContinue(
          op, ConcatOp::create(b, loc, batched(concat.getType()), ins,
                               b.getI64IntegerAttr(axis + 1)));
    }
    return op->emitError("kv-cache-layout: cannot give per-sequence positions "
                         "to '")
           << op->getName() << "'";
  }

  /// `op`'s result, [S, ...], is now `nv`, [B, S, ...]: continue with its
  /// users, then drop it.
  LogicalResult replaceAndContinue(Operation *op, Value nv) {
    if (failed(rebase(op->getResult(0), nv)))
      return failure();
    if (op->use_empty())
      op->erase();
    return success();
  }

  OpBuilder &b;
};

/// True if `range` is range(0, S, 1) with S the sequence length of `ids`.
bool isPositionRange(RangeOp range, Value ids) {
  auto start = getSplatValue(range.getStart());
  auto delta = getSplatValue(range.getDelta());
  if (!start || *start != 0 || !delta || *delta != 1)
    return false;
  auto limit = getFoldedDimExprs(range.getLimit());
  return limit.size() == 1 &&
         resolveDimExpr(limit[0]) == resolveDimExpr(ids, 1);
}

struct KvCacheLayoutPass
    : qcc::impl::KvCacheLayoutBase<KvCacheLayoutPass> {
  using KvCacheLayoutBase::KvCacheLayoutBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main)
      return;
    SmallVector<AttentionOp> attentions;
    main.walk([&](AttentionOp a) { attentions.push_back(a); });
    bool anyCausal = llvm::any_of(
        attentions, [](AttentionOp a) { return a.getCausal(); });
    if (!anyCausal)
      return; // an encoder: no cache
    for (AttentionOp a : attentions)
      if (!a.getCausal() || a.getMask()) {
        a.emitError("kv-cache-layout: a decoder's attention must be causal "
                    "without a mask to use a KV cache");
        return signalPassFailure();
      }
    if (layout != "paged" && layout != "contiguous") {
      module.emitError("kv-cache-layout: layout must be paged or contiguous, "
                       "not '")
          << layout << "'";
      return signalPassFailure();
    }
    if (blockTokens <= 0) {
      module.emitError("kv-cache-layout: block-tokens must be positive");
      return signalPassFailure();
    }
    // The token ids: the only integer [B, S] argument.
    if (main.getNumArguments() != 1 ||
        cast<RankedTensorType>(main.getArgument(0).getType()).getRank() != 2) {
      main.emitError("kv-cache-layout: a decoder with a KV cache must take "
                     "exactly one input, token ids [batch, seq]");
      return signalPassFailure();
    }

    func::FuncOp prefill = buildEntry(main, "prefill", /*decode=*/false);
    if (!prefill)
      return signalPassFailure();
    func::FuncOp decode = buildEntry(main, "decode", /*decode=*/true);
    if (!decode)
      return signalPassFailure();

    AttentionOp first = attentions.front();
    int64_t heads = first.getNumHeads(), kvHeads = first.getNumKvHeads();
    int64_t width = first.getQuery().getType().getDimSize(2);
    Builder b(module.getContext());
    module->setAttr(
        "qcc.kv_cache",
        b.getDictionaryAttr(
            {b.getNamedAttr("layout", b.getStringAttr(layout)),
             b.getNamedAttr("block_tokens", b.getI64IntegerAttr(blockTokens)),
             b.getNamedAttr("layers",
                            b.getI64IntegerAttr(attentions.size())),
             b.getNamedAttr("kv_heads", b.getI64IntegerAttr(kvHeads)),
             b.getNamedAttr("head_dim",
                            b.getI64IntegerAttr(width == kDyn ? -1
                                                              : width / heads)),
             b.getNamedAttr("dtype", b.getStringAttr("f32"))}));
  }

  func::FuncOp buildEntry(func::FuncOp main, StringRef name, bool decode) {
    OpBuilder b(main);
    b.setInsertionPointToEnd(main->getBlock());
    auto fn = cast<func::FuncOp>(b.clone(*main));
    fn.setSymName(name);
    Value ids = fn.getArgument(0);
    auto idsType = cast<RankedTensorType>(ids.getType());
    if (decode) { // one new token per sequence
      idsType = withShape(idsType, {idsType.getDimSize(0), 1});
      ids.setType(idsType);
      SmallVector<Type> inputs(fn.getFunctionType().getInputs());
      inputs[0] = idsType;
      fn.setFunctionType(
          b.getFunctionType(inputs, fn.getFunctionType().getResults()));
    }
    // positions: [B, S] like the ids, named like them.
    auto positionsType =
        RankedTensorType::get(idsType.getShape(), b.getI64Type());
    DictionaryAttr idsAttrs = fn.getArgAttrDict(0);
    SmallVector<NamedAttribute> attrs = {
        b.getNamedAttr("qcc.name", b.getStringAttr("positions"))};
    if (idsAttrs)
      if (Attribute dims = idsAttrs.get(kDimNamesAttr))
        attrs.push_back(b.getNamedAttr(kDimNamesAttr, dims));
    if (failed(fn.insertArgument(1, positionsType,
                                 b.getDictionaryAttr(attrs), fn.getLoc())))
      return {};
    Value positions = fn.getArgument(1);

    SmallVector<RangeOp> ranges;
    fn.walk([&](RangeOp r) {
      if (isPositionRange(r, ids))
        ranges.push_back(r);
    });
    PositionRebaser rebaser(b);
    for (RangeOp r : ranges) {
      b.setInsertionPoint(r);
      Value p = positions;
      Type et = r.getType().getElementType();
      if (et != positionsType.getElementType())
        p = CastOp::create(b, r.getLoc(), positionsType.clone(et), positions);
      if (failed(rebaser.rebase(r.getResult(), p)))
        return {};
      r.erase();
    }

    int64_t layer = 0;
    SmallVector<AttentionOp> attentions;
    fn.walk([&](AttentionOp a) { attentions.push_back(a); });
    for (AttentionOp a : attentions) {
      b.setInsertionPoint(a);
      auto kv = KvAttentionOp::create(
          b, a.getLoc(), a.getType(), a.getQuery(), a.getKey(), a.getValue(),
          b.getI64IntegerAttr(layer++), a.getNumHeadsAttr(),
          a.getNumKvHeadsAttr(), a.getScaleAttr());
      a.replaceAllUsesWith(kv.getResult());
      a.erase();
    }
    // Drop what only computed the replaced positions (shape arithmetic).
    SmallVector<Operation *> ops;
    fn.walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : llvm::reverse(ops))
      if (isa<QccDialect>(op->getDialect()) &&
          op->use_empty() && isMemoryEffectFree(op))
        op->erase();
    if (failed(verify(fn))) {
      fn.emitError("kv-cache-layout: the ") << name << " entry point does not "
                                            << "verify";
      return {};
    }
    return fn;
  }
};

} // namespace
