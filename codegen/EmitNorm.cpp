//===- EmitNorm.cpp - norm, norm_quantize, quantize -> CUDA C++ -----------===//
//
// layer_norm / rms_norm (one CTA per row, norm.cuh), optionally fused with
// the symmetric dynamic per-token quantization of its output, and the
// standalone dynamic quantize (quantize.cuh).
//
// Tiles (asserted in EmitterTest):
//   norm / norm_quantize: normBlockThreads(D): D <= 1024: 128 threads,
//                    <= 4096: 256, else 512;
//   quantize: 256 threads, one CTA per row (per tensor: one row);
//   hadamard: 256 threads, one CTA per row (K = N * M <= 8192, M <= 63:
//             the row and the DCT table in static shared memory).
//
//===----------------------------------------------------------------------===//
#include "codegen/EmitCommon.h"

#include "codegen/kernels/norm_config.h"
#include "format/Rotation.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace qcc::codegen::detail {

/// hadamard.cuh's limits (its static shared row and DCT table).
constexpr int64_t kHadamardMaxWidth = 8192, kHadamardMaxOdd = 63;

static Unit emitNormRows(const Region &r, bool quantize) {
  auto ln = r.find<qcc::LayerNormOp>();
  auto rms = r.find<qcc::RmsNormOp>();
  if (!ln && !rms)
    return unsupported("norm region without a norm");
  bool layer = bool(ln);
  Operation *norm = layer ? ln.getOperation() : rms.getOperation();
  Value x = layer ? ln.getInput() : rms.getInput();
  Value gamma = layer ? ln.getGamma() : rms.getGamma();
  Value beta = layer ? ln.getBeta() : Value();
  float eps = (layer ? ln.getEpsilon() : rms.getEpsilon()).convertToFloat();
  std::string inT = cType(tensorOf(x).getElementType());
  if (inT.empty() || !tensorOf(gamma).getElementType().isF32())
    return unsupported("norm of an unsupported element type");
  int64_t D = lastDim(x);
  if (ShapedType::isDynamic(D))
    return unsupported("norm over a dynamic dimension");
  int xi = r.argIndex(x), gi = r.argIndex(gamma);
  if (xi < 0 || gi < 0 || (beta && r.argIndex(beta) < 0))
    return unsupported("norm operands computed inside the region");
  qcc::QuantizeOp q = quantize ? r.find<qcc::QuantizeOp>() : nullptr;
  if (quantize) {
    if (!q || q.getGranularity() != "per_token" || q.getAsymmetric() ||
        q->getAttr("scale") || q.getOutlierColumns())
      return unsupported("norm_quantize: only symmetric dynamic per-token "
                         "quantization is fused yet");
  }
  int normOut = r.resultIndex(norm->getResult(0));
  int threads = qcc::normBlockThreads(D);
  Unit u;
  Expr rows = u.symbol("rows", Expr::rows(TensorRef::operand(xi)));
  KernelInterface iface;
  iface.pointer("const " + inT, Param::operand("in", xi))
      .pointer("const float", Param::operand("gamma", gi))
      .pointer("const float", beta ? Param::operand("beta", r.argIndex(beta))
                                   : Param::null("beta"))
      .pointer(inT, normOut >= 0 ? Param::result("out", normOut)
                                 : Param::null("out"));
  if (quantize) {
    int zi = r.resultIndex(q.getZeroPoint());
    iface.pointer("signed char", Param::result("q", r.resultIndex(q.getResult())))
        .pointer("float",
                 Param::result("q_scale", r.resultIndex(q.getScaleOut())))
        .pointer("int", zi >= 0 ? Param::result("q_zero_point", zi)
                                : Param::null("q_zero_point"));
  }
  iface.scalar(Param::int32("rows", rows))
      .scalar(Param::int32("dim", D))
      .scalar(Param::float32("epsilon", eps));
  std::string kind = layer ? "qcc::NormKind::LayerNorm" : "qcc::NormKind::RmsNorm";
  // Without quantization the q fields stay null (no such parameters).
  FieldValues fields;
  if (!quantize)
    fields.values = {
        {"q", "nullptr"}, {"q_scale", "nullptr"}, {"q_zero_point", "nullptr"}};
  static constexpr ParamsField kNormFields[] = {
      QCC_PARAMS_FIELDS(QCC_NORM_PARAMS)};
  std::string fill = assignFields(kNormFields, iface, fields);
  u.source = [=](const std::string &entry) {
    return header({"norm.cuh"}) +
           wrapperHead(std::to_string(threads), entry, iface) +
           llvm::formatv("  qcc::NormParams<{0}, {0}, float> p;\n", inT).str() +
           fill +
           llvm::formatv("  qcc::normRow<{0}, {1}, {2}>(p);\n}\n", threads,
                         kind, quantize ? "true" : "false")
               .str();
  };
  u.launch.steps.push_back(step("", threads, iface, rows));
  return u;
}

