//===- MaskAnalysis.cpp - what an exporter's attention mask computes ------===//
#include "passes/MaskAnalysis.h"

#include "dialects/QccOps.h"
#include "passes/ConstEval.h"
#include "passes/PatternUtils.h"
#include "runtime/core/HalfFloat.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <functional>
#include <limits>
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
    std::string reason;
    auto out = evaluateOpOnValues(
        op, [&](Value operand) { return eval(operand); }, &reason);
    if (failed(out) && reason.empty())
      return failure(); // an operand's evaluation failed, saying why
    if (failed(out))
      return fail("evaluating " + op->getName().getStringRef() + ": " +
                  reason);
    return (*out)[cast<OpResult>(v).getResultNumber()];
  }

  const DecoderInputs &in;
  const Sample &s;
  llvm::DenseMap<Value, rt::Tensor> memo;
};

/// The mask a hypothesis predicts: key j visible from query i of a row with
/// P cached tokens iff j <= P + i, j > P + i - window (window > 0) and
/// attend[j] != 0. With `rightOnly` (GroupQueryAttention's convention) the
/// rows of padding tokens are not compared: their keys differ from HF's.
struct MaskModel {
  int64_t window = 0;
  bool rightOnly = false;
  /// ALiBi: visible keys carry m_h * (j - (P + i)) plus any constant per
  /// query row (softmax ignores it), one slope per head of the mask (empty =
  /// none). Proven on samples without holes in the padding: exporters count
  /// key positions by index or by real tokens (BLOOM's cumsum), the same
  /// distances for contiguous tokens, the runtime's rows.
  std::vector<float> alibi;

  bool visible(const Sample &s, int64_t b, int64_t i, int64_t j) const {
    return j <= s.past + i && (window <= 0 || j > s.past + i - window) &&
           s.attend[b][j] != 0;
  }
  /// Rows with no visible key are not compared (exporters fill them either
  /// way), nor, with `rightOnly`, rows of padding tokens.
  bool compared(const Sample &s, int64_t b, int64_t i) const {
    if (rightOnly && s.attend[b][s.past + i] == 0)
      return false;
    for (int64_t j = 0; j <= s.past + i; ++j)
      if (visible(s, b, i, j))
        return true;
    return false;
  }
};

/// Compares an evaluated additive mask with the mask `model` predicts for
/// the sample.
bool matchesModel(const rt::Tensor &mask, const Sample &s,
                  const MaskModel &model, std::string &why,
                  bool *futureVisible = nullptr) {
  // An f16/bf16 mask (a half model's) is read widened, exactly; an f16 one
  // masks with f16's most negative finite value, finfo(float16).min.
  rt::Tensor m = rt::isHalfFloat(mask.dtype())
                     ? rt::convertFloat(mask, rt::DType::F32)
                     : mask;
  double maskedBelow =
      mask.dtype() == rt::DType::F16 ? -65504.0 : kMaskedBelow;
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
  if (!model.alibi.empty() && (int64_t)model.alibi.size() != shape[1]) {
    why = "the mask's head dimension changed";
    return false;
  }
  const float *data = m.data<float>();
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < shape[1]; ++h)
      for (int64_t i = 0; i < s.seq; ++i) {
        if (!model.compared(s, b, i))
          continue;
        // ALiBi: the row's constant, read at its first visible key.
        double rowBias = 0.0;
        float slope = model.alibi.empty() ? 0.0f : model.alibi[(size_t)h];
        bool haveRow = false;
        for (int64_t j = 0; j < kLen; ++j) {
          bool visible = model.visible(s, b, i, j);
          int64_t at = (((shape[0] == 1 ? 0 : b) * shape[1] + h) * shape[2] +
                        (shape[2] == 1 ? 0 : i)) *
                           shape[3] +
                       (shape[3] == 1 ? 0 : j);
          float x = data[at];
          bool ok;
          if (!visible) {
            ok = x <= maskedBelow;
          } else if (model.alibi.empty()) {
            ok = x == 0.0f;
          } else {
            // x - m_h (j - (P + i)) constant along the row; the bias is
            // computed in float32 by both sides, so within a few ulps of
            // the terms, and the slope (read from a short row) within 1e-5.
            double d = (double)slope * (double)(j - (s.past + i));
            double rest = (double)x - d;
            if (!haveRow)
              rowBias = rest, haveRow = true;
            double tol = 1e-5 * std::abs(d) +
                         1e-6 * (std::abs((double)x) + std::abs(rowBias)) +
                         1e-6;
            ok = std::isfinite(x) && std::abs(rest - rowBias) <= tol;
          }
          if (!ok) {
            if (futureVisible)
              *futureVisible = j > s.past + i && s.attend[b][j] != 0;
            why = "the mask differs from causal + padding";
            if (model.window > 0)
              why += " + window " + std::to_string(model.window);
            if (!model.alibi.empty())
              why += " + ALiBi";
            why += " at batch " + std::to_string(b) + ", query " +
                   std::to_string(i) + ", key " + std::to_string(j) +
                   " (past " + std::to_string(s.past) + ", seq " +
                   std::to_string(s.seq) + ")";
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

/// Checks `mask` against one model on the samples: small shapes (with the
/// model's padding), then one long unpadded row (or square) at every length
/// around each threshold.
MaskCheck checkModel(Value mask, const DecoderInputs &inputs,
                     const MaskModel &model, const std::set<int64_t> &ths) {
  MaskCheck result;
  result.window = model.window;
  result.rightPaddingOnly = model.rightOnly;
  result.alibi = model.alibi;
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
      if (model.rightOnly) {
        // Unpadded rows at every past; right padding of a prompt.
        small.push_back({2, seq, past, {ones(k), ones(k)}});
        for (int64_t j = std::max<int64_t>(k - 2, 1); j < k && past == 0; ++j)
          right[j] = 0;
        if (past == 0 && seq > 1)
          small.push_back({2, seq, past, {right, ones(k)}});
        continue;
      }
      if (k > 1)
        right[k - 1] = 0;
      small.push_back({2, seq, past, {ones(k), left}});
      if (model.alibi.empty())
        small.push_back({2, seq, past, {holes, right}});
      else
        small.push_back({2, seq, past, {right, ones(k)}});
    }
  for (const Sample &s : small) {
    SliceEvaluator ev(inputs, s);
    auto m = ev.eval(mask);
    if (failed(m)) {
      result.why = ev.why;
      return result;
    }
    if (!matchesModel(*m, s, model, result.why, &result.bidirectional))
      return result;
  }
  result.causalWithPadding = true;

  // Around every threshold of the builder (and the window): one row of a
  // long context with a cache, the whole square without one.
  std::set<int64_t> around = ths;
  if (model.window > 0)
    around.insert(model.window);
  int64_t cap = hasPast ? kMaxPastContext : kMaxSquareContext;
  int64_t verified = hasPast ? 5 + 6 : 6;
  for (int64_t c : around) {
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
      if (failed(m) || !matchesModel(*m, s, model, why)) {
        result.maxContext = k - 1;
        return result;
      }
      verified = k;
    }
  }
  return result;
}

} // namespace

