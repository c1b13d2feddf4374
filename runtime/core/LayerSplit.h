//===- LayerSplit.h - where a model splits by layers ------------*- C++ -*-===//
//
// llama.cpp's -ngl (qrun --gpu-layers N): the first N transformer blocks run
// on the GPU, the rest of the model on the CPU backend. A block is what lies
// between the kv_attention nodes of two consecutive layers. Each entry point
// is cut once, at the node boundary between the attentions of layers N-1 and
// N where the fewest activations are live (at the end of block N-1: the
// residual stream alone), so that they cross once per call. Entry points
// without a cache (main) are cut between the last node reading a weight
// that the cached entry points read only before their cuts and the first
// reading one they read only after.
//
// The cut depends on the node list alone, not on which backend runs a node:
// every plan of an artifact (the op plan, the GPU plan) splits the same way.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_LAYERSPLIT_H
#define QCC_RUNTIME_LAYERSPLIT_H

#include "runtime/core/Artifact.h"

#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace qcc::rt {

struct LayerSplit {
  int64_t modelLayers = 0; ///< the distinct layers of the kv_attention nodes
  int64_t gpuLayers = 0;   ///< blocks before the cut (<= modelLayers)
  /// Per entry point: the index of its first node after the cut
  /// (fn->nodes.size(): none, the whole entry point is before it).
  std::map<const Function *, size_t> cut;
  bool splits() const { return gpuLayers < modelLayers; }
};

/// The split of `functions` (entry points of `artifact`) after `gpuLayers`
/// blocks (>= 0; at or above the model's layers: nothing after the cut).
/// Throws std::runtime_error when no entry point has a kv_attention (no
/// layers to count), when the entry points disagree on the layers, or when
/// one node holds the attentions of layers gpuLayers-1 and gpuLayers.
LayerSplit splitByLayers(const Artifact &artifact,
                         const std::vector<const Function *> &functions,
                         int64_t gpuLayers);

/// The CPU half of a split run from the op plan rather than op by op from the
/// GPU plan's regions: the CPU backend's fused epilogues and compressed (2:4,
/// int4) weight paths then apply to it. Both plans of an entry point are cut
/// the same way (at the end of block N-1); what crosses the op plan's cut is
/// either carried over from the GPU plan's (the values made after an
/// attention: the residual stream) or made again on the CPU by the op
/// plan's `prologue` (those made without one: positions, masks, rotary
/// tables, from the inputs alone).
struct OpTail {
  const Function *ops = nullptr; ///< the op plan's entry point
  size_t cut = 0;                ///< its first node after the cut
  /// Its nodes before the cut that make the crossing values no attention
  /// precedes, ascending.
  std::vector<size_t> prologue;
  /// (GPU plan's value, op plan's value) pairs crossing the cuts after an
  /// attention, matched in the order the nodes after the cuts first read
  /// them.
  std::vector<std::pair<int64_t, int64_t>> carried;
};

/// The op tail of `gpu` cut before node `gpuCut` and `ops` (the same entry
/// point's op plan) cut before `opsCut`; nullopt when the two plans carry a
/// different number of values after an attention across their cuts, or of
/// different dtypes (the split then runs the GPU plan's regions on the CPU).
std::optional<OpTail> opTailOf(const Artifact &artifact, const Function &gpu,
                               size_t gpuCut, const Function &ops,
                               size_t opsCut);

/// Bytes of the weights (constants, each once by its bytes) that the nodes
/// before the cuts read, but for the nodes `onHost` names (the CUDA backend
/// looks up embedding rows on the host when it off-loads): what the device
/// holds under `split`.
uint64_t weightBytesBefore(const Artifact &artifact, const LayerSplit &split,
                           const std::function<bool(const Node &)> &onHost = {});

} // namespace qcc::rt

#endif // QCC_RUNTIME_LAYERSPLIT_H
