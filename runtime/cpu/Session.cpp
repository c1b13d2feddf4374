//===- Session.cpp - running an artifact's entry points -------------------===//
#include "runtime/cpu/Session.h"
#include "runtime/cpu/KvAttention.h"

#include "format/Int4.h"
#include "format/Sparse24.h"
#include "runtime/cpu/CpuKernels.h"
#include "runtime/core/ShapeInference.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

using namespace qcc::rt;

static void checkInput(const Port &port, const Tensor &t,
                       std::map<std::string, int64_t> &dimSizes) {
  auto fail = [&](const std::string &why) {
    throw std::runtime_error("input '" + port.name + "': " + why);
  };
  if (t.dtype() != port.dtype)
    fail(std::string("expected dtype ") + dtypeName(port.dtype) + ", got " +
         dtypeName(t.dtype()));
  if (t.rank() != (int64_t)port.shape.size())
    fail("expected rank " + std::to_string(port.shape.size()) + " " +
         shapeString(port.shape) + ", got shape " + shapeString(t.shape()));
  for (size_t i = 0; i < port.shape.size(); ++i) {
    if (port.shape[i] >= 0 && port.shape[i] != t.dim(i))
      fail("dimension " + std::to_string(i) + " must be " +
           std::to_string(port.shape[i]) + ", got shape " +
           shapeString(t.shape()));
    const std::string &name = i < port.dims.size() ? port.dims[i] : "";
    if (port.shape[i] < 0 && !name.empty()) {
      auto [it, fresh] = dimSizes.emplace(name, t.dim(i));
      if (!fresh && it->second != t.dim(i))
        fail("dimension '" + name + "' is " + std::to_string(t.dim(i)) +
             " here but " + std::to_string(it->second) +
             " in another input");
    }
  }
}

void qcc::rt::checkInputs(const Function &fn,
                          const std::map<std::string, Tensor> &inputs) {
  for (const auto &[n, t] : inputs) {
    bool known = false;
    for (const Port &p : fn.inputs)
      known |= p.name == n;
    if (!known) {
      std::string names;
      for (const Port &p : fn.inputs)
        names += (names.empty() ? "" : ", ") + p.name;
      throw std::runtime_error("unknown input '" + n + "' (the model's "
                               "inputs: " + names + ")");
    }
  }
  std::map<std::string, int64_t> dimSizes;
  for (const Port &p : fn.inputs) {
    auto it = inputs.find(p.name);
    if (it == inputs.end())
      throw std::runtime_error("missing input '" + p.name + "'");
    checkInput(p, it->second, dimSizes);
  }
}

/// The operands' shapes (an omitted optional operand: an empty shape).
static std::vector<Shape> shapesOf(const Operands &operands) {
  std::vector<Shape> shapes;
  for (const Tensor *t : operands)
    shapes.push_back(t ? t->shape() : Shape());
  return shapes;
}

