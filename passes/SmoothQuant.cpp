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
#include "passes/W8A8Error.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Debug.h"

#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

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

/// What absorbs 1/s for a group of linears reading one activation.
enum class Producer {
  Norm,           ///< gamma (and beta) of a layer_norm / rms_norm
  UpProjection,   ///< the rows of the linear factor of a GLU product
  ValueProjection ///< the rows of an attention's value projection
};

/// A group of linears that read one activation and get one s between them,
/// with the producer that absorbs 1/s.
struct Group {
  Producer producer;
  Operation *anchor; ///< the norm, the mul or the attention: remarks go here
  Operation *source; ///< the norm, or the linear whose rows absorb 1/s
  SmallVector<LinearOp> consumers;
  size_t channels = 0; ///< width of s
  /// Consumer input column c is smoothed channel channelOf[c]: the identity
  /// except under an attention, where column h*D + d reads V channel
  /// g*D + d of the KV head g that query head h shares.
  std::vector<size_t> channelOf;
  /// Runtime LoRA adapters reading the activation (qcc.lora, docs/LORA.md):
  /// their A columns absorb s as the linears' weight columns do.
  SmallVector<LoraOp> loras;
};

struct SmoothQuantPass : qcc::impl::SmoothQuantBase<SmoothQuantPass> {
  using SmoothQuantBase::SmoothQuantBase;

  void runOnOperation() override {
    if (alpha < 0 || alpha > 1) {
      getOperation().emitError("smooth-quant: alpha must be in [0, 1], not ")
          << alpha;
      return signalPassFailure();
    }
    // Norm groups first: an up projection's columns (scaled by its norm's s)
    // and rows (scaled by its down projection's s) commute, and each rewrite
    // reads the weight the previous one left.
    SmallVector<Operation *> norms;
    getOperation().walk([&](Operation *op) {
      if (isa<LayerNormOp, RmsNormOp>(op))
        norms.push_back(op);
    });
    for (Operation *norm : norms)
      if (auto g = normGroup(norm))
        smooth(*g);
    if (normsOnly) {
      dropSamples();
      return eraseDeadConstants(getOperation());
    }
    // Then every other activation a linear with statistics reads.
    SmallVector<std::pair<Value, LinearOp>> inputs;
    llvm::DenseSet<Value> seen;
    getOperation().walk([&](LinearOp l) {
      Value x = throughReshapes(l.getInput());
      if (absmaxOf(l) && seen.insert(x).second)
        inputs.push_back({x, l});
    });
    for (auto [x, l] : inputs) {
      Operation *def = x.getDefiningOp();
      if (def && isa<LayerNormOp, RmsNormOp>(def))
        continue; // a norm group, done above
      std::optional<Group> g;
      if (auto mul = dyn_cast_or_null<MulOp>(def))
        g = upGroup(mul);
      else if (auto att = dyn_cast_or_null<AttentionOp>(def))
        g = valueGroup(att);
      else
        declineInput(l, def);
      if (g)
        smooth(*g);
    }
    dropSamples();
    eraseDeadConstants(getOperation());
  }

  /// The sampled rows served the alpha search; they go further only to
  /// int8-fallback (`keep-samples`), rescaled with their input.
  void dropSamples() {
    if (keepSamples)
      return;
    getOperation().walk([](LinearOp l) { l->removeAttr(kInputSamplesAttr); });
  }

  /// A remark on `anchor` saying why its group is left unsmoothed (qcc-opt
  /// shows it; the qcc driver drops remarks).
  void decline(Operation *anchor, const llvm::Twine &why) {
    LLVM_DEBUG(llvm::dbgs() << "smooth-quant: skip " << anchor->getName()
                            << " at " << anchor->getLoc() << ": " << why
                            << "\n");
    anchor->emitRemark("smooth-quant: ")
        << anchor->getName() << " not smoothed: " << why;
  }

  /// A linear input produced by an op that cannot absorb 1/s: no explicit
  /// scale op is inserted (it would cost a pass over the activation for a
  /// gain the norm and linear producers already give), the remark names it.
  void declineInput(LinearOp l, Operation *def) {
    l->emitRemark("smooth-quant: qcc.linear not smoothed: its input comes "
                  "from ")
        << (def ? def->getName().getStringRef() : StringRef("an argument"))
        << ", which cannot absorb 1/s";
  }

