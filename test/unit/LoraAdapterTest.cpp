//===- LoraAdapterTest.cpp - PEFT adapters and safetensors files -----------===//
//
// The readers refuse what they cannot apply, one line naming the file, the
// field or tensor and the reason; what they accept is PEFT's semantics
// (the numbers against PEFT itself: test/e2e/check_lora.py).
//
//===----------------------------------------------------------------------===//
#include "compiler/LoraAdapter.h"
#include "compiler/OnnxImporter.h"
#include "compiler/Pipeline.h"
#include "compiler/Safetensors.h"
#include "dialects/QccConstants.h"
#include "dialects/QccOps.h"
#include "runtime/core/KvCache.h"
#include "runtime/cpu/CpuKernels.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

namespace {

std::string source(const std::string &rel) {
  return std::string(QCC_SOURCE_DIR) + "/" + rel;
}

/// A safetensors file's bytes: the header as given, then `data`.
std::string safetensors(const std::string &header, const std::string &data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[i] = (char)(n >> (8 * i));
  return out + header + data;
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

std::string parseError(const std::string &bytes) {
  auto f = qcc::SafetensorsFile::parse(
      llvm::MemoryBuffer::getMemBufferCopy(bytes), "t.safetensors");
  return f ? "" : llvm::toString(f.takeError());
}

/// A scratch adapter folder: adapter_config.json and
/// adapter_model.safetensors as given.
struct AdapterDir {
  llvm::SmallString<128> path;
  AdapterDir(const std::string &config, const std::string &weights) {
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("lora", path));
    std::ofstream(std::string(path) + "/adapter_config.json") << config;
    std::ofstream(std::string(path) + "/adapter_model.safetensors",
                  std::ios::binary)
        << weights;
  }
  ~AdapterDir() { llvm::sys::fs::remove_directories(path); }
  std::string read(double scale = 1.0) {
    auto a = qcc::readPeftAdapter(path, scale);
    return a ? "" : llvm::toString(a.takeError());
  }
};

const char *kQ = "base_model.model.model.layers.0.self_attn.q_proj";

/// One module of rank 1: A [1, 2], B [2, 1].
std::string rankOneWeights(const char *module = kQ) {
  std::string h = std::string("{\"") + module +
                  ".lora_A.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],"
                  "\"data_offsets\":[0,8]},\"" +
                  module +
                  ".lora_B.weight\":{\"dtype\":\"F32\",\"shape\":[2,1],"
                  "\"data_offsets\":[8,16]}}";
  return safetensors(h, floats({1, 2, 3, 4}));
}

const char *kConfig = R"({"peft_type": "LORA", "r": 1, "lora_alpha": 2})";

/// An adapter file of one module's two f32 factors, named with `suffixes`
/// (".lora_A.weight" / ".lora_B.weight", or the embedding's).
std::string twoFactors(const std::string &module,
                       std::pair<const char *, const char *> suffixes,
                       std::pair<int64_t, int64_t> aShape,
                       const std::vector<float> &a,
                       std::pair<int64_t, int64_t> bShape,
                       const std::vector<float> &b) {
  std::string data((a.size() + b.size()) * 4, '\0');
  std::memcpy(data.data(), a.data(), a.size() * 4);
  std::memcpy(data.data() + a.size() * 4, b.data(), b.size() * 4);
  auto entry = [](const std::string &name, std::pair<int64_t, int64_t> shape,
                  size_t begin, size_t end) {
    return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" +
           std::to_string(shape.first) + "," + std::to_string(shape.second) +
           "],\"data_offsets\":[" + std::to_string(begin) + "," +
           std::to_string(end) + "]}";
  };
  return safetensors("{" + entry(module + suffixes.first, aShape, 0, a.size() * 4) +
                         "," +
                         entry(module + suffixes.second, bShape, a.size() * 4,
                               data.size()) +
                         "}",
                     data);
}

} // namespace

