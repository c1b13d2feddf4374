//===- LayerSplitTest.cpp - where a model splits by layers ----------------===//
//
// runtime/core/LayerSplit.h on the gpt2 fixture's artifact: every cached
// entry point is cut between the attentions of the last GPU layer and the
// first CPU layer (each layer's keys and values on one side only), where one
// activation crosses; the entry points agree on which weights lie on each
// side; no split at or above the model's layers; errors for what cannot be
// split. With a GPU plan (NVRTC): the op tail (the CPU half from the op plan)
// after the GPU plan's first blocks, both run on the CPU, gives the op
// plan's logits for main, prefill and decode at every cut.
//
//===----------------------------------------------------------------------===//
#include "compiler/Pipeline.h"
#include "runtime/core/KvCache.h"
#include "runtime/core/LayerSplit.h"
#include "runtime/cpu/Session.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

using namespace qcc::rt;

namespace {

constexpr const char *kGpt2 = QCC_SOURCE_DIR "/test/models/gpt2.onnx";

/// The gpt2 fixture compiled once (op plan; with `gpuPlan`, the GPU plan
/// too, which needs NVRTC).
Artifact compileGpt2(bool gpuPlan) {
  llvm::SmallString<128> path;
  if (llvm::sys::fs::createTemporaryFile("layersplit", "qpkg", path))
    throw std::runtime_error("no temporary file");
  mlir::MLIRContext ctx;
  qcc::CompileOptions o;
  o.gpuKernels = gpuPlan;
  o.artifactPath = path.str().str();
  auto c = qcc::compileTo(ctx, kGpt2, qcc::Phase::Package, o);
  if (!c)
    throw std::runtime_error(llvm::toString(c.takeError()));
  Artifact a = Artifact::load(o.artifactPath, FileAccess::Read);
  llvm::sys::fs::remove(path);
  return a;
}

const Artifact &gpt2() {
  static const Artifact artifact = compileGpt2(false);
  return artifact;
}

#ifdef QCC_HAVE_CODEGEN
const Artifact &gpt2WithGpuPlan() {
  static const Artifact artifact = compileGpt2(true);
  return artifact;
}
#endif

std::vector<const Function *> entryPoints(const Artifact &a) {
  std::vector<const Function *> fns;
  for (const Function &f : a.functions())
    fns.push_back(&f);
  return fns;
}

/// Node index of each layer's kv_attention (top-level in the op plan).
std::map<int64_t, size_t> attentionsOf(const Function &fn) {
  std::map<int64_t, size_t> at;
  for (size_t i = 0; i < fn.nodes.size(); ++i)
    if (fn.nodes[i].kind == OpKind::KvAttention)
      at[fn.nodes[i].attrs.value("layer", int64_t(-1))] = i;
  return at;
}

using Weights = std::set<std::pair<const void *, size_t>>;

/// The constants the nodes [from, to) of `fn` read, by their bytes.
Weights weightsIn(const Artifact &a, const Function &fn, size_t from,
                  size_t to) {
  Weights w;
  for (size_t i = from; i < to; ++i)
    for (int64_t id : fn.nodes[i].inputs)
      if (const Tensor *c = id >= 0 ? a.constant(id) : nullptr)
        w.insert({c->raw(), c->bytes()});
  return w;
}

TEST(LayerSplit, EachLayersAttentionOnOneSide) {
  const Artifact &a = gpt2();
  const Function *decode = &a.function("decode");
  
  int64_t layers = (int64_t)attentionsOf(*decode).size();
  ASSERT_GE(layers, 2);
  for (int64_t n = 0; n < layers; ++n) {
    LayerSplit s = splitByLayers(a, entryPoints(a), n);
    EXPECT_EQ(s.modelLayers, layers);
    EXPECT_EQ(s.gpuLayers, n);
    EXPECT_TRUE(s.splits());
    for (const Function *fn : entryPoints(a))
      for (auto [layer, at] : attentionsOf(*fn))
        EXPECT_EQ(at < s.cut.at(fn), layer < n)
            << fn->name << " layer " << layer << " split at " << n;
  }
}

TEST(LayerSplit, OneActivationCrosses) {
  // Between two blocks only the residual stream is live (the positions are
  // an input, not an activation); before the first, nothing is made yet.
  const Artifact &a = gpt2();
  const Function *decode = &a.function("decode");
  int64_t layers = (int64_t)attentionsOf(*decode).size();
  for (int64_t n = 0; n < layers; ++n) {
    size_t cut = splitByLayers(a, entryPoints(a), n).cut.at(decode);
    std::set<int64_t> made, crossing;
    for (size_t i = 0; i < decode->nodes.size(); ++i) {
      for (int64_t id : decode->nodes[i].inputs)
        if (i >= cut && made.count(id) && a.valueType(id).first == DType::F32)
          crossing.insert(id);
      if (i < cut)
        made.insert(decode->nodes[i].outputs.begin(),
                    decode->nodes[i].outputs.end());
    }
    EXPECT_EQ(crossing.size(), n == 0 ? 0u : 1u) << "split at " << n;
  }
}

TEST(LayerSplit, EntryPointsAgreeOnWeights) {
  // The device holds the same weights whichever entry point runs: main (no
  // cache) is cut where the cached ones are.
  const Artifact &a = gpt2();
  const Function *decode = &a.function("decode");
  int64_t layers = (int64_t)attentionsOf(*decode).size();
  for (int64_t n = 1; n < layers; ++n) {
    LayerSplit s = splitByLayers(a, entryPoints(a), n);
    size_t cut = s.cut.at(decode);
    Weights before = weightsIn(a, *decode, 0, cut),
            after = weightsIn(a, *decode, cut, decode->nodes.size());
    for (const Function *fn : entryPoints(a)) {
      size_t c = s.cut.at(fn);
      ASSERT_LT(c, fn->nodes.size()) << fn->name;
      for (auto w : weightsIn(a, *fn, 0, c))
        EXPECT_FALSE(after.count(w) && !before.count(w))
            << fn->name << " reads a later layer's weight before its cut";
      for (auto w : weightsIn(a, *fn, c, fn->nodes.size()))
        EXPECT_FALSE(before.count(w) && !after.count(w))
            << fn->name << " reads an earlier layer's weight after its cut";
    }
  }
}

TEST(LayerSplit, NoSplitAtOrAboveTheLayers) {
  const Artifact &a = gpt2();
  int64_t layers = (int64_t)attentionsOf(a.function("decode")).size();
  for (int64_t n : {layers, layers + 5}) {
    LayerSplit s = splitByLayers(a, entryPoints(a), n);
    EXPECT_FALSE(s.splits());
    EXPECT_EQ(s.gpuLayers, layers);
    for (const Function *fn : entryPoints(a))
      EXPECT_EQ(s.cut.at(fn), fn->nodes.size());
  }
}

TEST(LayerSplit, RefusesWhatItCannotSplit) {
  const Artifact &a = gpt2();
  EXPECT_THROW(splitByLayers(a, entryPoints(a), -1), std::runtime_error);
  try {
    splitByLayers(a, {&a.function("main")}, 1);
    FAIL() << "main alone has no kv_attention";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("no layers to split"),
              std::string::npos)
        << e.what();
  }
}

