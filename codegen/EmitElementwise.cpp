//===- EmitElementwise.cpp - embedding, elementwise -> CUDA C++ -----------===//
//
// embedding (one CTA per id, embedding.cuh) and elementwise chains: the
// chain as one expression type of elementwise.cuh's qcc::ew functors,
// evaluated per element, broadcast operands read as broadcast.h indexes.
//
// Tiles (asserted in EmitterTest):
//   embedding: 128 threads, one CTA per id;
//   elementwise: 256 threads x 4 elements;
//
//===----------------------------------------------------------------------===//
#include "codegen/EmitCommon.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace qcc::codegen::detail {

static Unit emitEmbedding(const Region &r) {
  auto e = r.find<qcc::EmbeddingOp>();
  auto table = tensorOf(e.getTable());
  std::string tT = cType(table.getElementType());
  std::string oT = cType(tensorOf(e.getResult()).getElementType());
  if (!tensorOf(e.getIds()).getElementType().isInteger(64) || tT.empty() ||
      oT.empty() || !table.hasStaticShape())
    return unsupported("embedding of unsupported types");
  constexpr int threads = 128;
  int ti = r.argIndex(e.getTable()), ii = r.argIndex(e.getIds());
  if (ti < 0 || ii < 0)
    return unsupported("embedding operands computed inside the region");
  Unit u;
  Expr numIds = u.symbol("num_ids", Expr::numel(TensorRef::operand(ii)));
  KernelInterface iface;
  iface.pointer("const " + tT, Param::operand("table", ti))
      .pointer("const long long", Param::operand("ids", ii))
      .pointer(oT, Param::result("out", 0))
      .pointer("int", Param::runtimeValue("error_flag", RuntimeValue::ErrorFlag))
      .scalar(Param::int64("vocab", table.getShape()[0]))
      .scalar(Param::int32("dim", table.getShape()[1]))
      .scalar(Param::int32("num_ids", numIds));
  u.source = [=](const std::string &entry) {
    return header({"embedding.cuh"}) +
           wrapperHead(std::to_string(threads), entry, iface) +
           forwardTo(llvm::formatv("qcc::embeddingRow<{0}>", threads).str(),
                     iface);
  };
  u.launch.steps.push_back(step("", threads, iface, numIds));
  return u;
}

