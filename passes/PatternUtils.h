//===- PatternUtils.h - matching helpers shared by the passes --*- C++ -*-===//
#ifndef QCC_PASSES_PATTERNUTILS_H
#define QCC_PASSES_PATTERNUTILS_H

#include "dialects/QccConstants.h"
#include "dialects/QccOps.h"
#include "passes/InverseHessian.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <memory>

#include "mlir/IR/Value.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"

namespace qcc {

/// An additive attention-mask value at or below this is treated as -inf
/// (exporters write -inf or finfo(float32).min).
inline constexpr double kMaskedBelow = -1e30;

/// A qcc.constant of `shape` and `elementType` holding `values`' bytes
/// (row-major), named `name` (a dense_resource blob: dialects/QccConstants.h).
template <typename T>
mlir::Value constantOf(mlir::OpBuilder &b, mlir::Location loc,
                       llvm::ArrayRef<int64_t> shape, mlir::Type elementType,
                       const std::vector<T> &values, llvm::StringRef name) {
  llvm::ArrayRef<char> bytes(reinterpret_cast<const char *>(values.data()),
                             values.size() * sizeof(T));
  return ConstantOp::create(
      b, loc,
      makeElements(mlir::RankedTensorType::get(shape, elementType), bytes,
                   name));
}

/// The attribute of a value produced by qcc.constant, or null.
mlir::ElementsAttr getConstant(mlir::Value v);

/// The value of a constant whose elements are all equal (any shape, float or
/// integer), as a double; std::nullopt otherwise.
std::optional<double> getSplatValue(mlir::Value v);

/// The value of an integer constant whose elements are all equal, exactly
/// (getSplatValue's double cannot hold every int64); std::nullopt for floats
/// and integers wider than 64 bits.
std::optional<int64_t> getIntSplatValue(mlir::Value v);

/// True if `v` is a constant splat equal to `expected` within a relative
/// tolerance `rtol` (exporters print constants such as 1/sqrt(2) in float32).
bool isSplatNear(mlir::Value v, double expected, double rtol = 1e-5);

/// A dimension whose size may only be known at run time: either a constant
/// or dimension `index` of `source`, followed back through ops that preserve
/// it so that equal dimensions compare equal (see `getDimExprs`).
struct DimExpr {
  int64_t constant = mlir::ShapedType::kDynamic;
  mlir::Value source;
  int64_t index = -1;