TEST(Safetensors, RefusesHostileHeaders) {
  auto data = floats({1, 2});
  EXPECT_EQ(parseError(safetensors(
                R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                data)),
            "");
  EXPECT_NE(parseError("short").find("shorter than"), std::string::npos);
  std::string huge(8, '\xff');
  EXPECT_NE(parseError(huge + "{}").find("a header of"), std::string::npos);
  EXPECT_NE(parseError(safetensors("[1]", "")).find("not a JSON object"),
            std::string::npos);
  EXPECT_NE(parseError(safetensors("{", "")).find("not a JSON object"),
            std::string::npos);
  // Offsets past the data, sizes that disagree with shape x dtype, negative
  // and overflowing dimensions, unknown dtypes, missing fields.
  for (const char *h :
       {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})",
        R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
        R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
        R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
        R"({"x":{"dtype":"Q9","shape":[2],"data_offsets":[0,8]}})",
        R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})",
        R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[-1,7]}})",
        R"({"x":{"dtype":"F32","shape":[2]}})", R"({"x":3})"}) {
    std::string error = parseError(safetensors(h, data));
    EXPECT_NE(error.find("t.safetensors: tensor 'x': "), std::string::npos)
        << h << " -> " << error;
  }
}

TEST(Safetensors, WidensHalfAndBFloat16) {
  // 1.5 in f16 (0x3e00) and in bf16 (0x3fc0).
  std::string data("\x00\x3e\xc0\x3f", 4);
  auto f = qcc::SafetensorsFile::parse(
      llvm::MemoryBuffer::getMemBufferCopy(safetensors(
          R"({"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},)"
          R"("b":{"dtype":"BF16","shape":[1],"data_offsets":[2,4]}})",
          data)),
      "t");
  ASSERT_TRUE(bool(f)) << llvm::toString(f.takeError());
  EXPECT_EQ((*f->floats("h"))[0], 1.5f);
  EXPECT_EQ((*f->floats("b"))[0], 1.5f);
}

TEST(LoraAdapter, ScalingIsAlphaOverRankOrItsRoot) {
  AdapterDir plain(kConfig, rankOneWeights());
  auto a = qcc::readPeftAdapter(plain.path, 0.5);
  ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
  ASSERT_EQ(a->modules.size(), 1u);
  const qcc::LoraFactors &f = a->modules[0];
  EXPECT_EQ(f.module, "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(f.rows, 2); // out
  EXPECT_EQ(f.cols, 2); // in
  EXPECT_DOUBLE_EQ(f.scaling, 0.5 * 2.0 / 1.0);
  // delta = scaling * B A = 1 * [3, 4]^T [1, 2].
  EXPECT_EQ(f.delta(), (std::vector<float>{3, 6, 4, 8}));

  // rslora: alpha / sqrt(r); alpha_pattern by PEFT's suffix rule.
  AdapterDir patterned(
      R"({"r": 1, "lora_alpha": 2, "use_rslora": true,
          "alpha_pattern": {"layers.1.self_attn.q_proj": 7,
                            "layers.0.self_attn.q_proj": 9}})",
      rankOneWeights());
  auto b = qcc::readPeftAdapter(patterned.path);
  ASSERT_TRUE(bool(b)) << llvm::toString(b.takeError());
  EXPECT_DOUBLE_EQ(b->modules[0].scaling, 9.0);
  // A key matches at a '.' boundary only: "yers.0..." does not.
  AdapterDir partial(
      R"({"r": 1, "lora_alpha": 2, "alpha_pattern": {"yers.0.self_attn.q_proj": 7}})",
      rankOneWeights());
  auto c = qcc::readPeftAdapter(partial.path);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_DOUBLE_EQ(c->modules[0].scaling, 2.0);
}

