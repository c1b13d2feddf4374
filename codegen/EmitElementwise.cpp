//===- EmitElementwise.cpp - embedding, elementwise -> CUDA C++ -----------===//
//
// embedding (one CTA per id, embedding.cuh) and elementwise chains: the
// chain as one expression type of elementwise.cuh's qcc::ew functors,
// evaluated per element with broadcast operands read modulo their size.
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

Unit emitEmbedding(const Region &r) {
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

Unit emitElementwise(const Region &r) {
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
  KernelInterface iface;
  std::string load;
  for (unsigned j = 0; j < n; ++j)
    iface.pointer("const float", Param::operand("in" + std::to_string(j), j));
  for (unsigned j = 0; j < n; ++j) {
    // Broadcast operands are read modulo their size (0: as many elements as
    // the result).
    Expr nj = Expr::numel(TensorRef::operand(j));
    iface.scalar(Param::int64("mod" + std::to_string(j),
                              Expr::select(Expr::eq(nj, numel), 0, nj)));
    load += llvm::formatv("    x[{0}] = in{0}[mod{0} != 0 ? i % mod{0} : i];\n",
                          j)
                .str();
  }
  iface.pointer("float", Param::result("out", 0))
      .scalar(Param::int64("n", numel));
  std::string chain = expr.lookup(yield.getValues()[0]);
  u.source = [=](const std::string &entry) {
    return header({"elementwise.cuh"}) + "typedef " + chain + " Chain;\n" +
           wrapperHead(std::to_string(threads), entry, iface) +
           llvm::formatv(
               "  const long long base = (long long)blockIdx.x * {0} * {1} + "
               "threadIdx.x;\n"
               "#pragma unroll\n  for (int e = 0; e < {1}; ++e) {{\n"
               "    const long long i = base + (long long)e * {0};\n"
               "    if (i >= n) return;\n    float x[{2}];\n{3}"
               "    out[i] = Chain::eval(x);\n  }\n}\n",
               threads, perThread, n, load)
               .str();
  };
  u.launch.steps.push_back(
      step("", threads, iface, Expr::ceilDiv(numel, threads * perThread)));
  return u;
}


} // namespace qcc::codegen::detail
