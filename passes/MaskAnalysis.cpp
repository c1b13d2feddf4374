//===- MaskAnalysis.cpp - what an exporter's attention mask computes ------===//
#include "passes/MaskAnalysis.h"

#include "dialects/QccOps.h"
#include "passes/ConstEval.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <set>

using namespace mlir;
using namespace qcc;

namespace {

/// Longest evaluated context: with a cache one query row is evaluated
/// (linear in the length); without one the full [S, S] mask (quadratic).
constexpr int64_t kMaxPastContext = 65538;
constexpr int64_t kMaxSquareContext = 4098;

struct Sample {
  int64_t batch, seq, past;
  std::vector<std::vector<int64_t>> attend; // [batch][past + seq]
};

/// Evaluates the mask's subgraph for one sample.
class SliceEvaluator {
public:
  SliceEvaluator(const DecoderInputs &in, const Sample &s) : in(in), s(s) {}

  FailureOr<rt::Tensor> eval(Value v) {
    if (auto it = memo.find(v); it != memo.end())
      return it->second;
    FailureOr<rt::Tensor> t = compute(v);
    if (succeeded(t))
      memo[v] = *t;
    return t;
  }

  std::string why;

private:
  FailureOr<rt::Tensor> fail(const Twine &reason) {
    if (why.empty())
      why = reason.str();
    return failure();
  }

  /// Size of dimension `i` of function argument `arg` in this sample.
  std::optional<int64_t> argDim(Value arg, int64_t i) {
    auto t = cast<RankedTensorType>(arg.getType());
    if (!t.isDynamicDim(i))
      return t.getDimSize(i);
    if (i == 0)
      return s.batch;
    if (arg == in.ids || arg == in.positionIds)
      return i == 1 ? std::optional<int64_t>(s.seq) : std::nullopt;
    if (arg == in.attentionMask)
      return i == 1 ? std::optional<int64_t>(s.past + s.seq) : std::nullopt;
    if (llvm::is_contained(in.pasts, arg))
      return i == 2 ? std::optional<int64_t>(s.past) : std::nullopt;
    return std::nullopt;
  }

  /// The elements of a small integer vector the mask builder computes.
  std::optional<std::vector<int64_t>> intsOf(Value v) {
    auto t = eval(v);
    if (failed(t) || (t->dtype() != rt::DType::I64 &&
                      t->dtype() != rt::DType::I32))
      return std::nullopt;
    std::vector<int64_t> out;
    for (int64_t k = 0; k < t->numel(); ++k)
      out.push_back(t->dtype() == rt::DType::I64 ? t->data<int64_t>()[k]
                                                 : t->data<int32_t>()[k]);
    return out;
  }

