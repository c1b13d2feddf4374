//===- RotateResidual.cpp - rotate-residual -------------------------------===//
//
// QuaRot (Ashkboos et al., 2024) done by the compiler: the residual stream is
// rotated by an orthogonal Q (format/Rotation.h) and every weight that writes
// or reads it absorbs Q, with the norms' weights folded into their readers
// first, so the model computes the same function while its activations lose
// their outlier channels (docs/QUANTIZATION.md, section 10).
//
//===----------------------------------------------------------------------===//
#include "dialects/QccAttrNames.h"
#include "dialects/QccConstants.h"
#include "dialects/QccOps.h"
#include "format/Rotation.h"
#include "passes/PatternUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <functional>
#include <numeric>

namespace qcc {
#define GEN_PASS_DEF_ROTATERESIDUAL
#include "passes/Passes.h.inc"
} // namespace qcc

using namespace mlir;
using namespace qcc;

#define DEBUG_TYPE "qcc-rotate-residual"

namespace {

/// What rotating one function's residual stream touches.
struct StreamPlan {
  int64_t width = 0;
  /// Values in the rotated basis: the stream and what is added to it.
  llvm::SetVector<Value> rotated;
  /// Ops whose result enters the stream rotated at its source: embeddings
  /// (table rows), linears (weight columns and bias), constants (rows).
  llvm::SetVector<Operation *> producers;
  /// The norms reading the stream, and the linears reading each norm.
  llvm::SetVector<Operation *> norms;
  llvm::DenseMap<Operation *, SmallVector<LinearOp>> readers;
};

/// A ranked f32 tensor whose last dimension is static: its size, else -1.
int64_t lastDim(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.getElementType().isF32() || t.getRank() == 0 ||
      t.isDynamicDim(t.getRank() - 1))
    return -1;
  return t.getShape().back();
}

/// An f32 constant's values, or nullopt.
std::optional<std::vector<float>> f32Constant(Value v) {
  ElementsAttr c = getConstant(v);
  if (!c || !c.getElementType().isF32())
    return std::nullopt;
  return getF32Values(c);
}

/// A [V, D] f32 table: a constant, or the transpose of a constant [D, V]
/// (onnxruntime-genai ties the embedding to the LM head's weight that way).
std::optional<std::vector<float>> tableValues(Value table) {
  if (auto t = table.getDefiningOp<TransposeOp>()) {
    auto in = f32Constant(t.getInput());
    auto type = cast<RankedTensorType>(t.getInput().getType());
    if (!in || type.getRank() != 2 || t.getPerm() != ArrayRef<int64_t>{1, 0})
      return std::nullopt;
    int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
    std::vector<float> out(in->size());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        out[j * rows + i] = (*in)[i * cols + j];
    return out;
  }
  return f32Constant(table);
}

/// The table operand of an embedding of the input ids (qcc.embedding, or a
/// gather of rows of a table by ids straight from the function's
/// arguments), or null.
Value embeddingTable(Operation *op) {
  if (auto e = dyn_cast<EmbeddingOp>(op))
    return e.getTable();
  if (auto g = dyn_cast<GatherOp>(op))
    if (g.getAxis() == 0 && isa<BlockArgument>(g.getIndices()) &&
        tableValues(g.getInput()))
      return g.getInput();
  return nullptr;
}

int64_t rankOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t ? t.getRank() : -1;
}

/// Whether `axis` (negative: from the end) is the last of `rank` axes.
bool isLastAxis(int64_t axis, int64_t rank) {
  return axis == -1 || axis == rank - 1;
}

