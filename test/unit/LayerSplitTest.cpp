//===- LayerSplitTest.cpp - where a model splits by layers ----------------===//
//
// runtime/core/LayerSplit.h on the gpt2 fixture's artifact: every cached
// entry point is cut between the attentions of the last GPU layer and the
// first CPU layer (each layer's keys and values on one side only), where one
// activation crosses; the entry points agree on which weights lie on each
// side; no split at or above the model's layers; errors for what cannot be
// split.
//
//===----------------------------------------------------------------------===//
#include "compiler/Pipeline.h"
#include "runtime/core/LayerSplit.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

using namespace qcc::rt;

namespace {

constexpr const char *kGpt2 = QCC_SOURCE_DIR "/test/models/gpt2.onnx";

/// The gpt2 fixture compiled once (op plan, no GPU kernels).
const Artifact &gpt2() {
  static const Artifact artifact = [] {
    llvm::SmallString<128> path;
    if (llvm::sys::fs::createTemporaryFile("layersplit", "qpkg", path))
      throw std::runtime_error("no temporary file");
    mlir::MLIRContext ctx;
    qcc::CompileOptions o;
    o.gpuKernels = false;
    o.artifactPath = path.str().str();
    auto c = qcc::compileTo(ctx, kGpt2, qcc::Phase::Package, o);
    if (!c)
      throw std::runtime_error(llvm::toString(c.takeError()));
    Artifact a = Artifact::load(o.artifactPath, FileAccess::Read);
    llvm::sys::fs::remove(path);
    return a;
  }();
  return artifact;
}

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

} // namespace
