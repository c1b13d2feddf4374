//===- RaiseMoe.cpp - raise-moe -------------------------------------------===//
//
// The exporters unroll a mixture-of-experts block's loop over the experts:
// per expert e, the (slot, token) pairs whose top-k id is e (NonZero of a
// one-hot mask), the tokens' rows gathered, the expert's MLP over them, its
// output scaled by the routes' gates and scattered into zeros, added up.
// That loop becomes one qcc.moe over the stacked expert weights.
//
// Spellings of the mask (one_hot, transposes, gathers or slices of it) and
// of the gate lookup vary by exporter; they are checked by evaluating them
// on sample ids, gates and rows (the CPU reference kernels), not matched op
// by op. The expert MLPs are matched structurally: linears of constant
// float weights (gated: act(gate x) * up x, or act(up x)), then down.
// Experts whose linears the weight passes quantized keep their exported
// form: qcc.moe takes float weights only.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccConstants.h"
#include "dialects/QccOps.h"
#include "passes/ConstEval.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace qcc {
#define GEN_PASS_DEF_RAISEMOE
#include "passes/Passes.h.inc"
} // namespace qcc

#define DEBUG_TYPE "qcc-raise-moe"

using namespace mlir;
using namespace qcc;

namespace {


int64_t intAt(const rt::Tensor &t, int64_t i) {
  switch (t.dtype()) {
  case rt::DType::I64: return t.data<int64_t>()[i];
  case rt::DType::I32: return t.data<int32_t>()[i];
  case rt::DType::Bool: return t.data<uint8_t>()[i];
  case rt::DType::F32: return t.data<float>()[i] != 0;
  default: return -1;
  }
}

rt::Tensor i64Tensor(rt::Shape shape, const std::function<int64_t(int64_t)> &f) {
  rt::Tensor t(rt::DType::I64, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<int64_t>()[i] = f(i);
  return t;
}

bool isZeros(Value v) {
  if (auto s = getSplatValue(v))
    return *s == 0.0;
  auto cos = v.getDefiningOp<ConstantOfShapeOp>();
  if (!cos)
    return false;
  auto dense = dyn_cast<DenseFPElementsAttr>(cos.getValue());
  return dense && dense.getNumElements() == 1 &&
         (*dense.getValues<APFloat>().begin()).isZero();
}

Value stripExpand(Value v) {
  while (auto e = v.getDefiningOp<ExpandOp>())
    v = e.getInput();
  return v;
}

/// Column `col` of Transpose(NonZero(mask)): Squeeze(Split(.., axis 1,
/// [1, 1])#col, [1]), the slots (0) or tokens (1) of an expert's routes.
NonZeroOp matchNonZeroColumn(Value v, int64_t &col) {
  auto squeeze = v.getDefiningOp<SqueezeOp>();
  if (!squeeze || squeeze.getAxes() != ArrayRef<int64_t>{1})
    return {};
  auto part = dyn_cast<OpResult>(squeeze.getInput());
  auto split = part ? dyn_cast<SplitOp>(part.getOwner()) : SplitOp();
  if (!split || split.getNumResults() != 2 || split.getAxis() != 1)
    return {};
  col = part.getResultNumber();
  auto t = split.getInput().getDefiningOp<TransposeOp>();
  if (!t || t.getPerm() != ArrayRef<int64_t>{1, 0})
    return {};
  return t.getInput().getDefiningOp<NonZeroOp>();
}

/// The token rows an expert reads: Gather(x, tokens, 0), or
/// Reshape(Gather(Unsqueeze(x, [0]), tokens, 1)) as the legacy exports
/// write `hidden_states[None, top_x]`.
Value matchGatheredRows(Value v, Value tokens) {
  if (auto r = v.getDefiningOp<ReshapeOp>())
    v = r.getInput();
  auto g = v.getDefiningOp<GatherOp>();
  if (!g || g.getIndices() != tokens)
    return {};
  if (g.getAxis() == 0)
    return g.getInput();
  auto u = g.getInput().getDefiningOp<UnsqueezeOp>();
  if (g.getAxis() == 1 && u && u.getAxes() == ArrayRef<int64_t>{0})
    return u.getInput();
  return {};
}

/// A linear over `x` with a constant float weight and no bias.
LinearOp matchExpertLinear(Value v, Value x) {
  auto l = v.getDefiningOp<LinearOp>();
  if (!l || l.getInput() != x || l.getBias() || !getConstant(l.getWeight()))
    return {};
  return l;
}

struct Expert {
  int64_t id = -1;
  LinearOp up, gate, down;
  std::string activation;
};

/// down(act(gate x) * up x) or down(act(up x)) over the rows `x`.
FailureOr<Expert> matchExpertMlp(Value y, Value x) {
  Expert e;
  e.down = y.getDefiningOp<LinearOp>();
  if (!e.down || e.down.getBias() || !getConstant(e.down.getWeight()))
    return failure();
  auto activationOf = [&](Value a, Value &in) -> std::string {
    Operation *op = a.getDefiningOp();
    if (!op || op->getNumOperands() != 1)
      return "";
    in = op->getOperand(0);
    if (isa<SiluOp>(op))
      return "silu";
    if (isa<ReluOp>(op))
      return "relu";
    if (auto g = dyn_cast<GeluOp>(op))
      return g.getApproximate() == "tanh" ? "gelu_tanh" : "gelu";
    return "";
  };
  Value h = e.down.getInput(), in;
  if (auto mul = h.getDefiningOp<MulOp>()) {
    bool found = matchCommutative(mul, [&](Value a, Value b) {
      e.activation = activationOf(a, in);
      e.gate = matchExpertLinear(in, x);
      e.up = matchExpertLinear(b, x);
      return !e.activation.empty() && e.gate && e.up;
    });
    if (!found)
      return failure();
  } else {
    e.activation = activationOf(h, in);
    e.up = matchExpertLinear(in, x);
    if (e.activation.empty() || !e.up)
      return failure();
  }
  return e;
}

/// The one-hot ids an expert mask is computed from (its source).
Value findOneHotIds(Value mask) {
  SmallVector<Value> work{mask};
  llvm::DenseSet<Value> seen;
  while (!work.empty() && seen.size() < 64) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    Operation *op = v.getDefiningOp();
    if (!op)
      continue;
    if (auto oh = dyn_cast<OneHotOp>(op))
      return oh.getIndices();
    for (Value o : op->getOperands())
      work.push_back(o);
  }
  return {};
}

/// acc + ScatterElements(zeros, Expand(Unsqueeze(tokens)), Expand(y * g))
/// chained from zeros, one term per expert, each checked on samples.
struct MoeFromExpertLoop : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    // The terms, last first, down to the zeros the loop starts from.
    SmallVector<ScatterElementsOp> terms;
    Value acc = add.getResult();
    while (!isZeros(acc)) {
      auto a = acc.getDefiningOp<AddOp>();
      ScatterElementsOp term;
      Value rest;
      if (!a || !matchCommutative(a, [&](Value l, Value r) {
            term = r.getDefiningOp<ScatterElementsOp>();
            rest = l;
            return term != nullptr;
          }))
        return rewriter.notifyMatchFailure(add, "not a chain of scatters "
                                                "added to zeros");
      terms.push_back(term);
      acc = rest;
    }
    if (terms.size() < 2)
      return rewriter.notifyMatchFailure(add, "fewer than two experts");