  bool isConstant() const { return constant != mlir::ShapedType::kDynamic; }
  bool isKnown() const { return isConstant() || source; }
  bool operator==(const DimExpr &o) const {
    return isKnown() && constant == o.constant && source == o.source &&
           index == o.index;
  }
};

/// Dimension `index` of `v`, traced back to the earliest value that has the
/// same dimension (through elementwise ops, linear, norms, transposes, ...).
DimExpr getDimExpr(mlir::Value v, int64_t index);

/// The elements of a 1-D (or 0-D) int64 tensor computed by shape arithmetic
/// (constants, Shape, Gather, Unsqueeze, Squeeze, Concat, Slice, Cast);
/// unknown elements have !isKnown(). Empty if the length is not static.
llvm::SmallVector<DimExpr> getDimExprs(mlir::Value shapeVector);

/// True if the reshape keeps its input's dimensions [0, n) in place, i.e. its
/// target shape starts with exactly those dimensions (or 0 = copy).
bool reshapeKeepsLeadingDims(ReshapeOp reshape, int64_t n);

/// True if `t` (a shape-vector element) is dimension `index` of `v`, directly
/// or after both are traced to the reshape targets that set them
/// (`resolveDimExpr`).
bool isSameDim(const DimExpr &t, mlir::Value v, int64_t index);

/// True if element `index` of the shape vector `vec` is the product of
/// dimensions `i` and `j` of `v`: a constant equal to their static product,
/// or Mul(a, b) of two scalars that are those dimensions (`isSameDim`, in
/// either order), seen through Unsqueeze, Squeeze, Reshape, Cast, Concat and
/// a Gather of one index. The merged batch of BLOOM's [B * H, S, D] views is
/// written so.
bool isDimProduct(mlir::Value vec, int64_t index, mlir::Value v, int64_t i,
                  int64_t j);

//===----------------------------------------------------------------------===//
// Elementwise-chain matching (raise-layer-norm, raise-rms-norm, raise-gelu,
// raise-silu)
//===----------------------------------------------------------------------===//

/// Calls `match(a, b)` with the two operands of the binary op `binary` in
/// order and, if that returns false, swapped. For Add and Mul, whose operand
/// order the exporters do not fix. True if either call returned true.
bool matchCommutative(mlir::Operation *binary,
                      llvm::function_ref<bool(mlir::Value, mlir::Value)> match);

/// If one operand of the commutative binary op `binary` is a splat constant
/// near `expected` (see `isSplatNear`), the other operand; null otherwise.
mlir::Value getOperandBesideSplat(mlir::Operation *binary, double expected,
                                  double rtol = 1e-5);

/// `x` if `v` is Pow(x, 2) or Mul(x, x); null otherwise.
mlir::Value getSquareBase(mlir::Value v);

/// The input of `v` = ReduceMean(input) over the last dimension only, with
/// keepdims (axes [-1] or [rank - 1]); null otherwise.
mlir::Value getLastAxisMeanInput(mlir::Value v);

/// Matches `v` = num / den written as Div(num, den), Mul(num, Reciprocal(den))
/// or Mul(num, Div(1, den)) (Mul operands in either order).
bool matchDivision(mlir::Value v, mlir::Value &num, mlir::Value &den);

/// Matches `v` = Sqrt(Add(x, c)) (either order) with `c` a splat constant that
/// does not broadcast `x`; sets `x` and `c`'s value.
bool matchSqrtPlusConstant(mlir::Value v, mlir::Value &x, double &c);

/// A qcc.constant of float `type` with every element equal to `value`.
ConstantOp createSplatConstant(mlir::OpBuilder &b, mlir::Location loc,
                               mlir::RankedTensorType type, double value);

} // namespace qcc


//===----------------------------------------------------------------------===//
// Shape-expression helpers (raise-attention, raise-rotary)
//===----------------------------------------------------------------------===//

