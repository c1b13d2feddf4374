//===- OnnxContribConverters.cpp - onnxruntime contrib ops -> qcc ops -----===//
//
// The ops that onnxruntime's transformer tooling (the onnxruntime-genai model
// builder, the transformers optimizer) writes and ONNX does not define: the
// com.microsoft contrib ops, and SimplifiedLayerNormalization, which
// onnxruntime registers in the default domain (version 1). Each converter
// decomposes its op into existing qcc ops (rms_norm, add, rotary, attention
// and glue), so the raising passes, the runtime and the code generator see
// nothing new. Semantics are onnxruntime's CPU kernels
// (docs/ContribOperators.md of microsoft/onnxruntime, checked against
// onnxruntime 1.32); a form that cannot be expressed exactly is refused with a
// one-line reason.
//
//===----------------------------------------------------------------------===//
#include "compiler/OnnxConverter.h"

#include "passes/PatternUtils.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <cmath>
#include <limits>
#include <mutex>

#include <fmt/format.h>

using namespace mlir;
using namespace qcc;

using Results = FailureOr<SmallVector<Value>>;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
ArrayRef<int64_t> shapeOf(Value v) { return typeOf(v).getShape(); }
Type elementOf(Value v) { return typeOf(v).getElementType(); }

/// True if the node names output `i` (an omitted optional output is "").
bool wantsOutput(const ConvertContext &c, int i) {
  return i < c.node.output_size() && !c.node.output(i).empty();
}

/// Builds the glue of a decomposition at the node's location, with the
/// result types spelled out (a dynamic size stays dynamic).
struct Glue {
  ConvertContext &c;
  OpBuilder &b = c.builder;
  Type i64 = b.getI64Type(), i1 = b.getI1Type(), f32 = b.getF32Type();

  RankedTensorType t(ArrayRef<int64_t> shape, Type et) {
    return RankedTensorType::get(shape, et);
  }
  /// An int64 constant of the given shape ({} for a scalar).
  Value ints(ArrayRef<int64_t> values, ArrayRef<int64_t> shape) {
    return c.create<ConstantOp>(
        cast<ElementsAttr>(DenseElementsAttr::get(t(shape, i64), values)));
  }
  Value vec(ArrayRef<int64_t> values) {
    return ints(values, {(int64_t)values.size()});
  }
  Value scalar(int64_t v) { return ints({v}, {}); }
  Value floats(float v, Type et) {
    return createSplatConstant(b, c.loc, t({1}, et), v).getResult();
  }
  /// Dimension `i` of `x` as a [1] vector.
  Value dim(Value x, int64_t i) {
    return c.create<ShapeOp>(t({1}, i64), x, b.getI64IntegerAttr(i),
                             b.getI64IntegerAttr(i + 1));
  }
  /// A [1] vector as a scalar.
  Value toScalar(Value v) {
    return c.create<ReshapeOp>(t({}, elementOf(v)), v, ints({}, {0}), false);
  }
  template <typename OpT> Value binary(Value x, Value y, Type et = {}) {
    auto shape = broadcastShapes(shapeOf(x), shapeOf(y));
    SmallVector<int64_t> s =
        succeeded(shape)
            ? *shape
            : SmallVector<int64_t>(
                  std::max(shapeOf(x).size(), shapeOf(y).size()), kDyn);
    return c.create<OpT>(t(s, et ? et : elementOf(x)), x, y);
  }
  Value castTo(Value x, Type et) {
    return c.create<CastOp>(t(shapeOf(x), et), x);
  }
  Value unsqueeze(Value x, ArrayRef<int64_t> axes) {
    SmallVector<int64_t> shape;
    auto in = shapeOf(x);
    size_t k = 0;
    for (int64_t i = 0; i < (int64_t)(in.size() + axes.size()); ++i)
      shape.push_back(llvm::is_contained(axes, i) ? 1 : in[k++]);
    return c.create<UnsqueezeOp>(t(shape, elementOf(x)), x,
                                 b.getDenseI64ArrayAttr(axes));
  }
  /// Reshape to `target` (ONNX rules: 0 copies, -1 infers), typed `shape`.
  Value reshape(Value x, ArrayRef<int64_t> target, ArrayRef<int64_t> shape) {
    return c.create<ReshapeOp>(t(shape, elementOf(x)), x, vec(target), false);
  }
  Value transpose(Value x, ArrayRef<int64_t> perm) {
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(shapeOf(x)[p]);
    return c.create<TransposeOp>(t(shape, elementOf(x)), x,
                                 b.getDenseI64ArrayAttr(perm));
  }
  Value concat(ValueRange xs, int64_t axis) {
    SmallVector<int64_t> shape(shapeOf(xs[0]));
    shape[axis] = 0;
    for (Value x : xs) {
      int64_t d = shapeOf(x)[axis];
      shape[axis] = (d == kDyn || shape[axis] == kDyn) ? kDyn : shape[axis] + d;
    }
    return c.create<ConcatOp>(t(shape, elementOf(xs[0])), xs,
                              b.getI64IntegerAttr(axis));
  }
};