  /// A reshape that keeps the last dimension keeps every element's channel
  /// (row-major: channel = flat index mod C); the exporter's head merge
  /// before the output projection is one. Such reshapes are looked through.
  static bool keepsChannels(ReshapeOp r) {
    auto in = cast<RankedTensorType>(r.getInput().getType());
    auto out = cast<RankedTensorType>(r.getType());
    return in.getRank() > 0 && !ShapedType::isDynamic(in.getShape().back()) &&
           out.getRank() > 0 &&
           (ShapedType::isDynamic(out.getShape().back()) ||
            out.getShape().back() == in.getShape().back());
  }

  static Value throughReshapes(Value x) {
    while (auto r = x.getDefiningOp<ReshapeOp>()) {
      if (!keepsChannels(r))
        break;
      x = r.getInput();
    }
    return x;
  }

  /// The linears reading `out` into `g.consumers`; false (with a remark on
  /// g.anchor) unless every user is one with statistics and a constant
  /// weight.
  bool collectConsumers(Value out, Group &g) {
    return addConsumers(out, g) && !g.consumers.empty();
  }

  bool addConsumers(Value out, Group &g) {
    for (Operation *user : out.getUsers()) {
      // The shape of X / s is the shape of X.
      if (isa<ShapeOp>(user))
        continue;
      // The linears behind a reshape that keeps channels read X / s too
      // (consumersAreWide checks that their K is the channel count).
      if (auto r = dyn_cast<ReshapeOp>(user);
          r && r.getInput() == out && keepsChannels(r)) {
        if (!addConsumers(r.getResult(), g))
          return false;
        continue;
      }
      if (auto lora = dyn_cast<LoraOp>(user);
          lora && lora.getInput() == out &&
          getF32Values(getConstant(lora.getA()))) {
        g.loras.push_back(lora);
        continue;
      }
      // Any other consumer would see the smoothed values.
      auto l = dyn_cast<LinearOp>(user);
      if (!l || l.getInput() != out) {
        decline(g.anchor, "its result is also used by " +
                              user->getName().getStringRef());
        return false;
      }
      if (!absmaxOf(l)) {
        decline(g.anchor, "a qcc.linear reading it has no calibration "
                          "statistics (qcc.input_absmax)");
        return false;
      }
      if (!getF32Values(getConstant(l.getWeight()))) {
        decline(g.anchor, "a qcc.linear reading it has a computed weight");
        return false;
      }
      g.consumers.push_back(l);
    }
    return true;
  }

  /// Whether every consumer's statistics and weight rows are `width` wide
  /// (a remark on g.anchor if not).
  bool consumersAreWide(Group &g, size_t width) {
    for (LinearOp l : g.consumers)
      if (absmaxOf(l)->size() != width ||
          getF32Values(getConstant(l.getWeight()))->size() % width != 0) {
        decline(g.anchor, "a qcc.linear's statistics or weight columns do not "
                          "match the width of its input");
        return false;
      }
    for (LoraOp lora : g.loras)
      if (cast<RankedTensorType>(lora.getA().getType()).getShape().back() !=
          (int64_t)width) {
        decline(g.anchor, "a qcc.lora's A columns do not match the width of "
                          "its input");
        return false;
      }
    return true;
  }

  std::optional<Group> normGroup(Operation *norm) {
    Group g{Producer::Norm, norm, norm, {}, 0, {}};
    if (!collectConsumers(norm->getResult(0), g))
      return std::nullopt;
    if (isa<LayerNormOp>(norm) && norm->getNumOperands() > 2 &&
        !getF32Values(getConstant(norm->getOperand(2)))) {
      decline(norm, "its beta is not a constant");
      return std::nullopt;
    }
    auto gamma = getF32Values(getConstant(norm->getOperand(1)));
    if (!gamma) {
      decline(norm, "its gamma is not a constant");
      return std::nullopt;
    }
    if (!consumersAreWide(g, gamma->size()))
      return std::nullopt;
    g.channels = gamma->size();
    return g;
  }

