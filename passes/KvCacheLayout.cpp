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
#include "dialects/QccAttrNames.h"
#include "dialects/QccOps.h"
#include "passes/ConstEval.h"
#include "passes/MaskAnalysis.h"
#include "passes/PatternUtils.h"
#include "passes/Passes.h"
#include "format/OpKind.h"
#include "format/Quant.h"
#include "format/device/numerics.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <map>
#include <optional>

namespace qcc {
#define GEN_PASS_DEF_KVCACHELAYOUT
#include "passes/Passes.h.inc"
} // namespace qcc

using namespace mlir;
using namespace qcc;

#define DEBUG_TYPE "qcc-kv-cache-layout"

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

  /// Rows of the smallest position-embedding table seen, or -1 (no limit,
  /// e.g. rotary positions).
  int64_t maxPositions = -1;

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
    if (auto emb = dyn_cast<EmbeddingOp>(op))
      return embedPositions(emb, use.get(), nv);
    // unsqueeze(x, [0]) is the broadcast over the batch that now exists.
    if (auto un = dyn_cast<UnsqueezeOp>(op)) {
      SmallVector<int64_t> axes(un.getAxes());
      int64_t rank = un.getType().getRank();
      if (llvm::any_of(axes, [&](int64_t a) { return a == 0 || a == -rank; })) {
        // Axis 0 is the batch, which now exists; the other new axes are
        // inserted into the [B, S] value at the same output positions.
        SmallVector<int64_t> rest;
        for (int64_t a : axes)
          if (a != 0 && a != -rank)
            rest.push_back(a < 0 ? a + rank : a);
        Value batchedValue = nv;
        if (!rest.empty()) {
          SmallVector<int64_t> shape(un.getType().getShape());
          shape[0] = nt.getDimSize(0);
          batchedValue = UnsqueezeOp::create(b, loc,
                                             withShape(un.getType(), shape),
                                             nv, b.getDenseI64ArrayAttr(rest));
        }
        if (failed(rebaseBroadcast(un.getResult(), batchedValue)))
          return failure();
        if (op->use_empty())
          op->erase();
        return success();
      }
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

  /// A learned position table looked up at `oldValue` now reads the
  /// per-sequence positions `nv` [B, S]: the [B, S, E] rows broadcast
  /// wherever the one row did (added to the token embeddings), and the
  /// table's rows bound the context.
  LogicalResult embedPositions(EmbeddingOp emb, Value oldValue, Value nv) {
    if (emb.getIds() != oldValue)
      return emb->emitError("kv-cache-layout: positions used as a table");
    int64_t rows = emb.getTable().getType().getDimSize(0);
    if (rows != ShapedType::kDynamic)
      maxPositions = maxPositions < 0 ? rows : std::min(maxPositions, rows);
    SmallVector<int64_t> shape(cast<RankedTensorType>(nv.getType()).getShape());
    shape.push_back(emb.getType().getShape().back());
    b.setInsertionPoint(emb);
    auto ne = EmbeddingOp::create(b, emb.getLoc(),
                                  withShape(emb.getType(), shape),
                                  emb.getTable(), nv);
    emb.getResult().replaceAllUsesWith(ne.getResult());
    emb.erase();
    return success();
  }

  /// `oldValue` [1, ...] broadcast one row over the batch; `nv` [B, ...]
  /// holds a row per sequence. Consumers that broadcast over the leading
  /// dimension (elementwise math, batched matmul, unsqueeze/transpose/concat
  /// that keep it in front) are cloned onto `nv`, their results one row per
  /// sequence, until rotary tables or an embedding take them.
  LogicalResult rebaseBroadcast(Value oldValue, Value nv) {
    llvm::SetVector<Operation *> users(oldValue.getUsers().begin(),
                                       oldValue.getUsers().end());
    for (Operation *op : users) {
      b.setInsertionPoint(op);
      if (isa<RotaryOp>(op)) {
        if (op->getOperand(0) == oldValue)
          return op->emitError("kv-cache-layout: positions flow into the "
                               "rotated value itself");
        op->replaceUsesOfWith(oldValue, nv);
        continue;
      }
      if (auto emb = dyn_cast<EmbeddingOp>(op)) {
        if (failed(embedPositions(emb, oldValue, nv)))
          return failure();
        continue;
      }
      auto keepsFront = [&]() {
        if (auto un = dyn_cast<UnsqueezeOp>(op))
          return !llvm::is_contained(un.getAxes(), 0);
        if (auto t = dyn_cast<TransposeOp>(op))
          return t.getPerm()[0] == 0;
        if (auto c = dyn_cast<ConcatOp>(op))
          return c.getAxis() != 0 &&
                 llvm::all_of(c.getInputs(),
                              [&](Value in) { return in == oldValue; });
        return isa<CastOp, CosOp, SinOp, NegOp, ExpOp, MulOp, AddOp, SubOp,
                   DivOp, MatMulOp>(op);
      };
      if (!keepsFront())
        return op->emitError("kv-cache-layout: cannot give per-sequence "
                             "positions to '")
               << op->getName() << "'";
      Operation *clone = b.clone(*op);
      clone->replaceUsesOfWith(oldValue, nv);
      for (OpResult r : clone->getResults()) {
        auto t = cast<RankedTensorType>(r.getType());
        SmallVector<int64_t> shape(t.getShape());
        shape[0] = ShapedType::kDynamic;
        r.setType(withShape(t, shape));
      }
      if (failed(rebaseBroadcast(op->getResult(0), clone->getResult(0))))
        return failure();
      if (!op->use_empty())
        return op->emitError("kv-cache-layout: a value computed from "
                             "positions is used where one row must serve "
                             "every sequence");
      op->erase();
    }
    return success();
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

/// `v` with the 0-D/1-element reshapes of shape arithmetic peeled off.
Value skipIndexReshapes(Value v) {
  while (isa_and_nonnull<UnsqueezeOp, SqueezeOp, CastOp, ReshapeOp>(
      v.getDefiningOp()))
    v = v.getDefiningOp()->getOperand(0);
  return v;
}

/// The dimension named by the one-element shape value `v`.
DimExpr indexDim(Value v) {
  auto e = getFoldedDimExprs(v);
  if (e.size() != 1)
    return {};
  return resolveDimExpr(e[0]);
}

/// True if `range` is the exporter's position ids for the tokens of `ids`:
/// range(0, S, 1) with S the sequence length of `ids`, or, with a cache
/// passed as graph inputs, range(P, P + S, 1) with P dimension 2 (the past
/// length) of one of the `pasts`.
bool isPositionRange(RangeOp range, Value ids, ArrayRef<Value> pasts) {
  auto delta = getSplatValue(range.getDelta());
  if (!delta || *delta != 1)
    return false;
  DimExpr seq = resolveDimExpr(ids, 1);
  if (auto start = getSplatValue(range.getStart())) {
    return *start == 0 && indexDim(range.getLimit()) == seq;
  }
  DimExpr start = indexDim(range.getStart());
  if (!llvm::any_of(pasts, [&](Value p) {
        return resolveDimExpr(p, 2) == start;
      }))
    return false;
  auto add = skipIndexReshapes(range.getLimit()).getDefiningOp<AddOp>();
  return add && matchCommutative(add, [&](Value a, Value b) {
           return indexDim(a) == start && indexDim(b) == seq;
         });
}

/// Matches the attention key or value `packed` = Concat(Reshape(
/// Transpose[0, 2, 1, 3](past)), fresh, axis 1) that raise-attention builds
/// for a cache passed as a graph input: `past` [B, Hkv, P, D] must be an
/// argument of the function. Sets `past` and `fresh` (this call's packed
/// keys or values).
bool matchPastAppend(Value packed, BlockArgument &past, Value &fresh) {
  auto cat = packed.getDefiningOp<ConcatOp>();
  if (!cat || cat.getAxis() != 1 || cat.getInputs().size() != 2)
    return false;
  auto reshape = cat.getInputs()[0].getDefiningOp<ReshapeOp>();
  if (!reshape)
    return false;
  auto t = reshape.getInput().getDefiningOp<TransposeOp>();
  if (!t || t.getPerm() != ArrayRef<int64_t>{0, 2, 1, 3} ||
      !reshapeKeepsLeadingDims(reshape, 2))
    return false;
  past = dyn_cast<BlockArgument>(t.getInput());
  fresh = cat.getInputs()[1];
  return static_cast<bool>(past);
}

/// Matches the exporter's `present` output: Concat(past, heads of `fresh`,
/// axis 2), the heads those of `fresh` (`matchHeadsBHSD`).
bool isPresent(Value v, Value past, Value fresh) {
  auto cat = v.getDefiningOp<ConcatOp>();
  if (!cat || ((int64_t)cat.getAxis() != 2 && (int64_t)cat.getAxis() != -2) ||
      cat.getInputs().size() != 2 || cat.getInputs()[0] != past)
    return false;
  Value packed;
  int64_t heads, headDim;
  return matchHeadsBHSD(cat.getInputs()[1], packed, heads, headDim) &&
         packed == fresh;
}

/// onnxruntime-genai's GroupQueryAttention (as compiler/
/// OnnxContribConverters.cpp decomposes it): the attention key or value is
/// Reshape(Transpose[0, 2, 1, 3](present)) with the exporter's present
/// output = Where(keep, GatherElements(Concat(past, heads of fresh, axis 2),
/// indices, axis 2), 0). On unpadded rows the gather keeps every row in
/// place (checkAppendGather proves that), so it is the past form.
struct GatheredAppend {
  BlockArgument past;
  Value fresh, present, indices, keep;
};

std::optional<GatheredAppend> matchGatheredAppend(Value packed) {
  auto reshape = packed.getDefiningOp<ReshapeOp>();
  if (!reshape || !reshapeKeepsLeadingDims(reshape, 2))
    return std::nullopt;
  auto t = reshape.getInput().getDefiningOp<TransposeOp>();
  if (!t || t.getPerm() != ArrayRef<int64_t>{0, 2, 1, 3})
    return std::nullopt;
  auto where = t.getInput().getDefiningOp<WhereOp>();
  auto zero = where ? getSplatValue(where.getRhs()) : std::nullopt;
  if (!zero || *zero != 0.0)
    return std::nullopt;
  auto gather = where.getLhs().getDefiningOp<GatherElementsOp>();
  if (!gather || gather.getAxis() != 2)
    return std::nullopt;
  auto cat = gather.getInput().getDefiningOp<ConcatOp>();
  if (!cat || (int64_t)cat.getAxis() != 2 || cat.getInputs().size() != 2)
    return std::nullopt;
  auto heads = cat.getInputs()[1].getDefiningOp<TransposeOp>();
  GatheredAppend g;
  g.past = dyn_cast<BlockArgument>(cat.getInputs()[0]);
  int64_t numHeads, headDim;
  if (!g.past || !heads || heads.getPerm() != ArrayRef<int64_t>{0, 2, 1, 3} ||
      !matchHeadSplit(heads.getInput(), g.fresh, numHeads, headDim))
    return std::nullopt;
  g.present = where.getResult();
  g.indices = gather.getIndices();
  g.keep = where.getCondition();
  return g;
}

/// The past input and this call's new keys or values of an attention
/// operand, in optimum's form (matchPastAppend) or the genai builder's
/// (matchGatheredAppend).
bool matchCacheAppend(Value packed, BlockArgument &past, Value &fresh) {
  if (matchPastAppend(packed, past, fresh))
    return true;
  auto g = matchGatheredAppend(packed);
  if (!g)
    return false;
  past = g->past;
  fresh = g->fresh;
  return true;
}

/// The index operand of a table lookup by position or id (qcc.gather along
/// axis 0, qcc.embedding), or null.
OpOperand *lookupIndex(Operation *op) {
  if (auto g = dyn_cast<GatherOp>(op))
    return g.getAxis() == 0 ? &g.getIndicesMutable() : nullptr;
  if (auto e = dyn_cast<EmbeddingOp>(op))
    return &e.getIdsMutable();
  return nullptr;
}

/// The cache that an exporter passes as graph inputs and outputs (HF
/// `past_key_values` / `present`), by argument and result number.
struct PastForm {
  SmallVector<unsigned> pastArgs;
  SmallVector<unsigned> presentResults;
};

/// Recognizes the past form in `fn` (token ids first): every argument after
/// the ids is the past keys or values of one attention operand, appended to
/// as `matchCacheAppend`, and returned with the new keys/values as exactly
/// one `isPresent` result (or, genai's form, the gathered present itself).
/// Empty if `fn` takes only the ids; failure (with a diagnostic) if it takes
/// anything else.
FailureOr<PastForm> matchPastForm(func::FuncOp fn,
                                  ArrayRef<AttentionOp> attentions,
                                  unsigned roleArgs,
                                  const DecoderInputs &inputs) {
  PastForm form;
  if (fn.getNumArguments() == 0 ||
      cast<RankedTensorType>(fn.getArgument(0).getType()).getRank() != 2)
    return fn.emitError("kv-cache-layout: a decoder with a KV cache must take "
                        "token ids [batch, seq] first");
  if (fn.getNumArguments() == 1 + roleArgs)
    return form;
  auto fail = [&](const Twine &why) {
    return fn.emitError("kv-cache-layout: a decoder with a KV cache must take "
                        "only token ids [batch, seq] (and attention_mask / "
                        "position_ids), or also the past keys/values of "
                        "every attention: ")
           << why;
  };
  // past argument -> the new keys/values appended to it (and, genai's
  // form, the gathered present).
  llvm::MapVector<BlockArgument, Value> fresh;
  llvm::DenseMap<BlockArgument, Value> gathered;
  std::map<std::pair<void *, void *>, std::string> gatherChecks;
  for (AttentionOp a : attentions)
    for (Value operand : {a.getKey(), a.getValue()}) {
      BlockArgument past;
      Value f;
      if (!matchCacheAppend(operand, past, f) || past.getArgNumber() == 0)
        return fail("an attention's key or value is not its past input "
                    "with the new ones appended");
      if (auto g = matchGatheredAppend(operand)) {
        auto key = std::pair(g->indices.getAsOpaquePointer(),
                             g->keep.getAsOpaquePointer());
        auto it = gatherChecks.find(key);
        if (it == gatherChecks.end())
          it = gatherChecks
                   .insert({key, checkAppendGather(g->indices, g->keep,
                                                   inputs)})
                   .first;
        if (!it->second.empty())
          return fail("the present gathered from the past and the new "
                      "keys/values is not their concatenation: " +
                      it->second);
        gathered[past] = g->present;
      }
      if (!fresh.insert({past, f}).second)
        return fail("a past input feeds two attention operands");
    }
  if (fresh.size() != fn.getNumArguments() - 1 - roleArgs)
    return fail("an input is not the past of an attention");
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  llvm::DenseSet<BlockArgument> returned;
  for (OpOperand &r : ret->getOpOperands())
    for (auto &[past, f] : fresh)
      if (isPresent(r.get(), past, f) || r.get() == gathered.lookup(past)) {
        if (!returned.insert(past).second)
          return fail("a past input is returned twice");
        form.presentResults.push_back(r.getOperandNumber());
      }
  if (returned.size() != fresh.size())
    return fail("a past input is not returned with the new keys/values "
                "appended (present)");
  for (auto &[past, f] : fresh)
    form.pastArgs.push_back(past.getArgNumber());
  llvm::sort(form.pastArgs);
  return form;
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
    DecoderInputs inputs = findRoles(main);
    unsigned roleArgs = (inputs.attentionMask ? 1 : 0) +
                        (inputs.positionIds ? 1 : 0);
    // Candidate caches for the mask analysis (matchPastForm checks them,
    // with diagnostics, once a decoder is recognized): the 4-D inputs.
    for (BlockArgument arg : main.getArguments())
      if (auto t = dyn_cast<RankedTensorType>(arg.getType()))
        if (t.getRank() == 4)
          inputs.pasts.push_back(arg);
    // Causal attention, or attention whose exporter-built mask is the
    // causal mask with the attention_mask's key padding (MaskAnalysis.h):
    // in prefill/decode every sequence is unpadded, so that is causal.
    // A mask may also be proven with a sliding window (kv_attention's
    // window) or on unpadded and right-padded rows only (GroupQuery-
    // Attention's positions): both are what the runtime's unpadded rows are.
    llvm::DenseMap<Value, MaskCheck> checks;
    SmallVector<std::string> reasons;
    bool allBidirectional = true; // every refusal is an encoder's attention
    windows.clear();
    alibis.clear();
    for (AttentionOp a : attentions) {
      windows.push_back(a.getWindow());
      alibis.emplace_back();
      if (!a.getMask()) {
        if (!a.getCausal())
          reasons.push_back("an attention is bidirectional");
        continue;
      }
      auto it = checks.find(a.getMask());
      if (it == checks.end())
        it = checks.insert({a.getMask(),
                            checkCausalPaddingMask(a.getMask(), inputs)})
                 .first;
      LLVM_DEBUG(llvm::dbgs()
                 << "kv-cache-layout: mask of attention at " << a.getLoc()
                 << (it->second.causalWithPadding ? ": causal + padding"
                                                  : ": refused: ")
                 << (it->second.causalWithPadding ? "" : it->second.why)
                 << ", window " << it->second.window << "\n");
      const std::vector<float> &slopes = it->second.alibi;
      int64_t heads = a.getNumHeads();
      if (it->second.causalWithPadding && !slopes.empty()) {
        if ((int64_t)slopes.size() != heads && slopes.size() != 1) {
          reasons.push_back("the mask's ALiBi bias has " +
                            std::to_string(slopes.size()) +
                            " heads for an attention of " +
                            std::to_string(heads));
          allBidirectional = false;
          continue;
        }
        alibis.back() = slopes.size() == 1
                            ? std::vector<float>((size_t)heads, slopes[0])
                            : slopes;
      }
      if (!it->second.causalWithPadding) {
        reasons.push_back(it->second.why);
        allBidirectional &= it->second.bidirectional;
      } else if (it->second.window > 0) {
        windows.back() = windows.back() > 0
                             ? std::min(windows.back(), it->second.window)
                             : it->second.window;
      }
      else if (it->second.maxContext > 0)
        maskContext = maskContext < 0 ? it->second.maxContext
                                      : std::min(maskContext,
                                                 it->second.maxContext);
    }
    LLVM_DEBUG(llvm::dbgs() << "kv-cache-layout: " << attentions.size()
                            << " attention(s), " << reasons.size()
                            << " refused\n");
    if (reasons.size() == attentions.size()) {
      // An encoder (or no attention) has no cache; a decoder whose masks
      // are not provably causal + padding (a sliding window) says why.
      if (!allBidirectional && !attentions.empty())
        main.emitWarning("kv-cache-layout: no KV cache: ") << reasons.front();
      return;
    }
    if (!reasons.empty()) {
      // Compiles without a cache (main only), saying why.
      main.emitWarning("kv-cache-layout: no KV cache: some attentions are "
                       "causal, others not: ")
          << reasons.front();
      return;
    }
    if (blockTokens <= 0) {
      module.emitError("kv-cache-layout: block-tokens must be positive");
      return signalPassFailure();
    }
    // The token ids [B, S] first, then possibly the exporter's cache.
    FailureOr<PastForm> past =
        matchPastForm(main, attentions, roleArgs, inputs);
    if (failed(past))
      return signalPassFailure();
    LLVM_DEBUG(llvm::dbgs() << "kv-cache-layout: " << past->pastArgs.size()
                            << " past input(s) of the exporter's cache\n");
    refinePastTypes(main, attentions);
    // Gathers at positions the exporter computes from the attention mask
    // (the genai builder's past_b + i, past_b from the mask's row sums):
    // integer [B, S] indices proven to be P + i on unpadded rows.
    positionLookups.clear();
    if (inputs.attentionMask) {
      unsigned n = 0;
      main.walk([&](Operation *op) {
        OpOperand *index = lookupIndex(op);
        if (!index)
          return;
        Value idx = index->get();
        auto t = cast<RankedTensorType>(idx.getType());
        if (!isa<BlockArgument>(idx) && t.getRank() == 2 &&
            checkPositions(idx, inputs).empty()) {
          LLVM_DEBUG(llvm::dbgs() << "kv-cache-layout: lookup " << n << " at "
                                  << op->getLoc() << " reads positions\n");
          positionLookups.push_back(n);
        }
        ++n;
      });
    }

    // A decoder whose positions or masks the entry points cannot express
    // still compiles: `main` stays, without a cache, and qcc says why.
    std::string why;
    func::FuncOp prefill, decode;
    {
      ScopedDiagnosticHandler capture(&getContext(), [&](Diagnostic &d) {
        if (why.empty())
          why = d.str();
        return success();
      });
      prefill = buildEntry(main, "prefill", /*decode=*/false, *past);
      if (prefill)
        decode = buildEntry(main, "decode", /*decode=*/true, *past);
    }
    if (prefill && decode && !buildLastEntry(prefill))
      LLVM_DEBUG(llvm::dbgs() << "kv-cache-layout: no prefill_last (the "
                                 "logits are not a row-wise head)\n");
    LLVM_DEBUG(llvm::dbgs() << "kv-cache-layout: entry points "
                            << (prefill && decode ? "built" : "refused: ")
                            << (prefill && decode ? "" : why) << "\n");
    if (!prefill || !decode) {
      for (StringRef name : {"prefill", "decode"})
        if (auto fn = module.lookupSymbol<func::FuncOp>(name))
          fn.erase();
      StringRef reason(why);
      reason.consume_front("kv-cache-layout: ");
      main.emitWarning("kv-cache-layout: no KV cache: ") << reason;
      return;
    }

    AttentionOp first = attentions.front();
    int64_t heads = first.getNumHeads(), kvHeads = first.getNumKvHeads();
    int64_t width = first.getQuery().getType().getDimSize(2);
    Builder b(module.getContext());
    module->setAttr(
        qcc::kKvCacheAttr,
        b.getDictionaryAttr(
            {b.getNamedAttr("layout", b.getStringAttr(spelling(
                                           kKvLayoutNames, layout.getValue()))),
             b.getNamedAttr("block_tokens", b.getI64IntegerAttr(blockTokens)),
             b.getNamedAttr("layers",
                            b.getI64IntegerAttr(attentions.size())),
             b.getNamedAttr("kv_heads", b.getI64IntegerAttr(kvHeads)),
             b.getNamedAttr("head_dim",
                            b.getI64IntegerAttr(width == kDyn ? -1
                                                              : width / heads)),
             b.getNamedAttr("dtype",
                            b.getStringAttr(spelling(kKvDtypeNames,
                                                     kvDtype.getValue())))}));
    if (kvScales == KvScales::Kivi && kvDtype != KvDtype::I8) {
      module.emitError("kv-cache-layout: kv-scales=kivi needs kv-dtype=i8");
      return signalPassFailure();
    }
    if (kvDtypeHasScales(kvDtype) &&
        failed(addKvScales(module, attentions,
                           width == kDyn ? -1 : width / heads)))
      return signalPassFailure();
    if (maskContext > 0)
      maxPositions = maxPositions > 0 ? std::min(maxPositions, maskContext)
                                      : maskContext;
    if (maxPositionsBound > 0) // the option: what the user bounds it to
      maxPositions = maxPositions > 0 ? std::min<int64_t>(maxPositions,
                                                          maxPositionsBound)
                                      : maxPositionsBound;
    if (maxPositions > 0) {
      NamedAttrList kvAttrs(module->getAttrOfType<DictionaryAttr>(qcc::kKvCacheAttr));
      kvAttrs.set("max_positions", b.getI64IntegerAttr(maxPositions));
      module->setAttr(qcc::kKvCacheAttr,
                      kvAttrs.getDictionary(module.getContext()));
    }
  }

  /// `prefill_last` (docs/KV_CACHE.md): `prefill` with the logits of one
  /// position per row, the extra input `last` i64 [B, 1] (a row's last
  /// token: what generation samples from). The rows are gathered before
  /// the head — the linear that makes the logits, with the row-wise ops
  /// right before it (a norm, a per-token or static quantize) and after it
  /// (a softcap's elementwise ops) — so that neither the head's GEMM nor
  /// the [B, S, vocab] logits are computed for the other positions. Null
  /// (and no entry point) when the logits come from anything else.
  func::FuncOp buildLastEntry(func::FuncOp prefill) {
    OpBuilder b(prefill);
    b.setInsertionPointAfter(prefill);
    auto fn = cast<func::FuncOp>(b.clone(*prefill));
    fn.setSymName("prefill_last");
    // A head this rewrite does not fit is no error: no prefill_last.
    ScopedDiagnosticHandler quiet(fn.getContext(),
                                  [](Diagnostic &) { return success(); });
    if (succeeded(gatherBeforeHead(fn)) && succeeded(verify(fn)))
      return fn;
    fn.erase();
    return {};
  }

  /// The rewrite of buildLastEntry on `fn`, a copy of `prefill`.
  static LogicalResult gatherBeforeHead(func::FuncOp fn) {
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    // The logits: the first [B, S, V] float result (runtime logitsOutput).
    int64_t li = -1;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (t && t.getRank() == 3 && isa<FloatType>(t.getElementType())) {
        li = (int64_t)i;
        break;
      }
    }
    if (li < 0)
      return failure();
    Value logits = ret.getOperand(li);
    auto lt = cast<RankedTensorType>(logits.getType());
    // Values with the logits' [B, S] leading dimensions: per-row.
    auto perRow = [&](Value v) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      return t && t.getRank() == 3 && t.getDimSize(0) == lt.getDimSize(0) &&
             t.getDimSize(1) == lt.getDimSize(1);
    };
    auto broadcastOnly = [&](Operation *op, Value row) {
      for (Value v : op->getOperands())
        if (v != row && cast<RankedTensorType>(v.getType()).getRank() > 1)
          return false;
      return true;
    };
    llvm::SetVector<Operation *> region;
    // After the head: elementwise ops on the logits (a softcap).
    Value v = logits;
    Operation *head = nullptr;
    while (Operation *op = v.getDefiningOp()) {
      if (isa<LinearOp, QLinearOp>(op) ||
          (isa<MatMulOp>(op) &&
           cast<RankedTensorType>(op->getOperand(1).getType()).getRank() ==
               2)) {
        head = op;
        region.insert(op);
        break;
      }
      std::optional<format::OpKind> kind = runtimeOpKind(op);
      bool elementwise = isa<CastOp>(op) ||
                         (kind && format::joinsElementwiseChain(*kind));
      if (!elementwise || op->getNumResults() != 1 || !perRow(op->getOperand(0)) ||
          !broadcastOnly(op, op->getOperand(0)))
        return failure();
      region.insert(op);
      v = op->getOperand(0);
    }
    if (!head)
      return failure();
    // Before the head: the row-wise producers of its rows, when nothing
    // else reads them.
    auto rowWise = [&](Operation *op) {
      if (auto q = dyn_cast<QuantizeOp>(op))
        return q.getGranularity() == "per_token" || q.getScale().has_value();
      if (isa<RmsNormOp, LayerNormOp>(op))
        return broadcastOnly(op, op->getOperand(0));
      return false;
    };
    auto onlyFeedsRegion = [&](Operation *op) {
      for (Operation *user : op->getUsers())
        if (!region.contains(user))
          return false;
      return true;
    };
    for (bool grew = true; grew;) {
      grew = false;
      for (Operation *op : SmallVector<Operation *>(region.begin(),
                                                    region.end()))
        for (Value operand : op->getOperands())
          if (Operation *p = operand.getDefiningOp();
              p && perRow(operand) && !region.contains(p) && rowWise(p) &&
              perRow(p->getOperand(0)) && onlyFeedsRegion(p))
            grew |= region.insert(p);
    }
    // The logits and everything in between are read only inside.
    for (Operation *op : region)
      for (Operation *user : op->getUsers())
        if (!region.contains(user) && user != ret.getOperation())
          return failure();
    for (OpOperand &use : logits.getUses())
      if (use.getOwner() == ret.getOperation() &&
          use.getOperandNumber() != (unsigned)li)
        return failure();

    // last: i64 [B, 1], named, its batch dimension named as the ids'.
    OpBuilder b(fn);
    auto lastType = RankedTensorType::get({lt.getDimSize(0), 1},
                                          b.getI64Type());
    SmallVector<NamedAttribute> attrs = {
        b.getNamedAttr("qcc.name", b.getStringAttr("last"))};
    if (DictionaryAttr ids = fn.getArgAttrDict(0))
      if (auto dims = ids.getAs<ArrayAttr>(kDimNamesAttr); dims && !dims.empty())
        attrs.push_back(b.getNamedAttr(
            kDimNamesAttr, b.getArrayAttr({dims[0], b.getStringAttr("")})));
    unsigned lastArg = fn.getNumArguments();
    if (failed(fn.insertArgument(lastArg, lastType,
                                 b.getDictionaryAttr(attrs), fn.getLoc())))
      return failure();
    b.setInsertionPointToStart(&fn.getBody().front());
    Value index = UnsqueezeOp::create(
        b, fn.getLoc(),
        RankedTensorType::get({lt.getDimSize(0), 1, 1}, b.getI64Type()),
        fn.getArgument(lastArg), b.getDenseI64ArrayAttr({2}));
    // Each row value that enters the region, gathered once, where it is
    // defined; then every value inside has one position per row.
    auto onePosition = [](Type t) {
      auto rt = cast<RankedTensorType>(t);
      SmallVector<int64_t> shape(rt.getShape());
      shape[1] = 1;
      return rt.clone(shape);
    };
    llvm::MapVector<Value, Value> gathered;
    for (Operation *op : region)
      for (OpOperand &operand : op->getOpOperands()) {
        Value in = operand.get();
        if (!perRow(in) || (in.getDefiningOp() &&
                            region.contains(in.getDefiningOp())))
          continue;
        auto [it, fresh] = gathered.try_emplace(in, Value());
        if (fresh) {
          if (Operation *def = in.getDefiningOp())
            b.setInsertionPointAfter(def);
          else
            b.setInsertionPointAfter(index.getDefiningOp());
          it->second = GatherNdOp::create(b, op->getLoc(),
                                          onePosition(in.getType()), in,
                                          index, b.getI64IntegerAttr(1));
        }
        operand.set(it->second);
      }
    for (Operation *op : region)
      for (Value r : op->getResults())
        r.setType(onePosition(r.getType()));
    SmallVector<Type> results(fn.getFunctionType().getResults());
    results[li] = logits.getType();
    if (auto dims = fn.getResultAttrOfType<ArrayAttr>(li, kDimNamesAttr);
        dims && dims.size() == 3) {
      SmallVector<Attribute> names(dims.begin(), dims.end());
      names[1] = b.getStringAttr(""); // static now
      fn.setResultAttr(li, kDimNamesAttr, b.getArrayAttr(names));
    }
    fn.setFunctionType(
        b.getFunctionType(fn.getArgumentTypes(), results));
    return success();
  }

  /// Rows of the learned position table (a limit on the context), or -1.
  int64_t maxPositions = -1;
  /// The sliding window of each attention of `main`, in walk order (0 =
  /// none): its kv_attention's.
  SmallVector<int64_t> windows;
  /// The ALiBi slopes of each attention of `main`, in walk order (empty =
  /// none): its kv_attention's.
  SmallVector<std::vector<float>> alibis;
  /// The table lookups of `main` (numbered in walk order, lookupIndex)
  /// whose indices are proven positions (MaskAnalysis.h checkPositions).
  SmallVector<unsigned> positionLookups;
  /// The longest context the masks were verified for (MaskAnalysis.h), or -1.
  int64_t maskContext = -1;

  /// The past inputs of `main` get the kv heads and head size of the
  /// attention that appends to them where their type leaves them open (the
  /// genai builder's `kv_cache_dim`), so that a caller of `main` can pass an
  /// empty past of the right shape.
  static void refinePastTypes(func::FuncOp main,
                              ArrayRef<AttentionOp> attentions) {
    SmallVector<Type> inputs(main.getFunctionType().getInputs());
    for (AttentionOp a : attentions)
      for (Value operand : {a.getKey(), a.getValue()}) {
        BlockArgument past;
        Value fresh;
        int64_t width = a.getQuery().getType().getDimSize(2);
        if (!matchCacheAppend(operand, past, fresh) || width == kDyn)
          continue;
        auto t = cast<RankedTensorType>(past.getType());
        SmallVector<int64_t> shape(t.getShape());
        if (shape.size() != 4)
          continue;
        if (shape[1] == kDyn)
          shape[1] = a.getNumKvHeads();
        if (shape[3] == kDyn)
          shape[3] = width / a.getNumHeads();
        past.setType(withShape(t, shape));
        inputs[past.getArgNumber()] = past.getType();
      }
    main.setFunctionType(FunctionType::get(
        main.getContext(), inputs, main.getFunctionType().getResults()));
  }

  /// The decoder's inputs by role: token ids first; the attention mask and
  /// position ids by their HuggingFace names.
  static DecoderInputs findRoles(func::FuncOp fn) {
    DecoderInputs in;
    if (fn.getNumArguments() == 0)
      return in;
    in.ids = fn.getArgument(0);
    for (unsigned i = 1; i < fn.getNumArguments(); ++i) {
      auto name = fn.getArgAttrOfType<StringAttr>(i, "qcc.name");
      auto t = dyn_cast<RankedTensorType>(fn.getArgument(i).getType());
      if (!name || !t || t.getRank() != 2)
        continue;
      if (name.getValue() == "attention_mask")
        in.attentionMask = fn.getArgument(i);
      else if (name.getValue() == "position_ids")
        in.positionIds = fn.getArgument(i);
    }
    return in;
  }

  /// int8 KV: static scales = calibration absmax / qmax (127,
  /// format/Quant.h), per layer and kv head for K and V (per-head), or per
  /// layer and key channel for K with V's computed per token by the runtime
  /// (kivi). FP8 KV: per head, absmax / 448 (numerics::fp8Scale), so that
  /// the calibrated range fills E4M3's.
  LogicalResult addKvScales(ModuleOp module, ArrayRef<AttentionOp> attentions,
                            int64_t headDim) {
    Builder b(module.getContext());
    bool kivi = kvScales == KvScales::Kivi;
    SmallVector<Attribute> kScales, vScales;
    for (AttentionOp a : attentions) {
      SmallVector<std::pair<const char *, SmallVector<Attribute> *>> stats = {
          {"qcc.k_absmax", &kScales}, {"qcc.v_absmax", &vScales}};
      if (kivi)
        stats = {{"qcc.k_channel_absmax", &kScales}};
      for (auto [name, out] : stats) {
        int64_t per = kivi ? headDim : 1;
        auto absmax = a->getAttrOfType<DenseElementsAttr>(name);
        if (per <= 0 || !absmax ||
            absmax.getNumElements() != (int64_t)a.getNumKvHeads() * per)
          return a.emitError("kv-cache-layout: an ")
                 << (kvDtype == KvDtype::Fp8 ? "FP8" : "int8")
                 << " KV cache needs calibration statistics ("
                 << name << (kivi ? " per key channel)" : " per kv head)");
        SmallVector<Attribute> scales;
        for (float m : absmax.getValues<float>())
          scales.push_back(b.getF32FloatAttr(
              kvDtype == KvDtype::Fp8 ? numerics::fp8Scale(m)
              : m > 0                 ? m / (float)format::symmetricQMax()
                                      : 1.f));
        out->push_back(b.getArrayAttr(scales));
      }
    }
    auto kv = module->getAttrOfType<DictionaryAttr>(qcc::kKvCacheAttr);
    NamedAttrList attrs(kv);
    attrs.set("k_scales", b.getArrayAttr(kScales));
    if (kivi)
      attrs.set("scales", b.getStringAttr("kivi"));
    else
      attrs.set("v_scales", b.getArrayAttr(vScales));
    module->setAttr(qcc::kKvCacheAttr, attrs.getDictionary(module.getContext()));
    return success();
  }

  static void eraseDeadOps(func::FuncOp fn) {
    SmallVector<Operation *> ops;
    fn.walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : llvm::reverse(ops))
      if (isa<QccDialect>(op->getDialect()) && op->use_empty() &&
          isMemoryEffectFree(op))
        op->erase();
  }

  func::FuncOp buildEntry(func::FuncOp main, StringRef name, bool decode,
                          const PastForm &past) {
    OpBuilder b(main);
    b.setInsertionPointToEnd(main->getBlock());
    auto fn = cast<func::FuncOp>(b.clone(*main));
    fn.setSymName(name);
    Value ids = fn.getArgument(0);
    SmallVector<OpOperand *> lookups; // as in main, numbered in walk order
    fn.walk([&](Operation *op) {
      if (OpOperand *index = lookupIndex(op))
        lookups.push_back(index);
    });
    // The cache now lives in the runtime: the past inputs and the present
    // outputs go (their uses are dropped below).
    SmallVector<Value> pasts;
    for (unsigned i : past.pastArgs)
      pasts.push_back(fn.getArgument(i));
    if (!past.presentResults.empty()) {
      auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
      llvm::BitVector presents(ret->getNumOperands());
      for (unsigned i : past.presentResults)
        presents.set(i);
      ret->eraseOperands(presents);
      if (failed(fn.eraseResults(presents)))
        return {};
    }
    auto idsType = cast<RankedTensorType>(ids.getType());
    if (decode) { // one new token per sequence
      idsType = withShape(idsType, {idsType.getDimSize(0), 1});
      ids.setType(idsType);
      SmallVector<Type> inputs(fn.getFunctionType().getInputs());
      inputs[0] = idsType;
      fn.setFunctionType(
          b.getFunctionType(inputs, fn.getFunctionType().getResults()));
      // What the CUDA emitter picks skinny GEMV / split attention tiles by
      // (docs/KV_CACHE.md), rather than by the entry point's name.
      fn->setAttr(qcc::kTokensPerRowAttr, b.getI64IntegerAttr(1));
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
    DecoderInputs roles = findRoles(fn);
    if (Value am = roles.attentionMask) {
      // What is left of the mask input is its shape (the batch size the
      // dynamo exporter reads from it): the ids have the same batch and,
      // without a past input, the same length.
      for (OpOperand &use : llvm::make_early_inc_range(am.getUses())) {
        auto shape = dyn_cast<ShapeOp>(use.getOwner());
        if (!shape)
          continue;
        int64_t end = shape.getEnd() ? (int64_t)*shape.getEnd() : 2;
        if (pasts.empty() || (shape.getStart() == 0 && end == 1))
          use.set(ids);
      }
    }
    int64_t tableRows = -1; // of the tables looked up at positions
    for (unsigned i : positionLookups) {
      // Positions the exporter computed from the attention mask.
      OpOperand *index = lookups[i];
      b.setInsertionPoint(index->getOwner());
      Value p = positions;
      auto it = cast<RankedTensorType>(index->get().getType());
      if (it.getElementType() != positionsType.getElementType())
        p = CastOp::create(b, fn.getLoc(),
                           positionsType.clone(it.getElementType()), p);
      index->set(p);
      int64_t rows =
          cast<RankedTensorType>(index->getOwner()->getOperand(0).getType())
              .getDimSize(0);
      if (rows != kDyn)
        tableRows = tableRows < 0 ? rows : std::min(tableRows, rows);
    }
    if (Value pid = roles.positionIds) {
      // The exporter's position ids are the cache positions as they are.
      b.setInsertionPointToStart(&fn.getBody().front());
      Value p = positions;
      auto pt = cast<RankedTensorType>(pid.getType());
      if (pt.getElementType() != positionsType.getElementType())
        p = CastOp::create(b, fn.getLoc(),
                           positionsType.clone(pt.getElementType()), p);
      pid.replaceAllUsesWith(p);
    }

    int64_t layer = 0;
    SmallVector<AttentionOp> attentions;
    fn.walk([&](AttentionOp a) { attentions.push_back(a); });
    for (AttentionOp a : attentions) {
      b.setInsertionPoint(a);
      // With the past form, only this call's keys/values go to the cache.
      Value query = a.getQuery(), key = a.getKey(), value = a.getValue();
      if (!pasts.empty()) {
        BlockArgument pastArg;
        if (!matchCacheAppend(a.getKey(), pastArg, key) ||
            !matchCacheAppend(a.getValue(), pastArg, value))
          return {};
        // q and k permuted alike within each head (an interleaved rotary's
        // gathers, which `main` keeps for its past and present in the
        // model's order) need not be once the cache holds only what decode
        // writes, in one order. Per-channel (kivi) K scales are calibrated
        // in `main`'s order: those keys keep it.
        int64_t width = a.getQuery().getType().getDimSize(2);
        auto [q, k] = kvScales == KvScales::Kivi || width == kDyn
                          ? std::pair<Value, Value>()
                          : matchSharedHeadPermutation(
                                query, key, width / (int64_t)a.getNumHeads());
        if (q) {
          query = q;
          key = k;
        }
      }
      auto kv = KvAttentionOp::create(
          b, a.getLoc(), a.getType(), query, key, value,
          b.getI64IntegerAttr(layer), a.getNumHeadsAttr(),
          a.getNumKvHeadsAttr(), a.getScaleAttr(),
          b.getI64IntegerAttr(windows[layer]), a.getSoftcapAttr(),
          alibis[layer].empty() ? DenseF32ArrayAttr()
                                : b.getDenseF32ArrayAttr(alibis[layer]));
      ++layer;
      a.replaceAllUsesWith(kv.getResult());
      a.erase();
    }
    // Drop what only computed the masks and positions (shape arithmetic).
    eraseDeadOps(fn);
    SmallVector<RangeOp> ranges;
    fn.walk([&](RangeOp r) {
      if (isPositionRange(r, ids, pasts))
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
    maxPositions = rebaser.maxPositions;
    if (tableRows > 0)
      maxPositions = maxPositions > 0 ? std::min(maxPositions, tableRows)
                                      : tableRows;

    // Drop what only computed the replaced positions (shape arithmetic).
    eraseDeadOps(fn);
    llvm::BitVector drop(fn.getNumArguments());
    if (Value am = roles.attentionMask) {
      if (!am.use_empty()) {
        fn.emitError("kv-cache-layout: the ")
            << name << " entry point still uses attention_mask beyond the "
            << "attention masks (e.g. to compute positions from it)";
        return {};
      }
      drop.set(cast<BlockArgument>(am).getArgNumber());
    }
    if (Value pid = roles.positionIds)
      drop.set(cast<BlockArgument>(pid).getArgNumber());
    for (Value p : pasts) {
      if (!p.use_empty()) {
        fn.emitError("kv-cache-layout: the ")
            << name << " entry point still uses a past input beyond "
            << "appending to it and its length in the position ids";
        return {};
      }
      drop.set(cast<BlockArgument>(p).getArgNumber());
    }
    if (failed(fn.eraseArguments(drop)))
      return {};
    if (failed(verify(fn))) {
      fn.emitError("kv-cache-layout: the ") << name << " entry point does not "
                                            << "verify";
      return {};
    }
    return fn;
  }
};

} // namespace
