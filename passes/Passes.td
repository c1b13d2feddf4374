//===- Passes.td - qcc passes ------------------------------*- tablegen -*-===//
//
// One entry per pass; each has a .cpp of the same name in this folder and a
// lit test test/passes/<name>.mlir.
//
//===----------------------------------------------------------------------===//

#ifndef QCC_PASSES_TD
#define QCC_PASSES_TD

include "mlir/Pass/PassBase.td"

def FoldShapes : Pass<"fold-shapes", "mlir::func::FuncOp"> {
  let summary = "Fold shape arithmetic and constants; drop no-op glue";
  let description = [{
    Runs every op's folder to a fixed point (shape vectors of static
    dimensions become constants, identity casts/transposes disappear) plus
    patterns that decide identities symbolically, comparing dimensions as
    `DimExpr`s (a constant, or dimension i of a value traced back through
    shape-preserving ops):

    - `qcc.cast` chains whose inner cast is an exact float widening
      (f16/bf16 -> f32): Cast(Cast(x)) -> Cast(x), or x for a round trip.
    - Reshape whose target is the input's own dimensions (a 0 copies, one -1
      is inferred) -> the input; this covers Reshape(vector, [-1]).
    - Reshape(Reshape(x, s1), s2) -> Reshape(x, s2) when s2 has no 0 (also
      with an Unsqueeze or Squeeze in place of the inner Reshape) and the
      inner reshape has no other user, or s2 is its own shape (CodeGen views
      its heads [B, S, 4, D] again as [B, S, -1, D]: x is viewed once).
    - Split(Unsqueeze(x, axes), axis) along an axis x has ->
      Unsqueeze(Split(x), axes) per part (GPT-BigCode's fused c_attn).
    - Split of NonZero(m) (or its transpose) for a 1-D mask m of static size
      E into E parts of one -> the constants 0 .. E-1: the split is defined
      only when every entry is set (the legacy MoE exports' loop over the
      experts hit, unrolled when traced; as constants it covers every expert).
    - A Slice with constant bounds of a static dimension gets that size in
      its result type when its users are views or shape ops (MPT's legacy
      Wqkv slices come out [?, ?, ?]).
    - torch's -1 replacement before Expand,
      Where(Equal(v, ConstantOfShape(Shape(v), 1) * -1), ones, v) -> v when
      every element of v is a dimension or a constant other than -1.
    - Expand whose target broadcasts to the input's shape -> the input.
    - Slice with starts 0, steps 1 and ends >= INT64_MAX / 2 (or the
      dimension) on dynamic dimensions -> the input.
    - Shape / Gather / Slice / Concat / Unsqueeze / Squeeze / Reshape results
      whose elements are all static dimensions or constants -> a constant
      (e.g. Gather(Shape(x), 2) of a tensor<?x?x64xf32>).
    - Any qcc op whose operands are all small dense constants and whose
      results are static and small (<= 4096 elements) -> constants computed
      by the op's CPU reference kernel (passes/ConstEval.h): mask and
      position builders fold with the semantics the runtime runs.
    - torch's SDPA view of K^T, Reshape(Transpose[0, 2, 1](Reshape(x
      [A, B, C, D] -> [A*B, C, D])) -> [A, B, D, C]) -> Transpose[0, 1, 3, 2](x).
    - Concat operands of size 0 along the axis are dropped.
    - Transpose(Transpose(x, p), q) -> Transpose(x, p[q]) (SDPA's K^T of a
      head split).
    - Picks of one constant index, Gather(x, [i], axis) (rank >= 2) and
      GatherND(x, [[i]]), -> Slice(x, i, i + 1, axis); a pick through a
      transpose moves before it.
    - Whole heads sliced from a head split, Slice(Reshape(P [B, S, H * D] ->
      [B, S, H, D]), a, b, axis 2) -> Reshape(Slice(P, a * D, b * D), [B, S,
      b - a, D]): fused QKV projections (Falcon) become packed projections.
    - A permutation of a linear's output features, Gather(linear, P, last
      axis) with P a constant permutation, -> the linear with its constant
      weight rows (and bias) in the order P; also of a part Slice(linear,
      lo, hi, last axis) of a fused projection, rows [lo, hi) permuted in
      place. The linear's and the part's other users may only read other
      parts or shapes. (raise-rotary's interleaved rotary permutes q and k.)
    - A permutation whose result is read only for its shape (Shape ops, and
      views read only so) -> its input.
    - A linear read only through constant last-axis Slices, Slice(linear(x,
      W, b), lo, hi) -> linear(x, W[lo:hi], b[lo:hi]) per part: a fused
      projection (BLOOM's query_key_value) becomes one linear per part, with
      no strided copy of the fused result.
    - Attention on [B * H, S, D] views (BLOOM's baddbmm(alibi, q, k^T) and
      bmm(probs, v)): the un-merge Reshape([B * H, X, Y] -> [B, H, X', Y'])
      of a tree of batched MatMuls, Transpose[0, 2, 1]s and elementwise Add /
      Sub / Mul / Div whose leaves are merged views of heads,
      Reshape(x [B, H, X, Y] -> [B * H, X, Y]) or Reshape(x [B, H, Y] ->
      [B * H, 1, Y]) with the same static H (the merged count written B * H,
      or fixed by the other dims being x's), or scalars -> the same ops on
      the heads (the reshape kept only where it does not restore them);
      Shapes of the merged ops are computed from the heads' dims.
    - Expand, Reshape and Transpose results whose users are views, shape
      ops, MatMuls or linears (whose verifiers ask only that sizes agree)
      take the static sizes their operands fix (an Expand to a
      constant; a Reshape's -1 from the input dims the other target dims do
      not account for; a transposed static dim): Falcon's legacy [B, S, -1,
      D] view of its expanded kv heads, whose later [B, H, S, D] view is
      then an identity; Hugging Face's attention output
      `reshape(*input_shape, -1)` before o_proj, then an identity too.

    Dimensions are also compared after tracing them to the reshape and
    expand targets that set them (`resolveDimExpr`), and a batched MatMul's
    dimensions are its operands' (rows of the lhs, columns of the rhs, batch
    axes of the operand that is not a broadcast 1), a Concat's those of its
    inputs off the axis, a Gather's those of its input before the axis.
    Shape arithmetic folds Div(Mul(x, c), c) to x (B read back from B * H).

    Dimensions of function arguments with the same symbolic name
    (`qcc.dim_names`, e.g. the "batch" of input_ids and of attention_mask)
    compare equal; slice bounds are read as integers (INT64_MIN = from the
    start).

    ```mlir
    // before
    %s  = qcc.shape %x : (tensor<?x?x64xf32>) -> tensor<3xi64>
    %d0 = qcc.gather %s, %c0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
    %d1 = qcc.gather %s, %c1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
    %u0 = qcc.unsqueeze %d0 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
    %u1 = qcc.unsqueeze %d1 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
    %t  = qcc.concat %u0, %u1, %c64 {axis = 0 : i64} : (...) -> tensor<3xi64>
    %y  = qcc.reshape %x, %t : (tensor<?x?x64xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
    // after: uses of %y use %x
    ```

    Left alone: anything whose identity depends on an unknown value (a
    function argument used as a shape, a dimension of another tensor), lossy
    cast chains (f32 -> f16 -> f32), Expands that really broadcast
    (repeat_kv) and the rotary / attention structure, which later raise
    passes match. Weights (dense_resource) are never copied.
  }];
}

def RaiseLayerNorm : Pass<"raise-layer-norm", "mlir::func::FuncOp"> {
  let summary = "Raise the LayerNormalization expansion to qcc.layer_norm";
  let description = [{
    Matches layer normalization written out in primitive ops, as exporters
    emit it when they do not use the ONNX `LayerNormalization` op:

    ```
    d = x - ReduceMean(x)                  (last axis, keepdims)
    y = d / Sqrt(ReduceMean(d^2) + eps)    (last axis, keepdims)
    ```

    where `d^2` is `Pow(d, 2)` or `Mul(d, d)`, the division may also be
    `Mul(d, Reciprocal(s))` or `Mul(d, Div(1, s))`, `eps` is a splat constant
    of any broadcastable shape (0-d, [1], ...), the last axis is given as -1 or
    rank - 1, and Add/Mul operands come in either order. The core becomes
    `qcc.layer_norm x, ones` with a new constant ones gamma [D] (D must be
    static). Two more patterns then fold `Mul(layer_norm, gamma)` with a
    constant gamma [D] into the gamma (when the norm's gamma is all ones and
    it has no beta) and `Add(layer_norm, beta)` with a constant beta [D] into
    the beta; each needs the norm to have no other user.

    Before:

    ```mlir
    %mean = qcc.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
    %d = qcc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
    %sq = qcc.pow %d, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
    %var = qcc.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
    %ve = qcc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
    %std = qcc.sqrt %ve : tensor<?x?x1xf32>
    %n = qcc.div %d, %std : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
    %g = qcc.mul %n, %gamma : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %y = qcc.add %g, %beta : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    ```

    After:

    ```mlir
    %y = qcc.layer_norm %x, %gamma, %beta {epsilon = 9.99999974E-6 : f32}
        : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    ```

    Not matched: epsilon added outside the square root
    (`d / (Sqrt(var) + eps)`); a mean over any axis but the last, over several
    axes, or without keepdims; a first mean of another tensor than the one it
    is subtracted from; a variance of another tensor than the dividend. A gamma
    or beta that is not a constant [D] (a block argument, a [1, 1, D]
    constant) is not folded: the normalization is still raised, with a ones
    gamma, and the Mul/Add stays after it.
  }];
}