static Unit emitQuantize(const Region &r) {
  auto q = r.find<qcc::QuantizeOp>();
  if (!q)
    return unsupported("quantize region without qcc.quantize");
  std::string inT = cType(tensorOf(q.getInput()).getElementType());
  if (inT.empty())
    return unsupported("quantize of an unsupported element type");
  if (q->getAttr("scale"))
    return unsupported("no CUDA kernel for static quantize regions yet");
  bool perToken = q.getGranularity() == "per_token";
  // Outlier columns are read as 0: a row's column is its index in the row,
  // so only per-token rows know them.
  std::string skip;
  if (auto cols = q.getOutlierColumns()) {
    if (!perToken)
      return unsupported("no CUDA kernel for a per-tensor quantize with "
                         "outlier columns");
    skip = ", " + outlierColumnsType(*cols);
  }
  constexpr int threads = 256;
  int xi = r.argIndex(q.getInput());
  if (xi < 0)
    return unsupported("quantize of a value computed inside the region");
  TensorRef xt = TensorRef::operand(xi);
  Unit u;
  Expr M, K;
  if (perToken) {
    M = u.symbol("M", Expr::rows(xt));
    int64_t k = lastDim(q.getInput());
    K = u.symbol("K", ShapedType::isDynamic(k) ? Expr::dim(xt, -1) : Expr(k));
  } else {
    M = u.symbol("M", 1);
    K = u.symbol("K", Expr::numel(xt));
  }
  int zi = r.resultIndex(q.getZeroPoint());
  KernelInterface iface;
  iface.pointer("const " + inT, Param::operand("x", xi))
      .pointer("qcc::int8_t", Param::result("q", r.resultIndex(q.getResult())))
      .pointer("float", Param::result("s", r.resultIndex(q.getScaleOut())))
      .pointer("qcc::int32_t",
               zi >= 0 ? Param::result("z", zi) : Param::null("z"))
      .scalar(Param::int32("M", M))
      .scalar(Param::int32("K", K));
  const char *asymmetric = q.getAsymmetric() ? "true" : "false";
  u.source = [=](const std::string &entry) {
    return header({"quantize.cuh"}) +
           wrapperHead(std::to_string(threads), entry, iface) +
           forwardTo(llvm::formatv("qcc::quantize_rows<{0}, {1}{2}>", threads,
                                   asymmetric, skip)
                         .str(),
                     iface);
  };
  u.launch.steps.push_back(step("", threads, iface, M));
  return u;
}


/// qcc.hadamard (hadamard.cuh): the rotation's factors and seed are
/// template arguments, so the row and the DCT table are static shared
/// arrays of their exact sizes.
static Unit emitHadamard(const Region &r) {
  auto h = r.find<qcc::HadamardOp>();
  if (!h)
    return unsupported("hadamard region without qcc.hadamard");
  if (!tensorOf(h.getInput()).getElementType().isF32())
    return unsupported("hadamard of an unsupported element type");
  int64_t K = lastDim(h.getInput());
  if (ShapedType::isDynamic(K) || !format::Rotation::widthError(K).empty())
    return unsupported("hadamard over a width with no fast rotation");
  format::Rotation rotation(K, (uint64_t)h.getSeed());
  if (K > kHadamardMaxWidth || rotation.oddSize() > kHadamardMaxOdd)
    return unsupported("hadamard wider than the CUDA template takes (K <= " +
                       std::to_string(kHadamardMaxWidth) + ", odd factor <= " +
                       std::to_string(kHadamardMaxOdd) + ")");
  int xi = r.argIndex(h.getInput());
  if (xi < 0)
    return unsupported("hadamard of a value computed inside the region");
  constexpr int threads = 256;
  Unit u;
  Expr rows = u.symbol("rows", Expr::rows(TensorRef::operand(xi)));
  KernelInterface iface;
  iface.pointer("const float", Param::operand("in", xi))
      .pointer("float", Param::result("out", r.resultIndex(h.getResult())))
      .scalar(Param::int32("rows", rows));
  std::string callee = llvm::formatv("qcc::hadamard_rows<{0}, {1}, {2}, {3}ull>",
                                     threads, rotation.hadamardSize(),
                                     rotation.oddSize(),
                                     (uint64_t)h.getSeed())
                           .str();
  u.source = [=](const std::string &entry) {
    return header({"hadamard.cuh"}) +
           wrapperHead(std::to_string(threads), entry, iface) +
           forwardTo(callee, iface);
  };
  u.launch.steps.push_back(step("", threads, iface, rows));
  return u;
}

/// The norm family: norm, norm_quantize, quantize, hadamard.
Unit emitNorm(const Region &r) {
  qcc::KernelKind kind = r.kernel.getKind();
  if (kind == qcc::KernelKind::Quantize)
    return emitQuantize(r);
  if (kind == qcc::KernelKind::Hadamard)
    return emitHadamard(r);
  return emitNormRows(r, kind == qcc::KernelKind::NormQuantize);
}

} // namespace qcc::codegen::detail