TEST(LoraAdapter, RefusesWhatItCannotApply) {
  struct Case {
    std::string config, weights, expected;
  };
  std::string weights = rankOneWeights();
  std::vector<Case> cases = {
      {"[]", weights, "not a JSON object"},
      {R"({"peft_type": "IA3", "r": 1, "lora_alpha": 2})", weights,
       "peft_type is \"IA3\""},
      {R"({"r": 0, "lora_alpha": 2})", weights, "'r' must be a positive"},
      {R"({"r": 1, "lora_alpha": "x"})", weights, "'lora_alpha' must be"},
      {R"({"r": 1, "lora_alpha": 2, "use_dora": true})", weights, "DoRA"},
      {R"({"r": 1, "lora_alpha": 2, "bias": "all"})", weights, "biases"},
      {R"({"r": 1, "lora_alpha": 2, "modules_to_save": ["lm_head"]})",
       weights, "modules_to_save"},
      {R"({"r": 2, "lora_alpha": 2})", weights,
       "have rank 1, but the configuration says 2"},
      {R"({"r": 1, "lora_alpha": 2, "rank_pattern": {"(": 1}})", weights,
       "not a regular expression"},
      {kConfig,
       safetensors(R"({"base_model.model.x.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                   floats({1})),
       "is not a LoRA factor"},
      {kConfig,
       safetensors(std::string("{\"") + kQ +
                       ".lora_A.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],"
                       "\"data_offsets\":[0,8]}}",
                   floats({1, 2})),
       "has only its A factor"},
      {kConfig,
       safetensors(std::string("{\"") + kQ +
                       ".lora_A.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],"
                       "\"data_offsets\":[0,8]},\"" +
                       kQ +
                       ".lora_B.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],"
                       "\"data_offsets\":[8,24]}}",
                   floats({1, 2, 3, 4, 5, 6})),
       "are not [r, *] and [*, r]"},
      {kConfig,
       safetensors(std::string("{\"") + kQ +
                       ".lora_A.weight\":{\"dtype\":\"I32\",\"shape\":[1,2],"
                       "\"data_offsets\":[0,8]},\"" +
                       kQ +
                       ".lora_B.weight\":{\"dtype\":\"F32\",\"shape\":[2,1],"
                       "\"data_offsets\":[8,16]}}",
                   floats({1, 2, 3, 4})),
       "is not a float type"},
      {kConfig, "", "shorter than"},
  };
  for (const Case &c : cases) {
    AdapterDir dir(c.config, c.weights);
    std::string error = dir.read();
    EXPECT_NE(error.find(c.expected), std::string::npos)
        << c.config << " -> " << error;
    EXPECT_NE(error.find(std::string(dir.path)), std::string::npos) << error;
  }
  // A NaN in a factor.
  std::string nan = rankOneWeights();
  float q = std::nanf("");
  std::memcpy(nan.data() + nan.size() - 4, &q, 4);
  AdapterDir withNan(kConfig, nan);
  EXPECT_NE(withNan.read().find("NaN"), std::string::npos);
  auto missing = qcc::readPeftAdapter("/nonexistent-adapter");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("cannot read the file"),
            std::string::npos);
}

TEST(LoraAdapter, TheImporterNamesAModuleItCannotPlace) {
  // The zoo's llama-legacy is 64 wide; this adapter's q_proj is 2 wide, and
  // its layer 7 does not exist.
  mlir::MLIRContext ctx;
  std::string model = source("test/models/lora/llama/model.onnx");
  for (auto [module, expected] :
       std::vector<std::pair<const char *, const char *>>{
           {kQ, "its weight 'onnx::MatMul_715' is [64, 64], but the "
                "adapter's update is [2, 2]"},
           {"base_model.model.model.layers.7.self_attn.q_proj",
            "no MatMul or Gemm in the model reads it"}}) {
    AdapterDir dir(kConfig, rankOneWeights(module));
    auto adapter = qcc::readPeftAdapter(dir.path);
    ASSERT_TRUE(bool(adapter)) << llvm::toString(adapter.takeError());
    qcc::ImportOptions options;
    options.loraMerges.push_back(*adapter);
    auto m = qcc::importOnnxFile(ctx, model, options);
    ASSERT_FALSE(bool(m));
    std::string error = llvm::toString(m.takeError());
    EXPECT_NE(error.find(expected), std::string::npos) << error;
    EXPECT_NE(error.find("--lora"), std::string::npos) << error;
  }
}