/// Whether `op` moves whole rows (the last dimension, D wide) and never
/// mixes or reorders a row's elements, so that it commutes with x -> x Q:
/// reshapes keeping the last dimension (a row-major reshape whose last
/// dimensions are equal maps column j to column j), transposes, gathers,
/// slices, squeezes and expands that leave the last axis alone. Its data
/// operand is operand 0.
bool movesRows(Operation *op) {
  if (op->getNumOperands() == 0 || op->getNumResults() != 1)
    return false;
  Value in = op->getOperand(0), out = op->getResult(0);
  int64_t d = lastDim(in), rank = rankOf(in);
  if (d < 0 || lastDim(out) != d)
    return false;
  auto notLast = [&](ArrayRef<int64_t> axes, int64_t r) {
    return llvm::none_of(axes, [&](int64_t a) { return isLastAxis(a, r); });
  };
  if (isa<ReshapeOp, ExpandOp>(op))
    return true;
  if (auto t = dyn_cast<TransposeOp>(op))
    return !t.getPerm().empty() && t.getPerm().back() == rank - 1;
  if (auto g = dyn_cast<GatherOp>(op))
    return !isLastAxis((int64_t)g.getAxis(), rank);
  if (auto g = dyn_cast<GatherNdOp>(op)) {
    auto it = dyn_cast<RankedTensorType>(g.getIndices().getType());
    if (!it || it.isDynamicDim(it.getRank() - 1))
      return false;
    return (int64_t)g.getBatchDims() + it.getShape().back() < rank;
  }
  if (auto sq = dyn_cast<SqueezeOp>(op))
    return notLast(sq.getAxes(), rank);
  if (auto un = dyn_cast<UnsqueezeOp>(op))
    return notLast(un.getAxes(), rankOf(out));
  if (auto sl = dyn_cast<SliceOp>(op))
    return notLast(sl.getAxes(), rank);
  return false;
}

/// A scatter of whole rows (mixture-of-experts exports add each expert's
/// rows into a zero tensor): scatter_elements along another axis than the
/// last, with indices expanded from [..., 1] so that a row's elements all
/// go to one row.
bool scattersRows(Operation *op) {
  auto s = dyn_cast<ScatterElementsOp>(op);
  if (!s || lastDim(s.getInput()) < 0 ||
      isLastAxis((int64_t)s.getAxis(), rankOf(s.getInput())))
    return false;
  auto e = s.getIndices().getDefiningOp<ExpandOp>();
  auto t = e ? dyn_cast<RankedTensorType>(e.getInput().getType()) : nullptr;
  return t && t.getRank() > 0 && t.getShape().back() == 1;
}

/// A shape, or an op whose results only shapes read (a mixture of
/// experts' slice that sizes its scatter): rotation keeps shapes.
bool readsOnlyShape(Operation *u) {
  if (isa<ShapeOp>(u))
    return true;
  return u->getNumResults() > 0 && !u->use_empty() &&
         llvm::all_of(u->getUsers(),
                      [](Operation *s) { return isa<ShapeOp>(s); });
}

class Planner {
public:
  explicit Planner(StreamPlan &plan) : plan(plan) {}

  /// Puts `v` in the rotated basis: its producer (or, through adds and
  /// scalar multiplies, theirs) absorbs Q.
  LogicalResult join(Value v) {
    if (plan.rotated.contains(v))
      return success();
    Operation *def = v.getDefiningOp();
    if (!def)
      return refuse(v.getParentBlock()->getParentOp(),
                    "a function argument is added to the residual stream");
    int64_t d = lastDim(v);
    if (d < 0)
      return refuse(def, "writes a residual stream that is not f32 with a "
                         "static width");
    if (plan.width == 0)
      plan.width = d;
    if (d != plan.width)
      return refuse(def, "writes a width-" + std::to_string(d) +
                             " value to a width-" +
                             std::to_string(plan.width) + " residual stream");
    plan.rotated.insert(v);
    pending.push_back(v);
    if (Value table = embeddingTable(def)) {
      if (!tableValues(table))
        return refuse(def, "has a computed or non-f32 table");
      plan.producers.insert(def);
      return success();
    }
    if (auto l = dyn_cast<LinearOp>(def)) {
      if (!f32Constant(l.getWeight()) ||
          (l.getBias() && !f32Constant(l.getBias())))
        return refuse(def, "writes the residual stream with a computed or "
                           "non-f32 weight or bias");
      plan.producers.insert(def);
      return success();
    }
    if (isa<ConstantOp>(def)) {
      if (!f32Constant(v))
        return refuse(def, "is a non-f32 constant added to the stream");
      plan.producers.insert(def);
      return success();
    }
    if (auto add = dyn_cast<AddOp>(def))
      return success(succeeded(join(add.getLhs())) &&
                     succeeded(join(add.getRhs())));
    if (isa<MulOp>(def)) {
      if (Value x = scaledOperand(def))
        return join(x);
    }
    if (movesRows(def))
      return join(def->getOperand(0));
    if (scattersRows(def)) {
      auto sc = cast<ScatterElementsOp>(def);
      return success(succeeded(join(sc.getInput())) &&
                     succeeded(join(sc.getUpdates())));
    }
    if (auto c = dyn_cast<ConstantOfShapeOp>(def))
      if (isZeroFill(c))
        return success(); // zeros are zeros in any basis
    return refuse(def, "writes the residual stream (only embeddings, "
                       "linears, constants, adds and scalar multiplies can "
                       "absorb the rotation)");
  }