/// The epilogue that node `i` of `fn`, a float32 linear or a qlinear (float
/// result), absorbs from node i + 1 (CpuKernels.h, LinearEpilogue): an exact
/// gelu or a silu of its result, or an add or a mul of its result and
/// another float32 tensor of the result's shape, when nothing else reads the
/// linear's result. nullopt when there is none.
static std::optional<LinearEpilogue>
epilogueAfter(const Artifact &artifact, const Function &fn, size_t i,
              const std::vector<size_t> &lastUse,
              const std::vector<Tensor> &values, const Operands &ops) {
  const Node &node = fn.nodes[i];
  const bool q = node.kind == OpKind::QLinear;
  // The weight: a linear's operand 1, a qlinear's 3 (QccOps.td).
  const size_t wi = q ? 3 : 1;
  if ((node.kind != OpKind::Linear && !q) || node.body ||
      i + 1 >= fn.nodes.size() || node.outputs.size() != 1 ||
      ops.size() <= wi || !ops[0] || !ops[wi])
    return std::nullopt;
  const Node &next = fn.nodes[i + 1];
  int64_t out = node.outputs[0];
  if (next.body || next.outputs.size() != 1 || lastUse[out] != i + 1 ||
      artifact.valueType(out).first != DType::F32 ||
      artifact.valueType(next.outputs[0]).first != DType::F32)
    return std::nullopt;
  // A qlinear's integer operands as it takes them, its scales and bias f32
  // (the fast kernel's types; anything else runs unfused).
  for (const Tensor *t : ops)
    if (t && t->dtype() != DType::F32 &&
        !(q && (t->dtype() == DType::I8 || t->dtype() == DType::I32)))
      return std::nullopt;
  const Tensor &x = *ops[0], &w = *ops[wi];
  if (x.rank() < 1 || w.rank() != 2)
    return std::nullopt;
  LinearEpilogue epi;
  if (next.inputs.size() == 1 && next.inputs[0] == out &&
      ((next.kind == OpKind::Gelu &&
        next.attrs.value("approximate", std::string("none")) == "none") ||
       next.kind == OpKind::Silu)) {
    epi.activation = next.kind == OpKind::Gelu
                         ? LinearEpilogue::Activation::Gelu
                         : LinearEpilogue::Activation::Silu;
    return epi;
  }
  if ((next.kind != OpKind::Add && next.kind != OpKind::Mul) ||
      next.inputs.size() != 2 ||
      (next.inputs[0] == out) == (next.inputs[1] == out))
    return std::nullopt;
  int64_t other = next.inputs[next.inputs[0] == out ? 1 : 0];
  if (other < 0)
    return std::nullopt;
  const Tensor *t =
      artifact.constant(other) ? artifact.constant(other) : &values[other];
  Shape shape = x.shape();
  shape.back() = w.dim(0);
  if (t->dtype() != DType::F32 || t->shape() != shape)
    return std::nullopt;
  (next.kind == OpKind::Add ? epi.residual : epi.factor) = t;
  return epi;
}

std::map<std::string, Tensor>
Session::run(const std::string &name,
             const std::map<std::string, Tensor> &inputs, KvBatch *kv) {
  const Function *gpu = artifact.gpuFunction(name);
  if (plan == Plan::Kernels && !gpu)
    throw std::runtime_error(artifact.path() + ": no GPU plan for entry point "
                             "'" + name + "' (compiled with --no-cuda?)");
  const Function &fn = plan == Plan::Kernels ? *gpu : artifact.function(name);
  std::vector<Tensor> values(artifact.numValues());
  checkInputs(fn, inputs);
  for (const Port &p : fn.inputs)
    values[p.value] = inputs.at(p.name);

  // A batch without a cache carries only the rows' LoRA adapters.
  KvBatch *cached = kv && kv->cache ? kv : nullptr;
  if (cached && !kv->adapters.empty() &&
      kv->adapters.size() != kv->seqs.size())
    throw std::runtime_error("entry point " + name + ": the KV batch has " +
                             std::to_string(kv->seqs.size()) +
                             " sequences but " +
                             std::to_string(kv->adapters.size()) +
                             " adapters");
  if (cached) {
    if (kv->seqs.size() != kv->valid.size())
      throw std::runtime_error("entry point " + name + ": the KV batch has " +
                               std::to_string(kv->seqs.size()) +
                               " sequences but " +
                               std::to_string(kv->valid.size()) +
                               " valid counts");
    for (size_t b = 0; b < kv->seqs.size(); ++b)
      kv->cache->reserve(kv->seqs[b],
                         kv->cache->length(kv->seqs[b]) + kv->valid[b]);
  }

  std::vector<size_t> all(fn.nodes.size());
  for (size_t i = 0; i < all.size(); ++i)
    all[i] = i;
  runNodes(fn, all, values, kv, 0);
  if (cached)
    for (size_t b = 0; b < kv->seqs.size(); ++b)
      kv->cache->advance(kv->seqs[b], kv->valid[b]);
  std::map<std::string, Tensor> out;
  for (const Port &p : fn.outputs)
    out[p.name] = artifact.constant(p.value) ? *artifact.constant(p.value)
                                              : values[p.value];
  return out;
}