def RaiseRmsNorm : Pass<"raise-rms-norm", "mlir::func::FuncOp"> {
  let summary = "Raise the RMSNorm expansion to qcc.rms_norm";
  let description = [{
    Matches RMS normalization as torch.onnx exports HF `LlamaRMSNorm`:

    ```
    h = Cast(x to f32)                     (optional)
    r = 1 / Sqrt(ReduceMean(h^2) + eps)    (last axis, keepdims)
    y = gamma * Cast(h * r to f32)         (Cast optional)
    ```

    where `h^2` is `Pow(h, 2)` or `Mul(h, h)`, `1 / s` is `Div(1, s)` or
    `Reciprocal(s)` (or the whole product is `Div(h, s)`), `eps` is a splat
    constant of any broadcastable shape, the last axis is given as -1 or
    rank - 1, and Add/Mul operands come in either order. The core `h * r`
    becomes `qcc.rms_norm h, ones` with a new constant ones gamma [D] (D must
    be static); a second pattern folds `Mul(rms_norm, gamma)` with a constant
    gamma [D] into the gamma when the norm has no other user. Float32 to
    float32 casts fold away; a real upcast `h = Cast(x)` stays and is the
    norm's input. Only the final value is replaced: other users of `h` (the
    residual Add) keep reading it.

    Before:

    ```mlir
    %sq = qcc.pow %h, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
    %var = qcc.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
    %ve = qcc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
    %std = qcc.sqrt %ve : tensor<?x?x1xf32>
    %r = qcc.div %one, %std : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
    %n = qcc.mul %h, %r : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
    %y = qcc.mul %gamma, %n : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    ```

    After:

    ```mlir
    %y = qcc.rms_norm %h, %gamma {epsilon = 9.99999997E-7 : f32}
        : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    ```

    Not matched: epsilon added outside the square root (`1 / (Sqrt(ms) + eps)`);
    a mean over any axis but the last, over several axes, or without keepdims;
    a mean square of another tensor than the one scaled; an input that is
    `x - ReduceMean(x)` (that is a layer norm, left to raise-layer-norm); a
    result type other than the input's (a downcast before the gamma Mul). A
    gamma that is not a constant [D] is not folded: the normalization is still
    raised, with a ones gamma, and the Mul stays after it.
  }];
}

def RaiseGelu : Pass<"raise-gelu", "mlir::func::FuncOp"> {
  let summary = "Raise GELU (erf and tanh forms) to qcc.gelu";
  let description = [{
    Matches a product of the three factors `x`, `0.5` and a GELU branch,
    written as two Muls grouped either way (`(x * branch) * 0.5`,
    `(x * 0.5) * branch`, `x * (branch * 0.5)`, operands in any order):

    * erf form (torch `F.gelu`): branch = `Add(Erf(t), 1)` with
      `t = Div(x, sqrt(2))` or `Mul(x, 1 / sqrt(2))`
      -> `qcc.gelu x {approximate = "none"}`;
    * tanh form (GPT-2 `gelu_new`, `F.gelu(approximate="tanh")`): branch =
      `Add(Tanh(Mul(Add(x, Mul(x^3, 0.044715)), sqrt(2 / pi))), 1)` with
      `x^3` as `Pow(x, 3)` or `Mul(x, Mul(x, x))`, or the argument factored as
      BLOOM writes it, `sqrt(2 / pi) * x * (1 + 0.044715 * x * x)` (each
      product of three factors grouped either way, `x * x` also `Pow(x, 2)`)
      -> `qcc.gelu x {approximate = "tanh"}`.

    Constants are splats of any broadcastable shape that does not change the
    result's, compared with a relative tolerance of 1e-5 (exporters store
    them in float32). Before:

    ```mlir
    %0 = qcc.div %x, %sqrt2 : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<?x?x128xf32>
    %1 = qcc.erf %0 : tensor<?x?x128xf32>
    %2 = qcc.add %1, %one : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<?x?x128xf32>
    %3 = qcc.mul %x, %2 : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
    %y = qcc.mul %3, %half : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<?x?x128xf32>
    ```

    After:

    ```mlir
    %y = qcc.gelu %x : tensor<?x?x128xf32>
    ```

    Not matched: any constant off by more than the tolerance (0.25 for the
    0.5, 0.05 for 0.044715, ...); an Erf/Tanh argument built from another
    tensor than the one multiplied; the tanh form with sqrt(2 / pi)
    distributed over the sum (`x * 0.7978846 + x^3 * 0.0356774`); sigmoid
    approximations such as `x * Sigmoid(1.702 x)`.
  }];
}

def RaiseSilu : Pass<"raise-silu", "mlir::func::FuncOp"> {
  let summary = "Raise x * sigmoid(x) to qcc.silu";
  let description = [{
    Matches `Mul(x, Sigmoid(x))`, operands in either order, as torch.onnx
    exports `F.silu` (the SwiGLU gate of LLaMA MLPs), and replaces it with
    `qcc.silu x`. Before:

    ```mlir
    %s = qcc.sigmoid %x : tensor<?x?x172xf32>
    %y = qcc.mul %x, %s : (tensor<?x?x172xf32>, tensor<?x?x172xf32>) -> tensor<?x?x172xf32>
    ```

    After:

    ```mlir
    %y = qcc.silu %x : tensor<?x?x172xf32>
    ```

    Not matched: `Mul(y, Sigmoid(x))` with `y` another value than `x` (a
    gated unit, not SiLU, such as the SwiGLU product with `up`);
    `x * Sigmoid(k x)` with a scale `k` (swish-beta, the sigmoid GELU
    approximation).
  }];
}

def RaiseMoe : Pass<"raise-moe", "mlir::func::FuncOp"> {
  let summary = "Raise the exporters' loop over experts to qcc.moe";
  let description = [{
    The HF mixture-of-experts blocks (Mixtral, Qwen2-MoE, Qwen3-MoE, ...)
    export their loop over experts unrolled: per expert e, the routes whose
    top-k id is e (NonZero of a one-hot mask, split into slots and tokens),
    the tokens' rows gathered, the expert's MLP over them, its output times
    the routes' gates (gathered from the flattened [T, k] gates at
    token * k + slot) scattered into zeros, and the experts' parts added:

    ```mlir
    %m = ... mask of expert e from qcc.one_hot %ids ...   // [k, T]
    %nz = qcc.non_zero %m ; %p:2 = qcc.split (qcc.transpose %nz) ...
    %rows = qcc.gather %x, %tokens ...
    %y = qcc.linear (qcc.mul (qcc.silu (qcc.linear %rows, %gate_e)),
                             (qcc.linear %rows, %up_e)), %down_e
    %s = qcc.scatter_elements %zeros, %tokens2d, (qcc.mul %y, %g) {axis = 0}
    %acc = qcc.add %acc_prev, %s
    ```

    The chain becomes one `qcc.moe %x, %ids, %gates, %up, %down, %gate`
    with the experts' weights stacked [E, N, K] in id order; the router
    (softmax or sigmoid, top-k, renormalization) and a shared expert stay
    as they are. The mask's and the gate lookup's spellings are checked by
    evaluating them on sample ids and gates (T = E + 1 tokens, token t
    routed to (t + j) mod E in slot j): each term's mask must be exactly
    one expert's, the E terms experts 0 .. E-1 of a top-k over E scores,
    and the lookup must read gates[token, slot]. The MLPs are matched
    structurally: `down(act(gate x) * up x)` or `down(act(up x))`, act one
    of silu, gelu, gelu (tanh), relu, linears of constant float weights
    without bias, the same form for every expert.

    Runs after the weight passes: experts whose linears were quantized
    (W8A8, W4A16, 2:4) keep the exported per-expert form, which runs each
    expert over its routed rows too.
  }];
}