  /// Checks every user of the rotated values; false where one cannot read
  /// the rotated basis.
  LogicalResult close() {
    while (!pending.empty()) {
      Value v = pending.pop_back_val();
      for (OpOperand &use : v.getUses())
        if (failed(visitUser(use.getOwner(), v)))
          return failure();
    }
    return success();
  }

private:
  LogicalResult visitUser(Operation *u, Value v) {
    if (readsOnlyShape(u))
      return success(); // rotation keeps shapes
    if (isa<AddOp>(u))
      return join(u->getResult(0));
    if (isa<MulOp>(u) && scaledOperand(u) == v)
      return join(u->getResult(0));
    if ((movesRows(u) && u->getOperand(0) == v) || scattersRows(u))
      return join(u->getResult(0));
    if (isa<RmsNormOp, LayerNormOp>(u) && u->getOperand(0) == v)
      return planNorm(u);
    return refuse(u, "reads the residual stream (only adds, scalar "
                     "multiplies, norms and shapes may)");
  }

  LogicalResult planNorm(Operation *norm) {
    if (!plan.norms.insert(norm))
      return success();
    Value x = norm->getOperand(0);
    if (!isConstantNormParam(norm->getOperand(1), x) ||
        !f32Constant(norm->getOperand(1)))
      return refuse(norm, "has a computed or non-f32 weight");
    if (auto ln = dyn_cast<LayerNormOp>(norm))
      if (ln.getBeta() && (!isConstantNormParam(ln.getBeta(), x) ||
                           !f32Constant(ln.getBeta())))
        return refuse(norm, "has a computed or non-f32 bias");
    return planNormed(norm->getResult(0), norm);
  }

  /// The users of a norm's result (or of rows moved from it): linears,
  /// which absorb the norm's weight and Q, and shapes.
  LogicalResult planNormed(Value v, Operation *norm) {
    for (Operation *u : v.getUsers()) {
      if (readsOnlyShape(u))
        continue;
      if (movesRows(u) && u->getOperand(0) == v) {
        if (failed(planNormed(u->getResult(0), norm)))
          return failure();
        continue;
      }
      auto l = dyn_cast<LinearOp>(u);
      if (!l || l.getInput() != v || !f32Constant(l.getWeight()) ||
          (l.getBias() && !f32Constant(l.getBias())))
        return refuse(u, "reads a norm of the residual stream (a norm's "
                         "weight folds only into linears of constant f32 "
                         "weights)");
      if (!llvm::is_contained(plan.readers[norm], l))
        plan.readers[norm].push_back(l);
    }
    return success();
  }

  /// The rows of a multiply by one factor per row (a scalar: Gemma's
  /// embedding scale; [..., 1]: a mixture of experts' routing weights),
  /// which commutes with x -> x Q; else null.
  static Value scaledOperand(Operation *mul) {
    for (int i : {0, 1}) {
      Value x = mul->getOperand(i), f = mul->getOperand(1 - i);
      auto ft = dyn_cast<RankedTensorType>(f.getType());
      if (ft && lastDim(x) > 1 &&
          (ft.getRank() == 0 || ft.getShape().back() == 1))
        return x;
    }
    return nullptr;
  }