TEST(LoraAdapter, FlagsNameAdaptersAndScales) {
  auto merge = qcc::parseLoraSpec("dir:0.5", /*named=*/false);
  ASSERT_TRUE(bool(merge));
  EXPECT_EQ(merge->dir, "dir");
  EXPECT_EQ(merge->scale, 0.5);
  auto named = qcc::parseLoraSpec("chat=some/dir", /*named=*/true);
  ASSERT_TRUE(bool(named));
  EXPECT_EQ(named->name, "chat");
  EXPECT_EQ(named->dir, "some/dir");
  EXPECT_EQ(named->scale, 1.0);
  for (auto [text, isNamed] : std::vector<std::pair<const char *, bool>>{
           {"dir:x", false}, {"dir:inf", false}, {"", false}, {"dir", true},
           {"=dir", true}})
    EXPECT_FALSE(bool(qcc::parseLoraSpec(text, isNamed))) << text;
  qcc::CompileOptions o;
  o.loraAdapters = {{"a", "d1", 1.0}, {"a", "d2", 1.0}};
  EXPECT_NE(llvm::toString(o.validate()).find("given twice"), std::string::npos);
  o.loraAdapters = {{"a b", "d1", 1.0}};
  EXPECT_NE(llvm::toString(o.validate()).find("must be 1-64 characters"),
            std::string::npos);
  o.loraAdapters = {{"base", "d1", 1.0}};
  EXPECT_NE(llvm::toString(o.validate()).find("'base' names the model"),
            std::string::npos);
  o.loraAdapters = {{"ok", "d1", 1.0}};
  EXPECT_FALSE(bool(o.validate()));
}

TEST(LoraKernel, EachSequenceGetsItsOwnAdapter) {
  using namespace qcc::rt;
  // K = 2, N = 1, R = 1, J = 2: adapter 1 maps x to x0 + x1, adapter 2 to
  // 2 (x0 - x1).
  Tensor x(DType::F32, {2, 2, 2}), a(DType::F32, {2, 1, 2}),
      b(DType::F32, {2, 1, 1});
  float xs[] = {1, 2, 3, 4, 5, 6, 7, 9};
  std::memcpy(x.data<float>(), xs, sizeof xs);
  float as[] = {1, 1, 1, -1}, bs[] = {1, 2};
  std::memcpy(a.data<float>(), as, sizeof as);
  std::memcpy(b.data<float>(), bs, sizeof bs);
  auto run = [&](std::vector<int64_t> adapters) {
    Tensor y = loraKernel({&x, &a, &b}, adapters)[0];
    return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
  };
  EXPECT_EQ(run({}), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ(run({1, 2}), (std::vector<float>{3, 7, -2, -4}));
  EXPECT_EQ(run({0, 1}), (std::vector<float>{0, 0, 11, 16}));
  // Four rows: two sequences of two, or four of one; not three.
  EXPECT_EQ(run({2, 0, 0, 1}), (std::vector<float>{-2, 0, 0, 16}));
  EXPECT_THROW(run({1, 1, 1}), std::runtime_error);
  EXPECT_THROW(run({3, 0}), std::runtime_error);
  EXPECT_THROW(run({-1, 0}), std::runtime_error);
}

TEST(LoraKernel, PrefixBlocksAreSharedWithinOneAdapter) {
  using namespace qcc::rt;
  qcc::format::KvCacheConfig cfg;
  cfg.layout = "paged";
  cfg.blockTokens = 2;
  cfg.layers = 1;
  cfg.kvHeads = 1;
  cfg.headDim = 1;
  KvCacheOptions opts;
  opts.maxSequences = 3;
  opts.numBlocks = 8;
  opts.maxTokens = 8;
  KvCache cache(cfg, opts);
  std::vector<int64_t> tokens = {1, 2, 3, 4};
  int64_t s = cache.addSequence(1);
  EXPECT_EQ(cache.adapter(s), 1);
  cache.reserve(s, 4);
  cache.advance(s, 4);
  cache.publishPrefix(s, tokens);
  EXPECT_EQ(cache.matchPrefix(tokens, 4, 1).tokens, 4);
  EXPECT_EQ(cache.matchPrefix(tokens, 4, 0).tokens, 0);
  EXPECT_EQ(cache.matchPrefix(tokens, 4, 2).tokens, 0);
  int64_t other = cache.addSequence(2);
  EXPECT_THROW(cache.attachPrefix(other, cache.matchPrefix(tokens, 4, 1)),
               std::runtime_error);
}

TEST(LoraAdapter, AnEmbeddingGainsTheTransposedUpdate) {
  // lora_embedding_A [1, 128] picks row 5; lora_embedding_B [64, 1] = j:
  // table row 5 gains scaling * j in column j (scaling = 2 / 1).
  std::vector<float> a(128, 0.f), b(64);
  a[5] = 1;
  for (int j = 0; j < 64; ++j)
    b[j] = (float)j;
  AdapterDir dir(kConfig, twoFactors("base_model.model.model.embed_tokens",
                                     {".lora_embedding_A", ".lora_embedding_B"},
                                     {1, 128}, a, {64, 1}, b));
  auto adapter = qcc::readPeftAdapter(dir.path);
  ASSERT_TRUE(bool(adapter)) << llvm::toString(adapter.takeError());
  std::string model = source("test/models/lora/llama/model.onnx");
  // A context each: a blob's name is unique within one.
  auto table = [&](const qcc::ImportOptions &options) {
    mlir::MLIRContext ctx;
    auto module = qcc::importOnnxFile(ctx, model, options);
    EXPECT_TRUE(bool(module)) << llvm::toString(module.takeError());
    std::vector<float> values;
    (*module)->walk([&](qcc::ConstantOp c) {
      // The merged table is a new blob named after the old one.
      if (llvm::StringRef(qcc::blobName(c.getValue(), ""))
              .starts_with("model.model.embed_tokens.weight"))
        values = *qcc::getF32Values(c.getValue());
    });
    return values;
  };
  std::vector<float> base = table({});
  qcc::ImportOptions merged;
  merged.loraMerges.push_back(*adapter);
  std::vector<float> adapted = table(merged);
  ASSERT_EQ(base.size(), 128u * 64u);
  ASSERT_EQ(adapted.size(), base.size());
  for (size_t i = 0; i < base.size(); ++i) {
    float expected = i / 64 == 5 ? base[i] + 2.f * (float)(i % 64) : base[i];
    ASSERT_EQ(adapted[i], expected) << i;
  }
  // At run time adapters apply to linears only.
  qcc::ImportOptions runtime;
  runtime.loraAdapters.emplace_back("e", *adapter);
  mlir::MLIRContext ctx;
  auto refused = qcc::importOnnxFile(ctx, model, runtime);
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("is an embedding"),
            std::string::npos);
}