namespace qcc {

/// Like `getDimExprs`, and also folds integer Add/Sub/Mul/Div of constant
/// elements and Div(Mul(x, c), c) to x, and sees through the exporter's
/// Expand guard `Where(Equal(s, -1), 1, s)` (as `s` with -1 read as 1).
llvm::SmallVector<DimExpr> getFoldedDimExprs(mlir::Value shapeVector);

/// A 0-D or one-element shape value that folds to a constant (see
/// `getFoldedDimExprs`); std::nullopt otherwise.
std::optional<int64_t> getFoldedIndex(mlir::Value v);

/// `getDimExpr`, continued through ops that name the dimension in another way:
/// a Reshape, Expand or ConstantOfShape whose target dimension is known (an
/// Expand's 1 keeps its input's), Unsqueeze,
/// Trilu, Split (other than along its axis) and an axis-0 Gather by ids. Two
/// dimensions with equal results are equal at run time.
DimExpr resolveDimExpr(mlir::Value v, int64_t index);
DimExpr resolveDimExpr(DimExpr d);

/// Matches `v` = Reshape(packed) from [B, S, H * D] to [B, S, H, D] that keeps
/// B and S in place, with H and D constant; returns the reshape (null if no
/// match) and sets `packed`, `heads`, `headDim`.
ReshapeOp matchHeadSplit(mlir::Value v, mlir::Value &packed, int64_t &heads,
                         int64_t &headDim);

/// Matches `v` = heads [B, H, S, D] of a packed [B, S, H * D] value:
/// Transpose[0, 2, 1, 3](`matchHeadSplit`), or Unsqueeze(packed, [1]) for a
/// single head (multi-query K and V, as GPT-BigCode writes them). Sets
/// `packed`, `heads`, `headDim`.
bool matchHeadsBHSD(mlir::Value v, mlir::Value &packed, int64_t &heads,
                    int64_t &headDim);

/// The kv heads of a packed [B, S, G * D] value `x` repeated per token, each
/// `n` times in a row (head h of the result is head h / n of `x`): Gather(x,
/// [(h / n) * D + d for h < G * n, d < D], axis 2), a packed [B, S, G * n * D]
/// value, built at `b`'s insertion point. Falcon's new decoder architecture
/// broadcasts the k and v of a group over its query heads so.
mlir::Value createRepeatedHeads(mlir::OpBuilder &b, mlir::Location loc,
                                mlir::Value x, int64_t headDim, int64_t n);

/// Matches `v` = `createRepeatedHeads(x, headDim, n)` (the gather's indices
/// are checked): sets `x` and `n`.
bool matchRepeatedHeads(mlir::Value v, int64_t headDim, mlir::Value &x,
                        int64_t &n);

/// The shape vector [v.dim(0), v.dim(1), tail...] (Shape of v's two leading
/// dimensions concatenated with constants), built at `b`'s insertion point:
/// the target of a Reshape that keeps B and S, e.g. to [B, S, H, D].
mlir::Value createLeadingDimsShape(mlir::OpBuilder &b, mlir::Location loc,
                                   mlir::Value v,
                                   llvm::ArrayRef<int64_t> tail);

//===----------------------------------------------------------------------===//
// Feature permutations (raise-rotary, raise-attention, fold-shapes,
// group-fused-heads, the onnxruntime-genai importer)
//===----------------------------------------------------------------------===//

/// Rows `rows` of a constant [N, ...] `attr`, in that order (a weight's output
/// channels, a bias), as a new constant named after it with `suffix`; null if
/// the data cannot be read or a row is out of range.
mlir::ElementsAttr gatherRows(mlir::ElementsAttr attr,
                              llvm::ArrayRef<int64_t> rows,
                              llvm::StringRef suffix);

/// The order that takes interleaved rotary pairs (x[2i], x[2i + 1]) of the
/// first `rotaryDim` values of each head to qcc.rotary's rotate-half pairs
/// (x[i], x[i + R/2]): per head of `headDim` (`heads` of them, packed), the
/// even ones, then the odd ones, then the passed values in place. Element j
/// is the index of the value that moves to j.
llvm::SmallVector<int64_t> deinterleavedRotaryOrder(int64_t heads,
                                                    int64_t headDim,
                                                    int64_t rotaryDim);

/// The inverse of the permutation `perm`.
llvm::SmallVector<int64_t> invertPermutation(llvm::ArrayRef<int64_t> perm);

/// Gather(v, indices, axis = last) with the indices a constant i64 vector.
mlir::Value createLastAxisGather(mlir::OpBuilder &b, mlir::Location loc,
                                 mlir::Value v,
                                 llvm::ArrayRef<int64_t> indices);

/// The indices of `v` = Gather(input, constant indices, last axis) when they
/// permute the (static) last axis; sets `input`. std::nullopt otherwise.
std::optional<llvm::SmallVector<int64_t>>
matchLastAxisPermutation(mlir::Value v, mlir::Value &input);

/// The inputs of `query` and `key` [B, S, heads * headDim] when both are
/// Gathers (`matchLastAxisPermutation`) that permute the features of every
/// head in one same order: attention's scores q . k, summed over a head's
/// features, do not depend on that order. Null values otherwise.
std::pair<mlir::Value, mlir::Value>
matchSharedHeadPermutation(mlir::Value query, mlir::Value key,
                           int64_t headDim);

/// Interleaved rotary (GPT-J's rotate_every_two, onnxruntime's interleaved
/// = 1) of `packed` [B, S, H * headDim] as qcc.rotary between two gathers:
///
///   Gather(qcc.rotary(Gather(packed, order), cos, sin), order^-1)
///
/// with order = deinterleavedRotaryOrder; `cos` and `sin` are [.., R] tables
/// in rotate-half order (a pair's angle at i and i + R/2). The gathers are
/// glue: into a projection they fold as a permutation of its weight rows
/// (fold-shapes), and on both q and k they cancel in attention, whose scores
/// do not depend on the order of a head's features (raise-attention).
mlir::Value createInterleavedRotary(mlir::OpBuilder &b, mlir::Location loc,
                                    mlir::Value packed, mlir::Value cos,
                                    mlir::Value sin, int64_t headDim,
                                    int64_t rotaryDim);

/// Matches `v` = h / Sqrt(ReduceMean(h^2 over the last axis, keepdims) + eps)
/// in any division form of `matchDivision`, with eps >= 0, and sets `h` and
/// `eps`: the core of RMSNorm, and of LayerNorm with h = x - mean(x). On a
/// mismatch returns the reason (for notifyMatchFailure), else nullptr.
const char *matchRmsNormalization(mlir::Value v, mlir::Value &h, double &eps);

/// The all-ones gamma [D] a norm over `x` gets when the exporter applied no
/// scale (D = x's last dimension), built before `root`; on a mismatch (the
/// root's type differs from x's, or D is dynamic) returns the reason.
const char *createOnesGamma(mlir::OpBuilder &b, mlir::Operation *root,
                            mlir::Value x, mlir::Value &ones);

/// Erases the qcc.constant ops in `root` that nothing uses any more (the
/// float weights a pass replaced).
void eraseDeadConstants(mlir::Operation *root);

/// True if `param` is a constant [D] with the size and element type of the
/// last dimension of `input` (a norm's gamma or beta).
bool isConstantNormParam(mlir::Value param, mlir::Value input);

/// applyPatternsGreedily that, in builds with LLVM_DEBUG on, traces under
/// `-debug-only=<debugType>` each pattern's outcome: what it rewrote, and the
/// reason it declined (its notifyMatchFailure message). The raise passes'
/// decisions, one line each.
llvm::LogicalResult
applyPatternsTraced(mlir::Operation *op,
                    const mlir::FrozenRewritePatternSet &patterns,
                    const char *debugType);

/// The name of `loc` for messages: the ONNX node name of a NameLoc (also
/// inside a FusedLoc), else the location printed.
std::string locationName(mlir::Location loc);

//===----------------------------------------------------------------------===//
// Block linears and their calibration Hessians (sparsify-2-4, quantize-w4)
//===----------------------------------------------------------------------===//

/// The name a linear is known by: its location's name (the ONNX node), or "".
std::string nodeName(mlir::Operation *op);

/// Whether `l` is a mixture-of-experts router: its result reaches a qcc.top_k
/// through views, casts, softmax, sigmoid or a constant bias (DeepSeek's
/// correction). Its logits pick discrete experts, so the weight passes keep it
/// float: an int8 or int4 error flips a choice (a different expert, not a
/// small error), and its [experts, hidden] weight is a negligible read.
bool isRouterLinear(LinearOp l);

/// Every qcc.linear of `fn` with its transformer block: the block index,
/// counted by attention ops (the q/k/v projection feeding attention i is in
/// block i), or -1 outside the blocks (a linear from which no attention or
/// norm is reachable: the LM head).
llvm::DenseMap<mlir::Operation *, int64_t> blockLayers(mlir::func::FuncOp fn);

/// Inverse-Hessian factors by Gram attribute (linears of one input share one).
using InverseHessianCache =
    llvm::DenseMap<mlir::Attribute, std::shared_ptr<obs::InverseHessian>>;

/// Linear `l`'s calibration Gram matrix (qcc.input_gram, f64 [K, K],
/// row-major); nullopt after an error on `l` that names `pass`, `method` and
/// `label`.
std::optional<std::vector<double>> inputGram(LinearOp l, llvm::StringRef pass,
                                             llvm::StringRef method,
                                             llvm::StringRef label);

/// The OBS factor (passes/InverseHessian.h) of linear `l`'s calibration Gram
/// matrix (qcc.input_gram, f64 [K, K]), computed once per matrix in `cache`;
/// null after an error on `l` that names `pass`, `method` and `label`.
std::shared_ptr<obs::InverseHessian>
inverseHessianOf(LinearOp l, llvm::StringRef pass, llvm::StringRef method,
                 llvm::StringRef label, double dampening,
                 InverseHessianCache &cache);

} // namespace qcc

#endif // QCC_PASSES_PATTERNUTILS_H
