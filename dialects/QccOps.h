//===- QccOps.h - qcc operations -------------------------------*- C++ -*-===//
#ifndef QCC_DIALECTS_QCCOPS_H
#define QCC_DIALECTS_QCCOPS_H

#include "dialects/QccDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace qcc {
/// The KV cache that qcc.kv_attention reads and appends to.
struct KvCacheResource : mlir::SideEffects::Resource::Base<KvCacheResource> {
  llvm::StringRef getName() final { return "qcc.kv_cache"; }
};
} // namespace qcc

#include "dialects/QccEnums.h.inc"

#define GET_OP_CLASSES
#include "dialects/QccOps.h.inc"

namespace qcc {
/// The broadcast (numpy rules) of two shapes, with ShapedType::kDynamic for
/// unknown sizes; failure if two static sizes conflict.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);
} // namespace qcc

#endif // QCC_DIALECTS_QCCOPS_H