#ifdef QCC_HAVE_CODEGEN
/// Entry point `name` split after `blocks` blocks as the CUDA backend runs it
/// (GpuSession::setGpuLayers), with the GPU half run on the CPU too: the GPU
/// plan's nodes before its cut one by one (Session::runOne, region bodies op
/// by op), then the op tail from the values carried across.
std::map<std::string, Tensor> runSplit(const Artifact &a, Session &s,
                                       const std::string &name, int64_t blocks,
                                       const std::map<std::string, Tensor> &in,
                                       KvBatch *kv) {
  std::vector<const Function *> gpu, ops;
  for (const Function &f : a.functions()) {
    gpu.push_back(a.gpuFunction(f.name));
    ops.push_back(&f);
  }
  LayerSplit gpuSplit = splitByLayers(a, gpu, blocks),
             opSplit = splitByLayers(a, ops, blocks);
  const Function &g = *a.gpuFunction(name), &o = a.function(name);
  std::optional<OpTail> tail =
      opTailOf(a, g, gpuSplit.cut.at(&g), o, opSplit.cut.at(&o));
  if (!tail)
    throw std::runtime_error(name + ": the plans carry different values");
  if (kv)
    for (size_t b = 0; b < kv->seqs.size(); ++b)
      kv->cache->reserve(kv->seqs[b],
                         kv->cache->length(kv->seqs[b]) + kv->valid[b]);
  std::vector<Tensor> gv(a.numValues());
  for (const Port &p : g.inputs)
    gv[p.value] = in.at(p.name);
  for (size_t i = 0; i < gpuSplit.cut.at(&g); ++i) {
    const Node &node = g.nodes[i];
    Operands operands;
    for (int64_t id : node.inputs)
      operands.push_back(id < 0           ? nullptr
                         : a.constant(id) ? a.constant(id)
                                          : &gv[id]);
    std::vector<Tensor> out = s.runOne(node, operands, kv);
    for (size_t r = 0; r < out.size(); ++r)
      gv[node.outputs[r]] = out[r];
  }
  std::vector<Tensor> ov(a.numValues());
  for (const Port &p : o.inputs)
    ov[p.value] = in.at(p.name);
  for (auto [gpuValue, opValue] : tail->carried)
    ov[opValue] = gv[gpuValue];
  KvBatch none;
  s.runNodes(o, tail->prologue, ov, &none, tail->cut);
  std::vector<size_t> rest;
  for (size_t i = tail->cut; i < o.nodes.size(); ++i)
    rest.push_back(i);
  s.runNodes(o, rest, ov, kv ? kv : &none, tail->cut);
  if (kv)
    for (size_t b = 0; b < kv->seqs.size(); ++b)
      kv->cache->advance(kv->seqs[b], kv->valid[b]);
  std::map<std::string, Tensor> out;
  for (const Port &p : o.outputs)
    out[p.name] = ov[p.value];
  return out;
}