  /// Dimension `i` of `v` in this sample, by shape rules alone (no tensor
  /// data is computed but small shape vectors).
  std::optional<int64_t> dimOf(Value v, int64_t i, int depth = 0) {
    auto t = cast<RankedTensorType>(v.getType());
    if (!t.isDynamicDim(i))
      return t.getDimSize(i);
    DimExpr d = resolveDimExpr(v, i);
    if (d.isConstant())
      return d.constant;
    if (d.source && isa<BlockArgument>(d.source))
      return argDim(d.source, d.index);
    if (d.source)
      v = d.source, i = d.index;
    Operation *op = v.getDefiningOp();
    if (!op || depth > 64)
      return std::nullopt;
    int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
    auto dim = [&](Value x, int64_t j) { return dimOf(x, j, depth + 1); };
    if (auto cat = dyn_cast<ConcatOp>(op)) {
      int64_t axis = (int64_t)cat.getAxis();
      axis = axis < 0 ? axis + rank : axis;
      if (i != axis)
        return dim(cat.getInputs()[0], i);
      int64_t sum = 0;
      for (Value x : cat.getInputs()) {
        auto dx = dim(x, i);
        if (!dx)
          return std::nullopt;
        sum += *dx;
      }
      return sum;
    }
    if (auto tr = dyn_cast<TransposeOp>(op))
      return dim(tr.getInput(), tr.getPerm()[i]);
    if (auto r = dyn_cast<ReshapeOp>(op)) {
      auto target = intsOf(r.getShape());
      if (!target || (int64_t)target->size() != rank)
        return std::nullopt;
      int64_t x = (*target)[i];
      if (x == 0 && !r.getAllowzero())
        return dim(r.getInput(), i);
      if (x != -1)
        return x;
      auto in = cast<RankedTensorType>(r.getInput().getType());
      int64_t total = 1, rest = 1;
      for (int64_t j = 0; j < in.getRank(); ++j) {
        auto dj = dim(r.getInput(), j);
        if (!dj)
          return std::nullopt;
        total *= *dj;
      }
      for (int64_t j = 0; j < rank; ++j)
        if (j != i) {
          int64_t y = (*target)[j];
          if (y == 0 && !r.getAllowzero()) {
            auto dj = dim(r.getInput(), j);
            if (!dj)
              return std::nullopt;
            y = *dj;
          }
          rest *= y;
        }
      return rest ? std::optional<int64_t>(total / rest) : std::nullopt;
    }
    if (isa<ExpandOp, AddOp, SubOp, MulOp, DivOp, WhereOp, AndOp, OrOp,
            EqualOp, LessOp, LessEqualOp, GreaterOp, GreaterEqualOp, MaxOp,
            MinOp>(op)) {
      std::optional<int64_t> out = 1;
      SmallVector<Value> ins(op->getOperands());
      if (auto e = dyn_cast<ExpandOp>(op)) {
        auto target = intsOf(e.getShape());
        if (!target)
          return std::nullopt;
        int64_t off = rank - (int64_t)target->size();
        if (i >= off && (*target)[i - off] != 1)
          out = (*target)[i - off];
        ins = {e.getInput()};
      }
      for (Value x : ins) {
        int64_t xr = cast<RankedTensorType>(x.getType()).getRank();
        int64_t j = i - (rank - xr);
        if (j < 0)
          continue;
        auto dx = dim(x, j);
        if (!dx)
          return std::nullopt;
        if (*dx != 1)
          out = *dx;
      }
      return out;
    }
    // Ops that keep their first operand's leading dimensions.
    if (op->getNumOperands() > 0 && i < rank - 1 &&
        isa<LinearOp, RotaryOp, AttentionOp, RmsNormOp, LayerNormOp, GeluOp,
            SiluOp, SoftmaxOp, CastOp, NegOp>(op))
      return dim(op->getOperand(0), i);
    return std::nullopt;
  }

  rt::Tensor intTensor(Type et, rt::Shape shape,
                       const std::function<int64_t(int64_t, int64_t)> &f) {
    rt::DType dt;
    rt::parseDType(runtimeDType(et), dt);
    rt::Tensor t(dt, shape);
    for (int64_t b = 0; b < shape[0]; ++b)
      for (int64_t j = 0; j < shape[1]; ++j) {
        int64_t v = f(b, j), at = b * shape[1] + j;
        switch (dt) {
        case rt::DType::I64: t.data<int64_t>()[at] = v; break;
        case rt::DType::I32: t.data<int32_t>()[at] = (int32_t)v; break;
        case rt::DType::Bool: t.data<uint8_t>()[at] = v != 0; break;
        case rt::DType::F32: t.data<float>()[at] = (float)v; break;
        default: break;
        }
      }
    return t;
  }

