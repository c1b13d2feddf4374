//===- RuntimeToolsTest.cpp - perplexity, benchmarks, calibration ---------===//
//
// The runtime libraries behind qrun --perplexity / --bench / --profile and
// qcc-calib, on the gpt2 fixture compiled in memory.
//
//===----------------------------------------------------------------------===//
#include "compiler/ArtifactWriter.h"
#include "compiler/Pipeline.h"
#include "runtime/generate/Backend.h"
#include "runtime/generate/Benchmark.h"
#include "runtime/generate/Calibrator.h"
#include "runtime/generate/Generator.h"
#include "runtime/core/KvCache.h"
#include "runtime/generate/Perplexity.h"
#include "runtime/generate/Speculative.h"
#include "runtime/core/TensorIO.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

using namespace qcc::rt;

namespace {

constexpr int64_t kVocab = 256; // gpt2 fixture

/// The gpt2 fixture's bytes (kv-layout's `kvCache`).
std::vector<char> gpt2Bytes(qcc::KvLayout kvCache) {
  mlir::MLIRContext ctx;
  qcc::CompileOptions o;
  o.kvCache = kvCache;
  auto module = qcc::compile(ctx, QCC_SOURCE_DIR "/test/models/gpt2.onnx",
                             qcc::Phase::KvLayout, o);
  if (!module)
    throw std::runtime_error(llvm::toString(module.takeError()));
  auto bytes = qcc::serializeArtifact(**module, "gpt2", {});
  if (!bytes)
    throw std::runtime_error(llvm::toString(bytes.takeError()));
  return std::move(*bytes);
}

/// The gpt2 fixture as an artifact.
Artifact gpt2(qcc::KvLayout kvCache) {
  return Artifact::fromBytes(
      std::make_shared<std::vector<char>>(gpt2Bytes(kvCache)), "gpt2");
}

/// The gpt2 fixture in a temporary .qpkg file, removed with this object.
struct Gpt2File {
  explicit Gpt2File(qcc::KvLayout kvCache) {
    llvm::SmallString<128> p;
    if (llvm::sys::fs::createTemporaryFile("gpt2", "qpkg", p))
      throw std::runtime_error("cannot create a temporary file");
    path = p.str().str();
    std::vector<char> bytes = gpt2Bytes(kvCache);
    std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
  }
  ~Gpt2File() { llvm::sys::fs::remove(path); }
  std::string path;
};

/// Runs `f` with QCC_CUDA_DRIVER naming a missing library (no CUDA backend,
/// whatever the machine has).
template <typename F> void withoutCuda(F f) {
  const char *old = std::getenv("QCC_CUDA_DRIVER");
  std::string saved = old ? old : "";
  setenv("QCC_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  f();
  if (old)
    setenv("QCC_CUDA_DRIVER", saved.c_str(), 1);
  else
    unsetenv("QCC_CUDA_DRIVER");
}

TEST(Perplexity, MatchesHandComputedLikelihood) {
  Artifact a = gpt2(qcc::KvLayout::Paged);
  Session s(a);
  std::vector<int64_t> ids = benchTokenIds(19, kVocab);
  PerplexityOptions o;
  o.context = 8;
  o.useCache = false;
  PerplexityResult r = PerplexityEvaluator(a, s, o).evaluate(ids);
  // Windows [0, 8), [8, 16), [16, 19): 7 + 7 + 2 predictions.
  EXPECT_EQ(r.predicted, 16);
  double nll = 0;
  for (size_t begin = 0; begin < ids.size(); begin += 8) {
    std::vector<int64_t> w(ids.begin() + begin,
                           ids.begin() + std::min(ids.size(), begin + 8));
    Tensor logits = sequenceLogits(s, a.function("main"), w);
    for (size_t t = 0; t + 1 < w.size(); ++t) {
      const float *row = logits.data<float>() + t * kVocab;
      double sum = 0;
      for (int64_t v = 0; v < kVocab; ++v)
        sum += std::exp((double)row[v]);
      nll -= row[w[t + 1]] - std::log(sum);
    }
  }
  EXPECT_NEAR(r.perplexity, std::exp(nll / 16), 1e-6 * r.perplexity);
  // Through prefill over the KV cache: the same up to rounding.
  o.useCache = true;
  PerplexityResult cached = PerplexityEvaluator(a, s, o).evaluate(ids);
  EXPECT_EQ(cached.predicted, 16);
  EXPECT_NEAR(cached.perplexity, r.perplexity, 1e-3 * r.perplexity);
}

TEST(Perplexity, NothingToPredict) {
  Artifact a = gpt2(qcc::KvLayout::None);
  Session s(a);
  PerplexityOptions o;
  o.context = 8;
  PerplexityEvaluator e(a, s, o);
  EXPECT_EQ(e.evaluate({}).predicted, 0);
  EXPECT_EQ(e.evaluate({3}).predicted, 0);
  o.function = "nope";
  EXPECT_THROW(PerplexityEvaluator(a, s, o), std::runtime_error);
}

TEST(Benchmark, TokenIdsAreFixedAndInRange) {
  std::vector<int64_t> ids = benchTokenIds(100, 7);
  EXPECT_EQ(ids, benchTokenIds(100, 7));
  std::vector<int64_t> prefix = benchTokenIds(10, 7);
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), ids.begin()));
  for (int64_t id : ids)
    EXPECT_TRUE(id >= 0 && id < 7);
}