/// The gamma of a norm over the last axis: `scale` must be [D] (or hold D
/// elements in leading 1s, reshaped to [D]).
FailureOr<Value> lastAxisGamma(ConvertContext &c, Glue &g, Value x, Value scale,
                               StringRef name) {
  int64_t d = shapeOf(x).back();
  auto s = shapeOf(scale);
  if (s.empty() ||
      !llvm::all_of(s.drop_back(), [](int64_t n) { return n == 1; }) ||
      (d != kDyn && s.back() != kDyn && s.back() != d)) {
    (void)c.fail(fmt::format("{} must hold one value per element of the "
                             "last axis",
                             name.str()));
    return failure();
  }
  if (s.size() == 1)
    return scale;
  return g.reshape(scale, {-1}, {s.back()});
}

//===----------------------------------------------------------------------===//
// SimplifiedLayerNormalization (default domain, onnxruntime, version 1)
//===----------------------------------------------------------------------===//

/// Y = X / sqrt(mean(X^2 over the last axis) + epsilon) * scale: qcc.rms_norm.
Results convertSimplifiedLayerNormalization(ConvertContext &c) {
  Glue g{c};
  Value x = c.input(0);
  int64_t rank = shapeOf(x).size();
  int64_t axis = c.intAttr("axis", -1);
  if (rank == 0 || (axis != -1 && axis != rank - 1))
    return c.fail(fmt::format("axis = {} is not supported (qcc normalizes over "
                              "the last axis only, axis = -1)",
                              axis));
  if (c.intAttr("stash_type", 1) != 1 && !elementOf(x).isF32())
    return c.fail("stash_type other than 1 (float32) is not supported for a "
                  "non-float32 input");
  if (wantsOutput(c, 1))
    return c.fail("the inv_std_var output is not supported");
  auto gamma = lastAxisGamma(c, g, x, c.input(1), "scale");
  if (failed(gamma))
    return failure();
  return SmallVector<Value>{c.create<RmsNormOp>(
      typeOf(x), x, *gamma,
      c.builder.getF32FloatAttr(c.floatAttr("epsilon", 1e-5f)))};
}

//===----------------------------------------------------------------------===//
// com.microsoft SkipSimplifiedLayerNormalization (version 1)
//===----------------------------------------------------------------------===//

/// sum = input + skip (+ bias); output = rms_norm(sum) * gamma; output 3
/// (input_skip_bias_sum) is `sum`.
Results convertSkipSimplifiedLayerNormalization(ConvertContext &c) {
  Glue g{c};
  if (wantsOutput(c, 1) || wantsOutput(c, 2))
    return c.fail("the mean and inv_std_var outputs are not supported");
  Value x = c.input(0), skip = c.input(1), bias = c.input(3);
  if (!skip || !c.input(2))
    return c.fail("needs input, skip and gamma");
  Value sum = g.binary<AddOp>(x, skip);
  if (bias)
    sum = g.binary<AddOp>(sum, bias);
  if (shapeOf(sum).size() != shapeOf(x).size())
    return c.fail("skip and bias must broadcast to the input's shape");
  auto gamma = lastAxisGamma(c, g, x, c.input(2), "gamma");
  if (failed(gamma))
    return failure();
  Value y = c.create<RmsNormOp>(
      typeOf(sum), sum, *gamma,
      c.builder.getF32FloatAttr(c.floatAttr("epsilon", 1e-12f)));
  return SmallVector<Value>{y, Value(), Value(), sum};
}