def RaiseLinear : Pass<"raise-linear", "mlir::func::FuncOp"> {
  let summary = "Raise MatMul / Gemm with a constant weight (+ bias) to qcc.linear";
  let description = [{
    qcc.linear takes its weight as [N, K] (out, in). Rewrites:

    - MatMul(x [..., K], W const [K, N]) -> qcc.linear x, W^T, where W^T is
      a new constant [N, K] transposed at compile time (a dense_resource blob
      named `<old name>_t` when large; a weight shared by several matmuls is
      transposed once).
    - Add(b const [N], linear) in either operand order -> linear with bias.
    - Gemm(a [M, K], B const, c const [N]?) with alpha = 1, beta = 1 and
      transA = 0 -> linear (B used as is when transB = 1, transposed
      otherwise).
    - GPT-2's Conv1D, Reshape(linear(Reshape(x, [-1, K])), [d0, .., N]) where
      the outer target restores x's leading dimensions -> linear on x.

    ```mlir
    // before
    %w = qcc.constant dense_resource<fc.weight> : tensor<64x256xf32>
    %m = qcc.matmul %x, %w : (tensor<?x?x64xf32>, tensor<64x256xf32>) -> tensor<?x?x256xf32>
    %y = qcc.add %b, %m : (tensor<256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
    // after
    %wt = qcc.constant dense_resource<fc.weight_t> : tensor<256x64xf32>
    %y = qcc.linear %x, %wt, %b : (tensor<?x?x64xf32>, tensor<256x64xf32>,
                                   tensor<256xf32>) -> tensor<?x?x256xf32>
    ```

    Left alone: products of two activations (attention scores), MatMuls with
    a 1-D or 3-D+ constant, Gemm with alpha != 1, beta != 1 or transA, and
    addends that are not a constant [N] (e.g. [1, 1, N]) or that feed a
    linear with other users.
  }];
}

def RaiseEmbedding : Pass<"raise-embedding", "mlir::func::FuncOp"> {
  let summary = "Raise Gather of rows of a constant table to qcc.embedding";
  let description = [{
    Gather(table, ids, axis = 0) with `table` a constant 2-D float [V, E]
    tensor becomes qcc.embedding (token and learned position embeddings).

    ```mlir
    // before
    %y = qcc.gather %wte, %ids {axis = 0 : i64}
        : (tensor<256x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
    // after
    %y = qcc.embedding %wte, %ids
        : (tensor<256x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
    ```

    Left alone: gathers along another axis, from a non-constant table, and
    from 1-D tensors (Gather on a shape vector is shape arithmetic).
  }];
}

