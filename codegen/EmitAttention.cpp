//===- EmitAttention.cpp - attention regions -> CUDA C++ ------------------===//
//
// attention and kv_attention (with fused rotary, sliding window, softcap,
// ALiBi, contiguous or paged KV cache of f32, f16, int8 or fp8): the prefill
// tile kernel (attention_prefill.cuh), or in a one-token-per-row entry point
// the split-K decode kernel and its combine step (attention_decode.cuh).
//
// Tiles (asserted in EmitterTest):
//   attention prefill: AttnPrefillLaunch, HeadDim 64: <64, 64, 64, 4>;
//                    other multiples of 32: <D, 32, 64, 4>;
//   attention decode (qcc.tokens_per_row = 1): AttnDecodeLaunch<D, 4, 256>
//                    split + combine.
//
//===----------------------------------------------------------------------===//
#include "codegen/EmitCommon.h"
#include "dialects/QccRuntimeAttrs.h"

#include "codegen/kernels/attention_config.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace qcc::codegen::detail {
namespace {

/// The attention launch configurations for one head size, read from the
/// types the units instantiate (attention_config.h).
struct AttnTiles {
  int headDim;
  /// Prefill: AttnPrefillLaunch<D, blockQ, blockKV, prefillWarps>.
  int blockQ, blockKV, prefillWarps, prefillThreads, prefillSmem;
  /// Decode: AttnDecodeLaunch<D, decodeWarps, chunk> split + combine.
  int decodeWarps, chunk, decodeThreads, decodeSmem, combineThreads;
  template <int D> static constexpr AttnTiles of() {
    using Prefill = qcc::AttnPrefillLaunch<D, D == 64 ? 64 : 32, 64, 4>;
    using Split = qcc::AttnDecodeLaunch<D, 4, 256>;
    using Combine = qcc::AttnDecodeCombineLaunch<D>;
    return {D,
            Prefill::kBlockQ,
            Prefill::kBlockKV,
            Prefill::kNumWarps,
            Prefill::kBlockThreads,
            Prefill::kDynamicSmemBytes,
            Split::kNumWarps,
            Split::kChunkSize,
            Split::kBlockThreads,
            Split::kDynamicSmemBytes,
            Combine::kBlockThreads};
  }
};
/// One entry per head size the kernels take (multiples of 32 up to 256).
constexpr AttnTiles kAttnTiles[] = {
    AttnTiles::of<32>(),  AttnTiles::of<64>(),  AttnTiles::of<96>(),
    AttnTiles::of<128>(), AttnTiles::of<160>(), AttnTiles::of<192>(),
    AttnTiles::of<224>(), AttnTiles::of<256>()};

const AttnTiles *attnTiles(int64_t headDim) {
  for (const AttnTiles &t : kAttnTiles)
    if (t.headDim == headDim)
      return &t;
  return nullptr;
}

} // namespace