//===----------------------------------------------------------------------===//
// com.microsoft GroupQueryAttention (version 1)
//===----------------------------------------------------------------------===//

/// Rotary embedding of `x` [B, S, heads * D] with cos/sin [B, S, R] (the
/// half caches gathered at the positions, repeated twice: qcc.rotary's
/// rotate-half form): the first R values of each head rotate, the rest pass.
/// Interleaved pairs (x[2i], x[2i+1]) rotate the same way after moving evens
/// before odds, and are moved back.
Value rotate(Glue &g, Value x, int64_t heads, int64_t d, int64_t r,
             bool interleaved, Value cosT, Value sinT) {
  auto s = shapeOf(x);
  int64_t bDim = s[0], sDim = s[1];
  Value part = x, pass;
  if (r != d) {
    Value h = g.reshape(x, {0, 0, heads, d}, {bDim, sDim, heads, d});
    auto split = SplitOp::create(
        g.b, g.c.loc,
        TypeRange{g.t({bDim, sDim, heads, r}, elementOf(x)),
                  g.t({bDim, sDim, heads, d - r}, elementOf(x))},
        h, g.b.getI64IntegerAttr(3), g.b.getDenseI64ArrayAttr({r, d - r}));
    part = g.reshape(split.getResult(0), {0, 0, heads * r},
                     {bDim, sDim, heads * r});
    pass = split.getResult(1);
  }
  auto regroup = [&](Value v, int64_t a, int64_t b) {
    Value five = g.reshape(v, {0, 0, heads, a, b}, {bDim, sDim, heads, a, b});
    Value swapped = g.transpose(five, {0, 1, 2, 4, 3});
    return g.reshape(swapped, {0, 0, heads * r}, {bDim, sDim, heads * r});
  };
  if (interleaved)
    part = regroup(part, r / 2, 2);
  part = g.c.create<RotaryOp>(typeOf(part), part, cosT, sinT,
                              g.b.getI64IntegerAttr(r), IntegerAttr());
  if (interleaved)
    part = regroup(part, 2, r / 2);
  if (r == d)
    return part;
  Value h = g.reshape(part, {0, 0, heads, r}, {bDim, sDim, heads, r});
  Value joined = g.concat({h, pass}, 3);
  return g.reshape(joined, {0, 0, heads * d}, typeOf(x).getShape());
}