def GroupFusedHeads : Pass<"group-fused-heads", "mlir::func::FuncOp"> {
  let summary = "Make each per-head part of a fused projection one packed block";
  let description = [{
    GPT-NeoX's query_key_value projection holds [q | k | v] within each head:
    its output is split into heads [B, S, H, C] (optionally transposed to
    [B, H, S, C]) and each part is a slice [lo, hi) of the last axis (or a
    result of a Split of it). When every user of the head split is such a
    slice or split of non-overlapping parts, the
    linear's constant weight rows (and bias) are permuted at compile time so
    that each part of every head is one contiguous block, and each slice
    becomes the head split of a slice of the new projection: the packed form
    that raise-rotary and raise-attention match (as for Phi-3's fused QKV).
    Rows that no part reads are dropped.

    ```mlir
    // before (H = 4, C = 48: q, k, v of 16 per head)
    %p = qcc.linear %x, %w, %b : (..., tensor<192x64xf32>, tensor<192xf32>) -> tensor<?x?x192xf32>
    %r = qcc.reshape %p, %shape : (tensor<?x?x192xf32>, tensor<4xi64>) -> tensor<?x?x4x48xf32>
    %t = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : ... -> tensor<?x4x?x48xf32>
    %q = qcc.slice %t, %c0, %c16 {axes = array<i64: 3>, steps = array<i64: 1>} : ... -> tensor<?x4x?x?xf32>
    %k = qcc.slice %t, %c16, %c32 ...
    %v = qcc.slice %t, %c32, %c48 ...
    // after: rows [h*48 + 0, h*48 + 16) of every head h first, then k, then v
    %g = qcc.linear %x, %w2, %b2 : (..., tensor<192x64xf32>, tensor<192xf32>) -> tensor<?x?x192xf32>
    %qp = qcc.slice %g, %c0, %c64 {axes = array<i64: 2>, steps = array<i64: 1>} : ... -> tensor<?x?x64xf32>
    %qs = qcc.reshape %qp, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
    %q = qcc.transpose %qs {perm = array<i64: 0, 2, 1, 3>} : ... -> tensor<?x4x?x?xf32>
    // ... and the same for k (%c64 .. %c128) and v (%c128 .. %c192)
    ```

    The same for parts packed per group of heads along a part axis,
    Reshape(linear -> [B, S, G, P, D]) (G, P, D constant; parts are [lo, hi)
    of P, taken by Slice or Split, or one index by Gather, which drops the
    axis): BLOOM's [q, k, v] per head (G = H, P = 3), Falcon's new decoder
    architecture with [q_0 .. q_{n-1}, k, v] per kv head (G = H_kv, P = n +
    2). A part's Reshapes become Reshapes of its packed slice; Falcon's
    repeat of k and v over the query heads of their group,
    Reshape(Expand(part [B, S, G, 1, D] -> [B, S, G, n, D]) -> [B, S, G * n,
    D]), becomes the head split of a Gather of whole kv heads of the slice
    (head h reads kv head h / n), which raise-attention takes as GQA:

    ```mlir
    // before (G = 2, n = 2, D = 2: q0 q1 k v per group)
    %r = qcc.reshape %p, %s : (tensor<?x?x16xf32>, tensor<5xi64>) -> tensor<?x?x2x4x2xf32>
    %k5 = qcc.slice %r, %cm2, %cm1 {axes = array<i64: 3>, ...} : ... -> tensor<?x?x2x1x2xf32>
    %ke = qcc.expand %k5, %e : (tensor<?x?x2x1x2xf32>, tensor<5xi64>) -> tensor<?x?x2x2x2xf32>
    %k = qcc.reshape %ke, %v : (tensor<?x?x2x2x2xf32>, tensor<4xi64>) -> tensor<?x?x4x2xf32>
    // after: rows of k (4, 5 of group 0, 12, 13 of group 1) are one slice
    %kp = qcc.slice %g, %c8, %c12 {axes = array<i64: 2>, ...} : ... -> tensor<?x?x4xf32>
    %kr = qcc.gather %kp, %idx {axis = 2 : i64} : (tensor<?x?x4xf32>, tensor<8xi64>) -> tensor<?x?x8xf32>
    %k = qcc.reshape %kr, %kshape : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x4x2xf32>
    ```

    A projection that carries a runtime LoRA adapter's update (the
    importer's `add(linear, lora)`, docs/LORA.md) is regrouped with it: the
    rows of B [J, N, R] are gathered as the weight's, and the grouped
    projection is `add(linear, lora)` again.

    Left alone: head splits with any other user, a linear with users other
    than the head split and Shape ops (of its width only when no row is
    dropped), or with a non-constant weight, overlapping parts, parts whose
    values meet again in a Concat within a few uses (a partial rotary's
    rotated and passed parts of one head, which raise-rotary takes as they
    are; shapes read from the parts do not count), and a single part that
    is the whole head.
  }];
}

def RaiseRotary : Pass<"raise-rotary", "mlir::func::FuncOp"> {
  let summary = "Raise rotary embedding (rotate-half and interleaved) to "
                "qcc.rotary";
  let description = [{
    Matches the rotate-half rotary embedding that exporters write on the
    head-split view x = Transpose[0, 2, 1, 3](Reshape(packed -> [B, S, H, D]))
    of a [B, S, H * D] projection (or on the head split [B, S, H, D] itself,
    before the transpose, as GPT-J and CodeGen do: the tables then broadcast
    as [B, S, 1, D], and the result is the head split of the rotary):

    ```
    Add(Mul(x, cos), Mul(Concat(Neg(Slice(x, D/2 .. end)), Slice(x, 0 .. D/2),
                                axis = -1), sin))
    ```

    (Add and Mul operands in either order), where cos and sin are an [S, D]
    table broadcast as [1, 1, S, D] or a [B, S, D] table broadcast as
    [B, 1, S, D] by Unsqueeze. The slice bounds may be computed (LLaMA writes
    D / 2 as Div(16, 2)); the upper end may be D or INT64_MAX. The Add becomes
    qcc.rotary on the packed value, followed by the same Reshape (same shape
    operand) and Transpose, so that raise-attention sees a plain head split:

    ```mlir
    %r = qcc.reshape %q, %shape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
    %x = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : ...
    %y = qcc.add (qcc.mul %x, %cos4), (qcc.mul (qcc.concat (qcc.neg %x2), %x1), %sin4)
    // becomes
    %p = qcc.rotary %q, %cos, %sin {head_dim = 16 : i64}
        : (tensor<?x?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x?x64xf32>
    %r2 = qcc.reshape %p, %shape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
    %y = qcc.transpose %r2 {perm = array<i64: 0, 2, 1, 3>} : ...
    ```

    When x is a [0, 2, 1, 3] transpose of heads [B, S, H, D] computed per
    head rather than a head split (Qwen3's q/k norms), the heads are packed
    with Reshape(y, [B, S, H * D]) for qcc.rotary and split again after it
    (Reshape to [B, S, H, D] from the op's own leading dimensions). A norm
    over the last axis of a transpose that keeps that axis (Gemma3's q/k
    norms on [B, H, S, D]) is moved before the transpose to give that form:
    Norm(Transpose(y)) -> Transpose(Norm(y)).

    Partial rotary (GPT-NeoX's rotary_pct, StableLM's partial_rotary_factor)
    rotates only the first R values of each head with [.., R] tables:

    ```
    Concat(rotation of Slice(x, 0 .. R), Slice(x, R .. end), axis = -1)
    ```

    with the rotation above on the [B, H, S, R] slice; it becomes qcc.rotary
    {head_dim = D, rotary_dim = R} on the packed value, split again as above.
    Sizes typed `?` are read through slices with constant bounds. A table
    built with a size-1 head axis ([B, S, 1, R], GPT-J's repeat_interleave)
    is squeezed to [B, S, R].

    The interleaved form (GPT-J's, CodeGen's and Cohere's rotate_every_two,
    which rotates the pairs (x[2i], x[2i + 1]) with tables repeat_interleave'd
    to hold pair i's angle at 2i and 2i + 1), full or partial:

    ```
    Add(Mul(x, cos), Mul(Reshape(Concat(Unsqueeze(Neg(Slice(x, 1 .. end,
        step 2)), -1), Unsqueeze(Slice(x, 0 .. end, step 2), -1), axis -1)
        -> [.., R]), sin))
    ```

    becomes qcc.rotary between two Gathers along the packed axis, the first
    putting each head's evens before its odds (the passed values stay), the
    second putting them back, with the tables gathered into the same order:
    the rotate-half pairs (i, i + R/2) are then the model's pairs. Later
    passes fold the gathers: into the q and k projections' weight rows
    (fold-shapes) once attention drops the one after the rotary on both q
    and k (raise-attention).

    ```mlir
    %a = qcc.gather %q, %evens_first {axis = 2 : i64} : (tensor<?x?x64xf32>, tensor<64xi64>) -> tensor<?x?x64xf32>
    %r = qcc.rotary %a, %cos_g, %sin_g {head_dim = 16 : i64, rotary_dim = 8 : i64} : ...
    %y = qcc.gather %r, %back {axis = 2 : i64} : (tensor<?x?x64xf32>, tensor<64xi64>) -> tensor<?x?x64xf32>
    ```

    Not matched: Concat(x2, -x1) and stack((x[1::2], -x[::2])) (the other
    rotation direction), halves taken along another axis, a rotated part
    that is not the leading one, tables that vary per head. Which table
    multiplies x and which the rotated half cannot be checked: cos and sin
    are taken by position.
  }];
}

def RaiseAttention : Pass<"raise-attention", "mlir::func::FuncOp"> {
  let summary = "Raise scaled dot-product attention with its head split/merge "
                "to qcc.attention";
  let description = [{
    Anchors on the head merge Reshape(Transpose[0, 2, 1, 3](MatMul(P, V)))
    with P = Softmax(scores, axis = -1) and

    ```
    scores = [mask]([Div(., c) | Mul(., s)](MatMul(Q, K^T)))
    Q      = Transpose[0, 2, 1, 3](Reshape(q [B, S, H * D] -> [B, S, H, D]))
    K^T    = Transpose[0, 2, 3, 1](Reshape(k)) | Transpose[0, 1, 3, 2](K)
    K, V   = Transpose[0, 2, 1, 3](Reshape(k | v)), Unsqueeze(k | v, [1])
             (one head: GPT-BigCode's multi-query), or repeat_kv of it:
             Reshape(Expand(Unsqueeze(., 2), [B, Hkv, n, S, D]) -> [B, Hkv*n, S, D])
             Either may first be appended to a cache passed in (HF
             past_key_values): Concat(past [B, Hkv, P, D], ., axis 2)
    ```

    A packed k or v that repeats whole kv heads per token, Gather(kv [B, S,
    Hkv * D], [(h / n) * D + d], axis 2) (group-fused-heads' form of Falcon's
    new decoder architecture), also under a qcc.rotary (which rotates every
    head alike), is that kv repeated n times: the op takes kv (rotated) with
    `num_kv_heads = Hkv`.

    With a past, the op's key (value) is the packed past followed by the
    packed new ones, Concat(Reshape(Transpose[0, 2, 1, 3](past),
    [B, P, Hkv * D]), k, axis 1); the head-layout Concat stays for its other
    users (the exporter's `present` outputs). K and V must both have a past
    or neither.

    Every head split must keep B and S in place with constant H and D (S may
    be written -1, as OPT does, when H * D is the packed width); the kv head
    count of the k/v split is `num_kv_heads` (GQA when repeated). `scale` is
    1/c (Div), s (Mul) or 1, or the product of the scalars torch's SDPA
    decomposition multiplies Q and K^T by (sqrt(scale) each). The scaled
    scores may be softcapped, Mul(Tanh(Div(x, c)), c) (Gemma-2's eager
    attention) -> `softcap = c`. P may be
    Where(IsNaN(Softmax(x)), 0, Softmax(x)) (torch's guard for fully masked
    rows, which qcc.softmax already gives zeros). The mask is one of:
    - Where(m, scores, v <= -1e30) with m proven causal from its constants: a
      lower-triangular i1 buffer Slice'd to rows [k_len - q_len, k_len) and
      columns [0, k_len), k_len and q_len traced to K's and Q's sequence
      dimensions (GPT-2) -> `causal = true`;
    - Add(scores, m), m = Unsqueeze(Trilu(ConstantOfShape([q_len, k_len],
      v <= -1e30), upper, k = 1)) with q_len and k_len proven equal (LLaMA)
      -> `causal = true`;
    - Add(scores, m) for any other m (BERT's [B, 1, 1, S] padding mask) ->
      the `mask` operand, `causal = false`; Add(scores + b, m) (BLOOM's
      ALiBi bias b, added by baddbmm before the mask) -> the `mask` operand
      Add(b, m);
    - Where(c, scores [+ bias], fill) or Where(c, fill, scores [+ bias])
      (fill <= -1e30) with anything but a proven causal buffer, or with a
      bias (MPT's ALiBi table) -> the `mask` operand Where(c, bias | 0,
      fill) (operands in the Where's order), `causal = false`;
    - a mask added before the scale, Div(Add(Q K^T, m), c) (CodeGen), ->
      the `mask` operand Div(m, c) with `scale = 1/c` (or Mul by s).

    A second pattern drops a permutation that q and k share: attention(
    Gather(q, P), Gather(k, P), v) with P one order of the features within
    every head -> attention(q, k, v), the scores not depending on that
    order (raise-rotary's interleaved rotary leaves such gathers). A key
    with a past is left alone: the past holds keys in the model's order.

    Attention left unraised (a Softmax over a MatMul of two computed
    operands, through mask, scale, bias or softcap steps) gets one warning
    naming the first such Softmax's node, the pattern's reason for
    declining and how many more there are: it runs as separate ops, with no
    fused kernel and no KV cache.

    ```mlir
    %s = qcc.matmul %qh, %kt ; %d = qcc.div %s, %c4 ; %m = qcc.add %d, %mask
    %p = qcc.softmax %m {axis = -1 : i64} ; %o = qcc.matmul %p, %vh
    %t = qcc.transpose %o {perm = array<i64: 0, 2, 1, 3>}
    %y = qcc.reshape %t, %shape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
    // becomes
    %y = qcc.attention %q, %k, %v, %mask {causal = false, num_heads = 4 : i64,
           num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32}
        : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>,
           tensor<?x1x1x?xf32>) -> tensor<?x?x64xf32>
    ```

    A merge reshape to any other shape (GPT-2's Conv1D flattens to
    [B * S, H * D]) is kept, applied to the op's [B, S, H * D] result.

    Not matched: softmax over another axis; a Q/K/V reshape that moves B or S
    or a V (or K) that is not a head split of a packed value (including a
    rotary left in the [B, H, S, D] layout, see raise-rotary); attention
    computed on [B * H, S, D] views that fold-shapes cannot put back on the
    heads. A Where whose boolean
    mask is not proven causal (e.g. strictly lower-triangular, which also
    masks the diagonal) and an additive triangular mask that is not exactly
    causal (e.g. k = 0) are kept as the `mask` operand with `causal = false`.
  }];
}

def KvCacheLayout : Pass<"kv-cache-layout", "mlir::ModuleOp"> {
  let summary = "Give a decoder prefill and decode entry points over a KV cache";
  let description = [{
    For a decoder whose `@main` takes token ids [B, S] and whose attention is
    all causal, adds `@prefill` and `@decode` (docs/KV_CACHE.md). Causal means
    `causal = true` without a mask, or a mask operand that MaskAnalysis.h
    proves to be the causal mask with the key padding of an
    `attention_mask` input (by evaluating the mask builder with the CPU
    kernels on padded samples and around every integer constant it holds),
    possibly with a sliding window W (key j visible from query i iff
    i - W < j <= i, HF's convention; the kv_attention gets `window = W`), or
    proven on unpadded and right-padded samples only (GroupQueryAttention's
    convention: its positions are read from the mask's row sums; the
    runtime's rows are unpadded, so that is enough), or with an ALiBi bias:
    visible keys carry m_h * (j - i) plus a constant per query row, the
    slopes m_h read from an unpadded sample and checked on every sample
    without holes in the padding (BLOOM counts key positions over real
    tokens, MPT by index: the same distances for contiguous tokens; the
    kv_attention gets `alibi = [m_h]`).
    `attention_mask` and `position_ids` inputs (HuggingFace names) go from
    the entry points: position ids become `positions`, the mask is dropped
    (rows are unpadded), its shape is read from the ids.

    * each `qcc.attention` becomes `qcc.kv_attention {layer = i}` (layers
      numbered in program order, the attention's softcap and the mask's
      window kept), which appends the new keys/values to the cache and
      attends over it;
    * a `positions` [B, S] argument replaces every `range(0, S, 1)` over the
      ids' sequence length, and the ops between it and its consumers
      (embedding of positions, rotary cos/sin tables) get a leading batch
      dimension so that each row sits at its own offset;
    * an integer [B, S] index of a table lookup (gather along axis 0,
      embedding) that evaluates to P + i on unpadded samples (positions
      computed from the attention mask, as the genai builder's
      GroupQueryAttention does) is replaced by `positions` (the table's rows
      bound the context);
    * `@decode` takes one token per row ([B, 1]);
    * `@prefill_last` is `@prefill` plus a `last` i64 [B, 1] argument, whose
      logits (the first [B, S, V] float result) are those of position
      `last` of each row only: `gather_nd` (batch_dims 1) picks those rows
      before the head — the linear / qlinear / matmul that makes the logits,
      with the row-wise ops right before it (a norm; a per-token or static
      quantize) and the elementwise ops after it with constant operands (a
      softcap) — when nothing else reads what lies in between; otherwise
      the entry point is left out (generation then samples from
      `@prefill`).

    `@main` may also take the exporter's cache (HF past_key_values /
    present: the form exporters produce for generation). Recognized when
    every argument after the ids is the `past` [B, Hkv, P, D] of exactly one
    attention key or value operand, that operand is (as raise-attention
    builds it) Concat(Reshape(Transpose[0, 2, 1, 3](past)), new, axis 1), and
    Concat(past, heads of new, axis 2) is returned exactly once (`present`).
    The genai builder's form is taken too: the operand is Reshape(Transpose
    [0, 2, 1, 3](present)) with the returned present = Where(keep,
    GatherElements(Concat(past, heads of new, axis 2), indices, axis 2), 0),
    where the gather indices are evaluated to keep every row in place and
    `keep` to be true on unpadded samples.
    Then `@prefill`/`@decode` drop the past inputs and the present outputs,
    `kv_attention` gets only `new` (the cache holds the past), and the
    positions range(P, P + S, 1), P = dimension 2 of a past input, become
    the `positions` input like range(0, S, 1). A query and new keys that
    are permuted alike within each head (raise-attention keeps an
    interleaved rotary's gathers where a past is appended to) lose the
    permutation there, as raise-attention drops it without a past: the
    cache holds the keys in the order both entry points write (not with
    `kivi` scales, calibrated per key channel in `@main`'s order).

    `@main` stays for full-sequence runs. The layout is recorded in the
    module attribute `qcc.kv_cache` (layout, block_tokens, layers, kv_heads,
    head_dim, dtype), which the artifact carries to the runtime. An i8 cache
    adds its scales (docs/QUANTIZATION.md section 4): `per-head`, k_scales and
    v_scales [layers][kv_heads] = calibration absmax / 127; `kivi`,
    `scales = "kivi"` and k_scales [layers][kv_heads * head_dim] from each
    key channel's absmax (`qcc.k_channel_absmax`), the V scales being
    computed per token when the runtime appends it.

    ```mlir
    // before (in @main)
    %p = qcc.range %c0, %seq, %c1 : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
    %p2 = qcc.unsqueeze %p {axes = array<i64: 0>} : (tensor<?xi64>) -> tensor<1x?xi64>
    %pe = qcc.embedding %wpe, %p2 : (tensor<128x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
    %a = qcc.attention %q, %k, %v {causal = true, ...}
    // after (in @prefill(%ids, %positions))
    %pe = qcc.embedding %wpe, %positions : (tensor<128x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
    %a = qcc.kv_attention %q, %k, %v {layer = 0 : i64, ...}
    ```

    Encoders (no causal attention) are left alone. A decoder that mixes
    causal and other attention, whose masks cannot be proven (an attention
    sink, a window not next to a constant), or whose positions the pass
    cannot give a batch dimension keeps
    only `@main` and gets a warning saying why. Taking inputs beyond the ids,
    attention_mask, position_ids and the past form above is an error.
  }];
  let options = [
    Option<"layout", "layout", "::qcc::KvLayout",
           /*default=*/"::qcc::KvLayout::Paged", "KV cache layout",
           [{::qcc::optionValues(::qcc::kKvLayoutNames)}]>,
    Option<"blockTokens", "block-tokens", "int64_t",
           /*default=*/"::qcc::format::KvCacheConfig::kDefaultBlockTokens",
           "Tokens per block of the paged layout">,
    Option<"kvDtype", "kv-dtype", "::qcc::KvDtype",
           /*default=*/"::qcc::KvDtype::F32",
           "KV cache element type (i8 and fp8 scales come from the attention ops' "
           "qcc.k_absmax / qcc.v_absmax statistics)",
           [{::qcc::optionValues(::qcc::kKvDtypeNames)}]>,
    Option<"maxPositionsBound", "max-positions", "int64_t", /*default=*/"0",
           "The most positions a sequence may reach (0: the model's own "
           "bound, if any); the smaller of the two is the cache's "
           "max_positions">,
    Option<"kvScales", "kv-scales", "::qcc::KvScales",
           /*default=*/"::qcc::KvScales::PerHead",
           "Scales of an i8 cache (kivi: K per channel from "
           "qcc.k_channel_absmax, V per token computed on append)",
           [{::qcc::optionValues(::qcc::kKvScalesNames)}]>,
  ];
}

def TabulatePositions : Pass<"tabulate-positions", "mlir::func::FuncOp"> {
  let summary = "Values of the positions alone become rows of a table";
  let description = [{
    In an entry point that takes per-sequence `positions` (kv-cache-layout's
    prefill, prefill_last and decode) of a module with a KV cache, a float
    value computed from the positions and constants alone, one row per
    position ([B, S] -> [B, S, D]: a Hugging Face export's rotary cos and
    sin, positions x inv_freq, concat, cos), is computed at compile time for
    every position the cache holds (`max_positions` rows, with the CPU
    reference kernels, so the CPU reads the bits it would have computed)
    and read with `qcc.embedding(table, positions)`. The GPU plan then runs
    a gather kernel instead of host nodes before every decode step, and a
    position outside the cache is an error rather than a value.

    A candidate is checked on samples before it is replaced: evaluated on
    positions [[0 .. max_positions - 1]] it must give [1, max_positions, D]
    (the table), and on a [2, 3] batch of other positions the table's rows
    of those positions, bit for bit. Tables of more than 2^22 elements are
    not made. The ops only the replaced values used are erased.

    ```mlir
    // before (decode; qcc.kv_cache max_positions = 4096)
    %p = qcc.unsqueeze %positions {axes = array<i64: 2>} : ...
    %f = qcc.cast %p : tensor<?x?x1xi64> to tensor<?x?x1xf32>
    %a = qcc.mul %f, %inv_freq : (tensor<?x?x1xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
    %e = qcc.concat %a, %a {axis = 2 : i64} : ... -> tensor<?x?x32xf32>
    %cos = qcc.cos %e : tensor<?x?x32xf32>
    // after
    %table = qcc.constant dense<...> : tensor<4096x32xf32>
    %cos = qcc.embedding %table, %positions : (tensor<4096x32xf32>, tensor<?x?xi64>) -> tensor<?x?x32xf32>
    ```
  }];
}

def RotateResidual : Pass<"rotate-residual", "mlir::func::FuncOp"> {
  let summary = "Rotate the residual stream into the weights (QuaRot)";
  let description = [{
    The residual stream x (width D) becomes x Q for an orthogonal Q
    (format/Rotation.h: a randomized Hadamard matrix, times an orthonormal
    DCT factor where D is not a power of two), and the weights absorb it so
    that the function is unchanged in exact arithmetic:

    * producers of the stream: the input-id embedding's rows, and every
      linear, embedding or constant added to the stream (through adds and
      scalar multiplies): rows x -> x Q, a linear's W -> Q^T W, b -> Q^T b;
    * norms reading the stream: their weight (and a layer norm's bias)
      folds into the linears reading them, W -> W diag(gamma),
      b -> b + W beta; the norm keeps weight 1, which commutes with Q
      (||x Q|| = ||x||); those linears then read x Q: W -> W Q.

    Activations of the rotated stream have no outlier channels left, so
    per-token (and per-tensor) int8 scales fit all channels (QuaRot,
    Ashkboos et al. 2024). A layer norm subtracts the mean, which Q does not
    commute with: when the stream is read by layer norms, every producer is
    also centred (x - mean(x), SliceGPT's construction), the stream stays
    mean-free and the layer norms become rms_norm. A module that runs it is
    marked `qcc.rotation`.

    With `online` (the default), an MLP's down projection, whose input is
    the MLP's activation (a GLU product `act(gate) * up`, or gelu / silu /
    relu) with outlier channels no weight can absorb, reads it through
    `qcc.hadamard` (x -> x Q_K at run time, K its width) and absorbs Q_K in
    its weight (W -> W Q_K): QuaRot's online Hadamard. A width whose odd
    factor exceeds `format::Rotation::kMaxOddFactor` keeps its input as it
    is; a residual width like that is an error. Also with `online`, each
    attention's values are rotated per head in the weights alone (QuaRot's
    V / O rotation): the value projection's rows of each KV head absorb
    R^T (R of width head_dim) and the output projection's columns of each
    head R, so the output projection's input loses its outliers too. An
    attention whose value is not its own linear's result (fused QKV) or
    whose output reaches anything but linears is left alone. The module's
    `qcc.rotation` ends with ", online" and ", value heads" when they ran.

    The stream is found from the embeddings of the input ids. Every value in
    it may be read only by adds, scalar multiplies, norms (whose results feed
    only linears with constant f32 weights) and shapes; anything else (a
    function result, a runtime LoRA adapter on a norm, Gemma's norm after
    each block, a stream read by both layer and RMS norms) is an error
    naming the op, and nothing is changed.

    ```mlir
    // before
    %h = qcc.embedding %table, %ids : ...
    %n = qcc.rms_norm %h, %gamma {epsilon = 1.0e-5 : f32} : ...
    %y = qcc.linear %n, %w : ...
    // after: %table2 = %table Q, %w2 = %w diag(gamma) Q
    %h = qcc.embedding %table2, %ids : ...
    %n = qcc.rms_norm %h, %ones {epsilon = 1.0e-5 : f32} : ...
    %y = qcc.linear %n, %w2 : ...
    ```
  }];
  let options = [
    Option<"seed", "seed", "uint64_t", /*default=*/"0",
           "Seed of the Hadamard matrix's random signs">,
    Option<"online", "online", "bool", /*default=*/"true",
           "Also rotate MLP down projections' inputs at run time "
           "(qcc.hadamard)">,
  ];
}

def SmoothQuant : Pass<"smooth-quant", "mlir::func::FuncOp"> {
  let summary = "Migrate activation outliers into the weights (SmoothQuant)";
  let description = [{
    For each `layer_norm` / `rms_norm` whose every user is a `qcc.linear`
    with calibration statistics (`qcc.input_absmax`, per input channel), with
    the group's activation absmax A_j and weight column absmax W_j (max over
    all linears of the group: q/k/v share one s, gate/up share one):

    ```
    s_j = max(A_j, 1e-5)^alpha / max(W_j, 1e-5)^(1 - alpha)
    gamma_j /= s_j, beta_j /= s_j, W[:, j] *= s_j, A_j /= s_j
    ```

    The function is unchanged in exact arithmetic; the activations' outlier
    channels shrink so that per-tensor int8 scales stop being dominated by
    them. alpha 0.5 suits OPT/BLOOM-like models; raise it (0.75-0.9) for
    LLaMA-family models whose activations have stronger outliers.

    Beyond norms, 1/s folds into any producer that is linear in the
    smoothed channel (unless `norms-only`):

    * a GLU product `act(gate) * up` (SwiGLU, GeGLU) read only by linears
      (the MLP down projection): the rows (and bias) of `up`, a linear used
      only by the product, are divided by s;
    * an attention read only by linears (the output projection) whose value
      is a linear used only there (no rotary on V): the value projection's
      rows are divided by s, one factor per V channel g*D + d, and output
      projection column h*D + d is multiplied by the factor of the V channel
      that query head h reads (under GQA a KV head's factor is the max over
      its query heads' statistics, so all of them agree). `qcc.v_absmax`
      (the int8 KV scale) becomes absmax / min_d s_d per head: a bound that
      never clips.

    A runtime LoRA adapter reading the activation (`qcc.lora`, docs/LORA.md)
    joins the group: its A columns are multiplied by s like the linears'
    weight columns ((A s)(X / s) = A X).

    Other producers (a non-gated MLP's gelu, an embedding, an argument)
    cannot absorb 1/s; no explicit scale op is inserted: those linears stay
    unsmoothed, with a remark on the linear.

    A `qcc.shape` of the activation is not a user that matters (X / s has
    X's shape), and linears behind a reshape that keeps the last dimension
    (the exporter's head merge before the output projection) read the same
    channels: they join the group. A group whose activation has any other
    user is skipped, because that user would see the smoothed values. The pruning statistics of the group's
    linears (`qcc.input_gram`, `qcc.input_l2norm`) are rescaled with their
    input: H_ij / (s_i s_j), ||X_j|| / s_j. A group that is skipped (another
    user, a linear without statistics, a computed gamma, beta or weight) gets
    a remark saying why. The calibration rows (`qcc.input_samples`) are
    dropped, or with `keep-samples` rescaled to X / s and kept for
    `int8-fallback`.

    `auto-alpha` picks alpha per group instead: each alpha of 0.30, 0.35,
    ..., 0.95 is tried and the one with the least relative output error
    sum ||Q(X/s) Q(W s)^T - X W^T||^2 / sum ||X W^T||^2 over the group's
    linears is kept, with X the calibration activation rows
    (`qcc.input_samples`, [R, K]) and Q int8 per-token (activations) and
    per-output-channel (weights) symmetric quantization; a group without
    samples uses `alpha`. With `report-alpha`, each group's choice, error and
    outlier ratio (max / median channel absmax) go to stderr.

    ```mlir
    // before
    %n = qcc.layer_norm %x, %g, %b {epsilon = 1.0e-5 : f32} : ...
    %y = qcc.linear %n, %w {qcc.input_absmax = dense<[...]> : tensor<64xf32>} : ...
    // after: %g2 = %g / s, %b2 = %b / s, %w2 = %w * s (columns), absmax / s
    %n = qcc.layer_norm %x, %g2, %b2 {epsilon = 1.0e-5 : f32} : ...
    %y = qcc.linear %n, %w2 {qcc.input_absmax = dense<[...]> : tensor<64xf32>} : ...
    ```
  }];
  let options = [
    Option<"alpha", "alpha", "double", /*default=*/"0.5",
           "Migration strength in [0, 1]">,
    Option<"normsOnly", "norms-only", "bool", /*default=*/"false",
           "Smooth only norm -> linear groups">,
    Option<"autoAlpha", "auto-alpha", "bool", /*default=*/"false",
           "Pick alpha per group by W8A8 error on qcc.input_samples">,
    Option<"reportAlpha", "report-alpha", "bool", /*default=*/"false",
           "Print each group's alpha, error and outlier ratio to stderr">,
    Option<"keepSamples", "keep-samples", "bool", /*default=*/"false",
           "Keep qcc.input_samples, rescaled to X / s, for int8-fallback">,
  ];
}

def Sparsify24 : Pass<"sparsify-2-4", "mlir::func::FuncOp"> {
  let summary = "2:4 structured sparsity: prune linear weights, store them compressed";
  let description = [{
    Every `qcc.linear` inside a transformer block (its result reaches an
    attention or a norm; never the LM head, whose logits reach neither; the
    embedding is a `qcc.embedding`, not a linear) whose weight W [N, K] is a
    constant keeps 2 of every 4 consecutive weights along K; the weight
    becomes `qcc.sparse_2_4` of constants (values [N, K/2] of the weight's
    element type, i32 metadata [N, K/32]: format/Sparse24.h). `method`
    chooses the kept two:

    * `magnitude`: the two largest |w_ij|;
    * `wanda`: the two largest |w_ij| * ||X_j|| (`qcc.input_l2norm`);
    * `sparsegpt`: SparseGPT (Frantar & Alistarh, 2023) with the input's
      Gram matrix H = X^T X (`qcc.input_gram`): damp 1% of mean(diag H),
      U = upper Cholesky factor of (H + damp I)^-1; in blocks of 128
      columns, each group of four keeps the two largest w^2 / U_jj^2 at the
      group's first column, and each pruned weight's error (w - 0) / U_jj
      is spread over the row's later columns through row j of U (within the
      block at once, after it in one lazy batch). In double.

    A block linear whose K is not a multiple of 32 stays dense with a
    warning naming it; one matching `exclude` (a layer index, counted by
    attention ops, or a glob over the linear's name and its weight's name)
    stays dense with a remark. `all-linears` also prunes linears outside
    the blocks (the LM head). wanda and sparsegpt need the calibration
    statistics (an error names the linear without them); the pass drops
    them from every linear afterwards. Runs after smooth-quant (the smoothed
    weights are pruned; smooth-quant rescales the statistics) and before
    quantize (int8 scales come from the kept values).

    ```mlir
    // before
    %w = qcc.constant dense<[[1.0, -4.0, 3.0, 0.5, ...]]> : tensor<8x32xf32>
    %y = qcc.linear %x, %w : (tensor<?x32xf32>, tensor<8x32xf32>) -> tensor<?x8xf32>
    // after (magnitude): group 0 keeps k = 1, 2 (nibble 0x9)
    %v = qcc.constant dense<[[-4.0, 3.0, ...]]> : tensor<8x16xf32>
    %m = qcc.constant dense<[[...]]> : tensor<8x1xi32>
    %s = qcc.sparse_2_4 %v, %m : (tensor<8x16xf32>, tensor<8x1xi32>) -> tensor<8x32xf32>
    %y = qcc.linear %x, %s : (tensor<?x32xf32>, tensor<8x32xf32>) -> tensor<?x8xf32>
    ```
  }];
  let options = [
    Option<"method", "method", "::qcc::PruneMethod",
           /*default=*/"::qcc::PruneMethod::Magnitude",
           "How the two kept weights of each group are chosen",
           [{::qcc::optionValues(::qcc::kPruneMethodNames)}]>,
    ListOption<"exclude", "exclude", "std::string",
               "Linears left dense: layer indices or globs over names">,
    Option<"allLinears", "all-linears", "bool", /*default=*/"false",
           "Also linears outside the transformer blocks (the LM head)">,
    Option<"blockSize", "block-size", "int64_t", /*default=*/"128",
           "sparsegpt: columns per lazy batch (a multiple of 4)">,
    Option<"dampening", "dampening", "double", /*default=*/"0.01",
           "sparsegpt: added to diag(H), as a fraction of its mean">,
  ];
}

def QuantizeW4 : Pass<"quantize-w4", "mlir::func::FuncOp"> {
  let summary = "W4A16: int4 weights per group (GPTQ or round to nearest)";
  let description = [{
    Every `qcc.linear` inside a transformer block (as sparsify-2-4 places
    them: never the LM head; `all-linears` includes it) whose weight W
    [N, K] is a float constant gets an int4 weight: its weight becomes
    `qcc.weight_int4` of constants (packed i8 [N, K/2], f16 scales
    [N, K/G], with `act-order` an i32 permutation [K], with `asymmetric`
    f16 offsets [N, K/G]: format/Int4.h). Activations stay float. Per
    output channel and group of G = `group-size` consecutive k, symmetric:
    s = f16(max|w| / 7), q = clamp(round_half_even(w / s), -7, 7);
    `asymmetric` (GGUF Q4_1's scale + min): m = f16(min w),
    s = f16(max(0, max w - m) / 15) (1 when 0), u =
    clamp(round_half_even((w - m) / s), 0, 15), the weight u s + m.
    `method`:

    * `rtn`: round to nearest, each group from the float weight;
    * `gptq`: GPTQ (Frantar et al., 2022) with the input's Gram matrix
      H = X^T X (`qcc.input_gram`): damp 1% of mean(diag H), U = upper
      Cholesky factor of (H + damp I)^-1 (passes/InverseHessian.h, shared
      with sparsegpt); columns left to right in lazy batches of
      `block-size`, each group's grid (scale, offset) from the weights as
      updated so far at its first column, each column's error
      (w - w') / U_jj (w' = q s or u s + m) spread over the later columns
      through row j of U. With `act-order` the
      columns are visited (and stored, groups consecutive) by descending
      H_jj. In double.

    A linear whose K is not a multiple of the group size stays float with a
    warning naming it. gptq needs the calibration statistics (an error
    names the linear without them); the pass drops them from every linear.

    `int8-activations` (W4A8, docs/QUANTIZATION.md section 13): each int4
    linear's f32 input is also quantized to int8 per token (symmetric,
    absmax / 127) and read back: `qcc.quantize` with an f32 result (the
    QDQ form), so the linear keeps its float semantics while a backend may
    multiply the int8 codes by the int4 ones. Linears sharing an input
    share the quantize after CSE.

    ```mlir
    // before
    %w = qcc.constant dense<[[0.5, -1.75, ...]]> : tensor<8x64xf32>
    %y = qcc.linear %x, %w : (tensor<?x64xf32>, tensor<8x64xf32>) -> tensor<?x8xf32>
    // after (rtn, group-size 32; 1.75 the first group's max): s = 0.25,
    // q = 2 (nibble 0x2), -7 (0x9): byte 0x92
    %p = qcc.constant dense<[[-110, ...]]> : tensor<8x32xi8>
    %s = qcc.constant dense<[[2.500000e-01, ...]]> : tensor<8x2xf16>
    %q = qcc.weight_int4 %p, %s group_size 32 : (tensor<8x32xi8>, tensor<8x2xf16>) -> tensor<8x64xf32>
    %y = qcc.linear %x, %q : (tensor<?x64xf32>, tensor<8x64xf32>) -> tensor<?x8xf32>
    ```
  }];
  let options = [
    Option<"method", "method", "::qcc::W4Method",
           /*default=*/"::qcc::W4Method::Gptq",
           "How the int4 weights are rounded",
           [{::qcc::optionValues(::qcc::kW4MethodNames)}]>,
    Option<"groupSize", "group-size", "int64_t", /*default=*/"128",
           "Consecutive k per scale (positive, even, dividing K)">,
    Option<"actOrder", "act-order", "bool", /*default=*/"false",
           "gptq: visit and store columns by descending H_jj">,
    Option<"asymmetric", "asymmetric", "bool", /*default=*/"false",
           "Unsigned codes with an f16 offset (min) per group">,
    Option<"allLinears", "all-linears", "bool", /*default=*/"false",
           "Also linears outside the transformer blocks (the LM head)">,
    Option<"int8Activations", "int8-activations", "bool",
           /*default=*/"false",
           "W4A8: the int4 linears' inputs quantized to int8 per token">,
    Option<"blockSize", "block-size", "int64_t", /*default=*/"128",
           "gptq: columns per lazy batch">,
    Option<"dampening", "dampening", "double", /*default=*/"0.01",
           "gptq: added to diag(H), as a fraction of its mean">,
  ];
}

def Int8Fallback : Pass<"int8-fallback", "mlir::func::FuncOp"> {
  let summary = "Choose the input columns a W8A8 linear keeps in float (LLM.int8())";
  let description = [{
    LLM.int8()-style decomposition for the linears that smoothing leaves
    with outliers (docs/QUANTIZATION.md, section 3). For each `qcc.linear`
    with a constant (dense) weight and calibration statistics
    (`qcc.input_absmax` A [K], after smooth-quant: of X / s), the candidate
    columns are those with A_j > `outlier-ratio` * median(A), the largest
    first, at most `max-fraction` * K of them (at least 1). With the
    calibration rows `qcc.input_samples` X [R, K] the W8A8 output error
    (passes/W8A8Error.h) is measured without and with the candidates in
    float; the linear gets `qcc.outlier_columns` (ascending) when the error
    without them is above `error-threshold` and they lower it. `quantize`
    then keeps those columns in float: the int8 weight gets them zeroed,
    the activation scale skips them, and the float weight slice travels
    with the `qcc.qlinear`. The calibration rows are dropped afterwards.
    A linear left alone gets a remark saying why (`qcc-opt` shows it).
    With `report`, each chosen linear's columns and errors go to stderr.

    ```mlir
    // before
    %y = qcc.linear %x, %w {qcc.input_absmax = dense<[1.0, 90.0, 1.0, ...]> : tensor<64xf32>,
                            qcc.input_samples = ...} : ...
    // after
    %y = qcc.linear %x, %w {qcc.input_absmax = ..., qcc.outlier_columns = array<i64: 1>} : ...
    ```
  }];
  let options = [
    Option<"outlierRatio", "outlier-ratio", "double", /*default=*/"8.0",
           "A column is a candidate when its absmax exceeds this times the median">,
    Option<"maxFraction", "max-fraction", "double", /*default=*/"0.02",
           "At most this fraction of K columns (at least one) stays in float">,
    Option<"errorThreshold", "error-threshold", "double", /*default=*/"0.0",
           "Relative W8A8 output error above which a linear falls back">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print each chosen linear's columns and errors to stderr">,
  ];
}

def Quantize : Pass<"quantize", "mlir::func::FuncOp"> {
  let summary = "W8A8: int8 per-channel weights, int8 activations";
  let description = [{
    Every `qcc.linear` with a constant weight becomes `qcc.quantize` of its
    input followed by `qcc.qlinear`, with the weight quantized here to int8
    per output channel (symmetric abs-max, round half to even) and its row
    sums precomputed for the zero-point correction (docs/QUANTIZATION.md).
    A 2:4 sparse weight (`qcc.sparse_2_4` of constants, from sparsify-2-4)
    stays compressed: its values are quantized (scales and sums from the
    kept values, the same numbers as from the dense pruned row) and the
    qlinear reads `qcc.sparse_2_4` of the int8 values and the same metadata.
    A mixture-of-experts router (a linear whose result reaches `qcc.top_k`)
    stays float, as in quantize-w4 and sparsify-2-4: quantization error
    there picks another expert rather than adding a small error.
    `activations` picks SmoothQuant's levels: `per-token` (O1, dynamic),
    `per-tensor` (O2, dynamic) or `static` (O3: one scale from calibration,
    max of `qcc.input_absmax` / 127; an error without statistics).
    `asymmetric` uses zero-point activations (dynamic levels only). A
    linear with `qcc.outlier_columns` (int8-fallback) keeps those input
    columns in float: they are zeroed in the int8 weight (before its scales
    and sums), the quantize reads them as 0 (`outlier_columns`; a static
    scale is the max over the other columns), and the qlinear takes the
    float input and the float weight columns [N, n] (`outliers(...)`). The
    quantize op stands alone after the producer so that kernel formation can
    fuse it into the producing norm or GEMM epilogue.

    ```mlir
    // before
    %y = qcc.linear %x, %w, %b : (tensor<?x?x64xf32>, tensor<256x64xf32>, tensor<256xf32>) -> tensor<?x?x256xf32>
    // after (per-token)
    %q, %s, %z = qcc.quantize %x {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x?x64xf32>) -> (tensor<?x?x64xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>)
    %y = qcc.qlinear %q, %s, %z, %wq, %ws, %wsum, %b : ... -> tensor<?x?x256xf32>
    ```
  }];
  let options = [
    Option<"activations", "activations", "::qcc::ActivationQuant",
           /*default=*/"::qcc::ActivationQuant::PerToken",
           "Activation quantization level",
           [{::qcc::optionValues(::qcc::kActivationQuantNames)}]>,
    Option<"asymmetric", "asymmetric", "bool", /*default=*/"false",
           "Zero-point (asymmetric) activation quantization">,
    Option<"fp8", "fp8", "bool", /*default=*/"false",
           "FP8 E4M3 weights and activations instead of int8">,
  ];
}

def FormKernels : Pass<"form-kernels", "mlir::func::FuncOp"> {
  let summary = "Group ops into qcc.kernel regions, one per GPU kernel";
  let description = [{
    Forms the fusion groups the CUDA emitter turns into kernels:

    * `gemm_i8` / `gemm_f16`: a `qcc.qlinear` (or float `qcc.linear`) with
      its epilogue: an activation (`gelu`, `silu`) that is its only user,
      then a `mul` by a tensor of the same shape (SwiGLU's silu(gate) * up:
      the gate GEMM's region takes it), then a residual `add` of the same
      shape, each the only user of what precedes it; `gemm_i8_mixed` for a qlinear with float
      outlier columns (int8-fallback); `gemm_i8_sp` / `gemm_f16_sp` when the weight is
      a `qcc.sparse_2_4` used only there (it joins the region, so its values
      and metadata are the operands); `gemm_w4` when the weight is a
      `qcc.weight_int4` (W4A16) used only there (it joins the region: the
      packed weight and the scales are the operands). A W4A16 linear that
      gemm_w4 cannot run (act-order's permutation, K or the group size not
      a multiple of 32, a shared weight) stays out of every region with a
      remark, and the GPU plan runs it on the host;
    * in a decode entry point (`qcc.tokens_per_row = 1`), plain dense
      `gemm_i8` / `gemm_f16` regions (no epilogue op) over the same input
      (and int8 scale) join one region with a result each: q, k and v of
      one row become one grouped GEMV launch. The region goes where the
      first of them was, so only when every operand is defined before it;
    * `norm_quantize`: a `layer_norm` / `rms_norm` whose only user is the
      `qcc.quantize` of its output (the scale is computed in the same kernel;
      a `shape` of the normed value is made to read the norm's input);
    * `attention`: `qcc.attention` / `qcc.kv_attention` with the `rotary`
      ops that produce its query and key when it is their only user (rotary
      and KV append fused into the attention kernel);
    * `router`: a `softmax` over the last axis read only by a `top_k` of
      the largest along it (static k, recorded on it as `qcc.k` for the
      runtime's shapes), with the renormalization when the top-k values are
      read only by their `reduce_sum` over the last axis (kept) and the
      `div` by it (Mixtral's router);
    * `embedding`, `norm`, `quantize`, `moe` (a `qcc.moe`: its experts'
      grouped GEMMs over the routed tokens) alone; `elementwise`: a chain of
      elementwise ops, each the only user of the previous one.

    An op that could join a group but has to stay out (an activation or
    residual add reading a GEMM result that has other users, the quantize of
    a norm that has other users, a rotary with users besides its attention)
    gets a remark saying why. Shape glue (shape, gather of shape vectors,
    reshape, split, concat, constants) stays outside. Regions are isolated from above: weights enter
    as operands. Ops keep their semantics inside the region.

    ```mlir
    // before
    %q, %s, %z = qcc.quantize %x {quant = #qcc.quant<bits = 8, symmetric, per_token>} : ...
    %y = qcc.qlinear %q, %s, %z, %w, %ws, %wsum, %b : ...
    %g = qcc.gelu %y : tensor<?x?x1024xf32>
    // after
    %y = qcc.kernel gemm_i8 "k0" (%q, %s, %z, %w, %ws, %wsum, %b) : (...) -> tensor<?x?x1024xf32> {
    ^bb0(...):
      %0 = qcc.qlinear ...
      %1 = qcc.gelu %0 : tensor<?x?x1024xf32>
      qcc.yield %1 : tensor<?x?x1024xf32>
    }
    ```
  }];
}

#endif // QCC_PASSES_TD