  FailureOr<rt::Tensor> compute(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto t = cast<RankedTensorType>(v.getType());
      Type et = t.getElementType();
      bool supported = et.isInteger(64) || et.isInteger(32) ||
                       et.isInteger(1) || et.isF32();
      if (v == in.attentionMask && t.getRank() == 2 && supported)
        return intTensor(et, {s.batch, s.past + s.seq},
                         [&](int64_t b, int64_t j) { return s.attend[b][j]; });
      if (v == in.positionIds && t.getRank() == 2 && supported)
        return intTensor(et, {s.batch, s.seq},
                         [&](int64_t, int64_t i) { return s.past + i; });
      return fail("the mask reads the values of input " +
                  std::to_string(arg.getArgNumber()) +
                  " (only the attention mask's and the position ids' may "
                  "be read)");
    }
    Operation *op = v.getDefiningOp();
    if (auto c = dyn_cast<ConstantOp>(op)) {
      auto t = tensorFromElements(c.getValue());
      if (failed(t))
        return fail("a constant of the mask has no usable data");
      return *t;
    }
    if (auto shape = dyn_cast<ShapeOp>(op)) {
      // Shapes only: the operand itself is never evaluated.
      Value x = shape.getInput();
      int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
      int64_t start = shape.getStart();
      int64_t end = shape.getEnd() ? (int64_t)*shape.getEnd() : rank;
      start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
      end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
      rt::Tensor r(rt::DType::I64, {std::max<int64_t>(end - start, 0)});
      std::optional<rt::Shape> evaluated;
      for (int64_t i = start; i < end; ++i) {
        auto d = dimOf(x, i);
        if (!d) {
          // A dimension of a value the mask builder computes itself (a
          // Range of positions): evaluate that value.
          if (!evaluated) {
            auto t = eval(x);
            if (failed(t))
              return fail("the mask depends on a dimension that is not one "
                          "of the inputs'");
            evaluated = t->shape();
          }
          d = (*evaluated)[i];
        }
        r.data<int64_t>()[i - start] = *d;
      }
      return r;
    }
    if (!isa<QccDialect>(op->getDialect()) || op->getNumRegions() != 0)
      return fail("the mask is computed by an op that cannot be evaluated");
    std::vector<rt::Tensor> operands;
    operands.reserve(op->getNumOperands());
    for (Value operand : op->getOperands()) {
      auto t = eval(operand);
      if (failed(t))
        return failure();
      operands.push_back(*t);
    }
    rt::Operands ptrs;
    for (const rt::Tensor &t : operands)
      ptrs.push_back(&t);
    std::string reason;
    auto out = evaluateOpOnTensors(op, ptrs, &reason);
    if (failed(out))
      return fail("evaluating " + op->getName().getStringRef() + ": " +
                  reason);
    return (*out)[cast<OpResult>(v).getResultNumber()];
  }

  const DecoderInputs &in;
  const Sample &s;
  llvm::DenseMap<Value, rt::Tensor> memo;
};

/// Compares an evaluated additive mask with the causal-plus-padding mask of
/// the sample; rows with no visible key are not compared (exporters fill
/// them either way).
bool matchesCausalPadding(const rt::Tensor &m, const Sample &s,
                          std::string &why, bool *futureVisible = nullptr) {
  if (m.dtype() != rt::DType::F32 || m.rank() > 4) {
    why = "the mask is not a float tensor of rank <= 4";
    return false;
  }
  int64_t kLen = s.past + s.seq;
  rt::Shape full = {s.batch, 1, s.seq, kLen};
  rt::Shape shape(4 - m.rank(), 1);
  shape.insert(shape.end(), m.shape().begin(), m.shape().end());
  for (int64_t d : {0, 2, 3})
    if (shape[d] != 1 && shape[d] != full[d]) {
      why = "the mask's shape " + rt::shapeString(m.shape()) +
            " does not broadcast to [batch, heads, seq, past + seq]";
      return false;
    }
  const float *data = m.data<float>();
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < shape[1]; ++h)
      for (int64_t i = 0; i < s.seq; ++i) {
        bool anyVisible = false;
        for (int64_t j = 0; j <= s.past + i; ++j)
          anyVisible |= s.attend[b][j] != 0;
        if (!anyVisible)
          continue;
        for (int64_t j = 0; j < kLen; ++j) {
          bool visible = j <= s.past + i && s.attend[b][j] != 0;
          int64_t at = (((shape[0] == 1 ? 0 : b) * shape[1] + h) * shape[2] +
                        (shape[2] == 1 ? 0 : i)) *
                           shape[3] +
                       (shape[3] == 1 ? 0 : j);
          float x = data[at];
          if (visible ? x != 0.0f : !(x <= kMaskedBelow)) {
            if (futureVisible)
              *futureVisible = j > s.past + i && s.attend[b][j] != 0;
            why = "the mask differs from causal + padding at batch " +
                  std::to_string(b) + ", query " + std::to_string(i) +
                  ", key " + std::to_string(j) + " (past " +
                  std::to_string(s.past) + ", seq " + std::to_string(s.seq) +
                  ")";
            return false;
          }
        }
      }
  return true;
}

