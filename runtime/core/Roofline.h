//===- Roofline.h - FLOPs, bytes and roofline times of kernels --*- C++ -*-===//
//
// The one definition of what a kernel region (or a single op) computes and
// moves, used by `qcc --report` (compile time, assumed shapes) and by
// `qrun --profile` (run time, actual shapes); docs/ROOFLINE.md explains the
// counts and how to read MBU and MFU.
//
// FLOPs (a multiply-add is 2), per op kind:
//   linear / qlinear  2 M N K (M = rows of the input; bias and epilogue not
//                     counted); M N K with a 2:4 sparse weight (the
//                     multiply-adds the sparse tensor cores execute, at the
//                     dense peak: the same time as 2 M N K at NVIDIA's
//                     "with sparsity" peak, which is twice the dense one)
//   attention         4 D per attended (query, key) pair and query head
//                     (2 D for q.k, 2 D for p.v; softmax not counted). Causal
//                     attention counts only the pairs it attends (the lower
//                     triangle: the kernels skip key tiles past the
//                     diagonal), likewise a sliding window.
//   kv_attention      the same over the cache: query token t of row b
//                     attends to cached_b + t + 1 keys.
//   layer_norm        8 per element; rms_norm 4 per element
//   rotary            3 per rotated element
//   quantize          3 per element; softmax 5 per element
//   gelu 8, silu 4, every other elementwise op 1 per result element
//   embedding and shape glue: 0
// Bytes: compulsory traffic, each operand read and each result written once
// (a fused region's intermediates stay on chip), at the element size of its
// type (int8 1, f16/bf16 2, f32 4); a 2:4 sparse weight its compressed
// values (N K/2 elements) and metadata (N K/8 bytes); constants count as
// weights, except an embedding table, of which only the gathered rows count;
// kv_attention adds the cache: the cached tokens' K and V read and the new
// tokens' K and V written, at the cache's element size.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_ROOFLINE_H
#define QCC_RUNTIME_ROOFLINE_H

#include "runtime/core/Artifact.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace qcc::rt {

/// The math a kernel runs at, which selects the compute peak: int8 tensor
/// cores (qlinear), f16/bf16 tensor cores (linear: the CUDA backend runs f32
/// linears as f16 GEMMs), or plain f32 (everything else).
enum class Precision { F32, F16, I8 };
const char *precisionName(Precision p);

struct Cost {
  double flops = 0;
  double weightBytes = 0;     ///< constants read (weights, gathered rows)
  double activationBytes = 0; ///< other operands read, results written
  double kvBytes = 0;         ///< KV cache read and appended
  Precision precision = Precision::F32;

  double bytes() const { return weightBytes + activationBytes + kvBytes; }
  /// FLOPs per byte (0 when nothing moves).
  double intensity() const { return bytes() > 0 ? flops / bytes() : 0; }
  /// Sums the counts; the precision becomes the faster one (I8 > F16 > F32).
  Cost &operator+=(const Cost &o);
};

/// What a kv_attention op sees of the cache in one call: per row, the tokens
/// already cached and the valid tokens of this call; the cache's bytes per
/// element, and per V row and kv head of its scale (kivi: 4; else 0).
struct KvState {
  std::vector<int64_t> cached, valid;
  double elementBytes = 4;
  double rowScaleBytes = 0;
};

/// FLOPs of one op (not a kernel node) given its operands' and results'
/// shapes (an omitted optional operand has an empty shape); `kv` for
/// kv_attention (without it a kv_attention counts as one call over no
/// cache). Throws std::runtime_error when an operand the formula needs is
/// missing.
double opFlops(const Node &node, const std::vector<Shape> &operands,
               const std::vector<Shape> &results, const KvState *kv = nullptr);

/// The weight operand of a linear (1) or qlinear (3); -1 for other ops.
inline int weightOperand(OpKind op) {
  return op == OpKind::Linear ? 1 : op == OpKind::QLinear ? 3 : -1;
}