TEST(LoraAdapter, RuntimeAdaptersNeedRowsInBatchOrder) {
  // A mixture-of-experts expert reads its routed rows: at run time a row's
  // sequence (so its adapter) is unknown there. Merging is fine.
  std::vector<float> a(2 * 64, 0.01f), b(128 * 2, 0.01f);
  AdapterDir dir(R"({"r": 2, "lora_alpha": 2})",
                 twoFactors("base_model.model.model.layers.0.block_sparse_moe."
                            "experts.0.w1",
                            {".lora_A.weight", ".lora_B.weight"}, {2, 64}, a,
                            {128, 2}, b));
  auto adapter = qcc::readPeftAdapter(dir.path);
  ASSERT_TRUE(bool(adapter)) << llvm::toString(adapter.takeError());
  std::string model = source("test/models/zoo/mixtral-legacy/model.onnx");
  {
    mlir::MLIRContext ctx;
    qcc::ImportOptions runtime;
    runtime.loraAdapters.emplace_back("x", *adapter);
    auto refused = qcc::importOnnxFile(ctx, model, runtime);
    ASSERT_FALSE(bool(refused));
    EXPECT_NE(llvm::toString(refused.takeError())
                  .find("experts.0.w1': its linear reads rows gathered from "
                        "the batch's tokens"),
              std::string::npos);
  }
  mlir::MLIRContext ctx;
  qcc::ImportOptions merged;
  merged.loraMerges.push_back(*adapter);
  auto ok = qcc::importOnnxFile(ctx, model, merged);
  EXPECT_TRUE(bool(ok)) << llvm::toString(ok.takeError());
}
