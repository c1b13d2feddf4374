//===- ConstEval.h - evaluating ops at compile time -------------*- C++ -*-===//
//
// The reference kernels (runtime/reference/ReferenceKernels.h) are the one
// definition of what each qcc op computes. Compile-time evaluation calls them instead of a
// second set of folders, the way IREE's const-eval runs its own runtime:
// constant subgraphs fold with exactly the semantics the artifact will run,
// and analyses can evaluate a subgraph on sample inputs (mask builders).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_PASSES_CONSTEVAL_H
#define QCC_PASSES_CONSTEVAL_H

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/Operation.h"
#include "llvm/Support/Error.h"

#include "dialects/QccRuntimeAttrs.h"
#include "format/OpKind.h"
#include "runtime/reference/ReferenceKernels.h"

#include "llvm/ADT/DenseMap.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace qcc {

/// The kind of `op` as an artifact node holds it (format/OpKinds.def): its
/// qcc mnemonic parsed. None for an op of another dialect, and for qcc.constant
/// and qcc.yield, which are no nodes.
std::optional<format::OpKind> runtimeOpKind(mlir::Operation *op);

/// Evaluates `op` with the reference kernel of its kind on constant
/// `operands` (one per operand, null for an omitted optional one). Fails with
/// the reason in `why` when the op has no kernel, an operand has no data, or
/// the kernel refuses its inputs.
mlir::FailureOr<llvm::SmallVector<mlir::DenseElementsAttr>>
evaluateOp(mlir::Operation *op, llvm::ArrayRef<mlir::ElementsAttr> operands,
           std::string *why = nullptr);

/// A constant's data as a runtime tensor (a copy); fails on an element type
/// the runtime does not have or an attribute without data.
mlir::FailureOr<rt::Tensor> tensorFromElements(mlir::ElementsAttr attr);

/// Evaluates `op` on runtime tensors (null for an omitted operand) with its
/// CPU reference kernel. For analyses that evaluate whole subgraphs on sample
/// inputs without materializing attributes.
mlir::FailureOr<std::vector<rt::Tensor>>
evaluateOpOnTensors(mlir::Operation *op, const rt::Operands &operands,
                    std::string *why = nullptr);

/// evaluateOpOnTensors on the operands `operandOf` evaluates (an analysis'
/// evaluator of a subgraph on sample values). When `operandOf` fails, so
/// does this, leaving `why` untouched (the evaluator knows the reason).
mlir::FailureOr<std::vector<rt::Tensor>> evaluateOpOnValues(
    mlir::Operation *op,
    llvm::function_ref<mlir::FailureOr<rt::Tensor>(mlir::Value)> operandOf,
    std::string *why = nullptr);

/// Evaluates values of a small subgraph on sample tensors bound to some of
/// its values; constants are read, every other op runs its CPU reference
/// kernel. Fails on a value neither bound nor computable from bound ones
/// (or more than 32 ops up, or through a constant over 65,536 elements).
class SampleEvaluator {
public:
  void bind(mlir::Value v, rt::Tensor t) { memo[v] = std::move(t); }
  mlir::FailureOr<rt::Tensor> eval(mlir::Value v, int depth = 0);

private:
  llvm::DenseMap<mlir::Value, rt::Tensor> memo;
};

} // namespace qcc

#endif // QCC_PASSES_CONSTEVAL_H