void Session::runNodes(const Function &fn, const std::vector<size_t> &indices,
                       std::vector<Tensor> &values, KvBatch *kv,
                       size_t prepared) {
  // Free each value after its last use to bound memory.
  std::vector<size_t> lastUse = lastUses(fn, values.size());
  KvBatch *cached = kv && kv->cache ? kv : nullptr;
  // What kv_attention nodes see of the cache (for costs).
  KvState kvState;
  if (cached) {
    for (size_t b = 0; b < kv->seqs.size(); ++b)
      kvState.cached.push_back(kv->cache->length(kv->seqs[b]));
    kvState.valid = kv->valid;
    kvState.elementBytes = (double)kv->cache->config().elementBytes();
    kvState.rowScaleBytes =
        kv->cache->config().valueScalePerToken() ? sizeof(float) : 0;
  }
  const std::vector<CompressedUse> *sparse =
      cpuKernelPath() != CpuKernelPath::Reference
          ? &compressedUses(fn, prepared)
          : nullptr;
  if (cpuKernelPath() != CpuKernelPath::Reference)
    packWeights(fn, prepared);
  const std::string &name = fn.name;
  for (size_t k = 0; k < indices.size(); ++k) {
    const size_t i = indices[k];
    const Node &node = fn.nodes[i];
    const CompressedUse *use =
        sparse && i >= prepared ? &(*sparse)[i] : nullptr;
    if (use && use->role == CompressedUse::Skip)
      continue;
    if (use && use->role != CompressedUse::Linear)
      use = nullptr;
    Operands operands = operandsOf(node, values);
    auto t0 = std::chrono::steady_clock::now();
    // The fast path runs linear -> gelu / silu / add / mul as one kernel,
    // the GEMM with its epilogue; not while something watches each node. A
    // 2:4 weight the loader expanded runs as the dense linear it became,
    // its epilogue included (unfused, 2:4 ran 4-14% under dense).
    const bool expanded = use && use->runsDense() && sparseRunsDense();
    Operands denseOps; // an expanded weight's operands: its dense stand-in
    if (expanded) {
      denseOps = operands;
      denseOps.at(use->weightOperand()) = &use->denseStandIn;
    }
    const Operands &fusedOps = expanded ? denseOps : operands;
    std::optional<LinearEpilogue> epi;
    if ((!use || expanded) && !observer && !tracer && !shapeOnly &&
        cpuKernelPath() != CpuKernelPath::Reference &&
        k + 1 < indices.size() && indices[k + 1] == i + 1)
      epi = epilogueAfter(artifact, fn, i, lastUse, values, fusedOps);
    if (epi) {
      const Node &next = fn.nodes[i + 1];
      std::vector<Tensor> results;
      try {
        if (expanded)
          results = use->denseI8 ? fastQLinearKernel(Attrs(node.attrs),
                                                     fusedOps, use->denseI8,
                                                     *epi)
                                 : linearWithEpilogue(fusedOps, *epi,
                                                      use->denseF32);
        else
          results = node.kind == OpKind::QLinear
                        ? fastQLinearKernel(Attrs(node.attrs), operands,
                                            packedWeight(node, operands),
                                            *epi)
                        : linearWithEpilogue(operands, *epi,
                                             packedF32Weight(node, operands));
      } catch (const std::exception &e) {
        throw std::runtime_error("node '" + node.name + "' (" +
                                 opKindName(node.kind) + ", with '" +
                                 next.name + "' fused): " + e.what());
      }
      if (profiling) {
        double secs = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
        std::vector<Shape> in = shapesOf(fusedOps), mid{results[0].shape()};
        std::vector<Shape> nextIn{results[0].shape()};
        for (const Tensor *t : {epi->residual, epi->factor})
          if (t)
            nextIn.push_back(t->shape());
        Cost cost = nodeCost(artifact, node, in, mid, nullptr, nullptr);
        cost += nodeCost(artifact, next, nextIn, mid, nullptr, nullptr);
        nodeProfile.add(name,
                        std::string(opKindName(node.kind)) + "+" +
                            opKindName(next.kind),
                        secs, cost);
      }
      values[next.outputs[0]] = std::move(results[0]);
      for (size_t j : {i, i + 1})
        for (int64_t id : fn.nodes[j].inputs)
          if (id >= 0 && lastUse[id] <= i + 1 && !artifact.constant(id))
            values[id] = Tensor();
      ++k;
      continue;
    }
    std::vector<Tensor> results =
        runNode(node, operands, values, kv, name, use);
    if (profiling || tracer) {
      double secs = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
      std::vector<Shape> in = shapesOf(operands), out;
      for (const Tensor &t : results)
        out.push_back(t.shape());
      if (use) // the dense weight's slot holds nothing: its shape
        in[use->weightOperand()] = use->denseShape();
      Cost cost =
          use && use->runsDense()
              // The dense weight, as the dense kernel reads it.
              ? sparseLinearCost(artifact, node, use->compressed,
                                 numElements(in[0]) / std::max<int64_t>(
                                                          1, in[0].back()))
                    .dense
              : nodeCost(artifact, node, in, out, cached ? &kvState : nullptr,
                         use ? &use->compressed : nullptr);
      if (tracer)
        tracer({name, node, cost, secs});
      if (profiling)
        nodeProfile.add(name, profileKind(node), secs, cost);
    }
    for (size_t r = 0; r < results.size(); ++r)
      values[node.outputs[r]] = std::move(results[r]);
    for (int64_t id : node.inputs)
      if (id >= 0 && lastUse[id] == i && !artifact.constant(id))
        values[id] = Tensor();
  }
}

