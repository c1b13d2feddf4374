//===- LoraMerge.h - where a LoRA adapter's updates go in an ONNX graph -*- C++ -*-===//
//
// `qcc --lora DIR[:SCALE]` merges PEFT adapters into the weights at import,
// before any pass sees them (so calibration, SmoothQuant and quantization
// work on the adapted model). The adapter names Hugging Face module paths;
// the export names nodes and initializers. A module's weight is the float
// initializer that a MatMul / Gemm (an embedding: a Gather) reads, directly
// or through Transpose / Cast / Identity, where the node's name
// ("/model/model/layers.0/self_attn/q_proj/MatMul": the path the legacy
// exporter, optimum and onnxruntime's builder write), a node on the way, or
// the initializer's own name ("model.layers.0.self_attn.q_proj.weight")
// ends in the module's path. Exactly one weight must match.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_COMPILER_LORAMERGE_H
#define QCC_COMPILER_LORAMERGE_H

#include "compiler/LoraAdapter.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace onnx {
class GraphProto;
class NodeProto;
} // namespace onnx

namespace qcc {

/// One module's update and the initializer it is added to.
struct LoraTarget {
  const LoraFactors *factors;
  const onnx::NodeProto *reader; ///< the MatMul / Gemm / Gather
  std::string initializer;
  /// The initializer holds the update's transpose ([in, out] for a
  /// linear: MatMul's right operand, Gemm without transB).
  bool transposed;
};

/// The weight of every module of `adapter` in `graph`; one line naming the
/// adapter folder, the module and the reason when a module has no weight,
/// several, one of another shape, one that is not float, or one another
/// node also reads (tied weights).
llvm::Expected<std::vector<LoraTarget>>
findLoraTargets(const onnx::GraphProto &graph, const LoraAdapter &adapter);

/// `weight` (the initializer's values, f32, in its own layout) plus the
/// target's update.
void addLoraUpdate(const LoraTarget &target, std::vector<float> &weight);

} // namespace qcc

#endif // QCC_COMPILER_LORAMERGE_H
