//===- Session.h - running an artifact's entry points -----------*- C++ -*-===//
#ifndef QCC_RUNTIME_SESSION_H
#define QCC_RUNTIME_SESSION_H

#include "runtime/core/Artifact.h"
#include "runtime/cpu/CpuF32Gemm.h"
#include "runtime/cpu/CpuInt4Kernels.h"
#include "runtime/cpu/CpuInt8Gemm.h"
#include "runtime/cpu/CpuSparseKernels.h"
#include "runtime/cpu/CpuW4A8Kernels.h"
#include "runtime/core/KvCache.h"
#include "runtime/core/Executor.h"
#include "runtime/cpu/CpuPeaks.h"

#include <functional>
#include <map>
#include <set>
#include <tuple>

namespace qcc::rt {

/// Checks `inputs` against the entry point's ports (names, dtypes, ranks,
/// static sizes, and consistent sizes for equal dynamic dimension names);
/// throws std::runtime_error naming the input.
void checkInputs(const Function &fn,
                 const std::map<std::string, Tensor> &inputs);

/// For each value, the index of the last node of `fn` that reads it
/// (fn.nodes.size() for outputs): when it can be freed.
std::vector<size_t> lastUses(const Function &fn, size_t numValues);

/// Runs an entry point of a loaded artifact on the CPU reference backend.
class Session : public Executor {
public:
  explicit Session(const Artifact &artifact) : artifact(artifact) {}

  /// Which node list run() executes: the op-by-op plan ("functions", the
  /// default) or the GPU plan ("gpu_functions": kernel regions, each run op
  /// by op from its body). Running the GPU plan on the CPU checks that it
  /// computes what the op plan does, and checks inferShapes() against every
  /// kernel region's actual result shapes.
  enum class Plan { Ops, Kernels };
  void setPlan(Plan p) { plan = p; }

  /// Checks `inputs` against the entry point's ports (names, dtypes, ranks,
  /// static sizes, and consistent sizes for equal dynamic dimension names),
  /// runs every node in order and returns the outputs by name. Errors throw
  /// std::runtime_error naming the input or the node.
  ///
  /// With `kv` (entry points with `kv_attention` nodes: prefill, decode),
  /// first reserves room for each row's valid tokens (so that capacity
  /// errors come before any computation), runs `kv_attention` nodes against
  /// the cache and finally advances each row's sequence by its valid count.
  std::map<std::string, Tensor> run(const std::string &function,
                                    const std::map<std::string, Tensor> &inputs,
                                    KvBatch *kv = nullptr) override;

  /// Runs one node (a kernel node through its body) outside any entry
  /// point: the CUDA backend's host fallback, its check mode and the CPU
  /// part of a layer split. `kv` (may be null) carries the call's
  /// per-sequence LoRA adapters, which a qcc.lora node reads, and, for the
  /// layers a split runs on the CPU, the cache a kv_attention reads and
  /// appends to; the caller reserves its room before and advances it after
  /// the call's nodes, as run() does.
  std::vector<Tensor> runOne(const Node &node, const Operands &operands,
                             KvBatch *kv = nullptr);
  /// Runs the nodes `indices` (ascending) of `fn`, an op-plan entry point,
  /// on `values`, its value table, as run() does (fused epilogues, packed
  /// and compressed weights for the nodes from `prepared` on); the caller
  /// set every value they read that none of them makes, and reserves the KV
  /// batch's room before and advances it after. A layer split's CPU half
  /// (runtime/core/LayerSplit.h, OpTail).
  void runNodes(const Function &fn, const std::vector<size_t> &indices,
                std::vector<Tensor> &values, KvBatch *kv, size_t prepared);
  /// Makes the weights of fn's nodes from `first` on ready for runNodes
  /// (packed, compressed forms), once; the mapped bytes are released as
  /// they are packed.
  void prepareNodes(const Function &fn, size_t first);
  /// On the fast path, packs the weights of `node` (and of its body) for
  /// the GEMMs as run() does for an entry point's, once: runOne then reads
  /// them packed. The mapped source is released as it is packed.
  void packForHost(const Node &node);

  /// Called after each node runs with the node, its operands and its
  /// results (before any value is freed), e.g. to collect calibration
  /// statistics. The weight operand of a linear that runs from its 2:4
  /// compressed form (CpuSparseKernels.h) is an empty tensor. An empty function (the default) turns it off at the cost of
  /// one test per node.
  using Observer = std::function<void(const Node &, const Operands &inputs,
                                      const std::vector<Tensor> &outputs)>;
  void setObserver(Observer fn) { observer = std::move(fn); }

  /// Shape-only runs (cost models: `qcc --report`): kernel regions are not
  /// computed, their results are zero tensors of the shapes inferShapes()
  /// gives, while the glue around them runs, so that shapes computed from
  /// shapes come out right.
  void setShapeOnly(bool on) { shapeOnly = on; }