std::vector<size_t> qcc::rt::lastUses(const Function &fn, size_t numValues) {
  std::vector<size_t> lastUse(numValues, 0);
  for (size_t i = 0; i < fn.nodes.size(); ++i)
    for (int64_t id : fn.nodes[i].inputs)
      if (id >= 0)
        lastUse[id] = i;
  for (const Port &p : fn.outputs)
    lastUse[p.value] = fn.nodes.size();
  return lastUse;
}

Operands Session::operandsOf(const Node &node,
                             std::vector<Tensor> &values) const {
  Operands operands;
  for (int64_t id : node.inputs) {
    const Tensor *t = nullptr;
    if (id >= 0)
      t = artifact.constant(id) ? artifact.constant(id) : &values[id];
    operands.push_back(t);
  }
  return operands;
}

std::vector<Tensor> Session::runOne(const Node &node,
                                    const Operands &operands, KvBatch *kv) {
  // One table for every call: runNode empties the body values it sets, and
  // a table per call costs more than the node on a small model (SmolLM2's
  // has 29k values).
  if (oneNodeValues.size() != artifact.numValues())
    oneNodeValues.assign(artifact.numValues(), Tensor());
  return runNode(node, operands, oneNodeValues, kv, "(host)");
}

void Session::packForHost(const Node &node) {
  if (cpuKernelPath() != CpuKernelPath::Reference)
    packNode(node);
}

