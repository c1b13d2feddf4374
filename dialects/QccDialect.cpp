//===- QccDialect.cpp - the qcc dialect ----------------------------------===//
#include "dialects/QccDialect.h"
#include "dialects/QccOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

#include "dialects/QccDialect.cpp.inc"

void qcc::QccDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/QccOps.cpp.inc"
      >();
}

Operation *qcc::QccDialect::materializeConstant(OpBuilder &builder,
                                                Attribute value, Type type,
                                                Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