/// GroupQueryAttention as onnxruntime's CPU kernel computes it, for batch row
/// b with total_b = seqlens_k[b] + 1 tokens and S new ones:
///
///   past_b = max(total_b - S, 0)  (0 on the first prompt; the past buffer
///                                  of P rows holds past_b valid ones)
///   position of new token s:       past_b + s (rotary on Q and K)
///   present[b, :, t] (t < max(total_sequence_length, P)):
///       past[b, :, t] for t < past_b, new[b, :, t - past_b] for
///       t - past_b < S, else 0
///   query s attends to present keys t <= past_b + s (and, with
///   local_window_size W > 0, t > past_b + s - W), softcap * tanh(x /
///   softcap) on the scaled scores when softcap > 0.
///
/// present is a gather from concat(past, new) with those indices; the
/// attention is qcc.attention over present with an additive mask and its
/// softcap attribute.
Results convertGroupQueryAttention(ConvertContext &c) {
  Glue g{c};
  OpBuilder &b = c.builder;
  int64_t H = c.intAttr("num_heads", 0), Hkv = c.intAttr("kv_num_heads", 0);
  if (H <= 0 || Hkv <= 0 || H % Hkv != 0)
    return c.fail("num_heads must be a positive multiple of kv_num_heads");
  // What qcc cannot express.
  if (c.intAttr("smooth_softmax", 0) != 0)
    return c.fail("smooth_softmax is not supported");
  if (c.intAttr("qk_output", 0) != 0 || wantsOutput(c, 3))
    return c.fail("the output_qk output is not supported");
  if (c.intAttr("sliding_window_cache", 0) != 0)
    return c.fail("sliding_window_cache = 1 (a window-sized, evicting KV "
                  "buffer) is not supported");
  if (c.intAttr("causal", 1) != 1)
    return c.fail("causal = 0 (bidirectional) is not supported");
  for (const char *name : {"k_quant_type", "v_quant_type"})
    if (const auto *a = c.attr(name); a && a->s() != "NONE")
      return c.fail(fmt::format("a quantized KV cache ({} = {}) is not "
                                "supported",
                                name, a->s()));
  static const char *const optionalInputs[] = {
      "position_ids", "attention_bias", "head_sink",    "k_scale",
      "v_scale",      "q_norm_weight",  "k_norm_weight"};
  for (auto [i, name] : llvm::enumerate(optionalInputs))
    if (c.input(9 + i))
      return c.fail(fmt::format("the {} input is not supported", name));

  Value q = c.input(0), k = c.input(1), v = c.input(2);
  Value pastK = c.input(3), pastV = c.input(4);
  Value seqlens = c.input(5), totalLen = c.input(6);
  if (!q || !seqlens || !totalLen)
    return c.fail("needs query, seqlens_k and total_sequence_length");
  if (!elementOf(q).isF32())
    return c.fail("only float32 attention is supported");
  if (shapeOf(q).size() != 3 || shapeOf(q)[2] == kDyn)
    return c.fail("query must be [batch, sequence, hidden] with a static "
                  "hidden size");
  if (bool(k) != bool(v))
    return c.fail("key and value must be both given or both omitted");
  if (bool(pastK) != bool(pastV))
    return c.fail("past_key and past_value must be both given or both "
                  "omitted");
  int64_t width = shapeOf(q)[2], D;
  int64_t bDim = shapeOf(q)[0], sDim = shapeOf(q)[1];
  Type f32 = g.f32;
  if (!k) { // packed QKV
    if (width % (H + 2 * Hkv) != 0)
      return c.fail("packed QKV width is not (num_heads + 2 * kv_num_heads) "
                    "* head_size");
    D = width / (H + 2 * Hkv);
    auto split =
        SplitOp::create(b, c.loc,
                        TypeRange{g.t({bDim, sDim, H * D}, f32),
                                  g.t({bDim, sDim, Hkv * D}, f32),
                                  g.t({bDim, sDim, Hkv * D}, f32)},
                        q, b.getI64IntegerAttr(2),
                        b.getDenseI64ArrayAttr({H * D, Hkv * D, Hkv * D}));
    q = split.getResult(0);
    k = split.getResult(1);
    v = split.getResult(2);
  } else {
    if (width % H != 0)
      return c.fail("query width is not a multiple of num_heads");
    D = width / H;
    for (Value x : {k, v})
      if (shapeOf(x).size() != 3 || shapeOf(x)[2] != Hkv * D ||
          !elementOf(x).isF32())
        return c.fail("key and value must be float32 [batch, sequence, "
                      "kv_num_heads * head_size]");
  }
  if (pastK)
    for (Value x : {pastK, pastV}) {
      auto s = shapeOf(x);
      if (!elementOf(x).isF32())
        return c.fail("only a float32 KV cache is supported");
      if (s.size() != 4 || (s[1] != kDyn && s[1] != Hkv) ||
          (s[3] != kDyn && s[3] != D))
        return c.fail("past_key and past_value must be [batch, kv_num_heads, "
                      "past_sequence, head_size] (BNSH)");
    }

  // Index arithmetic in int64: past_b, and the positions past_b + s.
  Value seqLen = g.dim(q, 1); // [1] = S
  Value total = g.binary<AddOp>(g.castTo(seqlens, g.i64), g.vec({1})); // [B]
  if (shapeOf(total).size() != 1)
    return c.fail("seqlens_k must be [batch]");
  Value past =
      g.binary<MaxOp>(g.binary<SubOp>(total, seqLen), g.vec({0})); // [B]
  Value steps = c.create<RangeOp>(g.t({sDim}, g.i64), g.scalar(0),
                                  g.toScalar(seqLen), g.scalar(1)); // [S]
  Value pos = g.binary<AddOp>(g.unsqueeze(past, {1}),
                              g.unsqueeze(steps, {0})); // [B, S]

  if (c.intAttr("do_rotary", 0) != 0) {
    Value cosCache = c.input(7), sinCache = c.input(8);
    if (!cosCache || !sinCache)
      return c.fail("do_rotary = 1 needs cos_cache and sin_cache");
    auto cs = shapeOf(cosCache);
    if (cs.size() != 2 || cs[1] == kDyn || shapeOf(sinCache) != cs ||
        !elementOf(cosCache).isF32() || !elementOf(sinCache).isF32())
      return c.fail("cos_cache and sin_cache must be float32 [max_sequence, "
                    "rotary_dim / 2] of one static shape");
    int64_t r = 2 * cs[1];
    if (r == 0 || r > D)
      return c.fail(
          fmt::format("rotary dimension {} does not fit head size {}", r, D));
    bool interleaved = c.intAttr("rotary_interleaved", 0) != 0;
    Value cosHalf = c.create<GatherOp>(g.t({bDim, sDim, cs[1]}, f32), cosCache,
                                       pos, b.getI64IntegerAttr(0));
    Value sinHalf = c.create<GatherOp>(g.t({bDim, sDim, cs[1]}, f32), sinCache,
                                       pos, b.getI64IntegerAttr(0));
    Value cosT = g.concat({cosHalf, cosHalf}, 2);
    Value sinT = g.concat({sinHalf, sinHalf}, 2);
    q = rotate(g, q, H, D, r, interleaved, cosT, sinT);
    k = rotate(g, k, Hkv, D, r, interleaved, cosT, sinT);
  }

  // present = rows of concat(past, new) [B, Hkv, P + S, D] picked per batch
  // row, zero beyond its total length.
  auto heads = [&](Value x) { // [B, S, Hkv * D] -> [B, Hkv, S, D]
    return g.transpose(g.reshape(x, {0, 0, Hkv, D}, {bDim, sDim, Hkv, D}),
                       {0, 2, 1, 3});
  };
  Value newK = heads(k), newV = heads(v);
  Value pastLen = pastK ? g.dim(pastK, 2) : g.vec({0}); // [1] = P
  Value catK = pastK ? g.concat({pastK, newK}, 2) : newK;
  Value catV = pastV ? g.concat({pastV, newV}, 2) : newV;
  Value totalSeq = g.reshape(g.castTo(totalLen, g.i64), {1}, {1});
  Value presentLen = g.binary<MaxOp>(totalSeq, pastLen); // [1] = T
  Value t = c.create<RangeOp>(g.t({kDyn}, g.i64), g.scalar(0),
                              g.toScalar(presentLen), g.scalar(1)); // [T]
  Value tRow = g.unsqueeze(t, {0});                                 // [1, T]
  Value pastCol = g.unsqueeze(past, {1});                           // [B, 1]
  Value offset = g.binary<SubOp>(tRow, pastCol); // t - past_b
  Value inPast = g.binary<LessOp>(tRow, pastCol, g.i1);
  Value index = c.create<WhereOp>(
      g.t({bDim, kDyn}, g.i64), inPast, tRow,
      g.binary<AddOp>(offset, pastLen)); // t, or P + t - past_b
  Value last = g.binary<SubOp>(g.binary<AddOp>(pastLen, seqLen), g.vec({1}));
  index = g.binary<MinOp>(index, last); // in range where not valid, too
  Value valid = g.unsqueeze(g.binary<LessOp>(offset, seqLen, g.i1), {1, 3});
  Value index4 =
      c.create<ExpandOp>(g.t({bDim, Hkv, kDyn, D}, g.i64),
                         g.unsqueeze(index, {1, 3}), g.vec({1, Hkv, 1, D}));
  Value zero = g.floats(0.0f, f32);
  auto present = [&](int out, Value cat) {
    Value rows = c.create<GatherElementsOp>(g.t({bDim, Hkv, kDyn, D}, f32), cat,
                                            index4, b.getI64IntegerAttr(2));
    return c.create<WhereOp>(c.resultType(out, {bDim, Hkv, kDyn, D}, f32),
                             valid, rows, zero);
  };
  Value presentK = present(1, catK), presentV = present(2, catV);

  // Mask [B, 1, S, T]: key t is visible to query s where t <= past_b + s
  // (and t > past_b + s - W in a local window).
  Value qPos = g.unsqueeze(pos, {2});                     // [B, S, 1]
  Value key = g.unsqueeze(t, {0, 1});                     // [1, 1, T]
  Value visible = g.binary<LessEqualOp>(key, qPos, g.i1); // [B, S, T]
  int64_t window = c.intAttr("local_window_size", -1);
  if (window > 0)
    visible = g.binary<AndOp>(
        visible,
        g.binary<GreaterOp>(key, g.binary<SubOp>(qPos, g.vec({window})), g.i1));
  Value mask =
      c.create<WhereOp>(g.t(shapeOf(visible), f32), visible, zero,
                        g.floats(-std::numeric_limits<float>::infinity(), f32));
  mask = g.unsqueeze(mask, {1}); // [B, 1, S, T]

  float scale = c.floatAttr("scale", 0.0f);
  if (scale == 0.0f)
    scale = 1.0f / std::sqrt((float)D);
  float softcap = c.floatAttr("softcap", 0.0f);
  auto outType = c.resultType(0, {bDim, sDim, H * D}, f32);
  auto packed = [&](Value p) { // [B, Hkv, T, D] -> [B, T, Hkv * D]
    return g.reshape(g.transpose(p, {0, 2, 1, 3}), {0, 0, Hkv * D},
                     {bDim, kDyn, Hkv * D});
  };
  Value out = c.create<AttentionOp>(
      outType, q, packed(presentK), packed(presentV), mask,
      b.getI64IntegerAttr(H), b.getI64IntegerAttr(Hkv),
      b.getF32FloatAttr(scale), b.getBoolAttr(false), b.getI64IntegerAttr(0),
      b.getF32FloatAttr(std::max(softcap, 0.0f)));
  return SmallVector<Value>{out, presentK, presentV};
}

} // namespace