const std::vector<Session::CompressedUse> &
Session::compressedUses(const Function &fn, size_t from) {
  auto [it, fresh] = compressedUses_.try_emplace({&fn, from});
  std::vector<CompressedUse> &uses = it->second;
  if (!fresh)
    return uses;
  uses.resize(fn.nodes.size());
  // The dense weights that those linears read (value -> whether another
  // node or an output needs it): skip the nodes that make them unless so.
  std::map<int64_t, bool> needDense;
  for (auto &[i, w] : compressedWeights(artifact, fn)) {
    uses[i].role = CompressedUse::Linear;
    uses[i].compressed = w;
    // The loader validated the constant metadata (runtime/core/Artifact.cpp).
    uses[i].weight = sparseWeight(*w.values, *w.meta, /*checkMeta=*/false);
    needDense[fn.nodes[i].inputs[w.operand]] = false;
    if (sparseRunsDense() && i >= from)
      expandSparse(uses[i], fn.nodes[i].kind);
  }
  std::map<int64_t, const Node *> int4Producer; // dense weight -> weight_int4
  // Values that are per-token symmetric int8 codes read back (W4A8's
  // quantize with an f32 result) -> that quantize, when nothing reads its
  // scales (so they live until the run ends, for the linear to read).
  std::set<int64_t> read;
  for (const Node &n : fn.nodes)
    read.insert(n.inputs.begin(), n.inputs.end());
  for (const Port &p : fn.outputs)
    read.insert(p.value);
  std::map<int64_t, const Node *> codeProducer;
  for (const Node &n : fn.nodes)
    if (n.kind == OpKind::Quantize && n.outputs.size() == 3 &&
        n.attrs.value("to", "") == "f32" &&
        n.attrs.value("granularity", "") == "per_token" &&
        !n.attrs.value("asymmetric", false) && !n.attrs.contains("scale") &&
        !n.attrs.contains("outlier_columns") && !read.count(n.outputs[1]))
      codeProducer[n.outputs[0]] = &n;
  for (const Node &n : fn.nodes)
    if (n.kind == OpKind::WeightInt4 && n.outputs.size() == 1 &&
        n.inputs.size() >= 2 &&
        std::all_of(n.inputs.begin(), n.inputs.end(),
                    [&](int64_t id) { return artifact.constant(id); }))
      int4Producer[n.outputs[0]] = &n;
  for (size_t i = 0; i < fn.nodes.size() && !int4Producer.empty(); ++i) {
    const Node &n = fn.nodes[i];
    if (n.kind != OpKind::Linear || n.inputs.size() < 2)
      continue;
    auto p = int4Producer.find(n.inputs[1]);
    if (p == int4Producer.end())
      continue;
    const Node &w = *p->second;
    // The loader checked the operand count (runtime/core/Artifact.cpp).
    qcc::format::int4::OperandSlots slots = qcc::format::int4::operandSlots(
        w.inputs.size(), w.attrs.value("asymmetric", false));
    auto slot = [&](int index) {
      return index >= 0 ? artifact.constant(w.inputs[index]) : nullptr;
    };
    uses[i].role = CompressedUse::Linear;
    uses[i].int4 = int4Weight(*artifact.constant(w.inputs[0]),
                              *artifact.constant(w.inputs[1]), slot(slots.perm),
                              slot(slots.offsets),
                              w.attrs.value("group_size", int64_t(0)));
    uses[i].compressed = {1, uses[i].int4.packed, uses[i].int4.scales,
                          uses[i].int4.perm, uses[i].int4.offsets,
                          /*sparse24=*/false};
    needDense[n.inputs[1]] = false;
    // W4A8: the input is per-token int8 codes read back; with VNNI the
    // linear multiplies the codes (the weight repacked once, its mapped
    // bytes released as they are read).
    auto q = codeProducer.find(n.inputs[0]);
    if (q != codeProducer.end() && i >= from && cpuHasVnni() &&
        w4a8Packs(uses[i].int4)) {
      const Tensor &packed = *uses[i].int4.packed;
      auto [it, fresh] = packedW4A8_.try_emplace(packed.raw());
      if (fresh)
        it->second = packW4A8Weight(uses[i].int4, [&](const void *p, size_t n) {
          artifact.release(p, n);
        });
      uses[i].w4a8 = &it->second;
      uses[i].codeScale = q->second->outputs[1];
    }
  }
  for (size_t i = 0; i < fn.nodes.size(); ++i) {
    const Node &n = fn.nodes[i];
    int64_t operand =
        uses[i].role == CompressedUse::Linear ? uses[i].weightOperand() : -1;
    for (size_t o = 0; o < n.inputs.size(); ++o)
      if (auto d = needDense.find(n.inputs[o]);
          d != needDense.end() && (int64_t)o != operand)
        d->second = true;
  }
  for (const Port &p : fn.outputs)
    if (auto d = needDense.find(p.value); d != needDense.end())
      d->second = true;
  for (size_t i = 0; i < fn.nodes.size(); ++i) {
    const Node &n = fn.nodes[i];
    if ((n.kind == OpKind::Sparse24 || n.kind == OpKind::WeightInt4) &&
        n.outputs.size() == 1)
      if (auto d = needDense.find(n.outputs[0]);
          d != needDense.end() && !d->second)
        uses[i].role = CompressedUse::Skip;
  }
  return uses;
}

