//===- ConstEval.cpp - evaluating ops at compile time ---------------------===//
#include "passes/ConstEval.h"

#include "dialects/QccConstants.h"
#include "dialects/QccOps.h"
#include "runtime/cpu/CpuKernels.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cstring>

using namespace mlir;
using namespace qcc;
using nlohmann::json;

namespace {
llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}
} // namespace

std::optional<format::OpKind> qcc::runtimeOpKind(Operation *op) {
  if (!isa_and_nonnull<QccDialect>(op->getDialect()))
    return std::nullopt;
  return format::parseOpKind(op->getName().stripDialect());
}

std::string qcc::runtimeDType(Type t) {
  if (t.isF32()) return "f32";
  if (t.isF16()) return "f16";
  if (t.isBF16()) return "bf16";
  if (t.isInteger(64)) return "i64";
  if (t.isInteger(32)) return "i32";
  if (t.isInteger(8)) return "i8";
  if (t.isInteger(1)) return "bool";
  return "";
}

llvm::Expected<json> qcc::runtimeAttr(Attribute a) {
  if (auto b = dyn_cast<BoolAttr>(a))
    return json(b.getValue());
  if (isa<UnitAttr>(a))
    return json(true);
  if (auto arr = dyn_cast<ArrayAttr>(a)) {
    json out = json::array();
    for (Attribute e : arr) {
      auto j = runtimeAttr(e);
      if (!j)
        return j.takeError();
      out.push_back(*j);
    }
    return out;
  }
  if (auto i = dyn_cast<IntegerAttr>(a))
    return json(i.getValue().getSExtValue());
  if (auto f = dyn_cast<FloatAttr>(a))
    return json(f.getValueAsDouble());
  if (auto s = dyn_cast<StringAttr>(a))
    return json(s.getValue().str());
  if (auto arr = dyn_cast<DenseI64ArrayAttr>(a))
    return json(std::vector<int64_t>(arr.asArrayRef()));
  if (auto arr = dyn_cast<DenseF32ArrayAttr>(a))
    return json(std::vector<double>(arr.asArrayRef().begin(),
                                    arr.asArrayRef().end()));
  if (auto e = dyn_cast<DenseElementsAttr>(a)) {
    json values = json::array();
    Type et = e.getElementType();
    if (isa<FloatType>(et))
      for (APFloat v : e.getValues<APFloat>())
        values.push_back(v.convertToDouble());
    else if (et.isInteger(1))
      for (bool v : e.getValues<bool>())
        values.push_back(v ? 1 : 0);
    else
      for (APInt v : e.getValues<APInt>())
        values.push_back(v.getSExtValue());
    return json{{"dtype", runtimeDType(et)}, {"values", values}};
  }
  return error("cannot serialize attribute");
}

llvm::Expected<json> qcc::runtimeAttrs(Operation *op) {
  json attrs = json::object();
  for (NamedAttribute a : op->getAttrs()) {
    // Calibration statistics are compile-time only.
    if (a.getName() == "operandSegmentSizes" ||
        a.getName().strref().ends_with("_absmax"))
      continue;
    // The runtime reads a quantize's facts as granularity + asymmetric; the
    // width is its i8 result's (format/Quant.h has the range).
    if (auto q = dyn_cast<QuantAttr>(a.getValue())) {
      attrs["granularity"] = stringifyQuantGranularity(q.getGranularity()).str();
      if (!q.isSymmetric())
        attrs["asymmetric"] = true;
      continue;
    }
    auto j = runtimeAttr(a.getValue());
    if (!j)
      return error("attribute '" + a.getName().strref() +
                   "': " + llvm::toString(j.takeError()));
    attrs[a.getName().str()] = *j;
  }
  // The artifact has no operand segments: a weight_int4's offsets (its last
  // operand when present) are announced by `asymmetric` (format/Int4.h).
  if (auto w = dyn_cast<WeightInt4Op>(op); w && w.getOffsets())
    attrs["asymmetric"] = true;
  // The runtime has no IR types: a cast's target comes as an attribute.
  if (auto cast = dyn_cast<CastOp>(op))
    attrs["to"] = runtimeDType(cast.getType().getElementType());
  return attrs;
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
    // A folded constant is the reference kernels' result, whatever the
    // environment (QCC_CPU_KERNELS) and the compiling machine's CPU.
    rt::ScopedCpuKernelPath reference(rt::CpuKernelPath::Reference);
    rt::Attrs a(*attrs);
    out = rt::computeInF32(
        *kind, operands, resultTypes, [&](const rt::Operands &ops) {
          return rt::runCpuKernel(*kind, a, ops);
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