/// The integer constants of the mask's subgraph in [2, 2^40]: the only places
/// where a comparison of positions can change its outcome.
std::set<int64_t> thresholds(Value mask) {
  std::set<int64_t> out;
  llvm::SetVector<Value> work;
  work.insert(mask);
  for (size_t i = 0; i < work.size(); ++i) {
    Operation *op = work[i].getDefiningOp();
    if (!op)
      continue;
    if (auto c = dyn_cast<ConstantOp>(op)) {
      if (auto d = dyn_cast<DenseIntElementsAttr>(c.getValue()))
        for (const APInt &v : d.getValues<APInt>()) {
          int64_t x = v.getSExtValue();
          if (x < 0)
            x = -x;
          if (x >= 2 && x <= (int64_t(1) << 40))
            out.insert(x);
        }
      continue;
    }
    if (isa<ShapeOp>(op))
      continue;
    for (Value operand : op->getOperands())
      work.insert(operand);
  }
  return out;
}

std::vector<int64_t> ones(int64_t n) { return std::vector<int64_t>(n, 1); }

} // namespace

MaskCheck qcc::checkCausalPaddingMask(Value mask,
                                      const DecoderInputs &inputs) {
  MaskCheck result;
  bool hasPast = !inputs.pasts.empty();
  std::vector<Sample> small;
  for (int64_t past : hasPast ? std::vector<int64_t>{0, 2, 5}
                              : std::vector<int64_t>{0})
    for (int64_t seq : {1, 3, 6}) {
      int64_t k = past + seq;
      std::vector<int64_t> left = ones(k), holes = ones(k), right = ones(k);
      for (int64_t j = 0; j < std::min<int64_t>(2, k - 1); ++j)
        left[j] = 0;
      for (int64_t j = 0; j + 1 < k; j += 2)
        holes[j] = 0;
      if (k > 1)
        right[k - 1] = 0;
      small.push_back({2, seq, past, {ones(k), left}});
      small.push_back({2, seq, past, {holes, right}});
    }
  for (const Sample &s : small) {
    SliceEvaluator ev(inputs, s);
    auto m = ev.eval(mask);
    if (failed(m)) {
      result.why = ev.why;
      return result;
    }
    if (!matchesCausalPadding(*m, s, result.why, &result.bidirectional))
      return result;
  }
  result.causalWithPadding = true;

  // Around every threshold of the builder: one row of a long context with a
  // cache, the whole square without one.
  int64_t cap = hasPast ? kMaxPastContext : kMaxSquareContext;
  int64_t verified = hasPast ? 5 + 6 : 6;
  for (int64_t c : thresholds(mask)) {
    for (int64_t k = std::max<int64_t>(c - 1, 1); k <= c + 2; ++k) {
      if (k <= verified)
        continue;
      if (k > cap) {
        // Below the threshold's neighbourhood nothing changes.
        result.maxContext = std::max(verified, c - 2);
        return result;
      }
      Sample s = hasPast ? Sample{1, 1, k - 1, {ones(k)}}
                         : Sample{1, k, 0, {ones(k)}};
      SliceEvaluator ev(inputs, s);
      auto m = ev.eval(mask);
      std::string why;
      if (failed(m) || !matchesCausalPadding(*m, s, why)) {
        result.maxContext = k - 1;
        return result;
      }
      verified = k;
    }
  }
  return result;
}