/// The constant weight that `node`, of kind `kind`, reads as operand
/// `operand`, or nullptr.
/// The packed forms' key of a rank-2 weight `w`.
static std::tuple<const void *, int64_t, int64_t> packKey(const Tensor &w) {
  return {w.raw(), w.dim(0), w.dim(1)};
}

/// The packed form of `w` in `packed`, or nullptr.
template <class Map>
static const typename Map::mapped_type::value_type *
findPacked(const Map &packed, const Tensor *w) {
  auto it = w && w->rank() == 2 ? packed.find(packKey(*w)) : packed.end();
  return it == packed.end() || !it->second ? nullptr : &*it->second;
}

void Session::expandSparse(CompressedUse &use, OpKind kind) {
  const Tensor &values = *use.weight.values, &meta = *use.weight.meta;
  int64_t n = use.weight.n(), k = use.weight.k();
  bool i8 = kind == OpKind::QLinear && values.dtype() == DType::I8;
  bool f32 = kind == OpKind::Linear && values.dtype() == DType::F32;
  if (!i8 && !f32)
    return;
  // Keyed as a dense weight of [n, k] at the values' bytes would be; the
  // values are [n, k / 2], so no dense constant there has this key.
  PackKey key{values.raw(), n, k};
  auto expand = [&](auto &packed, auto pack) -> decltype(&*packed[key]) {
    auto [it, fresh] = packed.try_emplace(key);
    if (fresh) {
      Tensor dense = Tensor::uninitialized(values.dtype(), {n, k});
      format::sparse24::decompress(values.raw(), meta.data<int32_t>(), n, k,
                                   dtypeSize(values.dtype()),
                                   dense.data<std::byte>());
      it->second = pack(dense);
      // Not read again on this path: resident once, packed.
      artifact.release(values.raw(), values.bytes());
      artifact.release(meta.raw(), meta.bytes());
    }
    return it->second ? &*it->second : nullptr;
  };
  if (i8) {
    use.denseI8 = expand(packed_, [&](const Tensor &d) {
      return packForPath(d.data<int8_t>(), n, k, CpuKernelPath::Fast);
    });
    if (use.denseI8)
      use.denseStandIn = Tensor::view(
          DType::I8, {n, k}, use.denseI8->blocks.data());
  } else {
    use.denseF32 = expand(packedF32_, [&](const Tensor &d) {
      return packLinearWeight(d.data<float>(), n, k);
    });
    if (use.denseF32)
      use.denseStandIn = Tensor::view(DType::F32, {n, k},
                                      use.denseF32->data.get());
  }
}

void Session::packWeights(const Function &fn, size_t from) {
  if (!packedFunctions_.insert({&fn, from}).second)
    return;
  for (size_t i = from; i < fn.nodes.size(); ++i)
    packNode(fn.nodes[i]);
}

void Session::prepareNodes(const Function &fn, size_t first) {
  if (cpuKernelPath() == CpuKernelPath::Reference)
    return;
  compressedUses(fn, first);
  packWeights(fn, first);
}