  /// A linear whose only user is `user` and whose weight (and bias) are
  /// constants: its output rows can absorb 1/s.
  static LinearOp rowScalable(Value v, Operation *user) {
    auto l = v.getDefiningOp<LinearOp>();
    if (!l || !l->hasOneUse() || *l->getUsers().begin() != user ||
        !getF32Values(getConstant(l.getWeight())) ||
        (l.getBias() && !getF32Values(getConstant(l.getBias()))))
      return {};
    return l;
  }

  /// act(gate) * up feeding the down projection: up's rows absorb 1/s
  /// (the product is linear in each factor).
  std::optional<Group> upGroup(MulOp mul) {
    Group g{Producer::UpProjection, mul, nullptr, {}, 0, {}};
    auto type = cast<RankedTensorType>(mul.getType());
    LinearOp up;
    for (Value factor : {mul.getRhs(), mul.getLhs()})
      if (factor.getType() == type && (up = rowScalable(factor, mul)))
        break;
    if (!up) {
      decline(mul, "neither factor is a qcc.linear used only there, of the "
                   "product's shape");
      return std::nullopt;
    }
    size_t k = type.getShape().back();
    if (ShapedType::isDynamic(type.getShape().back()) ||
        !collectConsumers(mul.getResult(), g) || !consumersAreWide(g, k))
      return std::nullopt;
    g.source = up;
    g.channels = k;
    return g;
  }

  /// An attention whose value is a linear used only there (no rotary on V):
  /// the value projection's rows absorb 1/s, one factor per V channel,
  /// shared by the query heads that read that KV head.
  std::optional<Group> valueGroup(AttentionOp att) {
    Group g{Producer::ValueProjection, att, nullptr, {}, 0, {}};
    LinearOp v = rowScalable(att.getValue(), att);
    if (!v) {
      decline(att, "its value is not a qcc.linear used only there (a rotary "
                   "or another user would see the scaled values)");
      return std::nullopt;
    }
    int64_t heads = att.getNumHeads(), kvHeads = att.getNumKvHeads();
    int64_t vWidth = cast<RankedTensorType>(v.getType()).getShape().back();
    int64_t width =
        cast<RankedTensorType>(att.getType()).getShape().back();
    if (ShapedType::isDynamic(vWidth) || ShapedType::isDynamic(width) ||
        kvHeads <= 0 || heads % kvHeads != 0 || vWidth % kvHeads != 0 ||
        width != heads * (vWidth / kvHeads)) {
      decline(att, "its head layout is not [B, S, heads * head_dim]");
      return std::nullopt;
    }
    if (!collectConsumers(att.getResult(), g) || !consumersAreWide(g, width))
      return std::nullopt;
    int64_t d = vWidth / kvHeads, perKv = heads / kvHeads;
    g.source = v;
    g.channels = vWidth;
    g.channelOf.resize(width);
    for (int64_t c = 0; c < width; ++c)
      g.channelOf[c] = (c / d) / perKv * d + c % d;
    return g;
  }

  size_t channelOf(const Group &g, size_t column) const {
    return g.channelOf.empty() ? column : g.channelOf[column];
  }

  /// s per smoothed channel: the group's activation and weight column absmax
  /// (max over its linears and, under an attention, over the query heads
  /// that share a V channel).
  std::vector<float> factors(const Group &g, double a) {
    std::vector<float> act(g.channels, 0.f), wmax(g.channels, 0.f);
    for (LinearOp l : g.consumers) {
      auto x = *absmaxOf(l);
      auto w = *getF32Values(getConstant(l.getWeight()));
      size_t k = x.size();
      for (size_t c = 0; c < k; ++c)
        act[channelOf(g, c)] = std::max(act[channelOf(g, c)], x[c]);
      for (size_t i = 0; i < w.size(); ++i)
        wmax[channelOf(g, i % k)] =
            std::max(wmax[channelOf(g, i % k)], std::abs(w[i]));
    }
    std::vector<float> s(g.channels);
    for (size_t j = 0; j < g.channels; ++j)
      s[j] = std::pow(std::max(act[j], kEps), (float)a) /
             std::pow(std::max(wmax[j], kEps), 1.f - (float)a);
    return s;
  }

