//===- OnnxConverter.h - the per-op converter interface --------*- C++ -*-===//
//
// The importer maps each ONNX node through a table of small converters keyed
// by op type and op version (OnnxConverters.cpp). A converter sees the node's
// inputs as values, the result types the model declares (value_info), and
// helpers to read attributes; it returns the values of the node's outputs or a
// reason.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_COMPILER_ONNXCONVERTER_H
#define QCC_COMPILER_ONNXCONVERTER_H

#include "dialects/QccOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/ArrayRef.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace qcc {

/// A uint8 initializer. qcc has no uint8 tensors: the importer keeps its
/// shape and bytes aside for the converters that unpack such data at import
/// (MatMulNBits' bit-packed weights and zero points).
struct PackedTensor {
  std::vector<int64_t> shape;
  std::string bytes; ///< row-major, one byte per element
};

class ConvertContext {
public:
  ConvertContext(mlir::OpBuilder &builder, mlir::Location loc,
                 const onnx::NodeProto &node,
                 llvm::SmallVector<mlir::Value> inputs,
                 llvm::SmallVector<mlir::Type> resultTypes)
      : builder(builder), loc(loc), node(node), inputs(std::move(inputs)),
        resultTypes(std::move(resultTypes)) {}

  mlir::OpBuilder &builder;
  mlir::Location loc;
  const onnx::NodeProto &node;
  /// One per ONNX input; null for an omitted optional input.
  llvm::SmallVector<mlir::Value> inputs;
  /// One per ONNX output: the type the model declares for it, or null.
  llvm::SmallVector<mlir::Type> resultTypes;
  /// One per ONNX input: the uint8 initializer it names (its value in
  /// `inputs` is null), else null. Only converters that declare
  /// `readsPacked` see any.
  llvm::SmallVector<const PackedTensor *> packed;
  /// Set by a converter that fails: the reason, without the node's name.
  std::string error;
  /// Set by resultType where the model declares an output's type at odds
  /// with what the node computes (another rank, another static size): the
  /// importer refuses the node.
  mutable std::string typeConflict;

  mlir::Value input(size_t i) const {
    return i < inputs.size() ? inputs[i] : mlir::Value();
  }
  const PackedTensor *packedInput(size_t i) const {
    return i < packed.size() ? packed[i] : nullptr;
  }
  /// The type the converter computed for output `i` (`shape` and
  /// `elementType`), with the static sizes the model's declared type adds;
  /// a declaration that contradicts it sets typeConflict.
  mlir::RankedTensorType resultType(size_t i, llvm::ArrayRef<int64_t> shape,
                                    mlir::Type elementType) const {
    auto computed = mlir::RankedTensorType::get(shape, elementType);
    if (i >= resultTypes.size() || !resultTypes[i])
      return computed;
    // Both known: keep every size that either of them knows statically;
    // where they disagree the model's declaration is wrong.
    auto inferred = mlir::cast<mlir::RankedTensorType>(resultTypes[i]);
    auto conflict = [&] {
      if (typeConflict.empty())
        typeConflict = describeConflict(i, inferred, computed);
      return computed;
    };
    if (inferred.getRank() != computed.getRank())
      return conflict();
    llvm::SmallVector<int64_t> merged(inferred.getShape());
    for (auto [m, d] : llvm::zip(merged, shape)) {
      if (m == mlir::ShapedType::kDynamic)
        m = d;
      else if (d != mlir::ShapedType::kDynamic && d != m)
        return conflict();
    }
    return mlir::RankedTensorType::get(merged, inferred.getElementType());
  }
  /// Output `i` has the shape and element type of input `like`.
  mlir::RankedTensorType resultLike(size_t i, mlir::Value like) const {
    auto t = mlir::cast<mlir::RankedTensorType>(like.getType());
    return resultType(i, t.getShape(), t.getElementType());
  }

  /// The attribute `name`, null if absent. The importer has checked its
  /// type against attributeType(name).
  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  int64_t intAttr(llvm::StringRef name, int64_t dflt) const;
  float floatAttr(llvm::StringRef name, float dflt) const;
  std::optional<std::vector<int64_t>> intsAttr(llvm::StringRef name) const;

  /// The elements of a constant integer input (axes, sizes, ...), or nullopt.
  std::optional<llvm::SmallVector<int64_t>> constInts(size_t i) const;

  /// Records `reason` and returns failure, for `return ctx.fail(...)`.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>> fail(const llvm::Twine &r);

  template <typename OpT, typename... Args>
  mlir::Value create(Args &&...args) {
    return OpT::create(builder, loc, std::forward<Args>(args)...)->getResult(0);
  }

private:
  std::string describeConflict(size_t i, mlir::RankedTensorType declared,
                               mlir::RankedTensorType computed) const;
};

/// The type the converters read attribute `name` as (INT, FLOATS, ...), for
/// every attribute name they read (one name has one type across ONNX's and
/// onnxruntime's ops); UNDEFINED for any other. The importer refuses a node
/// whose attribute has another type before its converter runs.
onnx::AttributeProto::AttributeType attributeType(llvm::StringRef name);

using ConvertFn =
    std::function<mlir::FailureOr<llvm::SmallVector<mlir::Value>>(
        ConvertContext &)>;

/// The inputs and the outputs a node of an op may list, one letter per
/// position: 'r' required (named), 'o' optional (named, "" or left off the
/// end); a trailing '*' repeats the letter before it (variadic). The importer
/// holds every node to its op's arity before the converter runs
/// (checkArity), so a converter may take each required input as given and
/// never sees more inputs or outputs than the op has.
struct Arity {
  llvm::StringLiteral inputs;
  llvm::StringLiteral outputs = "r";
};

/// Why `node` does not fit `arity` ("" if it does), e.g. "takes 2 inputs,
/// not 1" or "input 1 may not be omitted".
std::string checkArity(const onnx::NodeProto &node, const Arity &arity);

/// One row of the converter table: ONNX op type, the op versions (schema
/// since-versions) the converter implements, the node's arity, the
/// converter, the op's domain ("" for the default ai.onnx domain), and
/// whether it reads uint8 initializers (ConvertContext::packed); any other op
/// given one is refused.
struct OnnxConverter {
  std::string opType;
  std::vector<int> versions;
  Arity arity;
  ConvertFn convert;
  std::string domain = "";
  bool readsPacked = false;
};

const std::vector<OnnxConverter> &onnxConverters();

/// onnxruntime's contrib ops (OnnxContribConverters.cpp): com.microsoft ops
/// and the ops onnxruntime adds to the default domain. ONNX's schemas do not
/// know them, so a node's op version is the newest one listed that the
/// model's opset for the op's domain selects.
const std::vector<OnnxConverter> &onnxContribConverters();

/// Registers the default-domain contrib ops (SimplifiedLayerNormalization)
/// with ONNX's schema registry, so that its checker accepts them as
/// onnxruntime does. Idempotent.
void registerContribSchemas();

/// Converts an ONNX TensorProto to an ElementsAttr (external data already
/// resolved into `externalBytes` when the tensor lives outside the model).
mlir::FailureOr<mlir::ElementsAttr>
tensorToElements(mlir::MLIRContext *ctx, const onnx::TensorProto &tensor,
                 const std::string *externalBytes, std::string &error);

/// The ONNX name of a TensorProto data type ("DOUBLE", "UINT8", ...).
std::string onnxTypeName(int32_t dataType);

/// The MLIR element type of an ONNX TensorProto data type, or null.
mlir::Type onnxElementType(mlir::MLIRContext *ctx, int32_t dataType);

} // namespace qcc

#endif // QCC_COMPILER_ONNXCONVERTER_H
