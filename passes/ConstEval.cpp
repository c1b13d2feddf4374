//===- ConstEval.cpp - evaluating ops at compile time ---------------------===//
#include "passes/ConstEval.h"

#include "dialects/QccConstants.h"
#include "dialects/QccOps.h"
#include "runtime/reference/ReferenceKernels.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cstring>

using namespace mlir;
using namespace qcc;

std::optional<format::OpKind> qcc::runtimeOpKind(Operation *op) {
  if (!isa_and_nonnull<QccDialect>(op->getDialect()))
    return std::nullopt;
  return format::parseOpKind(op->getName().stripDialect());
}

FailureOr<rt::Tensor> qcc::tensorFromElements(ElementsAttr e) {
  rt::DType dt;
  if (!e || !rt::parseDType(runtimeDType(e.getElementType()), dt))
    return failure();
  auto bytes = getBytes(e);
  if (!bytes)
    return failure();
  auto shape = cast<ShapedType>(e.getType()).getShape();
  rt::Tensor t(dt, rt::Shape(shape.begin(), shape.end()));
  if (t.bytes() != bytes->size())
    return failure();
  if (!bytes->empty()) // an empty tensor's data may be null: memcpy's UB
    std::memcpy(t.data<char>(), bytes->data(), bytes->size());
  return t;
}

FailureOr<std::vector<rt::Tensor>> qcc::evaluateOpOnValues(
    Operation *op, llvm::function_ref<FailureOr<rt::Tensor>(Value)> operandOf,
    std::string *why) {
  std::vector<rt::Tensor> operands;
  operands.reserve(op->getNumOperands());
  for (Value operand : op->getOperands()) {
    auto t = operandOf(operand);
    if (failed(t))
      return failure();
    operands.push_back(std::move(*t));
  }
  rt::Operands ptrs;
  for (const rt::Tensor &t : operands)
    ptrs.push_back(&t);
  return evaluateOpOnTensors(op, ptrs, why);
}

FailureOr<std::vector<rt::Tensor>>
qcc::evaluateOpOnTensors(Operation *op, const rt::Operands &operands,
                         std::string *why) {
  auto refuse = [&](const llvm::Twine &reason) {
    if (why)
      *why = reason.str();
    return failure();
  };
  std::optional<format::OpKind> kind = runtimeOpKind(op);
  if (!kind)
    return refuse("no CPU kernel for " + op->getName().getStringRef());
  auto attrs = runtimeAttrs(op);
  if (!attrs)
    return refuse(llvm::toString(attrs.takeError()));
  std::vector<rt::DType> resultTypes;
  for (Value r : op->getResults()) {
    rt::DType t = rt::DType::F32; // an unknown type fails the check below
    rt::parseDType(
        runtimeDType(cast<RankedTensorType>(r.getType()).getElementType()), t);
    resultTypes.push_back(t);
  }
  std::vector<rt::Tensor> out;
  try {
    // A folded constant is the reference kernels' result: the same bits
    // whatever the environment and the compiling machine's CPU.
    rt::Attrs a(*attrs);
    out = rt::computeInF32(
        *kind, operands, resultTypes, [&](const rt::Operands &ops) {
          return rt::reference::runKernel(*kind, a, ops);
        });
  } catch (const std::exception &e) {
    return refuse(e.what());
  }
  if (out.size() != op->getNumResults())
    return refuse("kernel returned the wrong number of results");
  for (auto [t, r] : llvm::zip(out, op->getResults())) {
    Type et = cast<RankedTensorType>(r.getType()).getElementType();
    if (runtimeDType(et) != rt::dtypeName(t.dtype()))
      return refuse("kernel result dtype differs from the op's");
  }
  return out;
}

FailureOr<SmallVector<DenseElementsAttr>>
qcc::evaluateOp(Operation *op, ArrayRef<ElementsAttr> operands,
                std::string *why) {
  std::vector<rt::Tensor> tensors;
  tensors.reserve(operands.size());
  for (ElementsAttr e : operands) {
    if (!e)
      continue;
    FailureOr<rt::Tensor> t = failure();
    try {
      t = tensorFromElements(e);
    } catch (const std::exception &) {
    }
    if (failed(t)) {
      if (why)
        *why = "operand without usable data";
      return failure();
    }
    tensors.push_back(std::move(*t));
  }
  rt::Operands in;
  size_t next = 0; // nulls stay where operands were omitted
  for (ElementsAttr e : operands)
    in.push_back(e ? &tensors[next++] : nullptr);
  auto out = evaluateOpOnTensors(op, in, why);
  if (failed(out))
    return failure();
  SmallVector<DenseElementsAttr> results;
  for (auto [t, r] : llvm::zip(*out, op->getResults())) {
    Type et = cast<RankedTensorType>(r.getType()).getElementType();
    auto type = RankedTensorType::get(
        SmallVector<int64_t>(t.shape().begin(), t.shape().end()), et);
    ArrayRef<char> bytes(t.data<char>(), t.bytes());
    // i1 is one byte per element in both; DenseElementsAttr packs it itself.
    if (et.isInteger(1)) {
      SmallVector<bool> bits;
      for (char c : bytes)
        bits.push_back(c != 0);
      results.push_back(DenseElementsAttr::get(type, ArrayRef<bool>(bits)));
    } else {
      results.push_back(DenseElementsAttr::getFromRawBuffer(type, bytes));
    }
  }
  return results;
}

FailureOr<rt::Tensor> SampleEvaluator::eval(Value v, int depth) {
  if (auto it = memo.find(v); it != memo.end())
    return it->second;
  Operation *op = v.getDefiningOp();
  // The subgraphs checked here are a few ops long; the bound keeps a
  // value that reaches the whole model from walking it.
  if (!op || depth > 32 || op->getNumRegions() != 0 ||
      !isa<QccDialect>(op->getDialect()))
    return failure();
  if (auto c = dyn_cast<ConstantOp>(op)) {
    auto t = tensorFromElements(c.getValue());
    if (failed(t) || t->numel() > (1 << 16))
      return failure();
    return memo[v] = *t;
  }
  auto out =
      evaluateOpOnValues(op, [&](Value o) { return eval(o, depth + 1); });
  if (failed(out))
    return failure();
  return memo[v] = (*out)[cast<OpResult>(v).getResultNumber()];
}