TEST(Benchmark, ForwardGenerateAndProfile) {
  Artifact a = gpt2(qcc::KvLayout::Paged);
  Session s(a);
  s.enableProfile(true);
  ForwardBench f = benchForward(s, a.function("main"), 2, 4, kVocab, 3);
  ASSERT_EQ(f.seconds.size(), 3u);
  EXPECT_TRUE(std::is_sorted(f.seconds.begin(), f.seconds.end()));
  EXPECT_GT(f.tokensPerSecond(), 0);

  std::ostringstream table;
  nlohmann::json j = writeProfile(s, "ops", 0, table);
  EXPECT_EQ(j["schema"], "qrun-profile/1");
  EXPECT_EQ(table.str().rfind("profile (op plan on the CPU; peaks", 0), 0u);
  // 4 runs of 9 linears, alone or with the add after them (the fast path's
  // GEMM epilogue, a row of its own).
  int64_t linears = 0;
  for (const auto &row : j["rows"])
    if (row["function"] == "main" &&
        (row["kind"] == "linear" || row["kind"] == "linear+add" ||
         row["kind"] == "linear+gelu"))
      linears += row["calls"].get<int64_t>();
  EXPECT_EQ(linears, 4 * 9) << j.dump();

  GenerateBench g = benchGenerate(a, s, 2, 4, 3, kVocab, false, "test");
  EXPECT_FALSE(g.recompute);
  ASSERT_EQ(g.result.tokens.size(), 2u);
  EXPECT_EQ(g.result.tokens[0].size(), 4u); // steps + 1: no EOS
  EXPECT_EQ(g.layout, "paged");
  EXPECT_GT(g.cacheBytes, 0u);
  GenerateBench rc = benchGenerate(a, s, 2, 4, 3, kVocab, true, "test");
  EXPECT_TRUE(rc.recompute);
  EXPECT_GT(rc.recomputeTokensPerSecond, 0);
}

// Greedy generation by recompute picks what the KV cache path picks.
TEST(Generate, RecomputeMatchesCache) {
  Artifact a = gpt2(qcc::KvLayout::Paged);
  Session s(a);
  std::vector<std::vector<int64_t>> prompts = {benchTokenIds(5, kVocab),
                                               {7, 8}};
  GenerateOptions g;
  g.maxNewTokens = 4;
  std::vector<std::pair<size_t, int64_t>> seen;
  g.onToken = [&](size_t i, int64_t id) { seen.push_back({i, id}); };
  GenerateResult r = generateByRecompute(s, a.function("main"), prompts, g,
                                         /*context=*/64);
  ASSERT_EQ(r.tokens.size(), 2u);
  EXPECT_EQ(r.decodeTokens, 8);
  EXPECT_EQ(seen.size(), 8u);
  const KvCacheConfig &cfg = *a.kvCache();
  KvCacheOptions copts;
  copts.maxSequences = 2;
  copts.numBlocks = 64;
  copts.maxTokens = 64;
  KvCache cache(cfg, copts);
  g.onToken = nullptr;
  GenerateResult cached = Generator(a, s, cache).generate(prompts, g);
  EXPECT_EQ(cached.tokens, r.tokens);
}