    Value x, ids, gates;
    int64_t numExperts = (int64_t)terms.size(), k = 0;
    SmallVector<Expert> experts;
    for (ScatterElementsOp se : terms) {
      if (se.getAxis() != 0 || se.getReduction() != "none" ||
          !isZeros(se.getInput()))
        return rewriter.notifyMatchFailure(se, "not a scatter into zeros");
      auto unsq = stripExpand(se.getIndices()).getDefiningOp<UnsqueezeOp>();
      if (!unsq || unsq.getAxes() != ArrayRef<int64_t>{1})
        return rewriter.notifyMatchFailure(se, "indices are not token rows");
      Value tokens = unsq.getInput();
      int64_t tokenCol = -1;
      NonZeroOp nz = matchNonZeroColumn(tokens, tokenCol);
      if (!nz || tokenCol != 1)
        return rewriter.notifyMatchFailure(se, "tokens are not the routes' "
                                               "second coordinate");
      // The scaled expert output: y * gate (either order).
      auto scaled = stripExpand(se.getUpdates()).getDefiningOp<MulOp>();
      Value weight;
      if (!scaled)
        return rewriter.notifyMatchFailure(se, "updates are not y * gate");
      FailureOr<Expert> expert = failure();
      Value rows;
      matchCommutative(scaled, [&](Value a, Value b) {
        auto down = a.getDefiningOp<LinearOp>();
        if (!down)
          return false;
        // The rows: the input of the first linear of the MLP.
        Value h = down.getInput();
        Operation *hop = h.getDefiningOp();
        if (!hop)
          return false;
        SmallVector<Value> candidates;
        for (Value o : hop->getOperands()) {
          if (auto l = o.getDefiningOp<LinearOp>())
            candidates.push_back(l.getInput());
          else if (o.getDefiningOp() && o.getDefiningOp()->getNumOperands())
            if (auto l = o.getDefiningOp()->getOperand(0).getDefiningOp<LinearOp>())
              candidates.push_back(l.getInput());
        }
        for (Value c : candidates) {
          Value src = matchGatheredRows(c, tokens);
          if (!src)
            continue;
          expert = matchExpertMlp(a, c);
          if (succeeded(expert)) {
            rows = src;
            weight = b;
            return true;
          }
        }
        return false;
      });
      if (failed(expert))
        return rewriter.notifyMatchFailure(se, "no expert MLP over the "
                                               "token rows");
      if (x && rows != x)
        return rewriter.notifyMatchFailure(se, "experts read other inputs");
      x = rows;

      // The mask's source ids, and the gate lookup's [T, k] gates.
      Value termIds = findOneHotIds(nz.getInput());
      auto topk = termIds ? termIds.getDefiningOp<TopKOp>() : TopKOp();
      if (!topk || topk.getIndices() != termIds)
        return rewriter.notifyMatchFailure(se, "the mask is not of top-k ids");
      auto idsType = cast<RankedTensorType>(termIds.getType());
      auto scoresType = cast<RankedTensorType>(topk.getInput().getType());
      if (idsType.getRank() != 2 || idsType.isDynamicDim(1) ||
          scoresType.isDynamicDim(scoresType.getRank() - 1) ||
          scoresType.getDimSize(scoresType.getRank() - 1) != numExperts ||
          ((int64_t)topk.getAxis() != 1 && (int64_t)topk.getAxis() != -1))
        return rewriter.notifyMatchFailure(
            se, "top-k is not over one score per expert");
      if (ids && termIds != ids)
        return rewriter.notifyMatchFailure(se, "experts read other routes");
      ids = termIds;
      k = idsType.getDimSize(1);
      auto gather = weight.getDefiningOp<GatherOp>();
      if (!gather || gather.getAxis() != 0)
        return rewriter.notifyMatchFailure(se, "gate is not a gathered one");
      // The [T, k] gates behind the views that flatten them (the deepest
      // [?, k] f32 value of the chain); the samples check the lookup.
      Value g;
      for (Value v = gather.getInput(); v;) {
        auto vt = cast<RankedTensorType>(v.getType());
        if (vt.getRank() == 2 && !vt.isDynamicDim(1) &&
            vt.getDimSize(1) == k && vt.getElementType().isF32())
          g = v;
        Operation *op = v.getDefiningOp();
        v = isa_and_nonnull<FlattenOp, UnsqueezeOp, ReshapeOp>(op)
                ? op->getOperand(0)
                : Value();
      }
      if (!g)
        return rewriter.notifyMatchFailure(se, "gates are not [T, k] f32");
      if (gates && g != gates)
        return rewriter.notifyMatchFailure(se, "experts read other gates");
      gates = g;

      // On samples: T = E + 1 tokens (so [k, T] and [T, k] differ), token t
      // routed to (t + j) mod E in slot j: each expert is in every slot.
      int64_t T = numExperts + 1;
      SampleEvaluator eval;
      eval.bind(ids, i64Tensor({T, k}, [&](int64_t i) {
                  return (i / k + i % k) % numExperts;
                }));
      auto mask = eval.eval(nz.getInput());
      if (failed(mask) || mask->shape() != rt::Shape{k, T})
        return rewriter.notifyMatchFailure(se, "the mask does not evaluate "
                                               "to [k, T] on sample ids");
      int64_t id = -1;
      for (int64_t e = 0; e < numExperts && id < 0; ++e) {
        bool all = true;
        for (int64_t j = 0; j < k && all; ++j)
          for (int64_t t = 0; t < T && all; ++t)
            all = (intAt(*mask, j * T + t) != 0) == ((t + j) % numExperts == e);
        if (all)
          id = e;
      }
      if (id < 0)
        return rewriter.notifyMatchFailure(se, "the mask is no expert's");
      // The gate of route (token, slot) = gates[token, slot].
      SampleEvaluator lookup;
      rt::Tensor sampleGates(rt::DType::F32, {T, k});
      for (int64_t i = 0; i < T * k; ++i)
        sampleGates.data<float>()[i] = (float)(i + 1);
      lookup.bind(gates, sampleGates);
      SmallVector<std::pair<int64_t, int64_t>> routes; // (slot, token)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t t = 0; t < T; ++t)
          if ((t + j) % numExperts == id)
            routes.push_back({j, t});
      // The route coordinates bound where the lookup reads them: the
      // tokens and the squeezed first column (the slots) of the same split.
      auto tokensValue = i64Tensor({(int64_t)routes.size()},
                                   [&](int64_t i) { return routes[i].second; });
      lookup.bind(tokens, tokensValue);
      auto split = cast<OpResult>(tokens.getDefiningOp<SqueezeOp>().getInput())
                       .getOwner();
      for (Operation *user : split->getResult(0).getUsers())
        if (auto sq = dyn_cast<SqueezeOp>(user))
          lookup.bind(sq.getResult(),
                      i64Tensor({(int64_t)routes.size()},
                                [&](int64_t i) { return routes[i].first; }));
      auto looked = lookup.eval(weight);
      if (failed(looked) || looked->numel() != (int64_t)routes.size() ||
          looked->dtype() != rt::DType::F32)
        return rewriter.notifyMatchFailure(se, "the gate lookup does not "
                                               "evaluate on samples");
      for (size_t i = 0; i < routes.size(); ++i)
        if (looked->data<float>()[i] !=
            sampleGates.data<float>()[routes[i].second * k + routes[i].first])
          return rewriter.notifyMatchFailure(se, "the gate lookup reads "
                                                 "another route's gate");
      expert->id = id;
      experts.push_back(*expert);
    }