  /// A constant_of_shape filling zeros.
  static bool isZeroFill(ConstantOfShapeOp c) {
    auto v = dyn_cast<DenseElementsAttr>(c.getValue());
    return v && v.isSplat() && v.getElementType().isF32() &&
           v.getSplatValue<float>() == 0.0f;
  }

  LogicalResult refuse(Operation *op, const std::string &why) {
    std::string node = nodeName(op);
    op->emitError("rotate-residual: cannot rotate the residual stream: '")
        << op->getName() << "'"
        << (node.empty() ? std::string() : " (node " + node + ")") << " "
        << why;
    return failure();
  }

  StreamPlan &plan;
  SmallVector<Value> pending;
};

struct RotateResidualPass
    : qcc::impl::RotateResidualBase<RotateResidualPass> {
  using RotateResidualBase::RotateResidualBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    StreamPlan plan;
    Planner planner(plan);
    // The token embedding: the largest table indexed by a function input
    // (position tables indexed by position_ids join the stream where they
    // are added to it).
    Operation *token = nullptr;
    int64_t seedRows = -1;
    fn.walk([&](Operation *op) {
      Value table = embeddingTable(op);
      if (!table || !isa<BlockArgument>(op->getOperand(1)))
        return;
      int64_t rows = cast<RankedTensorType>(table.getType()).getDimSize(0);
      if (rows > seedRows) {
        token = op;
        seedRows = rows;
      }
    });
    if (!token) {
      fn.emitError("rotate-residual: no embedding of the input ids: no "
                   "residual stream to rotate");
      return signalPassFailure();
    }
    if (failed(planner.join(token->getResult(0))))
      return signalPassFailure();
    if (failed(planner.close()))
      return signalPassFailure();
    // A layer norm subtracts the mean, which a rotation does not commute
    // with: the stream is kept mean-free instead (every producer centred),
    // and then layer_norm is rms_norm (SliceGPT's construction).
    bool centre = false, rms = false;
    for (Operation *n : plan.norms)
      (isa<LayerNormOp>(n) ? centre : rms) = true;
    if (centre && rms) {
      fn.emitError("rotate-residual: the residual stream is read by both "
                   "layer_norm and rms_norm; cannot rotate it");
      return signalPassFailure();
    }
    if (std::string why = format::Rotation::widthError(plan.width);
        !why.empty()) {
      fn.emitError("rotate-residual: cannot rotate the residual stream: ")
          << why;
      return signalPassFailure();
    }
    SmallVector<LinearOp> downs;
    if (online)
      downs = mlpDownProjections(fn, plan);
    format::Rotation rotation(plan.width, seed);
    for (Operation *norm : plan.norms)
      for (LinearOp l : plan.readers[norm])
        rewriteLinear(l, norm, plan.producers.contains(l), rotation, centre);
    for (Operation *p : plan.producers) {
      if (auto l = dyn_cast<LinearOp>(p)) {
        if (!isa_and_present<RmsNormOp, LayerNormOp>(
                l.getInput().getDefiningOp()) ||
            !plan.norms.contains(l.getInput().getDefiningOp()))
          rewriteLinear(l, nullptr, /*producer=*/true, rotation, centre);
      } else if (Value table = embeddingTable(p)) {
        p->setOperand(0, rotateTable(table, rotation, centre));
      } else {
        Value c = cast<ConstantOp>(p).getResult();
        c.replaceAllUsesWith(rotateTable(c, rotation, centre));
      }
    }
    for (Operation *norm : plan.norms)
      replaceNorm(norm);
    rotateOnline(downs);
    int64_t valueHeads = online ? rotateValueHeads(fn) : 0;
    eraseDeadConstants(fn);
    fn->getParentOfType<ModuleOp>()->setAttr(
        kRotationAttr,
        StringAttr::get(&getContext(),
                        "hadamard " + std::to_string(rotation.hadamardSize()) +
                            " x dct " + std::to_string(rotation.oddSize()) +
                            ", seed " + std::to_string(seed) +
                            (downs.empty() ? "" : ", online") +
                            (valueHeads == 0 ? "" : ", value heads")));
    LLVM_DEBUG(llvm::dbgs() << "rotate-residual: width " << plan.width << ", "
                            << plan.norms.size() << " norms, "
                            << plan.producers.size() << " producers, "
                            << downs.size() << " online rotations\n");
  }

  /// The linear behind an MLP activation operand (through gelu / silu /
  /// relu), or null.
  static LinearOp mlpLinear(Value v) {
    if (isa_and_present<GeluOp, SiluOp, ReluOp>(v.getDefiningOp()))
      v = v.getDefiningOp()->getOperand(0);
    return v.getDefiningOp<LinearOp>();
  }

  /// QuaRot's online Hadamard: the down projections of the stream's MLPs
  /// read the MLP's activation (a GLU product or an activation function
  /// of a linear that reads one of the stream's norms, through reshapes
  /// only: a mixture of experts' routed rows are left to qcc.moe), whose
  /// outlier channels no weight can absorb.
  SmallVector<LinearOp> mlpDownProjections(func::FuncOp fn,
                                           const StreamPlan &plan) {
    auto readsNorm = [&](LinearOp l) {
      if (!l)
        return false;
      Value v = l.getInput();
      while (auto r = v.getDefiningOp<ReshapeOp>())
        v = r.getInput();
      return plan.norms.contains(v.getDefiningOp());
    };
    SmallVector<LinearOp> downs;
    fn.walk([&](LinearOp l) {
      Operation *def = l.getInput().getDefiningOp();
      bool mlp = false;
      if (isa_and_present<GeluOp, SiluOp, ReluOp>(def))
        mlp = readsNorm(mlpLinear(l.getInput()));
      else if (isa_and_present<MulOp>(def))
        mlp = readsNorm(mlpLinear(def->getOperand(0))) ||
              readsNorm(mlpLinear(def->getOperand(1)));
      int64_t k = lastDim(l.getInput());
      if (mlp && k > 0 && format::Rotation::widthError(k).empty() &&
          f32Constant(l.getWeight()) &&
          l.getWeight().getType().getDimSize(1) == k)
        downs.push_back(l);
      else if (mlp)
        LLVM_DEBUG(llvm::dbgs() << "rotate-residual: no online rotation "
                                   "before " << l.getLoc() << "\n");
    });
    return downs;
  }

  /// QuaRot's rotation of the attention's values, per head: the value
  /// projection's rows of each KV head absorb R^T (R of width head_dim),
  /// so every head's values, and so every query head's output, come out
  /// times R; the output projection's columns of each head absorb R. All of
  /// it in the weights: attention mixes value rows, never a row's channels.
  /// An attention whose value is not a linear's own result (a fused QKV
  /// projection's slice), or whose result reaches anything but linears
  /// (through reshapes keeping the last dimension), is left alone.
  int64_t rotateValueHeads(func::FuncOp fn) {
    int64_t done = 0;
    SmallVector<AttentionOp> attentions;
    fn.walk([&](AttentionOp a) { attentions.push_back(a); });
    for (AttentionOp a : attentions) {
      auto v = a.getValue().getDefiningOp<LinearOp>();
      int64_t kvHeads = (int64_t)a.getNumKvHeads(),
              heads = (int64_t)a.getNumHeads();
      int64_t width = lastDim(a.getValue());
      if (!v || kvHeads <= 0 || heads <= 0 || width <= 0 ||
          width % kvHeads != 0 || !f32Constant(v.getWeight()) ||
          (v.getBias() && !f32Constant(v.getBias())) ||
          llvm::any_of(v->getUsers(), [&](Operation *u) {
            return u != a.getOperation() && !readsOnlyShape(u);
          }))
        continue;
      int64_t hd = width / kvHeads;
      if (!format::Rotation::widthError(hd).empty() ||
          lastDim(a.getResult()) != heads * hd)
        continue;
      SmallVector<LinearOp> outs;
      bool ok = true;
      std::function<void(Value)> readers = [&](Value r) {
        for (Operation *u : r.getUsers()) {
          if (readsOnlyShape(u))
            continue;
          if (isa<ReshapeOp>(u) && lastDim(u->getResult(0)) == heads * hd)
            readers(u->getResult(0));
          else if (auto l = dyn_cast<LinearOp>(u);
                   l && l.getInput() == r && f32Constant(l.getWeight()))
            outs.push_back(l);
          else
            ok = false;
        }
      };
      readers(a.getResult());
      if (!ok || outs.empty())
        continue;
      format::Rotation rotation(hd, seed);
      // Value rows: each column's head segments, and the bias's.
      auto wt = v.getWeight().getType();
      int64_t n = wt.getDimSize(0), k = wt.getDimSize(1);
      auto w32 = *f32Constant(v.getWeight());
      std::vector<double> w(w32.begin(), w32.end()), col(n);
      for (int64_t j = 0; j < k; ++j) {
        for (int64_t i = 0; i < n; ++i)
          col[i] = w[i * k + j];
        rotateEach(col, hd, rotation, /*centre=*/false);
        for (int64_t i = 0; i < n; ++i)
          w[i * k + j] = col[i];
      }
      OpBuilder b(v);
      std::string name = blobName(getConstant(v.getWeight()), "weight");
      v.getWeightMutable().assign(
          constantOf(b, v.getLoc(), {n, k}, b.getF32Type(),
                     std::vector<float>(w.begin(), w.end()), name + "_rot"));
      if (v.getBias()) {
        auto b32 = *f32Constant(v.getBias());
        std::vector<double> bias(b32.begin(), b32.end());
        rotateEach(bias, hd, rotation, /*centre=*/false);
        v.getBiasMutable().assign(
            constantOf(b, v.getLoc(), {n}, b.getF32Type(),
                       std::vector<float>(bias.begin(), bias.end()),
                       name + "_bias_rot"));
      }
      // Output projections: each row's head segments.
      for (LinearOp o : outs) {
        auto ot = o.getWeight().getType();
        int64_t on = ot.getDimSize(0), ok = ot.getDimSize(1);
        auto o32 = *f32Constant(o.getWeight());
        std::vector<double> ow(o32.begin(), o32.end());
        rotateEach(ow, hd, rotation, /*centre=*/false);
        OpBuilder ob(o);
        o.getWeightMutable().assign(constantOf(
            ob, o.getLoc(), {on, ok}, ob.getF32Type(),
            std::vector<float>(ow.begin(), ow.end()),
            blobName(getConstant(o.getWeight()), "weight") + "_rot"));
      }
      ++done;
    }
    return done;
  }

  /// Each down projection reads qcc.hadamard of its input and absorbs Q
  /// (W -> W Q).
  void rotateOnline(ArrayRef<LinearOp> downs) {
    for (LinearOp l : downs) {
      auto wt = l.getWeight().getType();
      int64_t n = wt.getDimSize(0), k = wt.getDimSize(1);
      format::Rotation rotation(k, seed);
      auto w32 = *f32Constant(l.getWeight());
      std::vector<double> w(w32.begin(), w32.end());
      rotateEach(w, k, rotation, /*centre=*/false);
      OpBuilder b(l);
      auto h = HadamardOp::create(b, l.getLoc(), l.getInput(),
                                  b.getI64IntegerAttr((int64_t)seed));
      l.getInputMutable().assign(h.getResult());
      l.getWeightMutable().assign(constantOf(
          b, l.getLoc(), {n, k}, b.getF32Type(),
          std::vector<float>(w.begin(), w.end()),
          blobName(getConstant(l.getWeight()), "weight") + "_rot"));
    }
  }

  /// x Q for every row of an f32 constant of last dimension d, centred
  /// first (x - mean(x)) when `centre`.
  static void rotateEach(std::vector<double> &rows, int64_t d,
                         const format::Rotation &rotation, bool centre) {
    for (size_t r = 0; r + d <= rows.size(); r += d) {
      std::span<double> row(&rows[r], d);
      if (centre) {
        double mean = std::accumulate(row.begin(), row.end(), 0.0) / d;
        for (double &x : row)
          x -= mean;
      }
      rotation.rotateRow(row);
    }
  }

  /// The rows of an embedding table or of a constant added to the stream,
  /// rotated (and centred), as a new constant.
  Value rotateTable(Value table, const format::Rotation &rotation,
                    bool centre) {
    auto values = *tableValues(table);
    std::vector<double> rows(values.begin(), values.end());
    rotateEach(rows, rotation.width(), rotation, centre);
    OpBuilder b(table.getContext());
    b.setInsertionPointAfterValue(table);
    auto type = cast<RankedTensorType>(table.getType());
    ElementsAttr source = getConstant(table);
    if (auto t = table.getDefiningOp<TransposeOp>())
      source = getConstant(t.getInput());
    return constantOf(b, table.getLoc(), type.getShape(), b.getF32Type(),
                      std::vector<float>(rows.begin(), rows.end()),
                      blobName(source, "embedding") + "_rot");
  }

  /// A linear reading `norm` (its weight folded in, rows rotated) and/or
  /// writing the stream (`producer`: columns and bias rotated, centred).
  void rewriteLinear(LinearOp l, Operation *norm, bool producer,
                     const format::Rotation &rotation, bool centre) {
    auto wt = l.getWeight().getType();
    int64_t n = wt.getDimSize(0), k = wt.getDimSize(1);
    auto w32 = *f32Constant(l.getWeight());
    std::vector<double> w(w32.begin(), w32.end()), bias;
    if (l.getBias()) {
      auto b32 = *f32Constant(l.getBias());
      bias.assign(b32.begin(), b32.end());
    }
    if (norm) {
      // y = (g n + beta) W^T + b = n (W diag g)^T + (b + W beta).
      auto gamma = *f32Constant(norm->getOperand(1));
      if (auto ln = dyn_cast<LayerNormOp>(norm); ln && ln.getBeta()) {
        auto beta = *f32Constant(ln.getBeta());
        if (bias.empty())
          bias.assign(n, 0.0);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < k; ++j)
            bias[i] += w[i * k + j] * beta[j];
      }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j)
          w[i * k + j] *= gamma[j];
      rotateEach(w, k, rotation, /*centre=*/false);
    }
    if (producer) {
      // Q^T W: each column c becomes (c^T Q)^T.
      std::vector<double> col(n);
      for (int64_t j = 0; j < k; ++j) {
        for (int64_t i = 0; i < n; ++i)
          col[i] = w[i * k + j];
        rotateEach(col, n, rotation, centre);
        for (int64_t i = 0; i < n; ++i)
          w[i * k + j] = col[i];
      }
      if (!bias.empty())
        rotateEach(bias, n, rotation, centre);
    }
    OpBuilder b(l);
    std::string name = blobName(getConstant(l.getWeight()), "weight");
    l.getWeightMutable().assign(constantOf(
        b, l.getLoc(), {n, k}, b.getF32Type(),
        std::vector<float>(w.begin(), w.end()), name + "_rot"));
    if (!bias.empty()) {
      Value nb = constantOf(b, l.getLoc(), {n}, b.getF32Type(),
                            std::vector<float>(bias.begin(), bias.end()),
                            name + "_bias_rot");
      if (l.getBias())
        l.getBiasMutable().assign(nb);
      else
        l->insertOperands(2, nb);
    }
  }

  /// The norm without its weight (folded into the readers): rms_norm with
  /// ones; a layer_norm of the mean-free stream is that rms_norm.
  void replaceNorm(Operation *norm) {
    OpBuilder b(norm);
    Value x = norm->getOperand(0), ones;
    [[maybe_unused]] const char *why = createOnesGamma(b, norm, x, ones);
    assert(!why && "the planner checked the norm's types");
    auto eps = norm->getAttrOfType<FloatAttr>("epsilon");
    auto r = RmsNormOp::create(b, norm->getLoc(), x.getType(), x, ones,
                               eps);
    norm->getResult(0).replaceAllUsesWith(r.getResult());
    norm->erase();
  }
};

} // namespace
