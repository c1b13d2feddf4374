//===- QccOps.td - qcc operations --------------------------*- tablegen -*-===//

#ifndef QCC_OPS_TD
#define QCC_OPS_TD

include "dialects/QccAttrs.td"
include "dialects/QccDialect.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Qcc_ConstantOp : Qcc_Op<"constant",
    [ConstantLike, AllTypesMatch<["value", "result"]>]> {
  let summary = "A constant tensor (weights are dense_resource blobs)";
  let description = [{
    Returns `value`. Initializers and ONNX `Constant` nodes become this op:
    weights as `dense_resource` blobs so that the IR stays printable, small
    shape and index constants as `dense` so that folding can read them.

    ```mlir
    %w = qcc.constant dense_resource<wte> : tensor<256x64xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise primitives (ONNX semantics, numpy broadcasting)
//===----------------------------------------------------------------------===//

class Qcc_BinaryOp<string mnemonic, string onnxName, string formula,
                   list<Trait> traits = []>
    : Qcc_Op<mnemonic, traits> {
  let summary = "Elementwise " # onnxName # " with numpy broadcasting";
  let description = "ONNX `" # onnxName # "`: `result[i] = " # formula #
      "`, where `lhs` and `rhs` are broadcast to the result shape with numpy "
      "rules (dimensions aligned from the right; a dimension of 1 stretches).";
  let arguments = (ins Qcc_Tensor:$lhs, Qcc_Tensor:$rhs);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_AddOp : Qcc_BinaryOp<"add", "Add", "lhs[i] + rhs[i]", [Commutative]>;
def Qcc_SubOp : Qcc_BinaryOp<"sub", "Sub", "lhs[i] - rhs[i]">;
def Qcc_MulOp : Qcc_BinaryOp<"mul", "Mul", "lhs[i] * rhs[i]", [Commutative]>;
def Qcc_DivOp : Qcc_BinaryOp<"div", "Div",
    "lhs[i] / rhs[i] (integer division truncates toward zero)">;
def Qcc_PowOp : Qcc_BinaryOp<"pow", "Pow", "pow(lhs[i], rhs[i])">;
def Qcc_EqualOp : Qcc_BinaryOp<"equal", "Equal",
    "lhs[i] == rhs[i] (result is i1)", [Commutative]>;
def Qcc_LessOp : Qcc_BinaryOp<"less", "Less", "lhs[i] < rhs[i] (result is i1)">;
def Qcc_LessEqualOp : Qcc_BinaryOp<"less_equal", "LessOrEqual",
    "lhs[i] <= rhs[i] (result is i1)">;
def Qcc_GreaterOp : Qcc_BinaryOp<"greater", "Greater",
    "lhs[i] > rhs[i] (result is i1)">;
def Qcc_GreaterEqualOp : Qcc_BinaryOp<"greater_equal", "GreaterOrEqual",
    "lhs[i] >= rhs[i] (result is i1)">;
def Qcc_AndOp : Qcc_BinaryOp<"and", "And", "lhs[i] && rhs[i] (i1 operands)",
    [Commutative]>;
def Qcc_OrOp : Qcc_BinaryOp<"or", "Or", "lhs[i] || rhs[i] (i1 operands)",
    [Commutative]>;
def Qcc_MaxOp : Qcc_BinaryOp<"max", "Max",
    "max(lhs[i], rhs[i]) (NaN if either is NaN; ONNX's variadic Max is a "
    "chain of these)", [Commutative]>;
def Qcc_MinOp : Qcc_BinaryOp<"min", "Min",
    "min(lhs[i], rhs[i]) (NaN if either is NaN; ONNX's variadic Min is a "
    "chain of these)", [Commutative]>;

def Qcc_WhereOp : Qcc_Op<"where"> {
  let summary = "Elementwise select with numpy broadcasting";
  let description = [{
    ONNX `Where`: `result[i] = condition[i] ? lhs[i] : rhs[i]`, the three
    operands broadcast together with numpy rules.
  }];
  let arguments = (ins Qcc_BoolTensor:$condition, Qcc_Tensor:$lhs,
                   Qcc_Tensor:$rhs);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$condition `,` $lhs `,` $rhs attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

class Qcc_UnaryOp<string mnemonic, string onnxName, string formula,
                  Type operandType = Qcc_FloatTensor>
    : Qcc_Op<mnemonic, [SameOperandsAndResultType]> {
  let summary = "Elementwise " # onnxName;
  let description = "ONNX `" # onnxName # "`: `result[i] = " # formula # "`.";
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Qcc_SqrtOp : Qcc_UnaryOp<"sqrt", "Sqrt", "sqrt(input[i])">;
def Qcc_ReciprocalOp : Qcc_UnaryOp<"reciprocal", "Reciprocal", "1 / input[i]">;
def Qcc_ErfOp : Qcc_UnaryOp<"erf", "Erf", "erf(input[i])">;
def Qcc_TanhOp : Qcc_UnaryOp<"tanh", "Tanh", "tanh(input[i])">;
def Qcc_SigmoidOp : Qcc_UnaryOp<"sigmoid", "Sigmoid",
    "1 / (1 + exp(-input[i]))">;
def Qcc_ExpOp : Qcc_UnaryOp<"exp", "Exp", "exp(input[i])">;
def Qcc_CosOp : Qcc_UnaryOp<"cos", "Cos", "cos(input[i])">;
def Qcc_SinOp : Qcc_UnaryOp<"sin", "Sin", "sin(input[i])">;
def Qcc_ReluOp : Qcc_UnaryOp<"relu", "Relu", "max(input[i], 0)">;
def Qcc_NegOp : Qcc_UnaryOp<"neg", "Neg", "-input[i]",
    RankedTensorOf<[Qcc_Float, Qcc_Int]>>;
def Qcc_NotOp : Qcc_UnaryOp<"not", "Not", "!input[i]", Qcc_BoolTensor>;
def Qcc_AbsOp : Qcc_UnaryOp<"abs", "Abs", "|input[i]|", Qcc_Tensor>;
def Qcc_LogOp : Qcc_UnaryOp<"log", "Log", "log(input[i])">;

def Qcc_IsNaNOp : Qcc_Op<"is_nan"> {
  let summary = "Elementwise IsNaN";
  let description = "ONNX `IsNaN`: `result[i] = isnan(input[i])` (result is i1).";
  let arguments = (ins Qcc_FloatTensor:$input);
  let results = (outs Qcc_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_CumSumOp : Qcc_Op<"cumsum"> {
  let summary = "Cumulative sum along one axis";
  let description = [{
    ONNX `CumSum` with a constant axis: along `axis`,
    `result[j] = sum(input[i] for i <= j)`; `exclusive` drops `input[j]` from
    its own sum, `reverse` sums from the end (`i >= j`). Exporters build
    position ids this way: `cumsum(attention_mask) - 1`.
  }];
  let arguments = (ins Qcc_Tensor:$input, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "false">:$exclusive,
                   DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_CastOp : Qcc_Op<"cast"> {
  let summary = "Elementwise conversion to the result's element type";
  let description = [{
    ONNX `Cast`: converts each element to the result element type. Float to
    integer truncates toward zero; any non-zero value converts to true (i1).
  }];
  let arguments = (ins Qcc_Tensor:$input);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions and reductions
//===----------------------------------------------------------------------===//

def Qcc_MatMulOp : Qcc_Op<"matmul"> {
  let summary = "Matrix product with numpy batching";
  let description = [{
    ONNX `MatMul` (numpy `matmul`): for ranks >= 2,
    `result[..., m, n] = sum_k lhs[..., m, k] * rhs[..., k, n]`, with the batch
    dimensions broadcast; a rank-1 operand is promoted by inserting a 1 and the
    inserted dimension is removed from the result.
  }];
  let arguments = (ins Qcc_FloatTensor:$lhs, Qcc_FloatTensor:$rhs);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_GemmOp : Qcc_Op<"gemm"> {
  let summary = "General matrix multiply: alpha * A' B' + beta * C";
  let description = [{
    ONNX `Gemm`: `A' = transA ? A^T : A` ([M, K]), `B' = transB ? B^T : B`
    ([K, N]), `result = alpha * A' B' + beta * C` with the optional `c`
    broadcast to [M, N] (numpy rules).
  }];
  let arguments = (ins Qcc_FloatTensor:$a, Qcc_FloatTensor:$b,
                   Optional<Qcc_FloatTensor>:$c,
                   DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.0">:$beta,
                   DefaultValuedAttr<BoolAttr, "false">:$transA,
                   DefaultValuedAttr<BoolAttr, "false">:$transB);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat = "$a `,` $b (`,` $c^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

class Qcc_ReduceOp<string mnemonic, string onnxName, string formula,
                   Type tensorType = Qcc_FloatTensor>
    : Qcc_Op<mnemonic> {
  let summary = "Reduction: " # onnxName;
  let description = "ONNX `" # onnxName # "`: `" # formula # "` over the "
      "dimensions in `axes` (normalized to be non-negative); they are kept with "
      "size 1 when `keepdims` is set and removed otherwise.";
  let arguments = (ins tensorType:$input, DenseI64ArrayAttr:$axes,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs tensorType:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_ReduceMeanOp : Qcc_ReduceOp<"reduce_mean", "ReduceMean",
    "result = sum(input) / (number of reduced elements)">;
def Qcc_ReduceSumOp : Qcc_ReduceOp<"reduce_sum", "ReduceSum",
    "result = sum(input)", Qcc_Tensor>;
def Qcc_ReduceMaxOp : Qcc_ReduceOp<"reduce_max", "ReduceMax",
    "result = max(input)", Qcc_Tensor>;

//===----------------------------------------------------------------------===//
// Shape and data movement glue
//===----------------------------------------------------------------------===//

def Qcc_TransposeOp : Qcc_Op<"transpose"> {
  let summary = "Permutes dimensions";
  let description = [{
    ONNX `Transpose`: `result` dimension `i` is `input` dimension `perm[i]`.
  }];
  let arguments = (ins Qcc_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Qcc_ReshapeOp : Qcc_Op<"reshape"> {
  let summary = "Reshapes to a shape given as a tensor";
  let description = [{
    ONNX `Reshape`: the elements of `input` in row-major order, viewed with
    the dimensions held by `shape`; one -1 is inferred from the element
    count. A 0 copies the input dimension at the same index, unless
    `allowzero` is set: then it is a dimension of size 0. (The importer sets
    `allowzero` only where no element of `shape` is a constant 0, so that
    patterns reading constant targets see the same meaning either way; the
    dynamo exporter sets it on every reshape.)
  }];
  let arguments = (ins Qcc_Tensor:$input, Qcc_IndexVector:$shape,
                   DefaultValuedAttr<BoolAttr, "false">:$allowzero);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat =
      "$input `,` $shape attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Qcc_FlattenOp : Qcc_Op<"flatten"> {
  let summary = "Flattens to a matrix";
  let description = [{
    ONNX `Flatten`: a 2-D view [prod(dims[0:axis]), prod(dims[axis:])].
  }];
  let arguments = (ins Qcc_Tensor:$input, I64Attr:$axis);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_SqueezeOp : Qcc_Op<"squeeze"> {
  let summary = "Removes dimensions of size 1";
  let description = [{
    ONNX `Squeeze` with constant axes: removes the listed dimensions, each of
    which must have size 1.
  }];
  let arguments = (ins Qcc_Tensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Qcc_UnsqueezeOp : Qcc_Op<"unsqueeze"> {
  let summary = "Inserts dimensions of size 1";
  let description = [{
    ONNX `Unsqueeze` with constant axes: `axes` index the result, where each
    listed dimension has size 1 and the others are the input's, in order.
  }];
  let arguments = (ins Qcc_Tensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Qcc_ConcatOp : Qcc_Op<"concat"> {
  let summary = "Concatenates along one dimension";
  let description = [{
    ONNX `Concat`: the inputs, equal in every dimension but `axis`, joined in
    order along `axis`.
  }];
  let arguments = (ins Variadic<Qcc_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Qcc_SplitOp : Qcc_Op<"split"> {
  let summary = "Splits along one dimension into consecutive parts";
  let description = [{
    ONNX `Split` with constant sizes: result `i` holds `sizes[i]` consecutive
    slices of `input` along `axis`, starting after the previous results.
  }];
  let arguments = (ins Qcc_Tensor:$input, I64Attr:$axis,
                   DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Qcc_Tensor>:$results);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_SliceOp : Qcc_Op<"slice"> {
  let summary = "Strided slice with run-time starts and ends";
  let description = [{
    ONNX `Slice`: along each dimension `axes[i]`, keeps indices
    `starts[i], starts[i] + steps[i], ...` up to but excluding `ends[i]`.
    Negative starts and ends count from the end; both are clamped to the
    dimension (ONNX rules). `axes` and `steps` are constant attributes.
  }];
  let arguments = (ins Qcc_Tensor:$input, Qcc_IndexVector:$starts,
                   Qcc_IndexVector:$ends, DenseI64ArrayAttr:$axes,
                   DenseI64ArrayAttr:$steps);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$input `,` $starts `,` $ends attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Qcc_GatherOp : Qcc_Op<"gather"> {
  let summary = "Gathers slices along one dimension by index";
  let description = [{
    ONNX `Gather`: `result[i..., j..., k...] = input[i..., indices[j...], k...]`
    where the `i` run over the dimensions before `axis`; negative indices count
    from the end.
  }];
  let arguments = (ins Qcc_Tensor:$input, Qcc_IntTensor:$indices, I64Attr:$axis);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat =
      "$input `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Qcc_GatherElementsOp : Qcc_Op<"gather_elements"> {
  let summary = "Gather single elements along one axis";
  let description = [{
    ONNX `GatherElements`: the result has the shape of `indices`, and
    `result[..., j, ...] = input[..., indices[..., j, ...], ...]` with the
    index replacing the coordinate along `axis` (negative indices count from
    the end; out-of-range indices are an error at run time).
  }];
  let arguments = (ins Qcc_Tensor:$input, Qcc_IntTensor:$indices,
                   I64Attr:$axis);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$input `,` $indices attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_GatherNdOp : Qcc_Op<"gather_nd"> {
  let summary = "Gather slices by index tuples";
  let description = [{
    ONNX `GatherND`: the last dimension of `indices` (size r) holds index
    tuples into the dimensions [batch_dims, batch_dims + r) of `input`; the
    first `batch_dims` dimensions are shared by `input` and `indices`. The
    result is `indices.shape[:-1] + input.shape[batch_dims + r:]`; negative
    indices count from the end. The dynamo exporter reads padding masks this
    way (`attention_mask[batch_idx, kv_idx]`).
  }];
  let arguments = (ins Qcc_Tensor:$input, Qcc_IntTensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$input `,` $indices attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_ScatterNdOp : Qcc_Op<"scatter_nd"> {
  let summary = "Writes slices at index tuples into a copy of a tensor";
  let description = [{
    ONNX `ScatterND`: the result is `input` with, for every index tuple
    t = `indices[i..., :]` (length r, negative counting from the end),
    `result[t] = updates[i...]` (a slice of `input.shape[r:]`). With
    repeated tuples the last write wins. `reduction` combines instead of
    writing, element by element as `scatter_elements` does ("add", "mul",
    "max", "min"). Legacy exports write masks this way
    (`mask[..., :n] = value`).
  }];
  let arguments = (ins Qcc_Tensor:$input, Qcc_IntTensor:$indices,
                   Qcc_Tensor:$updates,
                   DefaultValuedStrAttr<StrAttr, "none">:$reduction);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$input `,` $indices `,` $updates attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_ScatterElementsOp : Qcc_Op<"scatter_elements"> {
  let summary = "Writes single elements along one axis into a copy of a "
                "tensor";
  let description = [{
    ONNX `ScatterElements`: the result is `input` with, for every position
    p of `indices` (the shape of `updates`, the input's rank),
    `result[q] = updates[p]` where q is p with its coordinate along `axis`
    replaced by `indices[p]` (negative counting from the end; out of range
    is an error at run time). `reduction` combines instead of writing:
    "add", "mul", "max" or "min" (in the order of the positions; "max" keeps
    the element unless it is greater than the update, "min" unless it is
    less, so a NaN update replaces it, as onnxruntime does; for i1, add and
    max are "or", mul and min "and"). With "none" and repeated positions the
    last write wins. Mixture-of-experts exports add each expert's output
    into its tokens' rows this way (`index_add_`).
  }];
  let arguments = (ins Qcc_Tensor:$input, Qcc_IntTensor:$indices,
                   Qcc_Tensor:$updates, I64Attr:$axis,
                   DefaultValuedStrAttr<StrAttr, "none">:$reduction);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$input `,` $indices `,` $updates attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_TileOp : Qcc_Op<"tile"> {
  let summary = "Repeats a tensor along every dimension";
  let description = [{
    ONNX `Tile`: `repeats` holds one non-negative count per dimension of
    `input` (known at run time), the result has dimensions
    `input.shape[i] * repeats[i]` and `result[j...] = input[j % shape...]`.
    Exports build `repeat_interleave` of rotary tables (GPT-J, CodeGen) and
    ALiBi biases from it.
  }];
  let arguments = (ins Qcc_Tensor:$input, Qcc_IndexVector:$repeats);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$input `,` $repeats attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_TopKOp : Qcc_Op<"top_k"> {
  let summary = "The k largest (or smallest) elements along one axis";
  let description = [{
    ONNX `TopK` (versions 11 and 24): `k` is a one-element int64 vector
    (known at run time, at most the size of `axis`). Along `axis`, `values`
    holds the k largest elements (`largest`, else the k smallest) in that
    order and `indices` their positions; of equal elements the one with the
    lower index comes first. NaN counts as greater than every number (and
    equal to NaN), as in onnxruntime. ONNX's `sorted = 0` leaves the order
    unspecified; qcc always returns the sorted order. Mixture-of-experts
    routers pick their experts this way.
  }];
  let arguments = (ins Qcc_Tensor:$input, Qcc_IndexVector:$k, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "true">:$largest);
  let results = (outs Qcc_Tensor:$values, RankedTensorOf<[I64]>:$indices);
  let assemblyFormat = "$input `,` $k attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_OneHotOp : Qcc_Op<"one_hot"> {
  let summary = "One-hot encoding of indices along a new axis";
  let description = [{
    ONNX `OneHot` (version 11): `depth` holds one number d (an integer or a
    float, truncated; known at run time, at least 1) and `values` the pair
    [off, on]. The result has the shape of `indices` with a dimension of
    size d inserted at `axis` (in [-r-1, r] for indices of rank r) and the
    element type of `values`: `on` where the coordinate along `axis` equals
    the index (negative indices count from the end, float indices are
    truncated), `off` elsewhere; an index outside [-d, d) gives a row of
    `off`. Mixture-of-experts exports build their expert masks this way.
  }];
  let arguments = (ins Qcc_Tensor:$indices, Qcc_Tensor:$depth,
                   Qcc_Tensor:$values, I64Attr:$axis);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$indices `,` $depth `,` $values attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_NonZeroOp : Qcc_Op<"non_zero"> {
  let summary = "The coordinates of the non-zero elements";
  let description = [{
    ONNX `NonZero`: an int64 [max(rank, 1), n] tensor whose column j holds
    the coordinates of the j-th non-zero element of `input` in row-major
    order (NaN is non-zero, -0.0 is zero; a scalar counts as a vector of one
    element). n depends on the data: the result's second dimension is known
    only when the op runs, so it is always computed on the host.
    Mixture-of-experts exports find each expert's tokens this way.
  }];
  let arguments = (ins Qcc_Tensor:$input);
  let results = (outs 2DTensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_ShapeOp : Qcc_Op<"shape"> {
  let summary = "The dimensions of a tensor as a 1-D int64 tensor";
  let description = [{
    ONNX `Shape`: `result = dims(input)[start:end]` (python slicing rules).
  }];
  let arguments = (ins AnyRankedTensor:$input,
                   DefaultValuedAttr<I64Attr, "0">:$start,
                   OptionalAttr<I64Attr>:$end);
  let results = (outs Qcc_IndexVector:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Qcc_ConstantOfShapeOp : Qcc_Op<"constant_of_shape"> {
  let summary = "A tensor of a run-time shape filled with one value";
  let description = [{
    ONNX `ConstantOfShape`: a tensor whose dimensions are the elements of
    `shape`, every element equal to the single element of `value`.
  }];
  let arguments = (ins Qcc_IndexVector:$shape, ElementsAttr:$value);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$shape attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Qcc_RangeOp : Qcc_Op<"range"> {
  let summary = "An arithmetic sequence";
  let description = [{
    ONNX `Range`: `result[i] = start + i * delta` for
    `i < max(ceil((limit - start) / delta), 0)`; operands are scalars.
  }];
  let arguments = (ins Qcc_Scalar:$start, Qcc_Scalar:$limit, Qcc_Scalar:$delta);
  let results = (outs 1DTensorOf<[Qcc_Element]>:$result);
  let assemblyFormat = "$start `,` $limit `,` $delta attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Qcc_ExpandOp : Qcc_Op<"expand"> {
  let summary = "Broadcasts to a run-time shape";
  let description = [{
    ONNX `Expand`: `input` broadcast with numpy rules against the shape held
    by `shape` (the result shape is the broadcast of both).
  }];
  let arguments = (ins Qcc_Tensor:$input, Qcc_IndexVector:$shape);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat =
      "$input `,` $shape attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Qcc_TriluOp : Qcc_Op<"trilu"> {
  let summary = "Keeps the upper or lower triangle of the last two dimensions";
  let description = [{
    ONNX `Trilu` with a constant `k`: for `upper`, keeps `input[..., i, j]`
    where `j - i >= k` and sets the rest to zero; otherwise keeps
    `j - i <= k`.
  }];
  let arguments = (ins Qcc_Tensor:$input, BoolAttr:$upper,
                   DefaultValuedAttr<I64Attr, "0">:$k);
  let results = (outs Qcc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Transformer ops
//===----------------------------------------------------------------------===//

def Qcc_LinearOp : Qcc_Op<"linear"> {
  let summary = "Fully connected layer: x W^T + b";
  let description = [{
    `result[..., n] = sum_k input[..., k] * weight[n, k] + bias[n]`.
    `weight` is [N, K] (output channels by input channels, the layout of
    `torch.nn.Linear` and of per-output-channel quantization and 2:4
    sparsity along K); `bias` is optional.

    ```mlir
    %y = qcc.linear %x, %w, %b : (tensor<?x?x64xf32>, tensor<256x64xf32>,
                                  tensor<256xf32>) -> tensor<?x?x256xf32>
    ```
  }];
  let arguments = (ins Qcc_FloatTensor:$input, Qcc_FloatTensor:$weight,
                   Optional<Qcc_FloatTensor>:$bias);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_MoeOp : Qcc_Op<"moe"> {
  let summary = "Mixture-of-experts feed-forward over the routed tokens";
  let description = [{
    Each row t of `input` [T, H] goes through the k experts its router
    picked: with e = `expert_ids`[t, j] (in [0, E)) and g = `gates`[t, j],
    `result[t] = sum_j g * down[e] (act(gate[e] x_t) * (up[e] x_t))`, or
    `sum_j g * down[e] act(up[e] x_t)` without `gate_weight`. `up_weight`
    and `gate_weight` are [E, I, H] and `down_weight` [E, H, I], each
    expert's matrix in the linear layout ([N, K]); `activation` is silu,
    gelu (erf), gelu_tanh or relu. The router (softmax or sigmoid scores,
    top-k, renormalization) and a shared expert stay ordinary ops: they make
    `expert_ids` and `gates`. The kernels run each expert over the rows
    routed to it (a grouped GEMM), never densely over all experts.

    ```mlir
    %y = qcc.moe %x, %ids, %g, %up, %down, %gate {activation = "silu"}
       : (tensor<?x64xf32>, tensor<?x2xi64>, tensor<?x2xf32>,
          tensor<8x128x64xf32>, tensor<8x64x128xf32>, tensor<8x128x64xf32>)
       -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Qcc_FloatTensor:$input,
                   RankedTensorOf<[I64]>:$expert_ids, Qcc_FloatTensor:$gates,
                   Qcc_FloatTensor:$up_weight, Qcc_FloatTensor:$down_weight,
                   Optional<Qcc_FloatTensor>:$gate_weight,
                   StrAttr:$activation);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat = "$input `,` $expert_ids `,` $gates `,` $up_weight `,` "
                       "$down_weight (`,` $gate_weight^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_LayerNormOp : Qcc_Op<"layer_norm"> {
  let summary = "Layer normalization over the last dimension";
  let description = [{
    With `mean` and `var` (biased) over the last dimension of size D:
    `result = (input - mean) / sqrt(var + epsilon) * gamma + beta`;
    `gamma` and the optional `beta` are [D].
  }];
  let arguments = (ins Qcc_FloatTensor:$input, Qcc_FloatTensor:$gamma,
                   Optional<Qcc_FloatTensor>:$beta, F32Attr:$epsilon);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gamma (`,` $beta^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_RmsNormOp : Qcc_Op<"rms_norm"> {
  let summary = "Root-mean-square normalization over the last dimension";
  let description = [{
    `result = input / sqrt(mean(input^2) + epsilon) * gamma`, the mean taken
    over the last dimension of size D; `gamma` is [D].
  }];
  let arguments = (ins Qcc_FloatTensor:$input, Qcc_FloatTensor:$gamma,
                   F32Attr:$epsilon);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gamma attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_GeluOp : Qcc_Op<"gelu", [SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit (erf or tanh form)";
  let description = [{
    `approximate = "none"`: `result = 0.5 x (1 + erf(x / sqrt(2)))`.
    `approximate = "tanh"`:
    `result = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`.
  }];
  let arguments = (ins Qcc_FloatTensor:$input,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Qcc_SiluOp : Qcc_Op<"silu", [SameOperandsAndResultType]> {
  let summary = "Sigmoid linear unit";
  let description = [{ `result = x * sigmoid(x) = x / (1 + exp(-x))`. }];
  let arguments = (ins Qcc_FloatTensor:$input);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Qcc_HadamardOp : Qcc_Op<"hadamard", [SameOperandsAndResultType]> {
  let summary = "Online rotation: each row times QuaRot's randomized Hadamard matrix";
  let description = [{
    `result[..., :] = input[..., :] Q` for the orthogonal Q of width K (the
    last, static dimension) and `seed` defined by format/Rotation.h: sign
    flips, a Hadamard transform over K's power-of-two factor and an
    orthonormal DCT over its odd factor (at most
    `format::Rotation::kMaxOddFactor`). rotate-residual puts it before an
    MLP's down projection, whose weight absorbs Q (W -> W Q), so that the
    projection's int8 input has no outlier channels (QuaRot's online
    Hadamard).
  }];
  let arguments = (ins Qcc_FloatTensor:$input, I64Attr:$seed);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Qcc_SoftmaxOp : Qcc_Op<"softmax", [SameOperandsAndResultType]> {
  let summary = "Softmax along one dimension";
  let description = [{
    ONNX `Softmax` (opset 13): along `axis`,
    `result[i] = exp(x[i] - max(x)) / sum_j exp(x[j] - max(x))`.
  }];
  let arguments = (ins Qcc_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Qcc_AttentionOp : Qcc_Op<"attention"> {
  let summary = "Scaled dot-product attention (MHA or GQA; causal, "
                "bidirectional or masked)";
  let description = [{
    Operands are in the packed layout that the projections produce:
    `query` [B, Sq, H * D], `key` and `value` [B, Skv, Hkv * D], with
    H = `num_heads`, Hkv = `num_kv_heads` (H a multiple of Hkv; grouped-query
    attention when they differ) and D the head size. For each batch b and
    query head h, with kv head g = h / (H / Hkv):

    ```
    S[i, j] = scale * sum_d query[b, i, h*D + d] * key[b, j, g*D + d]
              + mask[b, h, i, j]                 (if mask is given)
    x       = scale * sum_d query[b, i, h*D + d] * key[b, j, g*D + d]
    S[i, j] = x                                  (softcap = 0)
            = softcap * tanh(x / softcap)        (softcap > 0)
    S[i, j] += mask[b, h, i, j]                  (if mask is given)
    S[i, j] = -inf  where causal and j > i + (Skv - Sq)
    S[i, j] = -inf  where window > 0 and j <= i + (Skv - Sq) - window
    P[i, :] = softmax(S[i, :])
    result[b, i, h*D + d] = sum_j P[i, j] * value[b, j, g*D + d]
    ```

    The optional additive `mask` broadcasts (numpy rules) to [B, H, Sq, Skv];
    padding masks arrive this way. `window` (0 = none) is a sliding window
    in HF's convention: query i, at key position i + (Skv - Sq), sees the
    `window` keys ending at its own. `softcap` (0 = none) is Gemma-2's
    logit softcapping. Result: [B, Sq, H * D].
  }];
  let arguments = (ins Qcc_FloatTensor:$query, Qcc_FloatTensor:$key,
                   Qcc_FloatTensor:$value, Optional<Qcc_FloatTensor>:$mask,
                   I64Attr:$num_heads, I64Attr:$num_kv_heads, F32Attr:$scale,
                   BoolAttr:$causal, DefaultValuedAttr<I64Attr, "0">:$window,
                   DefaultValuedAttr<F32Attr, "::llvm::APFloat(0.0f)">:$softcap);
  let results = (outs Qcc_FloatTensor:$result);
  // Without a window or softcap (their defaults, 0).
  let builders = [OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$query,
      "::mlir::Value":$key, "::mlir::Value":$value, "::mlir::Value":$mask,
      "::mlir::IntegerAttr":$num_heads, "::mlir::IntegerAttr":$num_kv_heads,
      "::mlir::FloatAttr":$scale, "::mlir::BoolAttr":$causal), [{
    build($_builder, $_state, result, query, key, value, mask, num_heads,
          num_kv_heads, scale, causal, ::mlir::IntegerAttr(),
          ::mlir::FloatAttr());
  }]>];
  let assemblyFormat = "$query `,` $key `,` $value (`,` $mask^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Quantized ops (docs/QUANTIZATION.md)
//===----------------------------------------------------------------------===//

def Qcc_QuantizeOp : Qcc_Op<"quantize"> {
  let summary = "Quantize activations to int8 (per token or per tensor)";
  let description = [{
    `input` f32 [..., K] -> `result` i8 of the same shape, `scale` f32 and
    `zero_point` i32, both [..., 1] for `per_token` granularity (one per row
    of K values) and [1] for `per_tensor`, as `quant` says (8 bits).

    `symmetric`: `scale = absmax / 127` (the `scale` attribute when given:
    static quantization), `q = clamp(round_half_even(x / scale), -127, 127)`,
    zero point 0. `asymmetric`: `scale = (max - min) / 255` with
    min <= 0 <= max, `zp = round_half_even(-min / scale) - 128`,
    `q = clamp(round_half_even(x / scale) + zp, -128, 127)`. A zero range
    gives scale 1. (127, 255 and -128 are `#qcc.quant`'s range for 8 bits.)

    An f8E4M3FN `result` (FP8 W8A8, docs/QUANTIZATION.md section 11) is
    symmetric only: `scale = absmax / 448` (or the static one), `q =
    e4m3(x / scale)` rounded to nearest even and saturated to +-448
    (format/device/numerics.h), zero point 0.

    An f32 `result` is the int8 code read back (quantize-dequantize, the
    ONNX QDQ form): `(q - zp) * scale` rounded once to f32, with `q`,
    `scale` and `zp` as for an i8 result. W4A8 (docs/QUANTIZATION.md
    section 13) feeds int4 linears so: a backend may compute such a linear
    with int8 x int4 products (runtime/cpu/CpuW4A8Kernels.h).

    `outlier_columns` (ascending, distinct, in [0, K)): those input columns
    are read as 0. They take no part in the scale (and zero point) and
    quantize to the zero point; the `qcc.qlinear` that reads the result
    takes them in float (LLM.int8()-style fallback, docs/QUANTIZATION.md).

    ```mlir
    %q, %s, %z = qcc.quantize %x {quant = #qcc.quant<bits = 8, symmetric, per_token>}
        : (tensor<?x?x64xf32>) -> (tensor<?x?x64xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>)
    ```
  }];
  let arguments = (ins Qcc_FloatTensor:$input, Qcc_QuantAttr:$quant,
                   OptionalAttr<F32Attr>:$scale,
                   OptionalAttr<DenseI64ArrayAttr>:$outlier_columns);
  let results = (outs RankedTensorOf<[I8, F8E4M3FN, F32]>:$result,
                  RankedTensorOf<[F32]>:$scale_out,
                  RankedTensorOf<[I32]>:$zero_point);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The granularity as the runtime spells it ("per_token", "per_tensor").
    ::llvm::StringRef getGranularity() {
      return ::qcc::stringifyQuantGranularity(getQuant().getGranularity());
    }
    bool getAsymmetric() { return !getQuant().isSymmetric(); }
  }];
}

def Qcc_QLinearOp : Qcc_Op<"qlinear", [AttrSizedOperandSegments]> {
  let summary = "int8 x int8 linear with int32 accumulation and a float epilogue";
  let description = [{
    `input` i8 [..., K] with its `input_scale` / `input_zero_point` from
    `qcc.quantize`; `weight` i8 [N, K] with per-output-channel
    `weight_scale` f32 [N] and `weight_sum` i32 [N] = sum_k weight[n, k]:

    ```
    acc[n] = sum_k input[k] * weight[n, k]                    (int32, exact)
    result[n] = float(acc[n] - zero_point * weight_sum[n]) * (input_scale * weight_scale[n]) + bias[n]
    ```

    FP8 (`input` and `weight` f8E4M3FN, from an FP8 quantize; zero point
    and `weight_sum` 0): each product of two E4M3 values is exact in f32,
    and they are summed in f32: `result[n] = acc[n] * (input_scale *
    weight_scale[n]) + bias[n]` with `acc[n] = sum_k input[k] *
    weight[n, k]` (f32, k ascending on the reference path).

    With outliers (LLM.int8()-style fallback, docs/QUANTIZATION.md): the
    float input `outlier_input` f32 [..., K] (what the quantize read), the
    float weight columns `outlier_weight` f32 [N, n] and `outlier_columns`
    c_0 < ... < c_(n-1) in [0, K), whose int8 weight columns are zero (and
    which the quantize read as 0). The float part is summed in the epilogue,
    before the bias, each step rounded to f32 in this order:

    ```
    f[n] = sum_j outlier_input[c_j] * outlier_weight[n, j]   (f32, j = 0, 1, ...)
    result[n] = (float(acc[n] - zero_point * weight_sum[n]) * (input_scale * weight_scale[n]) + f[n]) + bias[n]
    ```

    ```mlir
    %y = qcc.qlinear %xq, %xs, %xz, %w, %ws, %wsum outliers(%x, %wo) {outlier_columns = array<i64: 3, 17>}
        : (...) -> tensor<?x?x256xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I8, F8E4M3FN]>:$input,
                   RankedTensorOf<[F32]>:$input_scale,
                   RankedTensorOf<[I32]>:$input_zero_point,
                   RankedTensorOf<[I8, F8E4M3FN]>:$weight,
                   RankedTensorOf<[F32]>:$weight_scale,
                   RankedTensorOf<[I32]>:$weight_sum,
                   Optional<Qcc_FloatTensor>:$bias,
                   Optional<RankedTensorOf<[F32]>>:$outlier_input,
                   Optional<RankedTensorOf<[F32]>>:$outlier_weight,
                   OptionalAttr<DenseI64ArrayAttr>:$outlier_columns);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $input_scale `,` $input_zero_point `,` $weight `,`
    $weight_scale `,` $weight_sum (`,` $bias^)?
    (`outliers` `(` $outlier_input^ `,` $outlier_weight `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  // Without outliers (the usual qlinear).
  let builders = [OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input,
      "::mlir::Value":$input_scale, "::mlir::Value":$input_zero_point,
      "::mlir::Value":$weight, "::mlir::Value":$weight_scale,
      "::mlir::Value":$weight_sum, "::mlir::Value":$bias), [{
    build($_builder, $_state, result, input, input_scale, input_zero_point,
          weight, weight_scale, weight_sum, bias, ::mlir::Value(),
          ::mlir::Value(), ::mlir::DenseI64ArrayAttr());
  }]>];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The outlier operands and columns: all or none, in range, agreeing
    /// with the weight and with the quantize that feeds `input`.
    ::mlir::LogicalResult verifyOutliers();
  }];
}

def Qcc_Sparse24Op : Qcc_Op<"sparse_2_4"> {
  let summary = "A 2:4 structured-sparse [N, K] weight from its compressed form";
  let description = [{
    The dense weight `result` [N, K] that `values` [N, K/2] and `meta`
    i32 [N, K/32] store: in every group of four consecutive k, the two
    positions `meta` names hold the group's two `values` (in ascending k),
    the other two are zero. The layout is the sparse operand of the tensor
    cores' `mma.sp`, defined once in format/Sparse24.h. A linear or qlinear
    whose weight this op produces runs the sparse GEMM straight from the
    compressed form; anything else may read it as the dense tensor.

    ```mlir
    %w = qcc.sparse_2_4 %values, %meta
        : (tensor<256x32xi8>, tensor<256x2xi32>) -> tensor<256x64xi8>
    ```

    K must be a multiple of 32 (a row's metadata is whole 32-bit words); a
    constant `meta` must name two distinct, ascending positions per group.
  }];
  let arguments = (ins RankedTensorOf<[F32, F16, BF16, I8]>:$values,
                   RankedTensorOf<[I32]>:$meta);
  let results = (outs RankedTensorOf<[F32, F16, BF16, I8]>:$result);
  let assemblyFormat = "$values `,` $meta attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_WeightInt4Op : Qcc_Op<"weight_int4", [AttrSizedOperandSegments]> {
  let summary = "A W4A16 [N, K] weight from its packed int4 form";
  let description = [{
    The float weight `result` [N, K] that `packed` i8 [N, K/2] (two int4
    per byte along K, low nibble = even k), `scales` f16 [N, K/G]
    (G = `group_size`), with GPTQ act-order `perm` i32 [K] and, for the
    asymmetric form, `offsets` f16 [N, K/G] store: stored column j of row n
    is q[n, j] * scales[n, j / G] (q the two's-complement nibble) or, with
    offsets, u[n, j] * scales[n, j / G] + offsets[n, j / G] (u the unsigned
    nibble, 0..15: GGUF Q4_1's "scale + min"), and is the weight's column
    perm[j] (j without `perm`). The layout is defined once in
    format/Int4.h (docs/QUANTIZATION.md, section 7). A linear whose weight
    this op produces computes in float from the dequantized weight (A16:
    activations stay float).

    ```mlir
    %w = qcc.weight_int4 %packed, %scales group_size 128
        : (tensor<256x128xi8>, tensor<256x2xf16>) -> tensor<256x256xf32>
    %a = qcc.weight_int4 %packed, %scales offsets %mins group_size 128
        : (tensor<256x128xi8>, tensor<256x2xf16>, tensor<256x2xf16>) -> tensor<256x256xf32>
    ```

    K must be a static multiple of `group_size` (positive, even); a
    constant `perm` must be a permutation of [0, K); `offsets` has the
    shape of `scales`.
  }];
  let arguments = (ins RankedTensorOf<[I8]>:$packed,
                   RankedTensorOf<[F16]>:$scales,
                   Optional<RankedTensorOf<[I32]>>:$perm,
                   Optional<RankedTensorOf<[F16]>>:$offsets,
                   I64Attr:$group_size);
  let results = (outs RankedTensorOf<[F32, F16, BF16]>:$result);
  let assemblyFormat = "$packed `,` $scales (`,` $perm^)? "
                       "(`offsets` $offsets^)? `group_size` "
                       "$group_size attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Kernel regions (form-kernels)
//===----------------------------------------------------------------------===//

// Qcc_KernelKindAttr: dialects/QccAttrs.td (format/KernelKinds.def's enum).

def Qcc_KernelOp : Op<Qcc_Dialect, "kernel",
    [IsolatedFromAbove, SingleBlock]> {
  let summary = "A group of ops that becomes one GPU kernel";
  let description = [{
    The body computes the results from the block arguments (one per
    operand) with the ops it holds, in their usual semantics; `kind` names
    the device template the emitter instantiates, one of
    format/KernelKinds.def's (spelled as that table spells it); the verifier
    checks the body holds the op the kind is built around (for the 2:4 and
    int4 kinds, a weight view of block arguments: the compressed weight is
    read as it is); `name` is unique in the function. The region is
    isolated from above: weights enter as operands. form-kernels
    (passes/Passes.td) says which groups become which kind.

    ```mlir
    %y = qcc.kernel gemm_i8 "k3" (%xq, %xs, %xz, %w, %ws, %wsum, %b)
        : (...) -> tensor<?x?x1024xf32> {
    ^bb0(...):
      %0 = qcc.qlinear ...
      %1 = qcc.gelu %0 ...
      qcc.yield %1 : tensor<?x?x1024xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$inputs, Qcc_KernelKindAttr:$kind,
                   StrAttr:$sym_name);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "custom<KernelKind>($kind) $sym_name `(` $inputs `)` "
                       "attr-dict `:` functional-type($inputs, $results) $body";
  let hasVerifier = 1;
}

def Qcc_YieldOp : Op<Qcc_Dialect, "yield",
    [Pure, Terminator, HasParent<"KernelOp">, ReturnLike]> {
  let summary = "The results of a kernel region";
  let description = [{ Returns the values of a `qcc.kernel` body. }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def Qcc_KvCacheResource : Resource<"::qcc::KvCacheResource">;

def Qcc_KvAttentionOp : Op<Qcc_Dialect, "kv_attention",
    [MemoryEffects<[MemRead<Qcc_KvCacheResource>,
                    MemWrite<Qcc_KvCacheResource>]>]> {
  let summary = "Causal attention that appends to and reads the KV cache";
  let description = [{
    Operands as `qcc.attention` (packed `query` [B, S, H * D], `key` and
    `value` [B, S, Hkv * D]). Row b is one sequence with `cached_b` tokens
    already in layer `layer`'s cache and `valid_b` real tokens in this call
    (rows are right-padded to S); both are runtime state, not operands:

    1. for t < valid_b, key/value of token t are written to the cache at
       position cached_b + t;
    2. query token t attends causally to cache positions [0, cached_b + t]
       (with `window` W > 0: only to the last W of them, (cached_b + t - W,
       cached_b + t]), with the math of `qcc.attention` (scale, softcap, GQA
       head mapping); with `alibi` (one slope m_h per query head, ALiBi:
       BLOOM, MPT) the score of cache position j is raised by
       m_h * (j - (cached_b + t)) after the softcap, i.e. lowered by m_h
       times the distance;
    3. results for padding tokens are zeros.

    The cache layout (contiguous or paged) is a module attribute that the
    runtime reads from the artifact; see docs/KV_CACHE.md. The op reads and
    writes the cache, so it is not pure: two of them never merge.
  }];
  let arguments = (ins Qcc_FloatTensor:$query, Qcc_FloatTensor:$key,
                   Qcc_FloatTensor:$value, I64Attr:$layer, I64Attr:$num_heads,
                   I64Attr:$num_kv_heads, F32Attr:$scale,
                   DefaultValuedAttr<I64Attr, "0">:$window,
                   DefaultValuedAttr<F32Attr, "::llvm::APFloat(0.0f)">:$softcap,
                   OptionalAttr<DenseF32ArrayAttr>:$alibi);
  let results = (outs Qcc_FloatTensor:$result);
  // Without a window, softcap or ALiBi (their defaults).
  let builders = [OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$query,
      "::mlir::Value":$key, "::mlir::Value":$value, "::mlir::IntegerAttr":$layer,
      "::mlir::IntegerAttr":$num_heads, "::mlir::IntegerAttr":$num_kv_heads,
      "::mlir::FloatAttr":$scale), [{
    build($_builder, $_state, result, query, key, value, layer, num_heads,
          num_kv_heads, scale, ::mlir::IntegerAttr(), ::mlir::FloatAttr(),
          ::mlir::DenseF32ArrayAttr());
  }]>];
  let assemblyFormat = "$query `,` $key `,` $value attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_RotaryOp : Qcc_Op<"rotary"> {
  let summary = "Rotary position embedding, rotate-half form";
  let description = [{
    `input` is [B, S, H * D] with D = `head_dim`. Only the first R =
    `rotary_dim` values of each head rotate (R even, 0 < R <= D; R = D when
    the attribute is absent); the other D - R pass through (partial rotary:
    GPT-NeoX's rotary_pct, StableLM's partial_rotary_factor). `cos` and `sin`
    are [S, R] or [B, S, R]. Per head h and position s, with x = the head's
    first R values and rotate_half(x) = concat(-x[R/2:], x[:R/2]):

    ```
    result[b, s, h*D:h*D+R]     = x * cos[(b,) s] + rotate_half(x) * sin[(b,) s]
    result[b, s, h*D+R:(h+1)*D] = input[b, s, h*D+R:(h+1)*D]
    ```
  }];
  let arguments = (ins Qcc_FloatTensor:$input, Qcc_FloatTensor:$cos,
                   Qcc_FloatTensor:$sin, I64Attr:$head_dim,
                   OptionalAttr<I64Attr>:$rotary_dim);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat = "$input `,` $cos `,` $sin attr-dict `:` "
                       "functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// R: the rotated leading part of each head (head_dim when not set).
    int64_t getRotatedDim() {
      return getRotaryDim() ? (int64_t)*getRotaryDim() : (int64_t)getHeadDim();
    }
  }];
  let hasVerifier = 1;
}

def Qcc_EmbeddingOp : Qcc_Op<"embedding"> {
  let summary = "Embedding lookup: rows of a table by token id";
  let description = [{
    `table` is [V, E]; `result[i..., e] = table[ids[i...], e]`. Ids must lie
    in [0, V).
  }];
  let arguments = (ins Qcc_FloatTensor:$table, Qcc_IntTensor:$ids);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat =
      "$table `,` $ids attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Qcc_LoraOp : Qcc_Op<"lora"> {
  let summary = "Runtime LoRA adapters: each sequence's low-rank update";
  let description = [{
    The update that a linear reading `input` [..., K] gains from the LoRA
    adapter its sequence runs with (S-LoRA / Punica: adapters chosen per
    request, the base weights shared; docs/LORA.md):

    ```
    result[row, n] = sum_r b[j, n, r] * sum_k a[j, r, k] * input[row, k]
    ```

    with j + 1 the adapter of the row's sequence, or result[row, :] = 0 for
    sequences that run without one (adapter 0). `a` [J, R, K] and `b` [J, N,
    R] stack the J adapters compiled into the artifact, their ranks padded
    to R with zeros and PEFT's scaling folded into `b`. The adapters are not
    an operand: the runtime passes one per sequence with each call (the
    batch the KV cache serves; one for every row of a call without a cache),
    the way a kv_attention reads the cache. Rows are input's leading
    dimensions flattened; with B sequences in the call, row i is sequence
    i / (rows / B).

    ```mlir
    %d = qcc.lora %x, %a, %b : (tensor<?x?x64xf32>, tensor<2x4x64xf32>,
                                tensor<2x32x4xf32>) -> tensor<?x?x32xf32>
    %y = qcc.add %linear, %d : ...
    ```
  }];
  let arguments = (ins Qcc_FloatTensor:$input, Qcc_FloatTensor:$a,
                       Qcc_FloatTensor:$b);
  let results = (outs Qcc_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $a `,` $b attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // QCC_OPS_TD
