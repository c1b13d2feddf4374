//===- EmitMoe.cpp - mixture-of-experts regions -> CUDA C++ ---------------===//
//
// qcc.moe as moe.cuh's four steps (MoeDefault, moe_config.h); a router
// region (softmax, top_k, renormalization) as router.cuh's one.
//
// Tiles (asserted in EmitterTest):
//   router: one warp per token row, 4 rows per CTA (RouterLaunch<4>), the
//                    row's experts PerLane = ceil(E / 32) per lane;
//   moe: MoeDefault = MoeLaunch<64, 16, 32, 256> (64 features x 16 routes
//                    per CTA, K in slices of 32), the routes sorted by one
//                    CTA of 256, the combine 256 threads x 1 element.
//
//===----------------------------------------------------------------------===//
#include "codegen/EmitCommon.h"

#include "codegen/kernels/moe_config.h"

#include "llvm/Support/FormatVariadic.h"

#include <optional>

using namespace mlir;

namespace qcc::codegen::detail {

/// qcc.moe as moe.cuh's four steps: routes by expert, the grouped up (and
/// gate) GEMM with the activation, the grouped down GEMM, each token's
/// gate-weighted sum (MoeDefault, moe_config.h).
static Unit emitExperts(const Region &r) {
  using Cfg = qcc::MoeDefault;
  auto moe = r.find<qcc::MoeOp>();
  int xi = r.argIndex(moe.getInput()), ii = r.argIndex(moe.getExpertIds()),
      gi = r.argIndex(moe.getGates()), ui = r.argIndex(moe.getUpWeight()),
      di = r.argIndex(moe.getDownWeight());
  bool gated = static_cast<bool>(moe.getGateWeight());
  int wi = gated ? r.argIndex(moe.getGateWeight()) : 0;
  if (xi < 0 || ii < 0 || gi < 0 || ui < 0 || di < 0 || wi < 0)
    return unsupported("moe operands computed inside the region");
  for (Value v : moe->getOperands())
    if (auto t = dyn_cast<RankedTensorType>(v.getType());
        v != moe.getExpertIds() && (!t || !t.getElementType().isF32()))
      return unsupported("moe over non-f32 tensors");
  if (!tensorOf(moe.getResult()).getElementType().isF32())
    return unsupported("moe over non-f32 tensors");
  auto up = tensorOf(moe.getUpWeight());
  auto ids = tensorOf(moe.getExpertIds());
  if (!up.hasStaticShape() || ids.getRank() != 2 ||
      ShapedType::isDynamic(ids.getDimSize(1)))
    return unsupported("moe with dynamic experts, sizes or top-k");
  int64_t E = up.getDimSize(0), I = up.getDimSize(1), H = up.getDimSize(2),
          k = ids.getDimSize(1);
  if (E > 65535 || I > (1 << 30) || H > (1 << 30) || k > 1024)
    return unsupported("moe sizes beyond the kernel's grid");
  llvm::StringRef act = moe.getActivation();
  const char *actType = act == "silu"        ? "Silu"
                        : act == "gelu"      ? "Gelu"
                        : act == "gelu_tanh" ? "GeluTanh"
                        : act == "relu"      ? "Relu"
                                             : nullptr;
  if (!actType)
    return unsupported(("moe activation " + act).str());
  Unit u;
  Expr T = u.symbol("tokens", Expr::dim(TensorRef::operand(xi), 0));
  Expr routes = u.symbol("routes", Expr::mul({T, k}));
  uint32_t offsets = u.launch.addWorkspace("offsets", (E + 1) * 4);
  uint32_t list = u.launch.addWorkspace("list", Expr::mul({routes, 4}));
  uint32_t h = u.launch.addWorkspace("h", Expr::mul({routes, I * 4}));
  uint32_t y = u.launch.addWorkspace("y", Expr::mul({routes, H * 4}));
  KernelInterface routesIface;
  routesIface.pointer("const long long", Param::operand("expert_ids", ii))
      .scalar(Param::int32("routes", routes))
      .scalar(Param::int32("experts", E))
      .pointer("int", Param::workspaceBuffer("offsets", offsets))
      .pointer("int", Param::workspaceBuffer("list", list))
      .pointer("int", Param::runtimeValue("error_flag", RuntimeValue::ErrorFlag));
  // The grouped GEMMs: A (x or h), W (up or down) and, for up, the gate; N
  // features of K-wide rows into the workspace `out`.
  auto gemmIface = [&](Param a, Param w, std::optional<Param> gate, int64_t n,
                       int64_t kdim, const char *outName, uint32_t out) {
    KernelInterface iface;
    iface.pointer("const float", std::move(a))
        .pointer("const float", std::move(w));
    if (gate)
      iface.pointer("const float", std::move(*gate));
    iface.pointer("const int", Param::workspaceBuffer("offsets", offsets))
        .pointer("const int", Param::workspaceBuffer("list", list))
        .scalar(Param::int32("k", k))
        .scalar(Param::int32("n", n))
        .scalar(Param::int32("kdim", kdim))
        .pointer("float", Param::workspaceBuffer(outName, out));
    return iface;
  };
  KernelInterface upIface =
      gemmIface(Param::operand("x", xi), Param::operand("up", ui),
                gated ? Param::operand("gate", wi) : Param::null("gate"), I, H,
                "h", h);
  KernelInterface downIface =
      gemmIface(Param::workspaceBuffer("h", h), Param::operand("down", di),
                std::nullopt, H, I, "y", y);
  KernelInterface combineIface;
  combineIface.pointer("const float", Param::workspaceBuffer("y", y))
      .pointer("const float", Param::operand("gates", gi))
      .pointer("const long long", Param::operand("expert_ids", ii))
      .scalar(Param::int32("experts", E))
      .scalar(Param::int32("tokens", T))
      .scalar(Param::int32("k", k))
      .scalar(Param::int32("hidden", H))
      .pointer("float", Param::result("out", 0));
  u.source = [=](const std::string &entry) {
    return header({"moe.cuh"}) +
           llvm::formatv("typedef qcc::MoeLaunch<{0}, {1}, {2}, {3}> Cfg;\n",
                         Cfg::kTileN, Cfg::kTileR, Cfg::kTileK,
                         Cfg::kBlockThreads)
               .str() +
           wrapperHead(std::to_string(Cfg::kRouteThreads), entry + "_routes",
                       routesIface) +
           forwardTo("qcc::moeRoutes<Cfg>", routesIface) +
           wrapperHead(std::to_string(Cfg::kBlockThreads), entry + "_up",
                       upIface) +
           forwardTo(llvm::formatv("qcc::moeGroupedGemm<Cfg, {0}, "
                                   "qcc::MoeActivation::{1}, true, true>",
                                   gated ? "true" : "false", actType)
                         .str(),
                     upIface) +
           wrapperHead(std::to_string(Cfg::kBlockThreads), entry + "_down",
                       downIface) +
           llvm::formatv("  qcc::moeGroupedGemm<Cfg, false, "
                         "qcc::MoeActivation::{0}, false, false>(h, down, "
                         "nullptr, offsets, list, k, n, kdim, y);\n}\n",
                         actType)
               .str() +
           wrapperHead(std::to_string(Cfg::kCombineThreads), entry,
                       combineIface) +
           forwardTo("qcc::moeCombine<Cfg>", combineIface);
  };
  LaunchStep sort = step("_routes", Cfg::kRouteThreads, routesIface, 1);
  sort.name = "routes";
  auto gemmStep = [&](const char *name, const KernelInterface &iface,
                      int64_t n) {
    LaunchStep s = step(std::string("_") + name, Cfg::kBlockThreads, iface,
                        Cfg::gridFeatures(n), E,
                        Expr::ceilDiv(routes, Cfg::kTileR));
    s.name = name;
    return s;
  };
  LaunchStep upStep = gemmStep("up", upIface, I);
  LaunchStep downStep = gemmStep("down", downIface, H);
  LaunchStep combine =
      step("", Cfg::kCombineThreads, combineIface,
           Expr::ceilDiv(Expr::mul({T, H}), Cfg::kCombineThreads));
  combine.name = "combine";
  for (LaunchStep *s : {&sort, &upStep, &downStep, &combine}) {
    s->when = Expr::gt(T, 0);
    u.launch.steps.push_back(std::move(*s));
  }
  return u;
}

/// A router region as router.cuh's routerRow: softmax over the experts,
/// top_k, and the renormalization when the region divides the top-k values
/// by their sum.
static Unit emitRouter(const Region &r) {
  auto softmax = r.find<qcc::SoftmaxOp>();
  auto topk = r.find<qcc::TopKOp>();
  auto div = r.find<qcc::DivOp>();
  int li = r.argIndex(softmax.getInput());
  if (li < 0)
    return unsupported("router logits computed inside the region");
  auto logits = tensorOf(softmax.getInput());
  int64_t rank = logits.getRank(), E = logits.getShape().back();
  auto values = tensorOf(topk.getValues());
  int64_t K = values.getShape().back();
  if (rank < 1 || ShapedType::isDynamic(E) || ShapedType::isDynamic(K) ||
      !logits.getElementType().isF32())
    return unsupported("router over dynamic or non-f32 experts");
  if (E > 1024 || K > 16)
    return unsupported("router of more than 1024 experts or top-k over 16");
  Value gatesValue = div ? div.getResult() : topk.getValues();
  int gi = r.resultIndex(gatesValue), ii = r.resultIndex(topk.getIndices());
  if (gi < 0 || ii < 0)
    return unsupported("router region must yield its gates and expert ids");
  constexpr int warps = 4;
  int64_t perLane = (E + 31) / 32;
  Unit u;
  Expr rows = u.symbol("rows", Expr::rows(TensorRef::operand(li)));
  KernelInterface iface;
  iface.pointer("const float", Param::operand("logits", li))
      .pointer("float", Param::result("gates", gi))
      .pointer("long long", Param::result("ids", ii))
      .scalar(Param::int64("rows", rows));
  std::string callee =
      llvm::formatv("qcc::routerRow<{0}, {1}, {2}, {3}, {4}>", warps, E, K,
                    perLane, div ? "true" : "false")
          .str();
  u.source = [=](const std::string &entry) {
    return header({"router.cuh"}) +
           wrapperHead(std::to_string(32 * warps), entry, iface) +
           forwardTo(callee, iface);
  };
  u.launch.steps.push_back(
      step("", 32 * warps, iface, Expr::ceilDiv(rows, warps)));
  return u;
}

/// The mixture-of-experts family: the experts (qcc.moe) and the router.
Unit emitMoe(const Region &r) {
  if (r.kernel.getKind() == qcc::KernelKind::Router)
    return emitRouter(r);
  return emitExperts(r);
}

} // namespace qcc::codegen::detail