static Unit emitChain(const Region &r) {
  llvm::DenseMap<Value, std::string> expr;
  for (BlockArgument a : r.body.getArguments())
    expr[a] = "qcc::ew::Arg<" + std::to_string(a.getArgNumber()) + ">";
  for (Operation &op : r.body.without_terminator()) {
    auto in = [&](unsigned i) { return expr.lookup(op.getOperand(i)); };
    std::string e;
    if (isa<qcc::AddOp>(op))
      e = "qcc::ew::Add<" + in(0) + ", " + in(1) + ">";
    else if (isa<qcc::SubOp>(op))
      e = "qcc::ew::Sub<" + in(0) + ", " + in(1) + ">";
    else if (isa<qcc::MulOp>(op))
      e = "qcc::ew::Mul<" + in(0) + ", " + in(1) + ">";
    else if (isa<qcc::DivOp>(op))
      e = "qcc::ew::Div<" + in(0) + ", " + in(1) + ">";
    else if (auto g = dyn_cast<qcc::GeluOp>(op))
      e = std::string(g.getApproximate() == "tanh" ? "qcc::ew::GeluTanh<"
                                                   : "qcc::ew::Gelu<") +
          in(0) + ">";
    else if (isa<qcc::SiluOp>(op))
      e = "qcc::ew::Silu<" + in(0) + ">";
    else if (isa<qcc::SigmoidOp>(op))
      e = "qcc::ew::Sigmoid<" + in(0) + ">";
    else if (isa<qcc::ReluOp>(op))
      e = "qcc::ew::Relu<" + in(0) + ">";
    else if (isa<qcc::NegOp>(op))
      e = "qcc::ew::Neg<" + in(0) + ">";
    else if (isa<qcc::TanhOp>(op))
      e = "qcc::ew::Tanh<" + in(0) + ">";
    else if (isa<qcc::ExpOp>(op))
      e = "qcc::ew::Exp<" + in(0) + ">";
    else if (isa<qcc::CosOp>(op))
      e = "qcc::ew::Cos<" + in(0) + ">";
    else if (isa<qcc::SinOp>(op))
      e = "qcc::ew::Sin<" + in(0) + ">";
    else if (isa<qcc::SqrtOp>(op))
      e = "qcc::ew::Sqrt<" + in(0) + ">";
    else if (isa<qcc::ReciprocalOp>(op))
      e = "qcc::ew::Reciprocal<" + in(0) + ">";
    else
      return unsupported("no CUDA kernel for '" +
                         op.getName().getStringRef().str() +
                         "' in an elementwise chain yet");
    for (Value v : op.getOperands())
      if (!cType(tensorOf(v).getElementType()).size() ||
          !tensorOf(v).getElementType().isF32())
        return unsupported("elementwise chain over non-f32 tensors");
    expr[op.getResult(0)] = e;
  }
  auto yield = cast<qcc::YieldOp>(r.body.getTerminator());
  if (yield.getValues().size() != 1)
    return unsupported("elementwise region with several results");
  unsigned n = r.body.getNumArguments();
  constexpr int threads = 256, perThread = 4;
  Unit u;
  Expr numel = u.symbol("n", Expr::numel(TensorRef::result(0)));
  auto outType = cast<RankedTensorType>(r.kernel->getResult(0).getType());
  int64_t rank = outType.getRank();
  KernelInterface iface;
  for (unsigned j = 0; j < n; ++j)
    iface.pointer("const float", Param::operand("in" + std::to_string(j), j));
  // How each operand is read (ONNX broadcasting, broadcast.h): at i when its
  // shape is statically the result's, at 0 when it is statically one
  // element, at i modulo its size when it is statically the result's
  // trailing dimensions, else at i when it has as many elements as the result (then it
  // is the result's shape) and at broadcastIndex's element otherwise, from
  // the result's dimensions and the operand's strides (0 along a dimension
  // of size 1 or missing on the left).
  std::string load, arrays;
  bool needDims = false;
  for (unsigned j = 0; j < n; ++j) {
    auto t = cast<RankedTensorType>(r.body.getArgument(j).getType());
    std::string in = "in" + std::to_string(j);
    if (t.hasStaticShape() && t.getShape() == outType.getShape()) {
      load += llvm::formatv("    x[{0}] = {1}[i];\n", j, in).str();
      continue;
    }
    if (t.hasStaticShape() && t.getNumElements() == 1) {
      load += llvm::formatv("    x[{0}] = {1}[0];\n", j, in).str();
      continue;
    }
    // Statically the result's trailing dimensions (a bias): i modulo its
    // size, a constant.
    if (t.hasStaticShape() && t.getRank() < rank &&
        outType.getShape().take_back(t.getRank()) == t.getShape()) {
      load += llvm::formatv("    x[{0}] = {1}[i % {2}LL];\n", j, in,
                            t.getNumElements())
                  .str();
      continue;
    }
    needDims = true;
    std::string full = "full" + std::to_string(j);
    iface.scalar(Param::int64(full, Expr::eq(Expr::numel(TensorRef::operand(j)),
                                            numel)));
    std::string strides;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t k = d - (rank - t.getRank());
      Expr stride = 0;
      if (k >= 0) {
        std::vector<Expr> after{1};
        for (int64_t m = k + 1; m < t.getRank(); ++m)
          after.push_back(Expr::dim(TensorRef::operand(j), m));
        stride = Expr::select(Expr::eq(Expr::dim(TensorRef::operand(j), k), 1),
                              0, Expr::mul(std::move(after)));
      }
      std::string name = llvm::formatv("s{0}_{1}", j, d).str();
      iface.scalar(Param::int64(name, stride));
      strides += (d ? ", " : "") + name;
    }
    arrays += llvm::formatv("  const long long st{0}[{1}] = {{{2}};\n", j,
                            rank, strides)
                  .str();
    load += llvm::formatv("    x[{0}] = {1}[{2} ? i : "
                          "qcc::broadcastIndex(i, dims, st{0})];\n",
                          j, in, full)
                .str();
  }
  if (needDims) {
    std::string dims;
    for (int64_t d = 0; d < rank; ++d) {
      std::string name = "d" + std::to_string(d);
      iface.scalar(Param::int64(name, Expr::dim(TensorRef::result(0), d)));
      dims += (d ? ", " : "") + name;
    }
    arrays = llvm::formatv("  const long long dims[{0}] = {{{1}};\n", rank,
                           dims)
                 .str() +
             arrays;
  }
  iface.pointer("float", Param::result("out", 0))
      .scalar(Param::int64("n", numel));
  std::string chain = expr.lookup(yield.getValues()[0]);
  u.source = [=](const std::string &entry) {
    return header({"elementwise.cuh"}) + "typedef " + chain + " Chain;\n" +
           wrapperHead(std::to_string(threads), entry, iface) +
           llvm::formatv(
               "{4}  const long long base = (long long)blockIdx.x * {0} * {1} + "
               "threadIdx.x;\n"
               "#pragma unroll\n  for (int e = 0; e < {1}; ++e) {{\n"
               "    const long long i = base + (long long)e * {0};\n"
               "    if (i >= n) return;\n    float x[{2}];\n{3}"
               "    out[i] = Chain::eval(x);\n  }\n}\n",
               threads, perThread, n, load, arrays)
               .str();
  };
  u.launch.steps.push_back(
      step("", threads, iface, Expr::ceilDiv(numel, threads * perThread)));
  return u;
}


/// The elementwise family: embedding (a table lookup) and elementwise
/// chains.
Unit emitElementwise(const Region &r) {
  if (r.kernel.getKind() == qcc::KernelKind::Embedding)
    return emitEmbedding(r);
  return emitChain(r);
}

} // namespace qcc::codegen::detail