// qrun --backend: the choice, the line saying why, and the refusal.
TEST(Backend, ChoiceAndReason) {
  Artifact a = gpt2(qcc::KvLayout::None);
  BackendOptions o;
  o.backend = Backend::Cpu;
  o.plan = Session::Plan::Kernels;
  std::ostringstream log;
  auto e = makeExecutor(a, o, log);
  EXPECT_NE(dynamic_cast<Session *>(e.get()), nullptr);
  EXPECT_EQ(log.str(), "[qrun] CPU backend: --backend=cpu (GPU plan, op by op)\n");
  withoutCuda([&] {
    std::ostringstream why, quiet, out;
    o.backend = Backend::Auto;
    auto cpu = makeExecutor(a, o, why);
    EXPECT_NE(dynamic_cast<Session *>(cpu.get()), nullptr);
    EXPECT_EQ(why.str(), "[qrun] CPU backend: no CUDA driver "
                         "(/nonexistent/libcuda.so.1 not found)\n");
    o.quiet = true;
    makeExecutor(a, o, quiet);
    EXPECT_EQ(quiet.str(), "");
    // Only the CUDA backend reports launches.
    reportGpu(*cpu, /*quiet=*/false, quiet, out);
    EXPECT_EQ(quiet.str() + out.str(), "");
    o.backend = Backend::Cuda;
    try {
      makeExecutor(a, o, quiet);
      FAIL() << "--backend=cuda without a driver";
    } catch (const std::runtime_error &e) {
      EXPECT_STREQ(e.what(), "--backend=cuda: no CUDA driver "
                             "(/nonexistent/libcuda.so.1 not found)");
    }
  });
}

// The KV cache qrun --prompt sizes: every prompt plus its new tokens.
TEST(Generate, CacheOptions) {
  Artifact a = gpt2(qcc::KvLayout::Paged);
  const KvCacheConfig &cfg = *a.kvCache();
  int64_t b = cfg.blockTokens;
  std::vector<std::vector<int64_t>> prompts = {
      std::vector<int64_t>(b + 1, 3), {7, 8}};
  KvCacheOptions c = generationCacheOptions(cfg, prompts, 4);
  EXPECT_EQ(c.maxSequences, 2);
  EXPECT_EQ(c.numBlocks, 2 + 1);
  EXPECT_EQ(c.maxTokens, 2 * b);
  c = generationCacheOptions(cfg, prompts, 4, /*kvBlocks=*/9, /*maxTokens=*/50);
  EXPECT_EQ(c.numBlocks, 9);
  EXPECT_EQ(c.maxTokens, 50);
}

// qrun --draft: a draft model with its cache; the target as its own draft
// has every greedy draft accepted and gives the target's tokens.
TEST(Speculative, DraftModel) {
  Gpt2File file(qcc::KvLayout::Paged);
  Artifact a = Artifact::load(file.path);
  Session s(a);
  const KvCacheConfig &cfg = *a.kvCache();
  std::vector<std::vector<int64_t>> prompts = {benchTokenIds(5, kVocab)};
  GenerateOptions g;
  g.maxNewTokens = 6;
  KvCacheOptions copts = generationCacheOptions(cfg, prompts, g.maxNewTokens);
  BackendOptions cpu;
  cpu.backend = Backend::Cpu;
  std::ostringstream log;
  DraftModel draft(file.path, copts, prompts, g.maxNewTokens, cpu, log);
  EXPECT_EQ(log.str(), "[qrun] CPU backend: --backend=cpu\n");
  KvCache cache(cfg, copts), plain(cfg, copts);
  EXPECT_EQ(draft.cache->bytes(), cache.bytes()); // same model, same sizes
  SpeculativeGenerator gen(a, s, cache, &draft);
  SpeculativeOptions spec;
  spec.draftTokens = 3;
  SpeculativeStats stats;
  GenerateResult r = gen.generate(prompts, g, spec, &stats);
  EXPECT_EQ(stats.accepted, stats.proposed);
  EXPECT_EQ(r.tokens, Generator(a, s, plain).generate(prompts, g).tokens);

  Gpt2File noCache(qcc::KvLayout::None);
  try {
    DraftModel(noCache.path, copts, prompts, 4, cpu, log);
    FAIL() << "a draft without a KV cache";
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()),
              "--draft: " + noCache.path + " has no KV cache (compile it with "
              "--kv-cache=paged or contiguous)");
  }
}

