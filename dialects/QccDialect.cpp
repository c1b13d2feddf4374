//===- QccDialect.cpp - the qcc dialect ----------------------------------===//
#include "dialects/QccDialect.h"
#include "dialects/QccAttrs.h"
#include "dialects/QccOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

#include "dialects/QccDialect.cpp.inc"
#include "dialects/QccEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/QccAttrs.cpp.inc"

void qcc::QccDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/QccAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/QccOps.cpp.inc"
      >();
}

LogicalResult
qcc::QuantAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       unsigned bits, QuantScheme, QuantGranularity granularity,
                       std::optional<int64_t> axis) {
  if (bits < 2 || bits > 16)
    return emitError() << "quantization bits must be in [2, 16], not " << bits;
  if ((granularity == QuantGranularity::PerChannel) != axis.has_value())
    return emitError() << "a quantization axis is given exactly with "
                          "per_channel granularity";
  if (axis && *axis < 0)
    return emitError() << "quantization axis must be >= 0, not " << *axis;
  return success();
}

// A kernel kind is spelled as format/KernelKinds.def spells it:
// `#qcc.kernel_kind<gemm_i8>`, and a bare keyword in qcc.kernel's custom
// form (parseKernelKindKeyword, QccOps.cpp).
FailureOr<qcc::format::KernelKind> qcc::parseKernelKindKeyword(AsmParser &parser) {
  llvm::SMLoc at = parser.getCurrentLocation();
  StringRef word;
  if (failed(parser.parseKeyword(&word)))
    return failure();
  std::optional<qcc::format::KernelKind> kind = qcc::format::parseKernelKind(word);
  if (!kind)
    return parser.emitError(at) << "unknown kernel kind '" << word << "'";
  return *kind;
}

Attribute qcc::KernelKindAttr::parse(AsmParser &parser, Type) {
  FailureOr<qcc::format::KernelKind> kind;
  if (failed(parser.parseLess()) ||
      failed(kind = parseKernelKindKeyword(parser)) ||
      failed(parser.parseGreater()))
    return {};
  return KernelKindAttr::get(parser.getContext(), *kind);
}

void qcc::KernelKindAttr::print(AsmPrinter &printer) const {
  printer << "<" << qcc::format::spelling(getValue()) << ">";
}

Operation *qcc::QccDialect::materializeConstant(OpBuilder &builder,
                                                Attribute value, Type type,
                                                Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