/// The ALiBi slopes `mask` would have, one per head of the mask, read from
/// an unpadded square sample (the last query row sees every key: m_h =
/// (x[last] - x[0]) / (last)); empty if it cannot be evaluated or every
/// slope is 0 (then it is no ALiBi mask).
std::vector<float> alibiSlopes(Value mask, const DecoderInputs &inputs) {
  bool hasPast = !inputs.pasts.empty();
  int64_t seq = 6, past = hasPast ? 2 : 0, k = past + seq;
  Sample s{1, seq, past, {ones(k)}};
  SliceEvaluator ev(inputs, s);
  auto m = ev.eval(mask);
  // A hostile graph can compute an empty mask (a batch or head count of 0):
  // there is no row to read slopes from.
  if (failed(m) || m->dtype() != rt::DType::F32 || m->rank() != 4 ||
      m->dim(3) != k || (m->dim(2) != seq && m->dim(2) != 1) ||
      m->dim(0) < 1 || m->dim(1) < 1)
    return {};
  int64_t heads = m->dim(1), rows = m->dim(2);
  const float *x = m->data<float>();
  std::vector<float> slopes;
  bool any = false;
  for (int64_t h = 0; h < heads; ++h) {
    const float *row = x + (h * rows + (rows - 1)) * k;
    double slope = ((double)row[k - 1] - (double)row[0]) / (double)(k - 1);
    if (!std::isfinite(slope))
      return {};
    any |= slope != 0.0;
    slopes.push_back((float)slope);
  }
  return any ? slopes : std::vector<float>{};
}