    // One expert per id, all with the same MLP form and weight shapes.
    llvm::sort(experts, [](const Expert &a, const Expert &b) {
      return a.id < b.id;
    });
    for (int64_t e = 0; e < numExperts; ++e)
      if (experts[e].id != e)
        return rewriter.notifyMatchFailure(add, "experts are not 0 .. E-1");
    Expert first = experts.front();
    for (Expert e : experts)
      if (e.activation != first.activation || !e.gate != !first.gate ||
          e.up.getWeight().getType() != first.up.getWeight().getType() ||
          e.down.getWeight().getType() != first.down.getWeight().getType() ||
          (e.gate && e.gate.getWeight().getType() !=
                         first.gate.getWeight().getType()))
        return rewriter.notifyMatchFailure(add, "experts differ in form");
    auto xType = cast<RankedTensorType>(x.getType());
    if (xType != add.getType() || xType.getRank() != 2)
      return rewriter.notifyMatchFailure(add, "result is not the input's "
                                              "[T, H] type");

    // The stacked weights [E, N, K], expert by expert.
    auto stack = [&](auto weightOf) -> Value {
      auto wt = cast<RankedTensorType>(weightOf(first).getType());
      std::vector<char> bytes;
      for (Expert e : experts) {
        auto b = getBytes(getConstant(weightOf(e)));
        if (!b)
          return {};
        bytes.insert(bytes.end(), b->begin(), b->end());
      }
      auto type = RankedTensorType::get(
          {numExperts, wt.getDimSize(0), wt.getDimSize(1)},
          wt.getElementType());
      std::string name =
          blobName(getConstant(weightOf(first)), "moe") + ".experts";
      return ConstantOp::create(rewriter, add.getLoc(),
                                makeElements(type, bytes, name));
    };
    Value up = stack([](Expert e) { return e.up.getWeight(); });
    Value down = stack([](Expert e) { return e.down.getWeight(); });
    Value gate = first.gate
                     ? stack([](Expert e) { return e.gate.getWeight(); })
                     : Value();
    if (!up || !down || (first.gate && !gate))
      return rewriter.notifyMatchFailure(add, "expert weights not readable");
    rewriter.replaceOpWithNewOp<MoeOp>(add, xType, x, ids, gates, up, down,
                                       gate, first.activation);
    return success();
  }
};

struct RaiseMoePass : qcc::impl::RaiseMoeBase<RaiseMoePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MoeFromExpertLoop>(&getContext());
    if (failed(applyPatternsTraced(getOperation(), std::move(patterns),
                                   DEBUG_TYPE)))
      signalPassFailure();
  }
};

} // namespace
