//===- OnnxContribConverters.cpp - onnxruntime contrib ops -> qcc ops -----===//
//
// The ops that onnxruntime's transformer tooling (the onnxruntime-genai model
// builder, the transformers optimizer) writes and ONNX does not define: the
// com.microsoft contrib ops, and SimplifiedLayerNormalization, which
// onnxruntime registers in the default domain (version 1). Each converter
// decomposes its op into existing qcc ops (rms_norm, layer_norm, add, rotary,
// attention, matmul and glue), so the raising passes, the runtime and the code
// generator see nothing new; MatMulNBits' n-bit weights are dequantized at
// import into a float weight. Semantics are onnxruntime's CPU kernels
// (docs/ContribOperators.md of microsoft/onnxruntime, checked against
// onnxruntime 1.32); a form that cannot be expressed exactly is refused with a
// one-line reason.
//
//===----------------------------------------------------------------------===//
#include "compiler/OnnxConverter.h"

#include "dialects/QccConstants.h"
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
/// Bounds on sizes read from attributes, so that products of them cannot
/// overflow (and stay within what the importer accepts).
constexpr int64_t kMaxHeads = int64_t(1) << 16;
constexpr int64_t kMaxSize = int64_t(1) << 40;

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
// com.microsoft SkipSimplifiedLayerNormalization, SkipLayerNormalization
// (version 1)
//===----------------------------------------------------------------------===//

/// sum = input + skip (+ bias), as onnxruntime adds them; output =
/// norm(sum) * gamma (+ beta); output 3 (input_skip_bias_sum) is `sum`. The
/// norm is rms_norm for SkipSimplifiedLayerNormalization (bias: input 3) and
/// layer_norm for SkipLayerNormalization (beta: input 3, bias: input 4).
Results convertSkipNorm(ConvertContext &c, bool layerNorm) {
  Glue g{c};
  if (wantsOutput(c, 1) || wantsOutput(c, 2))
    return c.fail("the mean and inv_std_var outputs are not supported");
  Value x = c.input(0), skip = c.input(1), bias = c.input(layerNorm ? 4 : 3);
  if (shapeOf(x).empty())
    return c.fail("the input must have rank 1 or more");
  Value sum = g.binary<AddOp>(x, skip);
  if (bias)
    sum = g.binary<AddOp>(sum, bias);
  if (shapeOf(sum).size() != shapeOf(x).size())
    return c.fail("skip and bias must broadcast to the input's shape");
  auto gamma = lastAxisGamma(c, g, x, c.input(2), "gamma");
  if (failed(gamma))
    return failure();
  Value beta = layerNorm ? c.input(3) : Value();
  if (beta) {
    auto b = lastAxisGamma(c, g, x, beta, "beta");
    if (failed(b))
      return failure();
    beta = *b;
  }
  auto epsilon = c.builder.getF32FloatAttr(c.floatAttr("epsilon", 1e-12f));
  Value y =
      layerNorm
          ? c.create<LayerNormOp>(typeOf(sum), sum, *gamma, beta, epsilon)
          : c.create<RmsNormOp>(typeOf(sum), sum, *gamma, epsilon);
  return SmallVector<Value>{y, Value(), Value(), sum};
}

//===----------------------------------------------------------------------===//
// com.microsoft GroupQueryAttention (version 1)
//===----------------------------------------------------------------------===//

/// Rotary embedding of `x` [B, S, heads * D] with cos/sin [B, S, R] or [S, R]
/// (the half caches gathered at the positions, repeated twice: qcc.rotary's
/// rotate-half form): the first R values of each head rotate, the rest pass
/// (qcc.rotary's rotary_dim). Interleaved pairs (x[2i], x[2i+1]) rotate the
/// same way between gathers that move evens before odds and back
/// (createInterleavedRotary).
Value rotate(Glue &g, Value x, int64_t d, int64_t r, bool interleaved,
             Value cosT, Value sinT) {
  if (interleaved)
    return createInterleavedRotary(g.b, g.c.loc, x, cosT, sinT, d, r);
  return g.c.create<RotaryOp>(typeOf(x), x, cosT, sinT,
                              g.b.getI64IntegerAttr(d),
                              r == d ? IntegerAttr() : g.b.getI64IntegerAttr(r));
}