TEST(Calibrator, TextWindows) {
  Artifact a = gpt2(qcc::KvLayout::None);
  const Function &main = a.function("main");
  std::vector<int64_t> tokens = benchTokenIds(40, kVocab);
  auto batches = textBatches(main, tokens, 10, 8, "ids");
  ASSERT_EQ(batches.size(), 2u); // 8 + 2 windows
  const Tensor &last = batches[1].begin()->second;
  EXPECT_EQ(last.shape(), (Shape{2, 8}));
  // The last window ends at the last token.
  EXPECT_EQ(last.data<int64_t>()[15], tokens.back());
  try {
    textBatches(main, tokens, 1, 64, "ids");
    FAIL() << "a window longer than the text";
  } catch (const std::runtime_error &e) {
    EXPECT_STREQ(e.what(), "ids: 40 tokens, fewer than --seq-len 64");
  }
}

TEST(Calibrator, Statistics) {
  Artifact a = gpt2(qcc::KvLayout::None);
  Calibrator c(a);
  EXPECT_EQ(c.linears(), 9u);
  EXPECT_EQ(c.attentions(), 2u);
  EXPECT_THROW(c.statistics(0, 0), std::runtime_error); // nothing ran yet
  auto batches = textBatches(a.function("main"), benchTokenIds(40, kVocab),
                             3, 8, "ids");
  for (const auto &b : batches)
    EXPECT_EQ(c.run(b), 3);
  nlohmann::json stats = c.statistics(3, 8);
  EXPECT_EQ(stats["samples"], 3);
  EXPECT_EQ(stats["seq_len"], 8);
  ASSERT_EQ(stats["linears"].size(), 9u);
  ASSERT_EQ(stats["attentions"].size(), 2u);
  // The first linear (qkv) reads the 64-wide layer norm output.
  const auto &absmax = stats["linears"]["0"]["input_absmax"];
  ASSERT_EQ(absmax.size(), 64u);
  for (const auto &v : absmax)
    EXPECT_GT(v.get<float>(), 0.0f);
  EXPECT_FALSE(stats["attentions"]["0"]["k_absmax"].empty());
}

// Sampled rows: at most the capacity per distinct input, each row one
// observed input row (its absmax bounds every entry), in the sidecar.
TEST(Calibrator, ActivationRows) {
  Artifact a = gpt2(qcc::KvLayout::None);
  Calibrator c(a, /*pruningStats=*/false, /*sampleRows=*/5);
  auto batches = textBatches(a.function("main"), benchTokenIds(40, kVocab),
                             3, 8, "ids");
  for (const auto &b : batches)
    c.run(b);
  std::string rowsPath = ::testing::TempDir() + "calibrator-rows.bin";
  EXPECT_THROW(c.statistics(3, 8), std::runtime_error); // needs the file
  nlohmann::json stats = c.statistics(3, 8, "", rowsPath);
  EXPECT_EQ(stats["sample_file"], "calibrator-rows.bin");
  const auto &sets = stats["sample_sets"];
  ASSERT_FALSE(sets.empty());
  std::ifstream f(rowsPath, std::ios::binary);
  for (const auto &[id, l] : stats["linears"].items()) {
    const auto &set = sets.at(l["samples"].get<size_t>());
    int64_t k = set["k"], rows = set["rows"];
    EXPECT_EQ(rows, 5); // 24 tokens observed, 5 kept
    ASSERT_EQ((size_t)k, l["input_absmax"].size());
    std::vector<float> x((size_t)(rows * k));
    f.seekg(set["offset"].get<std::streamoff>());
    f.read(reinterpret_cast<char *>(x.data()), (std::streamsize)(x.size() * 4));
    ASSERT_TRUE(f) << "linear " << id;
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_LE(std::fabs(x[i]), l["input_absmax"][i % k].get<float>());
  }
  std::remove(rowsPath.c_str());
}

TEST(Calibrator, NpyFolder) {
  Artifact a = gpt2(qcc::KvLayout::None);
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("calib", dir));
  Tensor ids(DType::I64, {5, 6});
  std::vector<int64_t> v = benchTokenIds(30, kVocab);
  std::copy(v.begin(), v.end(), ids.data<int64_t>());
  writeNpy((dir + "/input_ids.npy").str(), ids);
  int64_t samples = 64, seqLen = 0;
  auto batches =
      npyBatches(a.function("main"), dir.str().str(), samples, seqLen, true);
  EXPECT_EQ(samples, 5); // all there are
  EXPECT_EQ(seqLen, 6);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].at("input_ids").shape(), (Shape{5, 6}));
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