void Session::packNode(const Node &node) {
  // The fast path does not read a packed weight's bytes in the file again:
  // dropped from memory span by span as they are packed (when the file is
  // mapped), so that the weight is resident once.
  SourceDone release = [&](const void *p, size_t n) {
    artifact.release(p, n);
  };
  // A region's body reads the region's operands through its arguments.
  std::map<int64_t, int64_t> operandOfArg;
  if (node.body)
    for (size_t a = 0; a < node.body->args.size() && a < node.inputs.size();
         ++a)
      operandOfArg[node.body->args[a]] = node.inputs[a];
  auto weight = [&](const Node &n, OpKind kind,
                    size_t operand) -> const Tensor * {
    if (n.kind != kind || n.inputs.size() <= operand)
      return nullptr;
    int64_t id = n.inputs[operand];
    if (auto it = operandOfArg.find(id); it != operandOfArg.end())
      id = it->second;
    return id >= 0 ? artifact.constant(id) : nullptr;
  };
  auto pack = [&](const Node &n) {
    if (const Tensor *w = weight(n, OpKind::Linear, 1);
        w && w->dtype() == DType::F32 && w->rank() == 2 &&
        !packedF32_.count(packKey(*w)))
      packedF32_[packKey(*w)] =
          packLinearWeight(w->data<float>(), w->dim(0), w->dim(1), release);
    if (const Tensor *w = weight(n, OpKind::QLinear, 3);
        w && w->dtype() == DType::I8 && w->rank() == 2 &&
        !packed_.count(packKey(*w)))
      packed_[packKey(*w)] =
          packForPath(w->data<int8_t>(), w->dim(0), w->dim(1),
                      CpuKernelPath::Fast, release);
  };
  pack(node);
  if (node.body)
    for (const Node &inner : node.body->nodes)
      pack(inner);
}

// By the operand's bytes: inside a region the weight is a block argument,
// and only constants are in the maps (a hit is the constant itself).
const PackedI8Weight *Session::packedWeight(const Node &node,
                                            const Operands &ops) const {
  if (cpuKernelPath() != CpuKernelPath::Fast ||
      node.kind != OpKind::QLinear || ops.size() <= 3)
    return nullptr;
  return findPacked(packed_, ops[3]);
}

const PackedF32Weight *Session::packedF32Weight(const Node &node,
                                                const Operands &ops) const {
  if (cpuKernelPath() != CpuKernelPath::Fast || node.kind != OpKind::Linear ||
      ops.size() <= 1)
    return nullptr;
  return findPacked(packedF32_, ops[1]);
}