/// qcc.rotary's cos and sin: the half caches [P, R / 2] gathered at the
/// positions `pos` ([B, S] or [S]), each repeated twice along the last axis.
std::pair<Value, Value> rotaryTables(Glue &g, Value cosCache, Value sinCache,
                                     Value pos) {
  SmallVector<int64_t> shape(shapeOf(pos));
  shape.push_back(shapeOf(cosCache)[1]);
  auto table = [&](Value cache) {
    Value half = g.c.create<GatherOp>(g.t(shape, elementOf(cache)), cache, pos,
                                      g.b.getI64IntegerAttr(0));
    return g.concat({half, half}, shape.size() - 1);
  };
  return {table(cosCache), table(sinCache)};
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
  if (H <= 0 || Hkv <= 0 || H % Hkv != 0 || H > kMaxHeads)
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
    if (D == 0)
      return c.fail("packed QKV width is less than one value per head");
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
    if (D == 0)
      return c.fail("query width is less than one value per head");
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
    auto [cosT, sinT] = rotaryTables(g, cosCache, sinCache, pos);
    q = rotate(g, q, D, r, interleaved, cosT, sinT);
    k = rotate(g, k, D, r, interleaved, cosT, sinT);
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

//===----------------------------------------------------------------------===//
// com.microsoft RotaryEmbedding (version 1)
//===----------------------------------------------------------------------===//

/// onnxruntime's CPU kernel: the input is [B, S, H * D] or [B, H, S, D]; D is
/// hidden / num_heads when num_heads is set, else twice cos_cache's width, and
/// R = rotary_embedding_dim (else D) with cos_cache, sin_cache [P, R / 2].
/// Token s of batch row b is at position position_ids[b, s] ([B, S]), or
/// position_ids[0] + s (one offset, [1]); the first R values of each head
/// rotate by the caches' rows there, in rotate-half (interleaved = 0) or
/// pairwise (interleaved = 1) form; the other D - R pass. qcc.rotary.
Results convertRotaryEmbedding(ConvertContext &c) {
  Glue g{c};
  Value x = c.input(0), pos = c.input(1);
  Value cosCache = c.input(2), sinCache = c.input(3);
  if (!x || !pos || !cosCache || !sinCache)
    return c.fail("needs input, position_ids, cos_cache and sin_cache");
  if (c.intAttr("is_packed_batching", 0) != 0)
    return c.fail("is_packed_batching = 1 (ragged packed input) is not "
                  "supported");
  if (c.floatAttr("scale", 1.0f) != 1.0f)
    return c.fail("scale other than 1 is not supported (onnxruntime's CPU "
                  "kernel ignores it, its spec applies it)");
  Type et = elementOf(x);
  auto cs = shapeOf(cosCache), xs = shapeOf(x);
  if (cs.size() != 2 || cs[1] == kDyn || shapeOf(sinCache) != cs ||
      elementOf(cosCache) != et || elementOf(sinCache) != et)
    return c.fail("cos_cache and sin_cache must be [max_position, "
                  "rotary_dim / 2] of one static shape and the input's type");
  bool bnsh = xs.size() == 4;
  if ((xs.size() != 3 && !bnsh) || xs.back() == kDyn || (bnsh && xs[1] == kDyn))
    return c.fail("input must be [batch, sequence, hidden] or [batch, heads, "
                  "sequence, head_size] with static head sizes");
  int64_t hidden = bnsh ? xs[1] * xs[3] : xs[2];
  int64_t H = c.intAttr("num_heads", 0);
  int64_t R = c.intAttr("rotary_embedding_dim", 0);
  if (R > 0 && H <= 0)
    return c.fail("rotary_embedding_dim needs num_heads");
  int64_t D = H > 0 ? hidden / H : 2 * cs[1];
  if (D <= 0 || hidden % D != 0 || (bnsh && D != xs[3]))
    return c.fail(fmt::format("hidden size {} is not num_heads x head size "
                              "{}",
                              hidden, D));
  H = hidden / D;
  if (R <= 0)
    R = D;
  if (R % 2 != 0 || R > D || cs[1] != R / 2)
    return c.fail(fmt::format("rotary dimension {} does not fit head size {} "
                              "and cos_cache width {}",
                              R, D, cs[1]));
  if (!elementOf(pos).isInteger(64))
    return c.fail("position_ids must be int64");
  int64_t bDim = xs[0], sDim = xs[bnsh ? 2 : 1];
  auto ps = shapeOf(pos);
  if (ps.size() <= 1 && typeOf(pos).getNumElements() == 1) {
    // One offset: positions offset + s, the same for every batch row.
    Value seqLen = g.dim(x, bnsh ? 2 : 1);
    Value steps = c.create<RangeOp>(g.t({sDim}, g.i64), g.scalar(0),
                                    g.toScalar(seqLen), g.scalar(1));
    pos = g.binary<AddOp>(steps, g.reshape(pos, {1}, {1}));
  } else if (ps.size() != 2) {
    return c.fail("position_ids must be [batch, sequence] or one offset [1]");
  }
  auto [cosT, sinT] = rotaryTables(g, cosCache, sinCache, pos);
  bool interleaved = c.intAttr("interleaved", 0) != 0;
  if (!bnsh)
    return SmallVector<Value>{rotate(g, x, D, R, interleaved, cosT, sinT)};
  // [B, H, S, D] -> [B, S, H * D] and back.
  Value packed = g.reshape(g.transpose(x, {0, 2, 1, 3}), {0, 0, H * D},
                           {bDim, sDim, H * D});
  Value y = rotate(g, packed, D, R, interleaved, cosT, sinT);
  y = g.reshape(y, {0, 0, H, D}, {bDim, sDim, H, D});
  return SmallVector<Value>{g.transpose(y, {0, 2, 1, 3})};
}

//===----------------------------------------------------------------------===//
// com.microsoft MatMulNBits (version 1)
//===----------------------------------------------------------------------===//

/// Code `i` of a row of `bits`-wide codes packed into bytes, low bits first.
unsigned packedCode(const char *row, int64_t i, int64_t bits) {
  unsigned byte = (unsigned char)row[i * bits / 8];
  return (byte >> (i * bits % 8)) & ((1u << bits) - 1);
}

/// The values of constant float input `i` (f16/bf16 widened), or failure
/// naming it.
FailureOr<std::vector<float>> floatConstant(ConvertContext &c, size_t i,
                                            StringRef name, size_t count) {
  auto values = getF32Values(getConstant(c.input(i)));
  if (!values || values->size() != count) {
    (void)c.fail(fmt::format("{} must be a float constant of {} values",
                             name.str(), count));
    return failure();
  }
  return std::move(*values);
}

/// Y = A @ W^T (+ bias) with W [N, K] stored block-quantized along K:
///   W[n, k] = (q[n, k] - zp[n, k / block_size]) * scale[n, k / block_size]
/// where q are the bits-wide codes of B [N, k_blocks, block_size * bits / 8]
/// (low bits first), scale is [N, k_blocks] (or flat), and zp is packed like
/// B per row of N (uint8 [N, ceil(k_blocks * bits / 8)]), unpacked (float
/// [N, k_blocks]) or, absent, 2^(bits - 1). W is dequantized here, exactly
/// (one rounding of the product), into a constant [K, N] of A's type and
/// emitted as MatMul (+ Add): raise-linear makes a qcc.linear of it, W8A8
/// requantizes it. accuracy_level is the least precision onnxruntime may
/// compute A in (4: int8 on its CPU); qcc computes in float32.
Results convertMatMulNBits(ConvertContext &c) {
  Glue g{c};
  int64_t K = c.intAttr("K", 0), N = c.intAttr("N", 0);
  int64_t bits = c.intAttr("bits", 4), block = c.intAttr("block_size", 0);
  if (bits != 2 && bits != 4 && bits != 8)
    return c.fail(fmt::format("bits = {} is not supported (2, 4 or 8)", bits));
  if (K <= 0 || N <= 0 || block < 16 || (block & (block - 1)) != 0 ||
      K > kMaxSize || N > kMaxSize || block > kMaxSize)
    return c.fail("needs K, N and block_size (a power of two, at least 16)");
  if (c.node.input_size() > 4 && !c.node.input(4).empty())
    return c.fail("the g_idx input (deprecated) is not supported");
  if (c.intAttr("weight_prepacked", 0) != 0)
    return c.fail("a prepacked B (weight_prepacked) is not supported");
  Value a = c.input(0);
  const PackedTensor *packedB = c.packedInput(1);
  if (!a || !packedB || !c.input(2))
    return c.fail("B must be a uint8 initializer (a constant), with A and "
                  "scales given");
  Type et = elementOf(a);
  auto as = shapeOf(a);
  if (!isa<FloatType>(et) || as.empty() ||
      (as.back() != kDyn && as.back() != K))
    return c.fail(fmt::format("A must be a float tensor [..., K = {}]", K));
  int64_t nBlocks = (K + block - 1) / block, blob = block * bits / 8;
  if (packedB->shape != std::vector<int64_t>{N, nBlocks, blob})
    return c.fail(fmt::format("B must be uint8 [N, k_blocks, blob] = [{}, {}, "
                              "{}]",
                              N, nBlocks, blob));
  auto scales = floatConstant(c, 2, "scales", N * nBlocks);
  if (failed(scales))
    return failure();
  // Zero points per (n, block), as floats.
  int64_t zpRow = (nBlocks * bits + 7) / 8;
  std::vector<float> zp(N * nBlocks, float(1 << (bits - 1)));
  if (const PackedTensor *packedZp = c.packedInput(3)) {
    if ((int64_t)packedZp->bytes.size() != N * zpRow)
      return c.fail(fmt::format("packed zero_points must hold N x "
                                "ceil(k_blocks x bits / 8) = {} bytes",
                                N * zpRow));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < nBlocks; ++j)
        zp[n * nBlocks + j] =
            packedCode(packedZp->bytes.data() + n * zpRow, j, bits);
  } else if (c.input(3)) {
    auto values = floatConstant(c, 3, "zero_points", N * nBlocks);
    if (failed(values))
      return failure();
    zp = std::move(*values);
  }
  std::vector<float> w(K * N); // [K, N], as MatMul's B
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < nBlocks; ++j) {
      const char *row = packedB->bytes.data() + (n * nBlocks + j) * blob;
      float scale = (*scales)[n * nBlocks + j], z = zp[n * nBlocks + j];
      for (int64_t i = 0; i < block && j * block + i < K; ++i)
        w[(j * block + i) * N + n] =
            ((float)packedCode(row, i, bits) - z) * scale;
    }
  auto wType = g.t({K, N}, et);
  Value weight = c.create<ConstantOp>(
      makeFloatElements(wType, w, c.node.input(1) + "_dequantized"));
  SmallVector<int64_t> shape(as.drop_back());
  shape.push_back(N);
  Value y = c.create<MatMulOp>(g.t(shape, et), a, weight);
  if (Value bias = c.input(5))
    y = g.binary<AddOp>(y, bias);
  return SmallVector<Value>{y};
}

} // namespace

const std::vector<OnnxConverter> &qcc::onnxContribConverters() {
  static const std::vector<OnnxConverter> table = {
      {"SimplifiedLayerNormalization",
       {1},
       {"rr", "ro"},
       convertSimplifiedLayerNormalization,
       ""},
      {"SkipSimplifiedLayerNormalization",
       {1},
       {"rrro", "rooo"},
       [](ConvertContext &c) { return convertSkipNorm(c, false); },
       "com.microsoft"},
      {"SkipLayerNormalization",
       {1},
       {"rrroo", "rooo"},
       [](ConvertContext &c) { return convertSkipNorm(c, true); },
       "com.microsoft"},
      // query; key, value, past_key, past_value; seqlens_k and
      // total_sequence_length; cos_cache, sin_cache and seven more optional.
      {"GroupQueryAttention",
       {1},
       {"roooorrooooooooo", "rooo"},
       convertGroupQueryAttention,
       "com.microsoft"},
      {"RotaryEmbedding",
       {1},
       {"rrrr"},
       convertRotaryEmbedding,
       "com.microsoft"},
      {"MatMulNBits",
       {1},
       {"rrrooo"},
       convertMatMulNBits,
       "com.microsoft",
       /*readsPacked=*/true},
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