Tensor ids(std::vector<int64_t> v, int64_t rows = 1) {
  Tensor t(DType::I64, {rows, (int64_t)v.size() / rows});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

/// Bit for bit: the GPU plan's regions compute the op plan's ops in its
/// order, and the CPU backend's fused epilogues equal the separate ops.
void expectSame(const Tensor &want, const Tensor &got, const std::string &what) {
  ASSERT_EQ(want.shape(), got.shape()) << what;
  for (int64_t e = 0; e < want.numel(); ++e)
    ASSERT_EQ(want.data<float>()[e], got.data<float>()[e]) << what << " [" << e << "]";
}

TEST(LayerSplit, OpTailGivesTheOpPlansResults) {
  const Artifact &a = gpt2WithGpuPlan();
  ASSERT_NE(a.gpuFunction("decode"), nullptr);
  const int64_t layers = a.kvCache()->layers;
  for (int64_t blocks = 0; blocks < layers; ++blocks) {
    std::string at = "after " + std::to_string(blocks) + " blocks: ";
    Session reference(a), split(a);
    std::map<std::string, Tensor> in = {{"input_ids", ids({5, 17, 3, 42, 9})}};
    expectSame(reference.run("main", in).at("logits"),
               runSplit(a, split, "main", blocks, in, nullptr).at("logits"),
               at + "main");
    // Generation: a prompt of 5, then one decoded token, each side its cache.
    KvCacheOptions options;
    options.numBlocks = 4;
    options.maxTokens = 64;
    KvCache refCache(*a.kvCache(), options), splitCache(*a.kvCache(), options);
    KvBatch refKv{&refCache, {refCache.addSequence()}, {5}, {}};
    KvBatch splitKv{&splitCache, {splitCache.addSequence()}, {5}, {}};
    in["positions"] = ids({0, 1, 2, 3, 4});
    expectSame(reference.run("prefill", in, &refKv).at("logits"),
               runSplit(a, split, "prefill", blocks, in, &splitKv).at("logits"),
               at + "prefill");
    std::map<std::string, Tensor> step = {{"input_ids", ids({7})},
                                          {"positions", ids({5})}};
    refKv.valid = splitKv.valid = {1};
    expectSame(reference.run("decode", step, &refKv).at("logits"),
               runSplit(a, split, "decode", blocks, step, &splitKv).at("logits"),
               at + "decode");
  }
}

// A GPU plan cut where more than the residual stream is live (at layer 1's
// attention: its input and the residual) carries more than the op plan's
// cut: no op tail, the GPU plan's nodes run instead.
TEST(LayerSplit, NoOpTailWhereThePlansCarryDifferentValues) {
  const Artifact &a = gpt2WithGpuPlan();
  const Function &g = *a.gpuFunction("decode"), &o = a.function("decode");
  std::vector<const Function *> ops = {&o};
  size_t opCut = splitByLayers(a, ops, 1).cut.at(&o);
  size_t attention = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const Node &inner :
         g.nodes[i].body ? g.nodes[i].body->nodes : std::vector<Node>{})
      if (inner.kind == OpKind::KvAttention &&
          inner.attrs.value("layer", int64_t(-1)) == 1)
        attention = i;
  ASSERT_GT(attention, 0u);
  std::vector<const Function *> gpu = {&g};
  EXPECT_TRUE(opTailOf(a, g, splitByLayers(a, gpu, 1).cut.at(&g), o, opCut));
  EXPECT_FALSE(opTailOf(a, g, attention, o, opCut));
}
#endif

} // namespace
