//===- EmitGemm.cpp - GEMM and GEMV regions -> CUDA C++ -------------------===//
//
// The six GEMM kinds (gemm_i8, gemm_f16, their 2:4 sparse forms,
// gemm_i8_mixed, gemm_w4): a wrapper that builds the GEMM's parameters and
// its epilogue chain (epilogue.cuh) and calls the mainloop of gemm_i8.cuh,
// gemm_f16.cuh, gemm_sp.cuh, gemv_i8.cuh or gemv_w4.cuh.
//
// Tiles (asserted in EmitterTest):
//   gemm_i8 prefill: N >= 1024: GemmI8Config<128, 128, 64, 64, 64, 4>
//                    (128 threads, 81,920 B smem); else <64, 64, 64, 32, 32,
//                    4> (128 threads, 40,960 B);
//   gemm_i8 in a function with qcc.tokens_per_row = 1 (kv-cache-layout's
//                    decode entry point): two entries, one launched per call
//                    by the launch record's `when`: up to 8 rows
//                    GemvI8Config<8, 4, 1, 4> (one column per warp, 4 K
//                    chunks in flight per lane), more rows <8, 4, 2> (entry
//                    suffix _rows), both with grid.y = ceil(M / 8) row chunks
//                    (the wrapper offsets pointers by 8 rows per y); measured
//                    on an H200, docs/GPU_NOTES.md. Weight shapes in
//                    codegen/tuning/gemv_sm90.inc (bench/gemv_tuning.py from
//                    gemv_bench's sweep) take the entries measured fastest
//                    there (a wide gate or LM head: <8, 4, 2, 1> up to 8 rows);
//   gemm_f16: same tiles as gemm_i8 (2-byte elements); over f32 tensors
//                    the weight is converted to f16 at upload, and a first
//                    step converts x into workspace.x16 (CastF32ToF16Config,
//                    256 threads), except in a dense decode GEMV, which
//                    rounds x to f16 as it loads it (no cast launch);
//   grouped decode GEMV (several plain GEMMs over one input, form-kernels'
//                    q, k, v): the decode GEMV's two tiles, member g over
//                    its own range of grid.x's column blocks;
//   gemm_i8_mixed (a qlinear with float outlier columns): gemm_i8's tiles
//                    and parameters plus xf (the f32 input) and wo (the f32
//                    weight columns) after wsum; the epilogue's
//                    AddOutliers<OutlierColumns<c...>> (the columns are in
//                    the type) adds their product after the dequantization;
//   gemm_i8_sp / gemm_f16_sp (2:4 sparse weight, gemm_sp.cuh): the same
//                    families with GemmSpI8Config / GemmSpF16Config, BlockK
//                    128: N >= 1024: <128, 128, 128, 64, 64, 3> (int8 92,160
//                    B, f16 165,888 B); else <64, 64, 128, 32, 32, 4 (int8) /
//                    3 (f16)>; decode: GemvSpI8Config / GemvSpF16Config<8,
//                    4, 2>. Parameters: x, wv (values), wmeta, then as the
//                    dense GEMM's;
//   gemm_w4 (gemv_w4.cuh, one output channel per warp): decode
//                    GemvW4Config<4, 4, 2> (up to 4 rows per block), prefill
//                    <16, 8, 1> (M over grid.y = ceil(M / 16)); K and the
//                    group size must be multiples of 32, else unsupported.
//
//===----------------------------------------------------------------------===//
#include "codegen/EmitCommon.h"
#include "codegen/Emitter.h"

#include "codegen/kernels/gemm_config.h"

#include "llvm/Support/FormatVariadic.h"

#include <cassert>
#include <optional>
#include <string_view>
#include <utility>

using namespace mlir;