Unit emitAttention(const Region &r, DictionaryAttr kvCache) {
  auto plain = r.find<qcc::AttentionOp>();
  auto kvAttn = r.find<qcc::KvAttentionOp>();
  if (!plain && !kvAttn)
    return unsupported("attention region without attention");
  bool kv = !plain;
  Operation *attn = kv ? kvAttn.getOperation() : plain.getOperation();
  if (!kv && plain.getMask())
    return unsupported("no CUDA kernel for masked attention yet");
  int64_t H = kv ? kvAttn.getNumHeads() : plain.getNumHeads();
  int64_t Hkv = kv ? kvAttn.getNumKvHeads() : plain.getNumKvHeads();
  float scale = (kv ? kvAttn.getScale() : plain.getScale()).convertToFloat();
  // Sliding window and logit softcap (0 = none), baked into the unit.
  int64_t window = kv ? kvAttn.getWindow() : plain.getWindow();
  llvm::APFloat softcap = kv ? kvAttn.getSoftcap() : plain.getSoftcap();
  // The fields of the parameter struct that are not wrapper parameters.
  FieldValues fields;
  fields.values = {{"window", std::to_string(window)},
                   {"softcap", floatLiteral(softcap.convertToFloat())}};
  // ALiBi slopes (kv_attention only; plain attention carries its bias in
  // the mask), one per query head, as a device array in the unit.
  std::string alibiTable;
  if (std::optional<ArrayRef<float>> slopes =
          kv ? kvAttn.getAlibi() : std::nullopt) {
    alibiTable = "__device__ const float qcc_alibi[] = {";
    for (float m : *slopes)
      alibiTable += floatLiteral(m) + ", ";
    alibiTable += "};\n";
    fields.values.push_back({"alibi", "qcc_alibi"});
  }
  Value qIn = kv ? kvAttn.getQuery() : plain.getQuery();
  Value kIn = kv ? kvAttn.getKey() : plain.getKey();
  Value vIn = kv ? kvAttn.getValue() : plain.getValue();
  int64_t width = lastDim(qIn);
  if (ShapedType::isDynamic(width) || width % H != 0)
    return unsupported("attention with a dynamic head size");
  int64_t D = width / H;
  const AttnTiles *tiles = attnTiles(D);
  if (!tiles)
    return unsupported(
        llvm::formatv("attention with head size {0} (needs a multiple of 32 "
                      "<= 256)",
                      D)
            .str());
  std::string T = cType(tensorOf(qIn).getElementType());
  if (T != "float")
    return unsupported("attention over non-f32 tensors");
  // Fused rotary: q and k are rotated on the fly, from one cos/sin pair over
  // the first rotary_dim values of each head (RopeTables; batch_stride from
  // the tables' shape at run time).
  auto rq = qIn.getDefiningOp<qcc::RotaryOp>();
  auto rk = kIn.getDefiningOp<qcc::RotaryOp>();
  bool rotary = rq || rk;
  int ci = -1, si = -1;
  if (rotary) {
    if (!rq || !rk)
      return unsupported("rotary on only one of q and k");
    if (rq.getCos() != rk.getCos() || rq.getSin() != rk.getSin())
      return unsupported("q and k rotated with different cos/sin tables");
    if ((int64_t)rq.getHeadDim() != D || (int64_t)rk.getHeadDim() != D)
      return unsupported("rotary head size differs from the attention's");
    if (rq.getRotatedDim() != rk.getRotatedDim())
      return unsupported("q and k rotated over different rotary_dim");
    if (!tensorOf(rq.getCos()).getElementType().isF32())
      return unsupported("rotary tables of a type other than f32");
    qIn = rq.getInput();
    kIn = rk.getInput();
    ci = r.argIndex(rq.getCos());
    si = r.argIndex(rq.getSin());
  }
  int qi = r.argIndex(qIn), ki = r.argIndex(kIn), vi = r.argIndex(vIn);
  if (qi < 0 || ki < 0 || vi < 0 || (rotary && (ci < 0 || si < 0)))
    return unsupported("attention operands computed inside the region");
  // The kernel writes only the attention output (rotated q/k stay inside).
  if (r.kernel.getNumResults() != 1 || r.resultIndex(attn->getResult(0)) != 0)
    return unsupported("attention region must yield only the attention output");
  std::string ropeInit = "  p.rope.cos = nullptr; p.rope.sin = "
                         "nullptr; p.rope.batch_stride = 0; "
                         "p.rope.rotary_dim = 0;\n";
  KernelInterface ropeIface;
  if (rotary) {
    ropeInit = "  p.rope.cos = rope_cos; p.rope.sin = rope_sin; "
               "p.rope.batch_stride = rope_stride; p.rope.rotary_dim = " +
               std::to_string(rq.getRotatedDim()) + ";\n";
    // Tables [B, S, W] with B > 1 advance by S * W per sequence; shared
    // tables ([1, S, W] or [S, W]) do not.
    TensorRef cos = TensorRef::operand(ci);
    Expr stride = 0;
    if (tensorOf(rq.getCos()).getRank() == 3)
      stride =
          Expr::select(Expr::gt(Expr::dim(cos, 0), 1),
                       Expr::mul({Expr::dim(cos, 1), Expr::dim(cos, 2)}), 0);
    ropeIface.pointer("const float", Param::operand("rope_cos", ci))
        .pointer("const float", Param::operand("rope_sin", si))
        .scalar(Param::int64("rope_stride", stride));
  }
  const char *rotaryArg = rotary ? "true" : "false";

  std::string cache = "qcc::NoCache", storage = "float";
  bool paged = true;
  int64_t layer = kv ? kvAttn.getLayer() : int64_t(0);
  int64_t blockTokens = 0;
  if (kv) {
    if (!kvCache)
      return unsupported("kv_attention without a module qcc.kv_cache");
    auto config = kvCacheConfig(kvCache);
    if (!config)
      return unsupported("kv_attention: " + llvm::toString(config.takeError()));
    paged = config->layout == "paged";
    storage = config->isInt8()   ? "signed char"
              : config->isFp8() ? "unsigned char"
              : config->isF16() ? "__half"
                                : "float";
    cache = std::string(paged ? "qcc::PagedCache<" : "qcc::ContiguousCache<") +
            storage + ">";
    blockTokens = config->blockTokens;
  }

  // Cache parameters (shared by prefill and decode).
  std::string cacheInit;
  KernelInterface cacheIface;
  if (kv) {
    cacheInit = "  p.cache.k_scales = k_scales; p.cache.v_scales = v_scales;\n"
                "  p.cache.v_token_scales = v_token_scales;\n"
                "  p.cache.layers = layers; p.cache.layer = layer;\n"
                "  p.cache.kv_heads = p.num_kv_heads; p.cache.head_dim = " +
                std::to_string(D) + ";\n";
    cacheInit += paged ? "  p.cache.pool = cache; p.cache.block_table = table;\n"
                         "  p.cache.max_blocks_per_seq = table_stride;\n"
                         "  p.cache.block_tokens = tokens;\n"
                       : "  p.cache.data = cache; p.cache.slot_of_row = table;\n"
                         "  p.cache.max_tokens = tokens;\n";
    cacheIface
        .pointer("const float",
                 Param::runtimeValue("k_scales", RuntimeValue::KvKScales))
        .pointer("const float",
                 Param::runtimeValue("v_scales", RuntimeValue::KvVScales))
        .pointer("float", Param::runtimeValue("v_token_scales",
                                              RuntimeValue::KvVTokenScales))
        .scalar(Param::runtimeValue("layers", RuntimeValue::KvLayers))
        .scalar(Param::int32("layer", layer))
        .pointer(storage, Param::runtimeValue("cache", paged
                                                           ? RuntimeValue::KvPool
                                                           : RuntimeValue::KvData))
        .pointer("const int",
                 Param::runtimeValue("table", paged ? RuntimeValue::KvBlockTable
                                                    : RuntimeValue::KvSlotOfRow))
        .scalar(paged ? Param::runtimeValue("table_stride",
                                            RuntimeValue::KvMaxBlocksPerSeq)
                      : Param::int32("table_stride", 0))
        .scalar(paged
                    ? Param::int32("tokens", blockTokens)
                    : Param::runtimeValue("tokens", RuntimeValue::KvMaxTokens));
  }

  // rope and cache are structs of their own (rotary.cuh, kv_cache.cuh),
  // filled field by field.
  fields.statements = {{"rope", ropeInit}, {"cache", cacheInit}};

  Unit u;
  Expr batch = u.symbol("batch", Expr::dim(TensorRef::operand(qi), 0));
  Expr seqQ = u.symbol("seq_q", Expr::dim(TensorRef::operand(qi), 1));
  Expr seqKv = u.symbol("seq_kv", Expr::dim(TensorRef::operand(ki), 1));

  if (kv && r.decode) {
    const int warps = tiles->decodeWarps, chunk = tiles->chunk;
    Expr splits = u.symbol(
        "splits",
        Expr::ceilDiv(Expr::runtimeSize(format::RuntimeSize::MaxContextLen),
                      chunk));
    Expr bh = Expr::mul({batch, H});
    uint32_t ml = u.launch.addWorkspace("ml", Expr::mul({bh, splits, 2 * 4}));
    uint32_t acc = u.launch.addWorkspace("acc", Expr::mul({bh, splits, D * 4}));
    KernelInterface splitIface;
    splitIface.pointer("const float", Param::operand("q", qi))
        .pointer("const float", Param::operand("k", ki))
        .pointer("const float", Param::operand("v", vi))
        .pointer("float", Param::result("out", 0))
        .pointer("float", Param::workspaceBuffer("ws_ml", ml))
        .pointer("float", Param::workspaceBuffer("ws_acc", acc))
        .scalar(Param::int32("batch", batch))
        .scalar(Param::int32("num_heads", H))
        .scalar(Param::int32("num_kv_heads", Hkv))
        .scalar(Param::float32("scale", scale))
        .pointer("const int",
                 Param::runtimeValue("cached_lens", RuntimeValue::CachedLens))
        .pointer("const int",
                 Param::runtimeValue("valid_lens", RuntimeValue::ValidLens))
        .append(cacheIface)
        .append(ropeIface);
    KernelInterface combineIface;
    combineIface.pointer("const float", Param::workspaceBuffer("ws_ml", ml))
        .pointer("const float", Param::workspaceBuffer("ws_acc", acc))
        .pointer("float", Param::result("out", 0))
        .scalar(Param::int32("num_heads", H))
        .scalar(Param::int32("splits", splits));
    int threads = tiles->decodeThreads, combineThreads = tiles->combineThreads;
    static constexpr ParamsField kDecodeFields[] = {
        QCC_PARAMS_FIELDS(QCC_ATTN_DECODE_PARAMS)};
    std::string fill = assignFields(kDecodeFields, splitIface, fields);
    u.source = [=](const std::string &entry) {
      return header({"attention_decode.cuh"}) + alibiTable +
             llvm::formatv("typedef qcc::AttnDecodeParams<float, float, {0}> "
                           "Params;\n",
                           cache)
                 .str() +
             wrapperHead(std::to_string(threads), entry, splitIface) +
             "  Params p;\n" + fill +
             llvm::formatv("  qcc::attentionDecodeSplit<{0}, {1}, {2}, {3}>(p);"
                           "\n}\n",
                           D, warps, chunk, rotaryArg)
                 .str() +
             wrapperHead(std::to_string(D), entry + "_combine", combineIface) +
             forwardTo(llvm::formatv("qcc::attentionDecodeCombineRow<{0}, float>",
                                     D)
                           .str(),
                       combineIface);
    };
    LaunchStep split = step("", threads, splitIface, splits, H, batch,
                            tiles->decodeSmem);
    split.name = "split";
    LaunchStep combine = step("_combine", combineThreads, combineIface, H, batch);
    combine.name = "combine";
    combine.when = Expr::gt(splits, 1);
    u.launch.steps.push_back(std::move(split));
    u.launch.steps.push_back(std::move(combine));
    return u;
  }

  // Prefill (or plain attention without a cache).
  int bq = tiles->blockQ, bkv = tiles->blockKV, warps = tiles->prefillWarps;
  bool causal = kv || plain.getCausal();
  int smem = tiles->prefillSmem;
  KernelInterface iface;
  iface.pointer("const float", Param::operand("q", qi))
      .pointer("const float", Param::operand("k", ki))
      .pointer("const float", Param::operand("v", vi))
      .pointer("float", Param::result("out", 0))
      .scalar(Param::int32("batch", batch))
      .scalar(Param::int32("seq_q", seqQ))
      .scalar(Param::int32("seq_kv", seqKv))
      .scalar(Param::int32("num_heads", H))
      .scalar(Param::int32("num_kv_heads", Hkv))
      .scalar(Param::float32("scale", scale))
      .pointer("const int",
               kv ? Param::runtimeValue("cached_lens", RuntimeValue::CachedLens)
                  : Param::null("cached_lens"))
      .pointer("const int",
               kv ? Param::runtimeValue("valid_lens", RuntimeValue::ValidLens)
                  : Param::null("valid_lens"))
      .append(cacheIface)
      .append(ropeIface);
  int threads = tiles->prefillThreads;
  static constexpr ParamsField kPrefillFields[] = {
      QCC_PARAMS_FIELDS(QCC_ATTN_PREFILL_PARAMS)};
  std::string fill = assignFields(kPrefillFields, iface, fields);
  u.source = [=](const std::string &entry) {
    return header({"attention_prefill.cuh"}) + alibiTable +
           llvm::formatv("typedef qcc::AttnPrefillParams<float, float, {0}> "
                         "Params;\n",
                         cache)
               .str() +
           wrapperHead(std::to_string(threads), entry, iface) +
           "  extern __shared__ float qcc_smem[];\n"
           "  Params p;\n" +
           fill +
           llvm::formatv("  qcc::attentionPrefillTile<{0}, {1}, {2}, {3}, {4}, "
                         "{5}>(p, qcc_smem);\n}\n",
                         D, bq, bkv, warps, causal ? "true" : "false",
                         rotaryArg)
               .str();
  };
  LaunchStep s = step("", threads, iface, Expr::ceilDiv(seqQ, bq), H, batch,
                      smem);
  u.launch.steps.push_back(std::move(s));
  return u;
}


} // namespace qcc::codegen::detail