MaskCheck qcc::checkCausalPaddingMask(Value mask,
                                      const DecoderInputs &inputs) {
  std::set<int64_t> ths = thresholds(mask);
  MaskCheck plain = checkModel(mask, inputs, MaskModel{}, ths);
  if (plain.causalWithPadding && plain.maxContext < 0)
    return plain;
  // ALiBi (BLOOM, MPT): causal + padding with a linear bias per head.
  if (std::vector<float> slopes = alibiSlopes(mask, inputs); !slopes.empty()) {
    MaskModel alibi;
    alibi.alibi = slopes;
    MaskCheck r = checkModel(mask, inputs, alibi, ths);
    if (r.causalWithPadding)
      return r;
  }
  // Other models: a sliding window W next to a constant of the builder
  // (W - 1 .. W + 1: a constant may be W or a bound derived from it), with
  // any padding or, as GroupQueryAttention computes, right padding only.
  std::set<int64_t> windows = {0};
  for (int64_t c : ths)
    for (int64_t w : {c - 1, c, c + 1})
      if (w >= 1 && w <= kMaxPastContext)
        windows.insert(w);
  auto better = [](const MaskCheck &a, const MaskCheck &b) {
    if (!a.causalWithPadding)
      return false;
    if (!b.causalWithPadding)
      return true;
    return b.maxContext >= 0 && (a.maxContext < 0 || a.maxContext > b.maxContext);
  };
  MaskCheck best = plain;
  for (bool rightOnly : {false, true})
    for (int64_t w : windows) {
      if (w == 0 && !rightOnly)
        continue; // the plain model, checked above
      MaskCheck r = checkModel(mask, inputs, MaskModel{w, rightOnly}, ths);
      if (better(r, best))
        best = r;
      if (best.causalWithPadding && best.maxContext < 0)
        return best;
    }
  if (!best.causalWithPadding) // the plain model's reason
    return plain;
  return best;
}

namespace {

/// Runs `check` on `v` evaluated over unpadded samples (the rows of the
/// runtime's ragged batch): batch 2 at small lengths, then one long row at
/// every length around each integer constant of `v`'s subgraph (up to the
/// cap). Returns why a sample failed, or "" when all passed.
std::string
forUnpaddedSamples(Value v, const DecoderInputs &inputs,
                   const std::function<std::string(const rt::Tensor &,
                                                   const Sample &)> &check) {
  bool hasPast = !inputs.pasts.empty();
  std::vector<Sample> samples;
  for (int64_t past : hasPast ? std::vector<int64_t>{0, 2, 5}
                              : std::vector<int64_t>{0})
    for (int64_t seq : {1, 3, 6})
      samples.push_back({2, seq, past, {ones(past + seq), ones(past + seq)}});
  int64_t cap = hasPast ? kMaxPastContext : kMaxSquareContext;
  for (int64_t c : thresholds(v))
    for (int64_t k = std::max<int64_t>(c - 1, 12); k <= std::min(c + 2, cap);
         ++k)
      samples.push_back(hasPast ? Sample{1, 1, k - 1, {ones(k)}}
                                : Sample{1, k, 0, {ones(k)}});
  for (const Sample &s : samples) {
    SliceEvaluator ev(inputs, s);
    auto t = ev.eval(v);
    if (failed(t))
      return ev.why;
    std::string why = check(*t, s);
    if (!why.empty())
      return why + " (past " + std::to_string(s.past) + ", seq " +
             std::to_string(s.seq) + ")";
  }
  return "";
}

int64_t intAt(const rt::Tensor &t, int64_t k) {
  switch (t.dtype()) {
  case rt::DType::I64: return t.data<int64_t>()[k];
  case rt::DType::I32: return t.data<int32_t>()[k];
  case rt::DType::Bool: return t.data<uint8_t>()[k];
  default: return std::numeric_limits<int64_t>::min();
  }
}

} // namespace

std::string qcc::checkPositions(Value positions, const DecoderInputs &inputs) {
  return forUnpaddedSamples(
      positions, inputs, [](const rt::Tensor &t, const Sample &s) {
        if (t.shape() != rt::Shape{s.batch, s.seq})
          return std::string("the positions are not [batch, seq]");
        for (int64_t b = 0; b < s.batch; ++b)
          for (int64_t i = 0; i < s.seq; ++i)
            if (intAt(t, b * s.seq + i) != s.past + i)
              return "position " + std::to_string(i) + " of row " +
                     std::to_string(b) + " is not past + " +
                     std::to_string(i);
        return std::string();
      });
}

std::string qcc::checkAppendGather(Value indices, Value keep,
                                   const DecoderInputs &inputs) {
  std::string why = forUnpaddedSamples(
      indices, inputs, [](const rt::Tensor &t, const Sample &s) {
        if (t.rank() != 4 || t.dim(2) != s.past + s.seq)
          return std::string("the gathered rows are not past + seq");
        int64_t inner = t.dim(3), rows = t.dim(2);
        for (int64_t k = 0; k < t.numel(); ++k)
          if (intAt(t, k) != k / inner % rows)
            return std::string("the gather does not keep every row in place");
        return std::string();
      });
  if (!why.empty())
    return why;
  return forUnpaddedSamples(keep, inputs,
                            [](const rt::Tensor &t, const Sample &) {
                              for (int64_t k = 0; k < t.numel(); ++k)
                                if (intAt(t, k) == 0)
                                  return std::string("a row is zeroed");
                              return std::string();
                            });
}