namespace qcc::codegen::detail {
namespace {

/// A GEMM tile configuration: the type a unit instantiates (its C++
/// spelling) and the launch facts read from that type (gemm_config.h).
struct GemmTile {
  const char *type;
  int threads, smem, blockM, blockN;
  template <class Cfg> static constexpr GemmTile of(const char *type) {
    return {type, Cfg::kThreads, Cfg::kSmemBytes, Cfg::kBlockM, Cfg::kBlockN};
  }
};
// Spelled by the type's own tokens, so spelling and sizes cannot disagree.
#define QCC_GEMM_TILE(...)                                                     \
  GemmTile::of<qcc::__VA_ARGS__>("qcc::" #__VA_ARGS__)
/// The tiles the heuristics pick from (this file's header), each {int8, f16}.
constexpr GemmTile kGemmWide[2] = {
    QCC_GEMM_TILE(GemmI8Config<128, 128, 64, 64, 64, 4>),
    QCC_GEMM_TILE(GemmF16Config<128, 128, 64, 64, 64, 4>)};
constexpr GemmTile kGemmNarrow[2] = {
    QCC_GEMM_TILE(GemmI8Config<64, 64, 64, 32, 32, 4>),
    QCC_GEMM_TILE(GemmF16Config<64, 64, 64, 32, 32, 4>)};
/// Decode GEMVs, picked at run time by the rows of the call (bench/gemv_bench.cu
/// on an H200, docs/GPU_NOTES.md): up to 8 rows, one column per warp with 4 K
/// chunks in flight per lane; more rows (row chunks over grid.y), two columns
/// per warp, one chunk: its fewer, lighter blocks keep the chunks that share a
/// weight row resident together, so the weight comes from L2 after the first.
constexpr GemmTile kGemv[2] = {QCC_GEMM_TILE(GemvI8Config<8, 4, 1, 4>),
                               QCC_GEMM_TILE(GemvF16Config<8, 4, 1, 4>)};
constexpr GemmTile kGemvRows[2] = {QCC_GEMM_TILE(GemvI8Config<8, 4, 2>),
                                   QCC_GEMM_TILE(GemvF16Config<8, 4, 2>)};
/// The 2:4 sparse GEMM (gemm_sp.cuh): same families, BlockK 128 (a row's
/// metadata for one K tile is one 16-byte cp.async).
constexpr GemmTile kGemmSpWide[2] = {
    QCC_GEMM_TILE(GemmSpI8Config<128, 128, 128, 64, 64, 3>),
    QCC_GEMM_TILE(GemmSpF16Config<128, 128, 128, 64, 64, 3>)};
constexpr GemmTile kGemmSpNarrow[2] = {
    QCC_GEMM_TILE(GemmSpI8Config<64, 64, 128, 32, 32, 4>),
    QCC_GEMM_TILE(GemmSpF16Config<64, 64, 128, 32, 32, 3>)};
constexpr GemmTile kGemvSp[2] = {QCC_GEMM_TILE(GemvSpI8Config<8, 4, 2>),
                                 QCC_GEMM_TILE(GemvSpF16Config<8, 4, 2>)};
/// gemm_w4 (gemv_w4.cuh): decode, up to 4 rows per block; prefill, M tiled
/// by 16 rows per block (one output channel per warp).
constexpr GemmTile kGemmW4[2] = {QCC_GEMM_TILE(GemvW4Config<4, 4, 2>),
                                 QCC_GEMM_TILE(GemvW4Config<16, 8, 1>)};
/// Decode GEMV entries measured faster than kGemv / kGemvRows for their
/// weight shape on an H200 (bench/gemv_tuning.py wrote the table from
/// bench/gemv_bench.cu's sweep; docs/GPU_NOTES.md). The sm_80 binaries share
/// the choice: it is made once per unit, from the Hopper measurement.
struct TunedGemv {
  bool i8;
  int rows; ///< 1: the entry for up to 8 rows; 32: the row-chunk entry
  int64_t N, K;
  GemmTile tile;
};
#define QCC_GEMV_TUNED(Cfg, Rows, N, K, ...)                                   \
  {std::string_view(#Cfg) == "GemvI8Config", Rows, N, K,                       \
   QCC_GEMM_TILE(Cfg<__VA_ARGS__>)},
constexpr TunedGemv kTunedGemvSm90[] = {
#include "codegen/tuning/gemv_sm90.inc"
};
#undef QCC_GEMV_TUNED
#undef QCC_GEMM_TILE
constexpr bool tunedGemvsChunkRowsAlike() {
  for (const TunedGemv &t : kTunedGemvSm90)
    if (t.tile.blockM != kGemv[0].blockM || (t.rows != 1 && t.rows != 32))
      return false;
  return kGemv[0].blockM == kGemvRows[0].blockM;
}
static_assert(tunedGemvsChunkRowsAlike(),
              "both decode GEMV entries must chunk rows alike");

/// The decode GEMV's two entries (up to 8 rows, more rows) for a [N, K]
/// weight: the tuning table's where it measured one, else the defaults.
std::pair<const GemmTile *, const GemmTile *> decodeGemvTiles(bool i8,
                                                              int64_t N,
                                                              int64_t K) {
  const GemmTile *one = &kGemv[i8 ? 0 : 1], *rows = &kGemvRows[i8 ? 0 : 1];
  for (const TunedGemv &t : kTunedGemvSm90)
    if (t.i8 == i8 && t.N == N && t.K == K)
      (t.rows == 1 ? one : rows) = &t.tile;
  return {one, rows};
}
static_assert(kGemmWide[1].smem <= kMaxDynamicSmemSm80 &&
                  kGemmNarrow[1].smem <= kMaxDynamicSmemSm80 &&
                  kGemmSpWide[1].smem <= kMaxDynamicSmemSm80 &&
                  kGemmSpNarrow[1].smem <= kMaxDynamicSmemSm80,
              "GEMM tiles must fit sm_80");

const GemmTile &gemmW4Tile(bool decode) { return kGemmW4[decode ? 0 : 1]; }

const GemmTile &gemmTile(bool i8, bool sparse, bool decode, int64_t N) {
  const GemmTile *family =
      sparse ? (decode ? kGemvSp : N >= 1024 ? kGemmSpWide : kGemmSpNarrow)
             : (decode ? kGemv : N >= 1024 ? kGemmWide : kGemmNarrow);
  return family[i8 ? 0 : 1];
}

/// The float epilogue after the GEMM (+ dequant): activation and residual.
struct Epilogue {
  std::string act; // "", "qcc::GeluErf", "qcc::GeluTanh", "qcc::Silu"
  int factor = -1;   // operand index of a same-shape factor (after act)
  int residual = -1; // operand index of the residual (after the factor)
  Value result;      // the yielded value
  std::string error;
};

Epilogue gemmEpilogue(const Region &r, Operation *gemm) {
  Epilogue e;
  Value cur = gemm->getResult(0);
  for (Operation *op = gemm->getNextNode(); op && !isa<qcc::YieldOp>(op);
       op = op->getNextNode()) {
    // The chain applies act, factor, residual in that order (form-kernels
    // forms no other).
    if (e.factor >= 0 || e.residual >= 0) {
      if (!isa<qcc::AddOp>(op) || e.residual >= 0) {
        e.error = "'" + op->getName().getStringRef().str() +
                  "' after a GEMM epilogue's product or residual add";
        return e;
      }
    }
    if (auto g = dyn_cast<qcc::GeluOp>(op)) {
      e.act = g.getApproximate() == "tanh" ? "qcc::GeluTanh" : "qcc::GeluErf";
    } else if (isa<qcc::SiluOp>(op)) {
      e.act = "qcc::Silu";
    } else if (isa<qcc::MulOp, qcc::AddOp>(op)) {
      // The other operand: a region operand of the running value's shape.
      Value other = op->getOperand(0) == cur ? op->getOperand(1)
                                             : op->getOperand(0);
      int index = tensorOf(other) == tensorOf(cur) ? r.argIndex(other) : -1;
      bool mul = isa<qcc::MulOp>(op);
      (mul ? e.factor : e.residual) = index;
      if (index < 0) {
        e.error = mul ? "product with an unsupported operand"
                      : "residual add of an unsupported operand";
        return e;
      }
    } else {
      e.error = "'" + op->getName().getStringRef().str() +
                "' in a GEMM epilogue";
      return e;
    }
    cur = op->getResult(0);
  }
  e.result = cur;
  if (r.resultIndex(cur) != 0 || r.kernel.getNumResults() != 1)
    e.error = "GEMM region must yield only its final value";
  return e;
}

} // namespace

namespace {

/// A GEMM's epilogue chain (epilogue.cuh's qcc::Chain), stage by stage in
/// order: its type and its constructor arguments.
struct ChainBuilder {
  std::string types, inits;
  void add(const std::string &type, const std::string &init) {
    types += (types.empty() ? "" : ", ") + type;
    inits += (inits.empty() ? "" : ", ") + init;
  }
  /// `add` of a stage constructed from `args` ("{...}").
  void stage(const std::string &type, const std::string &args) {
    add(type, type + "{" + args + "}");
  }
  std::string declaration() const {
    return "qcc::Chain<" + types + "> epi(" + inits + ");";
  }
};

/// The int8 GEMM's first stage: dequantization by the input's scale and zero
/// point (`xs`, `xz`: per token, else per tensor) and the weight's channel
/// scales and sums (`ws<id>`, `wsum<id>`).
void dequantStage(ChainBuilder &c, bool perToken, const std::string &id) {
  std::string st = perToken ? "1" : "0";
  c.stage("qcc::DequantPerTokenPerChannel",
          "xs, " + st + ", xz, " + st + ", ws" + id + ", wsum" + id);
}
/// AddBias / StoreF32 or StoreF16 over element type `t` ("float", "__half").
void biasStage(ChainBuilder &c, const std::string &t, const std::string &bias) {
  c.stage("qcc::AddBias<" + (t == "float" ? std::string() : t) + ">", bias);
}
void storeStage(ChainBuilder &c, const std::string &t, const std::string &y,
                const std::string &ld) {
  c.stage(t == "float" ? "qcc::StoreF32" : "qcc::StoreF16", y + ", " + ld);
}

/// A grouped decode GEMV: form-kernels' sibling GEMMs over one input (q, k
/// and v of one normed row) in one launch. Member g owns a range of column
/// blocks of grid.x (its own weight, dequantization, bias and result) and
/// runs the single GEMV's mainloop over it with its block index within the
/// range; rows in 8-row chunks over grid.y, the second entry (_rows) above
/// 8 rows, as a single decode GEMV.
Unit emitGemmGroup(const Region &r, ArrayRef<Operation *> gemms) {
  if (!r.decode)
    return unsupported("grouped GEMMs outside a decode entry point");
  bool i8 = isa<qcc::QLinearOp>(gemms.front());
  auto input = [&](Operation *g) {
    return i8 ? cast<qcc::QLinearOp>(g).getInput()
              : cast<qcc::LinearOp>(g).getInput();
  };
  Value x = input(gemms.front());
  int xi = r.argIndex(x);
  int64_t K = lastDim(x);
  Type xt = tensorOf(x).getElementType();
  if (xi < 0 || ShapedType::isDynamic(K))
    return unsupported("grouped GEMMs over an input computed inside the region");
  // f32 activations are rounded to f16 as they are loaded (as in a single
  // decode GEMV of an f32 linear); f16 ones are read as they are.
  bool castOnLoad = !i8 && xt.isF32();
  if (!i8 && !castOnLoad && !xt.isF16())
    return unsupported("no CUDA kernel for bf16 grouped GEMMs yet");
  int elemBytes = i8 ? 1 : 2;
  if ((K * elemBytes) % 16 != 0)
    return unsupported("grouped GEMMs with K * element bytes not a multiple of 16");
  std::string elem = i8 ? "qcc::int8_t" : "__half";

  Unit u;
  Expr M = u.symbol("M", Expr::rows(TensorRef::operand(xi)));
  KernelInterface iface;
  iface.pointer(i8 ? "const qcc::int8_t"
                   : castOnLoad ? "const float" : "const __half",
                Param::operand("x", xi));
  bool perToken = false;
  if (i8) {
    auto q0 = cast<qcc::QLinearOp>(gemms.front());
    int xs = r.argIndex(q0.getInputScale()), xz = r.argIndex(q0.getInputZeroPoint());
    if (xs < 0 || xz < 0)
      return unsupported("GEMM operands computed inside the region");
    perToken = tensorOf(q0.getInputScale()).getRank() == tensorOf(x).getRank();
    iface.pointer("const float", Param::operand("xs", xs));
    iface.pointer("const qcc::int32_t", Param::operand("xz", xz));
  }
  struct Member {
    int64_t N;
    ChainBuilder chain;
  };
  std::vector<Member> members;
  for (auto [g, gemm] : llvm::enumerate(gemms)) {
    std::string id = std::to_string(g);
    if (input(gemm) != x || gemm->getResult(0).getUses().empty())
      return unsupported("grouped GEMMs over different inputs");
    Value w = i8 ? cast<qcc::QLinearOp>(gemm).getWeight()
                 : cast<qcc::LinearOp>(gemm).getWeight();
    Value bias = i8 ? cast<qcc::QLinearOp>(gemm).getBias()
                    : cast<qcc::LinearOp>(gemm).getBias();
    auto wt = tensorOf(w);
    int wi = r.argIndex(w), yi = r.resultIndex(gemm->getResult(0));
    if (wi < 0 || yi < 0 || !wt || !wt.hasStaticShape() || wt.getRank() != 2 ||
        wt.getShape()[1] != K)
      return unsupported("a grouped GEMM's weight or result is not the "
                         "region's");
    Type we = wt.getElementType();
    if (!i8 && !(castOnLoad ? we.isF32() : we.isF16()))
      return unsupported("no CUDA kernel for mixed-type linear yet");
    Member m;
    m.N = wt.getShape()[0];
    iface.pointer("const " + elem, castOnLoad ? Param::operandF16("w" + id, wi)
                                              : Param::operand("w" + id, wi));
    if (i8) {
      auto q = cast<qcc::QLinearOp>(gemm);
      int ws = r.argIndex(q.getWeightScale()), wsum = r.argIndex(q.getWeightSum());
      if (ws < 0 || wsum < 0 || q.getInputScale() != cast<qcc::QLinearOp>(gemms.front()).getInputScale() ||
          q.getInputZeroPoint() != cast<qcc::QLinearOp>(gemms.front()).getInputZeroPoint() ||
          q.getOutlierColumns())
        return unsupported("grouped int8 GEMMs that do not share their input's quantization");
      iface.pointer("const float", Param::operand("ws" + id, ws));
      iface.pointer("const qcc::int32_t", Param::operand("wsum" + id, wsum));
      dequantStage(m.chain, perToken, id);
    }
    if (bias) {
      int bi = r.argIndex(bias);
      if (bi < 0)
        return unsupported("GEMM operands computed inside the region");
      std::string biasT = i8 || castOnLoad ? "float" : "__half";
      iface.pointer("const " + biasT, Param::operand("bias" + id, bi));
      biasStage(m.chain, biasT, "bias" + id);
    }
    std::string outT =
        i8 ? "float" : cType(tensorOf(gemm->getResult(0)).getElementType());
    if (outT.empty())
      return unsupported("GEMM result of an unsupported element type");
    iface.pointer(outT, Param::result("y" + id, yi));
    std::string n = std::to_string(m.N);
    storeStage(m.chain, outT, "y" + id + " + (long long)m0 * " + n, n);
    members.push_back(std::move(m));
  }
  iface.scalar(Param::int32("M", M));
  iface.scalar(Param::int32("K", K));

  static constexpr ParamsField kGemmFields[] = {
      QCC_PARAMS_FIELDS(QCC_GEMM_PARAMS)};
  // One configuration for all members: the tuned one of the member with the
  // most weight bytes.
  const Member *largest = &members.front();
  for (const Member &m : members)
    if (m.N > largest->N)
      largest = &m;
  auto [tilePtr, rowsPtr] = decodeGemvTiles(i8, largest->N, K);
  const GemmTile &tile = *tilePtr, &rowsTile = *rowsPtr;
  auto blocks = [&](const GemmTile &t) {
    int64_t total = 0;
    for (const Member &m : members)
      total += (m.N + t.blockN - 1) / t.blockN;
    return total;
  };
  // The wrapper over configuration `cfg` whose blocks are `blockN` wide.
  auto wrapper = [=](const std::string &cfg, const std::string &entry,
                     int blockN) {
    std::string prefetch, body;
    int64_t first = 0;
    for (auto [g, m] : llvm::enumerate(members)) {
      int64_t count = (m.N + blockN - 1) / blockN;
      std::string id = std::to_string(g), n = std::to_string(m.N),
                  lo = std::to_string(first), hi = std::to_string(first + count);
      bool last = g + 1 == members.size();
      std::string cond = last ? "" : "if (b < " + hi + ") ";
      std::string head = (g ? "  else " : "  ") + cond;
      prefetch += head + "qcc::gemv_prefetch_weights<" + cfg + ">(w" + id +
                  ", " + n + ", K, b - " + lo + ");\n";
      FieldValues fields;
      fields.values = {{"A", "x"}, {"B", "w" + id}, {"M", "rows"}, {"N", n}};
      body += head + "{\n    qcc::GemmParams<" + elem +
              (castOnLoad ? ", float" : "") + "> p = " +
              aggregateInit(kGemmFields, iface, fields) + ";\n    " +
              m.chain.declaration() + "\n    qcc::gemv_" +
              (i8 ? "i8" : "f16") + "<" + cfg + ">(p, epi, b - " + lo +
              ");\n  }\n";
      first += count;
    }
    std::string rowsBody =
        "  const int m0 = blockIdx.y * " + cfg + "::kMaxM;\n"
        "  const int rows = M - m0 < " + cfg + "::kMaxM ? M - m0 : " + cfg +
        "::kMaxM;\n  x += (long long)m0 * K;\n" +
        (i8 && perToken ? "  xs += m0;\n  xz += m0;\n" : "");
    // The block index is read before the wait only to pick the weights to
    // prefetch.
    return wrapperHead(cfg + "::kThreads", entry, iface,
                       "  const int b = blockIdx.x;\n" + prefetch) +
           rowsBody + body + "}\n";
  };
  std::string include = i8 ? "gemv_i8.cuh" : "gemm_f16.cuh";
  u.source = [=, tileType = std::string(tile.type),
              rowsType = std::string(rowsTile.type),
              blockN = tile.blockN,
              rowsBlockN = rowsTile.blockN](const std::string &entry) {
    return header({include.c_str()}) + "typedef " + tileType + " Cfg;\n" +
           wrapper("Cfg", entry, blockN) + "typedef " + rowsType +
           " CfgRows;\n" + wrapper("CfgRows", entry + "_rows", rowsBlockN);
  };
  LaunchStep main = step("", tile.threads, iface, blocks(tile),
                         Expr::ceilDiv(M, tile.blockM), 1, tile.smem);
  LaunchStep rows = step("_rows", rowsTile.threads, iface, blocks(rowsTile),
                         Expr::ceilDiv(M, rowsTile.blockM), 1, rowsTile.smem);
  rows.name = "rows";
  rows.when = Expr::gt(M, tile.blockM);
  main.when = Expr::gt(tile.blockM + 1, M);
  u.launch.steps.push_back(std::move(main));
  u.launch.steps.push_back(std::move(rows));
  return u;
}

} // namespace

Unit emitGemm(const Region &r) {
  SmallVector<Operation *> gemms;
  for (Operation &op : r.body)
    if (isa<qcc::QLinearOp, qcc::LinearOp>(op))
      gemms.push_back(&op);
  if (gemms.size() > 1)
    return emitGemmGroup(r, gemms);
  auto q = r.find<qcc::QLinearOp>();
  auto f = r.find<qcc::LinearOp>();
  qcc::KernelKind kind = r.kernel.getKind();
  bool i8 = kind == qcc::KernelKind::GemmI8 ||
            kind == qcc::KernelKind::GemmI8Sp ||
            kind == qcc::KernelKind::GemmI8Mixed;
  // 2:4 sparse: the weight is a qcc.sparse_2_4 of the operands `values`
  // [N, K/2] and `meta` [N, K/32] (format/Sparse24.h), read as they are.
  bool sparse =
      kind == qcc::KernelKind::GemmI8Sp || kind == qcc::KernelKind::GemmF16Sp;
  // W4A16: the weight is a qcc.weight_int4 of the operands `packed`
  // [N, K/2], f16 `scales` [N, K/G] and, asymmetric, f16 `offsets` [N, K/G]
  // (format/Int4.h), read as they are; gemv_w4.cuh dequantizes in
  // registers.
  bool w4 = kind == qcc::KernelKind::GemmW4;
  Operation *gemm = i8 ? q.getOperation() : f.getOperation();
  if (!gemm)
    return unsupported("GEMM region without its GEMM op");
  // gemm_i8_mixed: a qlinear with float outlier columns; the int8 GEMM's
  // epilogue adds the float product of the gathered columns.
  bool mixed = kind == qcc::KernelKind::GemmI8Mixed;
  if (i8 && !mixed && q.getOutlierColumns())
    return unsupported("a qlinear with outlier columns outside a "
                       "gemm_i8_mixed region");
  Value x = i8 ? q.getInput() : f.getInput();
  Value w = i8 ? q.getWeight() : f.getWeight();
  Value bias = i8 ? q.getBias() : f.getBias();
  auto sp = w.getDefiningOp<qcc::Sparse24Op>();
  if (sparse && !sp)
    return unsupported("sparse GEMM region without its qcc.sparse_2_4");
  auto wq = w.getDefiningOp<qcc::WeightInt4Op>();
  if (w4 && (!wq || wq.getPerm()))
    return unsupported("gemm_w4 region without its qcc.weight_int4 (or with "
                       "act-order's perm)");
  // wi: the dense weight, the 2:4 values or the packed int4; mi: the 2:4
  // metadata or the int4 scales.
  int xi = r.argIndex(x),
      wi = r.argIndex(sparse ? sp.getValues() : w4 ? wq.getPacked() : w);
  int mi = sparse ? r.argIndex(sp.getMeta())
           : w4   ? r.argIndex(wq.getScales())
                  : 0;
  int oi = w4 && wq.getOffsets() ? r.argIndex(wq.getOffsets()) : 0;
  if (xi < 0 || wi < 0 || mi < 0 || oi < 0)
    return unsupported("GEMM operands computed inside the region");
  bool w4Offsets = w4 && wq.getOffsets();
  auto wt = tensorOf(w);
  if (!wt || !wt.hasStaticShape() || wt.getRank() != 2)
    return unsupported("GEMM with a dynamic weight shape");
  int64_t N = wt.getShape()[0], K = wt.getShape()[1];
  std::string elem = "qcc::int8_t";
  int elemBytes = 1;
  // f32 linears run as f16 GEMMs (f32 accumulation and epilogue): the
  // runtime converts the weight to f16 once when it uploads it, and a first
  // launch step converts the activations into a workspace.
  bool fromF32 = false;
  if (!i8) {
    Type xt = tensorOf(x).getElementType(), wtE = wt.getElementType();
    // gemm_w4: the weight's float type is only its dequantized view.
    fromF32 = xt.isF32() && (w4 || wtE.isF32());
    if (!fromF32 && (!xt.isF16() || (!w4 && !wtE.isF16())))
      return unsupported("no CUDA kernel for bf16 or mixed-type linear yet");
    elem = "__half";
    elemBytes = 2;
  }
  int64_t G = w4 ? (int64_t)wq.getGroupSize() : 0;
  if (w4 && (K % qcc::GemvW4Config<1, 1, 1>::kKMultiple != 0 || G % 32 != 0))
    return unsupported("gemm_w4 needs K and the group size to be multiples "
                       "of 32");
  if ((K * elemBytes) % 16 != 0)
    return unsupported(llvm::formatv("GEMM with K = {0} (K * {1} bytes must "
                                     "be a multiple of 16)",
                                     K, elemBytes)
                           .str());
  Epilogue epi = gemmEpilogue(r, gemm);
  if (!epi.error.empty())
    return unsupported(epi.error);
  std::string outT = i8 ? "float" : cType(tensorOf(epi.result).getElementType());
  std::string biasT = i8 || fromF32 ? "float" : "__half";
  if (outT.empty())
    return unsupported("GEMM result of an unsupported element type");
  bool decode = r.decode;
  // A dense decode GEMV rounds f32 activations to f16 as it loads them
  // (ActivationChunk<__half, float>): the same values as the cast step,
  // one launch fewer per linear and step.
  bool castOnLoad = fromF32 && decode && !w4 && !sparse;
  bool castStep = fromF32 && !castOnLoad;

  Unit u;
  Expr M = u.symbol("M", Expr::rows(TensorRef::operand(xi)));
  Expr xn;
  uint32_t x16 = 0;
  if (castStep) {
    xn = u.symbol("xn", Expr::numel(TensorRef::operand(xi)));
    x16 = u.launch.addWorkspace("x16", Expr::mul({xn, 2}));
  }
  // The wrapper's parameters (the main step's and the _rows step's).
  KernelInterface iface;
  const char *wName = sparse ? "wv" : "w";
  if (w4) {
    iface.pointer("const __half", castStep ? Param::workspaceBuffer("x", x16)
                                           : Param::operand("x", xi));
    iface.pointer("const qcc::int8_t", Param::operand("w", wi));
    iface.pointer("const __half", Param::operand("wscale", mi));
    if (w4Offsets)
      iface.pointer("const __half", Param::operand("woffset", oi));
  } else if (fromF32) {
    iface.pointer(castOnLoad ? "const float" : "const __half",
                  castOnLoad ? Param::operand("x", xi)
                             : Param::workspaceBuffer("x", x16));
    iface.pointer("const __half", Param::operandF16(wName, wi));
  } else {
    iface.pointer("const " + elem, Param::operand("x", xi));
    iface.pointer("const " + elem, Param::operand(wName, wi));
  }
  if (sparse)
    iface.pointer("const qcc::int32_t", Param::operand("wmeta", mi));
  ChainBuilder chain;
  // per token: [..., 1] of the input's rank; per tensor: [1]
  bool perToken =
      i8 && tensorOf(q.getInputScale()).getRank() == tensorOf(x).getRank();
  if (i8) {
    int xs = r.argIndex(q.getInputScale()),
        xz = r.argIndex(q.getInputZeroPoint()),
        ws = r.argIndex(q.getWeightScale()),
        wsum = r.argIndex(q.getWeightSum());
    if (xs < 0 || xz < 0 || ws < 0 || wsum < 0)
      return unsupported("GEMM operands computed inside the region");
    iface.pointer("const float", Param::operand("xs", xs));
    iface.pointer("const qcc::int32_t", Param::operand("xz", xz));
    iface.pointer("const float", Param::operand("ws", ws));
    iface.pointer("const qcc::int32_t", Param::operand("wsum", wsum));
    dequantStage(chain, perToken, "");
  }
  if (mixed) {
    int xf = r.argIndex(q.getOutlierInput()),
        wo = r.argIndex(q.getOutlierWeight());
    if (xf < 0 || wo < 0)
      return unsupported("GEMM operands computed inside the region");
    iface.pointer("const float", Param::operand("xf", xf));
    iface.pointer("const float", Param::operand("wo", wo));
    std::string stage =
        "qcc::AddOutliers<" + outlierColumnsType(*q.getOutlierColumns()) + ">";
    chain.stage(stage, "xf, K, wo");
  }
  if (bias) {
    int bi = r.argIndex(bias);
    iface.pointer("const " + biasT, Param::operand("bias", bi));
    biasStage(chain, biasT, "bias");
  }
  if (!epi.act.empty())
    chain.stage(epi.act, "");
  if (epi.factor >= 0) {
    std::string ft = outT == "float" ? "" : outT;
    iface.pointer("const " + outT, Param::operand("factor", epi.factor));
    chain.stage("qcc::MulOperand<" + ft + ">", "factor, N");
  }
  if (epi.residual >= 0) {
    std::string rt = outT == "float" ? "" : outT;
    iface.pointer("const " + outT, Param::operand("res", epi.residual));
    chain.stage("qcc::AddResidual<" + rt + ">", "res, N");
  }
  iface.pointer(outT, Param::result("y", 0));
  storeStage(chain, outT, "y", "N");
  iface.scalar(Param::int32("M", M));
  iface.scalar(Param::int32("N", N));
  iface.scalar(Param::int32("K", K));
  if (w4)
    iface.scalar(Param::int32("G", G));

  std::string includes = header({w4       ? "gemv_w4.cuh"
                                 : sparse ? "gemm_sp.cuh"
                                 : i8 ? (decode ? "gemv_i8.cuh" : "gemm_i8.cuh")
                                      : "gemm_f16.cuh"});
  // A dense decode GEMV has a second entry for calls of more than one row
  // chunk; each launches only when its rows are given.
  bool denseDecode = decode && !w4 && !sparse;
  const GemmTile &tile = w4            ? gemmW4Tile(decode)
                         : denseDecode ? *decodeGemvTiles(i8, N, K).first
                                       : gemmTile(i8, sparse, decode, N);
  const GemmTile *rowsTile =
      denseDecode ? decodeGemvTiles(i8, N, K).second : nullptr;
  // The mainloop's parameter struct; a decode GEMV's M is its row chunk's.
  static constexpr ParamsField kGemmFields[] = {
      QCC_PARAMS_FIELDS(QCC_GEMM_PARAMS)};
  static constexpr ParamsField kGemmSpFields[] = {
      QCC_PARAMS_FIELDS(QCC_GEMM_SP_PARAMS)};
  FieldValues gemmFields;
  if (sparse)
    gemmFields.values = {{"values", "wv"}, {"meta", "wmeta"}};
  else
    gemmFields.values = {{"A", "x"}, {"B", "w"}};
  if (decode)
    gemmFields.values.push_back({"M", "rows"});
  std::string gemmParams =
      w4 ? ""
      : sparse
          ? "  qcc::GemmSpParams<" + elem + "> p = " +
                aggregateInit(kGemmSpFields, iface, gemmFields) + ";\n"
          : "  qcc::GemmParams<" + elem + (castOnLoad ? ", float" : "") +
                "> p = " + aggregateInit(kGemmFields, iface, gemmFields) +
                ";\n";
  std::string epilogue = "  " + chain.declaration() + "\n";
  // The wrapper's body over the configuration type named `cfg` ("Cfg", or
  // "CfgRows" for the _rows entry: the same body over the other tile).
  auto call = [=](const std::string &cfg) {
    if (w4) // gemv_w4 tiles M over blockIdx.y itself
      return epilogue + "  qcc::gemv_w4<" + cfg + ">(x, w, wscale, " +
             (w4Offsets ? "woffset" : "nullptr") + ", M, N, K, G, epi);\n";
    std::string body;
    if (decode) {
      // Row chunk blockIdx.y: offset every per-row pointer by m0 rows.
      body += "  const int m0 = blockIdx.y * " + cfg + "::kMaxM;\n";
      body += "  const int rows = M - m0 < " + cfg + "::kMaxM ? M - m0 : " +
              cfg + "::kMaxM;\n";
      body += "  x += (long long)m0 * K;\n";
      if (perToken)
        body += "  xs += m0;\n  xz += m0;\n";
      if (mixed)
        body += "  xf += (long long)m0 * K;\n";
      if (epi.factor >= 0)
        body += "  factor += (long long)m0 * N;\n";
      if (epi.residual >= 0)
        body += "  res += (long long)m0 * N;\n";
      body += "  y += (long long)m0 * N;\n";
    }
    return body + gemmParams + epilogue + "  qcc::" + (decode ? "gemv" : "gemm") +
           (i8 ? "_i8" : "_f16") + (sparse ? "_sp" : "") + "<" + cfg +
           ">(p, epi);\n";
  };
  // The f32 GEMM's first step: x (f32) -> workspace x16 (f16, round to
  // nearest even).
  using Cast = qcc::CastF32ToF16Config;
  KernelInterface castIface;
  if (castStep)
    castIface.pointer("const float", Param::operand("x", xi))
        .pointer("__half", Param::workspaceBuffer("x16", x16))
        .scalar(Param::int64("n", xn));
  static constexpr ParamsField kCastFields[] = {
      QCC_PARAMS_FIELDS(QCC_CAST_F32_TO_F16_PARAMS)};
  std::string castParams =
      castStep ? "  qcc::CastF32ToF16Params p = " +
                    aggregateInit(kCastFields, castIface) + ";\n"
              : "";
  std::string rowsType = rowsTile ? rowsTile->type : "";
  // A dense decode GEMV asks L2 for its block's weight rows before it waits
  // for the kernel before it (launched early under programmatic dependent
  // launch, it then starts from L2; measured by bench/gemv_bench.cu).
  auto prefetch = [=](const std::string &cfg) {
    return rowsTile ? "  qcc::gemv_prefetch_weights<" + cfg + ">(w, N, K);\n"
                    : std::string();
  };
  u.source = [=, tileType = std::string(tile.type)](const std::string &entry) {
    std::string src = includes + "typedef " + tileType + " Cfg;\n" +
                      wrapperHead("Cfg::kThreads", entry, iface,
                                  prefetch("Cfg")) +
                      call("Cfg") + "}\n";
    if (!rowsType.empty())
      src += "typedef " + rowsType + " CfgRows;\n" +
             wrapperHead("CfgRows::kThreads", entry + "_rows", iface,
                         prefetch("CfgRows")) +
             call("CfgRows") + "}\n";
    if (!castIface.empty())
      src += wrapperHead(std::to_string(Cast::kThreads), entry + "_cast",
                         castIface) +
             castParams +
             "  qcc::cast_f32_to_f16<qcc::CastF32ToF16Config>(p);\n}\n";
    return src;
  };
  LaunchStep main =
      step("", tile.threads, iface, (N + tile.blockN - 1) / tile.blockN,
           Expr::ceilDiv(M, tile.blockM), 1, tile.smem);
  std::optional<LaunchStep> rowsStep;
  if (rowsTile) {
    assert(rowsTile->blockM == tile.blockM && "one row chunk means the same in both");
    rowsStep = step("_rows", rowsTile->threads, iface,
                    (N + rowsTile->blockN - 1) / rowsTile->blockN,
                    Expr::ceilDiv(M, rowsTile->blockM), 1, rowsTile->smem);
    rowsStep->name = "rows";
    rowsStep->when = Expr::gt(M, tile.blockM);
    main.when = Expr::gt(tile.blockM + 1, M);
  }
  if (castStep) {
    LaunchStep cast = step("_cast", Cast::kThreads, castIface,
                           Expr::ceilDiv(xn, Cast::kThreads), 1, 1,
                           Cast::kSmemBytes);
    cast.name = "cast";
    u.launch.steps.push_back(std::move(cast));
  }
  u.launch.steps.push_back(std::move(main));
  if (rowsStep)
    u.launch.steps.push_back(std::move(*rowsStep));
  return u;
}


} // namespace qcc::codegen::detail