std::vector<Tensor> Session::runNode(const Node &node, const Operands &operands,
                                     std::vector<Tensor> &values, KvBatch *kv,
                                     const std::string &function,
                                     const CompressedUse *sparse) {
  std::vector<Tensor> results;
  // Shape-only runs skip a region's arithmetic unless it yields integers:
  // those are shape computations (a mask's broadcast shape in a LLaMA
  // export) that the host's shape glue, Expand or Reshape, reads.
  bool yieldsIntegers = false;
  for (int64_t id : node.outputs) {
    DType t = artifact.valueType(id).first;
    yieldsIntegers |= t == DType::I64 || t == DType::I32;
  }
  if (node.body && shapeOnly && !yieldsIntegers) {
    std::vector<Shape> shapes;
    for (const Tensor *t : operands)
      shapes.push_back(t ? t->shape() : Shape());
    std::vector<Shape> inferred = inferShapes(node, shapes);
    for (size_t r = 0; r < inferred.size() && r < node.outputs.size(); ++r)
      results.emplace_back(artifact.valueType(node.outputs[r]).first,
                           inferred[r]);
  } else if (node.body) {
    const KernelBody &body = *node.body;
    for (size_t a = 0; a < body.args.size(); ++a)
      values[body.args[a]] = operands[a] ? *operands[a] : Tensor();
    for (const Node &inner : body.nodes) {
      std::vector<Tensor> out =
          runNode(inner, operandsOf(inner, values), values, kv, function);
      for (size_t r = 0; r < out.size(); ++r)
        values[inner.outputs[r]] = std::move(out[r]);
    }
    for (int64_t id : body.yields)
      results.push_back(values[id]);
    for (const Node &inner : body.nodes)
      for (int64_t id : inner.outputs)
        values[id] = Tensor();
    for (int64_t id : body.args)
      values[id] = Tensor();
    // The CUDA backend allocates results from inferred shapes: hold the
    // rules to what the CPU computed.
    std::vector<Shape> shapes;
    for (const Tensor *t : operands)
      shapes.push_back(t ? t->shape() : Shape());
    std::vector<Shape> inferred = inferShapes(node, shapes);
    for (size_t r = 0; r < results.size(); ++r)
      if (r >= inferred.size() || inferred[r] != results[r].shape())
        throw std::runtime_error(
            "kernel '" + node.name + "': inferred result shape " +
            (r < inferred.size() ? shapeString(inferred[r]) : "none") +
            " but the region computes " + shapeString(results[r].shape()));
  } else {
    bool isKv = node.kind == OpKind::KvAttention;
    if (isKv && !(kv && kv->cache))
      throw std::runtime_error("entry point " + function +
                               " needs a KV cache (node '" + node.name +
                               "' is kv_attention)");
    std::vector<DType> resultTypes;
    for (int64_t id : node.outputs)
      resultTypes.push_back(artifact.valueType(id).first);
    try {
      Attrs attrs(node.attrs);
      results = computeInF32(
          node.kind, operands, resultTypes,
          [&](const Operands &ops) -> std::vector<Tensor> {
            if (isKv)
              return {kvAttention(attrs, ops, *kv)};
            if (node.kind == OpKind::Lora)
              return loraKernel(ops, kv ? kv->adapters
                                        : std::vector<int64_t>());
            // A mapped table's rows by pread: mapped reads would make
            // whole page-cache folios of it resident.
            if (node.kind == OpKind::Embedding)
              return embeddingKernel(ops, [&](const void *p, size_t n,
                                              void *dst) {
                artifact.read(p, n, dst);
              });
            if (node.kind == OpKind::QLinear && !sparse &&
                cpuKernelPath() != CpuKernelPath::Reference)
              return fastQLinearKernel(attrs, ops, packedWeight(node, ops));
            if (const PackedF32Weight *p = sparse ? nullptr
                                                  : packedF32Weight(node, ops))
              return linearWithEpilogue(ops, {}, p);
            if (sparse && sparse->runsDense() && sparseRunsDense()) {
              Operands dense = ops;
              dense.at(sparse->weightOperand()) = &sparse->denseStandIn;
              return sparse->denseI8
                         ? fastQLinearKernel(attrs, dense, sparse->denseI8)
                         : linearWithEpilogue(dense, {}, sparse->denseF32);
            }
            if (sparse && sparse->w4a8)
              return w4a8LinearKernel(ops, *sparse->w4a8,
                                      values[sparse->codeScale]);
            if (sparse && sparse->isInt4())
              return int4LinearKernel(ops, sparse->int4);
            if (sparse)
              return node.kind == OpKind::QLinear
                         ? sparseQLinearKernel(ops, sparse->weight)
                         : sparseLinearKernel(ops, sparse->weight);
            return runCpuKernel(node.kind, attrs, ops);
          });
    } catch (const std::exception &e) {
      throw std::runtime_error("node '" + node.name + "' (" +
                               opKindName(node.kind) + "): " + e.what());
    }
  }
  if (results.size() != node.outputs.size())
    throw std::runtime_error("node '" + node.name + "' (" +
                             opKindName(node.kind) +
                             "): kernel returned the wrong result count");
  if (observer)
    observer(node, operands, results);
  return results;
}