  /// One node of an entry point (a kernel region or an op; not the ops
  /// inside a region) as it ran: its cost (runtime/core/Roofline.h) at the
  /// shapes it ran with, and its time.
  struct NodeRun {
    const std::string &function;
    const Node &node;
    const Cost &cost;
    double seconds;
  };
  /// Called after every node of every run when set (empty: off).
  using Tracer = std::function<void(const NodeRun &)>;
  void setTracer(Tracer fn) { tracer = std::move(fn); }

  /// The cache keeps keys and values in host memory, as the options say.
  KvCacheOptions cacheOptions(KvCacheOptions o) const override { return o; }
  std::string profileDevice() const override { return "the CPU"; }
  const Peaks &profilePeaks() const override { return cpuPeaks(); }

private:
  /// How the fast paths for compressed weights run a top-level node: a
  /// linear / qlinear whose weight a sparse_2_4 node of constants produces
  /// runs from the compressed `weight` (runtime/cpu/CpuSparseKernels.h), a
  /// linear whose weight a weight_int4 node of constants produces from the
  /// packed `int4` (runtime/cpu/CpuInt4Kernels.h); that producing node is
  /// skipped when nothing else reads the dense weight.
  struct CompressedUse {
    enum Role : uint8_t { None, Linear, Skip } role = None;
    CompressedWeight compressed; ///< Linear: the 2:4 or int4 weight, for its cost
    Sparse24Weight weight;
    Int4Weight int4; ///< int4.packed set: a W4A16 linear
    bool isInt4() const { return int4.packed != nullptr; }
    /// An int4 linear whose input is W4A8's quantize with an f32 result,
    /// on a CPU with VNNI: the repacked weight and the quantize's scales'
    /// value (runtime/cpu/CpuW4A8Kernels.h).
    const PackedW4A8Weight *w4a8 = nullptr;
    int64_t codeScale = -1;
    /// Linear, 2:4, where sparseRunsDense(): the weight expanded once and
    /// packed for the dense kernel, and a stand-in for the dense weight's
    /// operand slot (its dtype and shape; a view of the packed bytes, which
    /// are at least as many: the packed kernels read no other).
    const PackedI8Weight *denseI8 = nullptr;
    const PackedF32Weight *denseF32 = nullptr;
    Tensor denseStandIn;
    bool runsDense() const { return denseI8 || denseF32; }
    int64_t weightOperand() const {
      return isInt4() ? 1 : compressed.operand;
    }
    Shape denseShape() const {
      return isInt4() ? Shape{int4.n(), int4.k()}
                      : Shape{weight.n(), weight.k()};
    }
  };
  /// Of fn's nodes; the weights of those from `from` on made ready (the
  /// expanded 2:4, the repacked W4A8 ones).
  const std::vector<CompressedUse> &compressedUses(const Function &fn,
                                                   size_t from = 0);
  /// Expands the 2:4 weight of `use` to the dense layout and packs it (once
  /// per compressed weight: entry points share them), where
  /// sparseRunsDense() and the values are int8 or float32.
  void expandSparse(CompressedUse &use, OpKind kind);

  /// Packs, once per constant, the int8 weight of every qlinear and the
  /// float32 weight of every linear of `fn` (kernel region bodies included)
  /// for the fast path's GEMMs (runtime/cpu/CpuInt8Gemm.h, on CPUs with AVX-512
  /// VNNI; runtime/cpu/CpuF32Gemm.h, with AVX-512F; elsewhere nothing is packed
  /// and the portable kernel or BLAS runs).
  void packWeights(const Function &fn, size_t from = 0);
  void packNode(const Node &node);
  /// On the fast path, the packed form of node's weight (a qlinear's), or
  /// nullptr.
  const PackedI8Weight *packedWeight(const Node &node,
                                     const Operands &ops) const;
  /// On the fast path, the packed form of node's weight (a float32
  /// linear's), or nullptr.
  const PackedF32Weight *packedF32Weight(const Node &node,
                                         const Operands &ops) const;

  /// Runs one node (a kernel node through its body); `values` is the
  /// function's value table (body values live there too).
  Operands operandsOf(const Node &node, std::vector<Tensor> &values) const;
  std::vector<Tensor> runNode(const Node &node, const Operands &operands,
                              std::vector<Tensor> &values, KvBatch *kv,
                              const std::string &function,
                              const CompressedUse *sparse = nullptr);

  const Artifact &artifact;
  std::map<std::pair<const Function *, size_t>, std::vector<CompressedUse>>
      compressedUses_;
  std::set<std::pair<const Function *, size_t>> packedFunctions_;
  // By the constant's bytes and shape: entry points share weights under
  // other value ids (keyed by id, SmolLM2's float weights were packed
  // twice: +1 GB), and an artifact may lay two constants of other shapes
  // over the same bytes.
  using PackKey = std::tuple<const void *, int64_t, int64_t>;
  std::map<PackKey, std::optional<PackedI8Weight>> packed_;
  std::map<PackKey, std::optional<PackedF32Weight>> packedF32_;
  std::map<const void *, PackedW4A8Weight> packedW4A8_; ///< by packed bytes
  std::vector<Tensor> oneNodeValues; ///< runOne's value table
  Plan plan = Plan::Ops;
  bool shapeOnly = false;
  Observer observer;
  Tracer tracer;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_SESSION_H