/// A linear / qlinear weight read in a compressed form rather than as the
/// dense [N, K] tensor of operand `operand`: 2:4 (values [N, K/2] and meta
/// [N, K/32], format/Sparse24.h; half the multiply-adds) or int4 (packed
/// [N, K/2] and scales, with perm and offsets where the weight has them,
/// format/Int4.h).
struct CompressedWeight {
  int operand = -1;
  const Tensor *values = nullptr, *meta = nullptr; ///< int4: packed, scales
  const Tensor *perm = nullptr, *offsets = nullptr; ///< int4 only
  bool sparse24 = true;
  /// The bytes the compressed form reads.
  double bytes() const {
    double b = 0;
    for (const Tensor *t : {values, meta, perm, offsets})
      b += t ? (double)t->bytes() : 0.0;
    return b;
  }
};

/// The linears / qlinears among `fn`'s nodes (not inside kernel regions)
/// whose weight a sparse_2_4 node of constants makes (2:4 sparse linears):
/// node index -> the compressed weight.
std::map<size_t, CompressedWeight> compressedWeights(const Artifact &a,
                                                     const Function &fn);

/// The cost of running `node` of artifact `a` (a kernel region through its
/// body, the body's shapes inferred from the operands') with operands and
/// results of the given shapes. Constants of `a` count as weights.
/// `compressed`: the (non-kernel) linear / qlinear `node` reads its weight
/// compressed: its weight bytes are the compressed form's, its FLOPs (2:4)
/// the sparse count. A linear inside a region whose weight a sparse_2_4 of
/// the same region makes counts the sparse FLOPs too.
Cost nodeCost(const Artifact &a, const Node &node,
              const std::vector<Shape> &operands,
              const std::vector<Shape> &results, const KvState *kv = nullptr,
              const CompressedWeight *compressed = nullptr);

/// A 2:4 sparse linear's cost at M input rows, dense (the weight read as
/// the [N, K] tensor, 2 M N K FLOPs) and sparse (values + metadata read,
/// M N K FLOPs), activations as the op reads and writes them.
struct SparseLinearCost {
  Cost dense, sparse;
};
SparseLinearCost sparseLinearCost(const Artifact &a, const Node &linear,
                                  const CompressedWeight &weight, int64_t M);

/// A machine's roofline: peak bandwidth (bytes/s) and compute (FLOP/s per
/// precision).
struct Peaks {
  std::string name;
  double bandwidth = 0;
  double f32 = 0, f16 = 0, i8 = 0;
  std::string source; ///< where the figures come from
  double compute(Precision p) const;
};

/// H100 SXM and H200 (NVIDIA's datasheets; see Roofline.cpp).
const std::vector<Peaks> &gpuPeaks();

/// The roofline floor: max(FLOPs / compute peak, bytes / bandwidth).
double rooflineSeconds(const Cost &c, const Peaks &p);

/// The roofline a GPU's profile is read against: the datasheet peaks of
/// gpuPeaks() whose name the device's contains ("NVIDIA H100 80GB HBM3"),
/// else the bandwidth `measureBandwidth` returns (a device-to-device copy,
/// called only then) and no compute peaks (MFU then reads 0).
Peaks gpuPeaksFor(const std::string &deviceName,
                  const std::function<double()> &measureBandwidth);

/// Achieved time and cost per (entry point, node kind) summed over runs:
/// what `qrun --profile` prints. A node's kind is its kernel region's kind
/// (GPU plan) or its op. The CPU session times nodes with the wall clock, the
/// CUDA session with events around each launch.
struct ProfileRow {
  std::string function, kind;
  int64_t calls = 0;
  double seconds = 0;
  Cost cost; ///< summed over the calls
};
/// A node's row in a profile: its kernel region's kind, else its op.
std::string profileKind(const Node &node);
class NodeProfile {
public:
  void add(const std::string &function, const std::string &kind,
           double seconds, const Cost &cost);
  /// Sorted by entry point, then time, most first.
  std::vector<ProfileRow> rows() const;

private:
  std::map<std::pair<std::string, std::string>, ProfileRow> byKind;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_ROOFLINE_H