  /// Replaces the constant operand `operand` of `op` by its values with
  /// element i divided by s[i % s.size()] (norm vectors) or row i by s[i]
  /// (weights [N, K] with N = s.size()).
  static void divideRows(Operation *op, unsigned operand,
                         const std::vector<float> &s, StringRef suffix) {
    Value v = op->getOperand(operand);
    auto values = *getF32Values(getConstant(v));
    size_t rowLen = values.size() / s.size();
    for (size_t i = 0; i < values.size(); ++i)
      values[i] /= s[i / rowLen];
    OpBuilder b(op);
    op->setOperand(operand,
                   f32Constant(b, op->getLoc(),
                               cast<RankedTensorType>(v.getType()), values,
                               nameOf(v, suffix)));
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
    // The calibration rows [R, K]: X / s, per column (q/k/v share theirs).
    if (auto samples = l->getAttrOfType<ElementsAttr>(kInputSamplesAttr)) {
      auto type = cast<RankedTensorType>(samples.getType());
      Attribute &done = grams[samples];
      if (!done && type.getRank() == 2 && type.getDimSize(1) == (int64_t)k) {
        if (auto x = getF32Values(samples)) {
          for (size_t i = 0; i < x->size(); ++i)
            (*x)[i] /= s[i % k];
          done = makeElements(
              type,
              ArrayRef<char>(reinterpret_cast<const char *>(x->data()),
                             x->size() * sizeof(float)),
              blobName(samples, "samples") + "_smoothed");
        }
      }
      if (done)
        l->setAttr(kInputSamplesAttr, done);
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

  /// Folds 1/s into the group's producer and s into its linears, with the
  /// fixed alpha or, with auto-alpha, the group's best on the grid.
  void smooth(const Group &g) {
    double a = alpha;
    if (autoAlpha || reportAlpha) {
      if (std::optional<Search> found = search(g)) {
        if (autoAlpha)
          a = found->best;
        if (reportAlpha)
          report(g, *found, a);
      }
    }
    smooth(g, a);
  }

  /// The alpha grid of auto-alpha: 0.30, 0.35, ..., 0.95.
  static constexpr int kGridFirst = 6, kGridLast = 19;
  static double gridAlpha(int i) { return i * 0.05; }
  /// Output channels per linear that the error is measured on (evenly
  /// strided): per-output-channel weight scales make each row's error
  /// independent of the others, so a subset is an unbiased sample that
  /// bounds the search's cost (rows * 256 * K multiply-adds per linear and
  /// alpha).
  static constexpr int64_t kMaxOutputs = 256;

  /// One group's sampled rows X [R, K], and per linear the measured output
  /// channels of W and their float outputs X W^T.
  struct Probe {
    std::vector<float> x;
    int64_t rows = 0, k = 0;
    struct Linear {
      std::vector<float> w; // [n, K], the measured rows
      std::vector<float> y; // [R, n]
      int64_t n = 0;
    };
    std::vector<Linear> linears;
  };

  struct Search {
    double best = 0;
    std::vector<double> error;            ///< group error per grid alpha
    std::vector<std::vector<double>> per; ///< per linear, per grid alpha
    double fixedError = 0;                ///< at the fixed `alpha`
    std::vector<double> fixedPer;
  };

  std::optional<Probe> probe(const Group &g) {
    auto samples =
        g.consumers.front()->getAttrOfType<ElementsAttr>(kInputSamplesAttr);
    if (!samples)
      return std::nullopt;
    auto type = cast<RankedTensorType>(samples.getType());
    auto x = getF32Values(samples);
    if (!x || type.getRank() != 2 || x->empty())
      return std::nullopt;
    Probe p;
    p.rows = type.getDimSize(0);
    p.k = type.getDimSize(1);
    p.x = std::move(*x);
    for (LinearOp l : g.consumers) {
      auto w = *getF32Values(getConstant(l.getWeight()));
      int64_t N = (int64_t)w.size() / p.k;
      if ((int64_t)absmaxOf(l)->size() != p.k)
        return std::nullopt;
      Probe::Linear m;
      m.n = std::min(N, kMaxOutputs);
      for (int64_t i = 0; i < m.n; ++i) {
        int64_t row = i * N / m.n;
        m.w.insert(m.w.end(), w.begin() + row * p.k,
                   w.begin() + (row + 1) * p.k);
      }
      m.y = w8a8::matmulT(p.x, m.w, p.rows, m.n, p.k);
      p.linears.push_back(std::move(m));
    }
    return p;
  }

  /// Per linear of `p`, ||Q(X / s) Q(W s)^T - X W^T||^2 and ||X W^T||^2
  /// with s per input column (passes/W8A8Error.h).
  static std::vector<std::pair<double, double>>
  errors(const Probe &p, const std::vector<float> &sc) {
    std::vector<float> xs(p.x);
    for (size_t i = 0; i < xs.size(); ++i)
      xs[i] /= sc[i % p.k];
    std::vector<std::pair<double, double>> out;
    for (const Probe::Linear &m : p.linears) {
      std::vector<float> ws(m.w);
      for (size_t i = 0; i < ws.size(); ++i)
        ws[i] *= sc[i % p.k];
      w8a8::OutputError e =
          w8a8::outputError(xs, ws, m.y, p.rows, m.n, p.k, /*floatColumns=*/{});
      out.push_back({e.error, e.reference});
    }
    return out;
  }

  /// The group's relative error (and each linear's) at `a`.
  std::pair<double, std::vector<double>> evaluate(const Group &g,
                                                  const Probe &p, double a) {
    std::vector<float> s = factors(g, a), sc(p.k);
    for (int64_t c = 0; c < p.k; ++c)
      sc[c] = s[channelOf(g, c)];
    double err = 0, ref = 0;
    std::vector<double> per;
    for (auto [e, r] : errors(p, sc)) {
      err += e;
      ref += r;
      per.push_back(r > 0 ? e / r : 0);
    }
    return {ref > 0 ? err / ref : 0, per};
  }

  std::optional<Search> search(const Group &g) {
    std::optional<Probe> p = probe(g);
    if (!p)
      return std::nullopt;
    Search out;
    double bestError = INFINITY;
    for (int i = kGridFirst; i <= kGridLast; ++i) {
      auto [e, per] = evaluate(g, *p, gridAlpha(i));
      out.error.push_back(e);
      out.per.push_back(per);
      if (e < bestError) {
        bestError = e;
        out.best = gridAlpha(i);
      }
    }
    std::tie(out.fixedError, out.fixedPer) = evaluate(g, *p, alpha);
    return out;
  }

  static const char *producerName(Producer p) {
    switch (p) {
    case Producer::Norm: return "norm";
    case Producer::UpProjection: return "up->down";
    case Producer::ValueProjection: return "v->o";
    }
    llvm_unreachable("unknown producer");
  }

  /// One line per group on stderr: the alpha used, the group's error there
  /// and at the fixed alpha, and per linear its outlier ratio (before ->
  /// after smoothing) and error.
  void report(const Group &g, const Search &found, double used) {
    int usedIndex = (int)std::lround(used / 0.05) - kGridFirst;
    bool onGrid = usedIndex >= 0 && usedIndex <= kGridLast - kGridFirst &&
                  std::abs(gridAlpha(usedIndex + kGridFirst) - used) < 1e-9;
    double usedError = onGrid ? found.error[usedIndex] : found.fixedError;
    const std::vector<double> &usedPer =
        onGrid ? found.per[usedIndex] : found.fixedPer;
    std::vector<float> s = factors(g, used);
    std::ostringstream os;
    os << std::setprecision(3);
    os << "smooth-quant: " << producerName(g.producer) << " group of "
       << g.consumers.size() << ", alpha " << used << ": W8A8 error "
       << 100 * usedError << "% (alpha " << (double)alpha << ": "
       << 100 * found.fixedError << "%);";
    for (size_t i = 0; i < g.consumers.size(); ++i) {
      LinearOp l = g.consumers[i];
      double e = usedPer[i];
      auto x = *absmaxOf(l);
      std::vector<float> after(x);
      for (size_t c = 0; c < after.size(); ++c)
        after[c] /= s[channelOf(g, c)];
      os << " " << locationName(l.getLoc()) << ": outliers "
         << w8a8::outlierRatio(x) << "x -> " << w8a8::outlierRatio(after)
         << "x, error " << 100 * e << "%;";
    }
    llvm::errs() << os.str() << "\n";
  }

  void smooth(const Group &g, double a) {
    std::vector<float> s = factors(g, a);
    LLVM_DEBUG(llvm::dbgs() << "smooth-quant: smooth " << g.anchor->getName()
                            << " at " << g.anchor->getLoc() << " and "
                            << g.consumers.size() << " linear(s), "
                            << g.channels << " channels, alpha " << a
                            << ", max s = " << *llvm::max_element(s) << "\n");
    switch (g.producer) {
    case Producer::Norm:
      divideRows(g.source, 1, s, "_smoothed");
      if (isa<LayerNormOp>(g.source) && g.source->getNumOperands() > 2)
        divideRows(g.source, 2, s, "_smoothed");
      break;
    case Producer::ValueProjection:
      // The int8 KV scale bounds the smoothed values: per head,
      // max_d |v_d| / s_d <= absmax / min_d s_d (calibration kept only the
      // head's absmax; a looser scale never clips).
      if (auto vmax = g.anchor->getAttrOfType<DenseElementsAttr>(
              "qcc.v_absmax");
          vmax && vmax.getElementType().isF32() &&
          (size_t)vmax.getNumElements() > 0 &&
          g.channels % vmax.getNumElements() == 0) {
        std::vector<float> m(vmax.getValues<float>().begin(),
                             vmax.getValues<float>().end());
        size_t d = g.channels / m.size();
        for (size_t h = 0; h < m.size(); ++h)
          m[h] /= *std::min_element(s.begin() + h * d, s.begin() + (h + 1) * d);
        g.anchor->setAttr("qcc.v_absmax",
                          DenseElementsAttr::get(vmax.getType(),
                                                 ArrayRef<float>(m)));
      }
      [[fallthrough]];
    case Producer::UpProjection: {
      auto l = cast<LinearOp>(g.source);
      divideRows(l, 1, s, "_smoothed_rows");
      if (l.getBias())
        divideRows(l, 2, s, "_smoothed_rows");
      break;
    }
    }
    // s per consumer input column.
    size_t k = g.channelOf.empty() ? g.channels : g.channelOf.size();
    std::vector<float> sc(k);
    for (size_t c = 0; c < k; ++c)
      sc[c] = s[channelOf(g, c)];
    // The pruning statistics describe the smoothed input X / s from now on
    // (one new Gram matrix per old one: q/k/v share theirs).
    llvm::DenseMap<Attribute, Attribute> rescaledGram;
    for (LinearOp l : g.consumers)
      rescaleStatistics(l, sc, rescaledGram);
    // A constant whose last axis is the smoothed input's, times s.
    auto scaleColumns = [&](Operation *user, OpOperand &operand) {
      Value v = operand.get();
      auto values = *getF32Values(getConstant(v));
      for (size_t i = 0; i < values.size(); ++i)
        values[i] *= sc[i % k];
      OpBuilder b(user);
      operand.assign(f32Constant(b, user->getLoc(),
                                 cast<RankedTensorType>(v.getType()), values,
                                 nameOf(v, "_smoothed")));
    };
    for (LinearOp l : g.consumers) {
      scaleColumns(l, l.getWeightMutable());
      OpBuilder lb(l);
      auto x = *absmaxOf(l);
      for (size_t c = 0; c < k; ++c)
        x[c] /= sc[c];
      l->setAttr(qcc::kInputAbsmaxAttr,
                 DenseElementsAttr::get(
                     RankedTensorType::get({(int64_t)k}, lb.getF32Type()),
                     ArrayRef<float>(x)));
    }
    // A LoRA adapter reads X / s too: (A s) (X / s) = A X.
    for (LoraOp lora : g.loras)
      scaleColumns(lora, lora.getAMutable());
  }
};

} // namespace