const std::vector<OnnxConverter> &qcc::onnxContribConverters() {
  static const std::vector<OnnxConverter> table = {
      {"SimplifiedLayerNormalization",
       {1},
       convertSimplifiedLayerNormalization,
       ""},
      {"SkipSimplifiedLayerNormalization",
       {1},
       convertSkipSimplifiedLayerNormalization,
       "com.microsoft"},
      {"GroupQueryAttention", {1}, convertGroupQueryAttention, "com.microsoft"},
  };
  return table;
}

void qcc::registerContribSchemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (onnx::OpSchemaRegistry::Schema("SimplifiedLayerNormalization", 1, ""))
      return; // a newer ONNX library knows it
    const std::vector<std::string> floats = {"tensor(float)", "tensor(float16)",
                                             "tensor(bfloat16)",
                                             "tensor(double)"};
    onnx::OpSchema sln;
    sln.SetName("SimplifiedLayerNormalization")
        .SetDomain("")
        .SinceVersion(1)
        .Attr("axis", "", onnx::AttributeProto::INT, int64_t(-1))
        .Attr("epsilon", "", onnx::AttributeProto::FLOAT, 1e-5f)
        .Attr("stash_type", "", onnx::AttributeProto::INT, int64_t(1))
        .Input(0, "X", "", "T")
        .Input(1, "scale", "", "V")
        .Output(0, "Y", "", "V")
        .Output(1, "inv_std_var", "", "U", onnx::OpSchema::Optional)
        .TypeConstraint("T", floats, "")
        .TypeConstraint("U", {"tensor(float)", "tensor(double)"}, "")
        .TypeConstraint("V", floats, "")
        .TypeAndShapeInferenceFunction([](onnx::InferenceContext &ctx) {
          onnx::propagateElemTypeFromInputToOutput(ctx, 1, 0);
          if (onnx::hasInputShape(ctx, 0))
            onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
        });
    onnx::RegisterSchema(sln);
  });
}
