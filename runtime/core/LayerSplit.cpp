//===- LayerSplit.cpp - where a model splits by layers --------------------===//
#include "runtime/core/LayerSplit.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

namespace qcc::rt {
namespace {

/// The layers of the kv_attention nodes of `n` (itself or its body).
void attentionLayers(const Node &n, std::vector<int64_t> &out) {
  if (n.kind == OpKind::KvAttention)
    out.push_back(n.attrs.value("layer", int64_t(-1)));
  if (n.body)
    for (const Node &inner : n.body->nodes)
      attentionLayers(inner, out);
}

/// A weight by its bytes: entry points name the same weight under value ids
/// of their own.
using WeightKey = std::pair<const void *, size_t>;

void weightsRead(const Artifact &a, const Node &n, std::set<WeightKey> &out) {
  for (int64_t id : n.inputs)
    if (const Tensor *c = id >= 0 ? a.constant(id) : nullptr)
      out.insert({c->raw(), c->bytes()});
  if (n.body)
    for (const Node &inner : n.body->nodes)
      weightsRead(a, inner, out);
}

/// Values that hold activations (shape arithmetic is integer).
bool isActivation(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 ||
         t == DType::I8 || t == DType::F8E4M3;
}

/// The boundary in [lo, hi] (cut before node p) with the fewest activation
/// values live across it; the latest of equals (more of the model before).
size_t leastLiveBoundary(const Artifact &a, const Function &fn, size_t lo,
                         size_t hi) {
  std::vector<size_t> producer(a.numValues(), SIZE_MAX),
      lastUse(a.numValues(), 0);
  for (size_t i = 0; i < fn.nodes.size(); ++i) {
    for (int64_t id : fn.nodes[i].inputs)
      if (id >= 0)
        lastUse[id] = i;
    for (int64_t id : fn.nodes[i].outputs)
      producer[id] = i;
  }
  for (const Port &p : fn.outputs)
    lastUse[p.value] = fn.nodes.size();
  // live[p - lo]: values made before node p and read at or after it.
  std::vector<int64_t> live(hi - lo + 1, 0);
  for (size_t v = 0; v < producer.size(); ++v) {
    if (producer[v] == SIZE_MAX || !isActivation(a.valueType(v).first))
      continue;
    size_t from = std::max(lo, producer[v] + 1), to = std::min(hi, lastUse[v]);
    for (size_t p = from; p <= to && p >= lo; ++p)
      ++live[p - lo];
  }
  size_t best = hi;
  for (size_t p = hi + 1; p-- > lo;)
    if (live[p - lo] < live[best - lo])
      best = p;
  return best;
}

} // namespace

LayerSplit splitByLayers(const Artifact &artifact,
                         const std::vector<const Function *> &functions,
                         int64_t gpuLayers) {
  if (gpuLayers < 0)
    throw std::runtime_error("--gpu-layers: " + std::to_string(gpuLayers) +
                             " is negative");
  LayerSplit split;
  // Per cached entry point: where each layer's attention is.
  std::map<const Function *, std::map<int64_t, size_t>> attentions;
  for (const Function *fn : functions) {
    std::map<int64_t, size_t> at;
    for (size_t i = 0; i < fn->nodes.size(); ++i) {
      std::vector<int64_t> layers;
      attentionLayers(fn->nodes[i], layers);
      for (int64_t l : layers)
        if (l < 0 || !at.emplace(l, i).second)
          throw std::runtime_error(
              "entry point " + fn->name + ": kv_attention layer " +
              std::to_string(l) + (l < 0 ? " is negative" : " appears twice"));
    }
    if (at.empty())
      continue;
    int64_t count = (int64_t)at.size();
    if (at.rbegin()->first != count - 1)
      throw std::runtime_error("entry point " + fn->name +
                               ": kv_attention layers are not 0.." +
                               std::to_string(count - 1));
    if (split.modelLayers && split.modelLayers != count)
      throw std::runtime_error("entry point " + fn->name + " has " +
                               std::to_string(count) + " layers, another " +
                               std::to_string(split.modelLayers));
    split.modelLayers = count;
    attentions[fn] = std::move(at);
  }
  if (attentions.empty())
    throw std::runtime_error("no entry point has a kv_attention: no layers "
                             "to split (compile with a KV cache)");
  split.gpuLayers = std::min(gpuLayers, split.modelLayers);
  if (!split.splits()) {
    for (const Function *fn : functions)
      split.cut[fn] = fn->nodes.size();
    return split;
  }
  // The cached entry points: between the two attentions. Their weights on
  // either side place the others' cuts.
  std::set<WeightKey> before, after;
  for (auto &[fn, at] : attentions) {
    size_t hi = at.at(split.gpuLayers);
    size_t lo = split.gpuLayers == 0 ? 0 : at.at(split.gpuLayers - 1) + 1;
    if (lo > hi)
      throw std::runtime_error(
          "entry point " + fn->name + ": node '" + fn->nodes[hi].name +
          "' holds the attentions of layers " +
          std::to_string(split.gpuLayers - 1) + " and " +
          std::to_string(split.gpuLayers) + ": no cut between them");
    for (size_t l = 1; l < at.size(); ++l)
      if (at.at(l) < at.at(l - 1))
        throw std::runtime_error("entry point " + fn->name +
                                 ": the attention of layer " +
                                 std::to_string(l) + " comes before layer " +
                                 std::to_string(l - 1) + "'s");
    size_t cut = leastLiveBoundary(artifact, *fn, lo, hi);
    split.cut[fn] = cut;
    for (size_t i = 0; i < fn->nodes.size(); ++i)
      weightsRead(artifact, fn->nodes[i], i < cut ? before : after);
  }
  std::set<WeightKey> onlyBefore, onlyAfter;
  std::set_difference(before.begin(), before.end(), after.begin(),
                      after.end(),
                      std::inserter(onlyBefore, onlyBefore.begin()));
  std::set_difference(after.begin(), after.end(), before.begin(),
                      before.end(), std::inserter(onlyAfter, onlyAfter.begin()));
  for (const Function *fn : functions) {
    if (attentions.count(fn))
      continue;
    // After the last node reading a weight of the first blocks, at or before
    // the first reading one of the rest.
    size_t lo = 0, hi = fn->nodes.size();
    for (size_t i = 0; i < fn->nodes.size(); ++i) {
      std::set<WeightKey> read;
      weightsRead(artifact, fn->nodes[i], read);
      for (const WeightKey &w : read) {
        if (onlyBefore.count(w))
          lo = i + 1;
        if (onlyAfter.count(w) && hi == fn->nodes.size())
          hi = i;
      }
    }
    split.cut[fn] = hi == fn->nodes.size() ? hi
                    : lo > hi             ? hi
                                          : leastLiveBoundary(artifact, *fn,
                                                              lo, hi);
  }
  return split;
}

namespace {

bool holdsAttention(const Node &n) {
  std::vector<int64_t> layers;
  attentionLayers(n, layers);
  return !layers.empty();
}

/// What crosses `fn`'s cut before node `cut`: values made before it and read
/// after it (or returned), in the order they are first read there; and
/// whether each is made after an attention.
struct Crossing {
  std::vector<int64_t> values;
  std::vector<bool> afterAttention;
};
Crossing crossing(const Artifact &a, const Function &fn, size_t cut) {
  std::vector<char> made(a.numValues(), 0), afterAttention(a.numValues(), 0);
  for (size_t i = 0; i < cut; ++i) {
    const Node &n = fn.nodes[i];
    bool after = holdsAttention(n);
    for (int64_t id : n.inputs)
      after = after || (id >= 0 && afterAttention[id]);
    for (int64_t id : n.outputs) {
      made[id] = 1;
      afterAttention[id] = after;
    }
  }
  Crossing c;
  std::vector<char> seen(a.numValues(), 0);
  auto read = [&](int64_t id) {
    if (id >= 0 && made[id] && !seen[id]) {
      seen[id] = 1;
      c.values.push_back(id);
      c.afterAttention.push_back(afterAttention[id]);
    }
  };
  for (size_t i = cut; i < fn.nodes.size(); ++i)
    for (int64_t id : fn.nodes[i].inputs)
      read(id);
  for (const Port &p : fn.outputs)
    read(p.value);
  return c;
}

} // namespace

std::optional<OpTail> opTailOf(const Artifact &artifact, const Function &gpu,
                               size_t gpuCut, const Function &ops,
                               size_t opsCut) {
  Crossing g = crossing(artifact, gpu, gpuCut), o = crossing(artifact, ops, opsCut);
  std::vector<int64_t> gCarried, oCarried;
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.afterAttention[i])
      gCarried.push_back(g.values[i]);
  OpTail tail;
  tail.ops = &ops;
  tail.cut = opsCut;
  std::vector<int64_t> needed; // made again by the prologue
  for (size_t i = 0; i < o.values.size(); ++i)
    (o.afterAttention[i] ? oCarried : needed).push_back(o.values[i]);
  if (gCarried.size() != oCarried.size())
    return std::nullopt;
  for (size_t i = 0; i < gCarried.size(); ++i) {
    if (artifact.valueType(gCarried[i]).first !=
        artifact.valueType(oCarried[i]).first)
      return std::nullopt;
    tail.carried.push_back({gCarried[i], oCarried[i]});
  }
  // The prologue: the nodes before the cut that the needed values come from.
  std::vector<size_t> producer(artifact.numValues(), SIZE_MAX);
  for (size_t i = 0; i < opsCut; ++i)
    for (int64_t id : ops.nodes[i].outputs)
      producer[id] = i;
  std::vector<char> inPrologue(opsCut, 0);
  while (!needed.empty()) {
    int64_t id = needed.back();
    needed.pop_back();
    size_t i = id >= 0 ? producer[id] : SIZE_MAX;
    if (i == SIZE_MAX || inPrologue[i])
      continue; // an input, a constant, or already in
    inPrologue[i] = 1;
    for (int64_t in : ops.nodes[i].inputs)
      needed.push_back(in);
  }
  for (size_t i = 0; i < opsCut; ++i)
    if (inPrologue[i])
      tail.prologue.push_back(i);
  return tail;
}

uint64_t weightBytesBefore(const Artifact &artifact, const LayerSplit &split,
                           const std::function<bool(const Node &)> &onHost) {
  std::set<WeightKey> before;
  for (auto &[fn, cut] : split.cut)
    for (size_t i = 0; i < cut; ++i)
      if (!onHost || !onHost(fn->nodes[i]))
        weightsRead(artifact, fn->nodes[i], before);
  uint64_t bytes = 0;
  for (const WeightKey &w : before)
    bytes += w.second;
  return bytes;
}

} // namespace qcc::rt
