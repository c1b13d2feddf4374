//===- ArtifactLoaderTest.cpp - the loader refuses hostile artifacts ------===//
//
// runtime/core/Artifact validates the whole header and manifest at load: the CRC
// covers the header, offsets and sizes cannot wrap, every id is in range,
// values are defined before they are read, nesting is bounded. Each case
// below is a hostile artifact with a valid CRC (anyone can write one) that
// must be refused with one line naming the file and the reason. The fuzz
// targets fuzz/ArtifactFuzzer.cpp and fuzz/ManifestFuzzer.cpp search for
// more; what they found is replayed from test/fuzz-regressions/.
//
//===----------------------------------------------------------------------===//
#include "format/ArtifactFormat.h"
#include "format/Checked.h"
#include "runtime/core/Artifact.h"
#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/Session.h"
#include "runtime/core/SyntheticWeights.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>

using namespace qcc;
using nlohmann::json;

namespace {

/// A manifest's value entry.
json v(const char *dtype, json shape) {
  return json{{"dtype", dtype}, {"shape", std::move(shape)}};
}
/// A manifest's constant entry: `size` bytes at `offset` of the data.
json c(int value, int offset, int size) {
  return json{{"value", value}, {"offset", offset}, {"size", size}};
}

/// main(x: f32[4]) = x + c, c a constant f32[4] at offset 0 of the data.
json goodManifest() {
  return json{
      {"format_version", format::kFormatVersion},
      {"values",
       {{{"dtype", "f32"}, {"shape", {4}}},
        {{"dtype", "f32"}, {"shape", {4}}},
        {{"dtype", "f32"}, {"shape", {4}}}}},
      {"constants", {{{"value", 1}, {"offset", 0}, {"size", 16}}}},
      {"functions",
       {{{"name", "main"},
         {"inputs",
          {{{"name", "x"}, {"value", 0}, {"dtype", "f32"}, {"shape", {4}}}}},
         {"outputs",
          {{{"name", "y"}, {"value", 2}, {"dtype", "f32"}, {"shape", {4}}}}},
         {"nodes",
          {{{"op", "add"}, {"name", "add0"}, {"in", {0, 1}}, {"out", {2}}}}}}}},
      {"sections", json::object()}};
}

std::shared_ptr<std::vector<char>> package(const std::string &manifest,
                                           std::string data = std::string(16, '\0')) {
  return std::make_shared<std::vector<char>>(
      format::packageFile(manifest, data));
}

/// The loader's message for `bytes`, or "" when it accepts them: the same
/// from the bytes in memory (qrun --no-mmap) and mapped (qrun's default).
std::string refusal(std::shared_ptr<std::vector<char>> bytes) {
  auto load = [](std::shared_ptr<const format::FileBytes> file) {
    try {
      rt::Artifact::fromFile(std::move(file), "hostile.qpkg");
      return std::string();
    } catch (const std::runtime_error &e) {
      return std::string(e.what());
    }
  };
  std::string mapped =
      load(format::FileBytes::mapCopy({bytes->data(), bytes->size()}));
  std::string read = load(format::FileBytes::hold(std::move(bytes)));
  EXPECT_EQ(mapped, read);
  return read;
}
std::string refusal(const json &manifest) {
  return refusal(package(manifest.dump()));
}

#define EXPECT_REFUSED(expr, text)                                             \
  do {                                                                         \
    std::string msg = (expr);                                                  \
    EXPECT_EQ(msg.rfind("hostile.qpkg: ", 0), 0u) << msg;                      \
    EXPECT_NE(msg.find(text), std::string::npos) << msg;                       \
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;                       \
  } while (0)

TEST(ArtifactLoader, AcceptsAWellFormedArtifact) {
  EXPECT_EQ(refusal(goodManifest()), "");
  rt::Artifact a = rt::Artifact::fromBytes(package(goodManifest().dump()),
                                           "good.qpkg");
  ASSERT_NE(a.constant(1), nullptr);
  EXPECT_EQ(a.constant(1)->bytes(), 16u);
}

TEST(ArtifactLoader, CrcCoversTheHeader) {
  // Each header field but the CRC is covered: changing one is a mismatch.
  for (size_t at : {offsetof(format::Header, flags),
                    offsetof(format::Header, manifestSize),
                    offsetof(format::Header, reserved)}) {
    auto bytes = package(goodManifest().dump());
    (*bytes)[at] ^= 1;
    EXPECT_REFUSED(refusal(bytes), "corrupted: checksum mismatch");
  }
}

TEST(ArtifactLoader, HeaderRangesCannotWrap) {
  auto bytes = package(goodManifest().dump());
  format::Header h;
  std::memcpy(&h, bytes->data(), sizeof h);
  h.dataOffset = 64 * (UINT64_MAX / 64); // offset + size wraps to small
  std::memcpy(bytes->data(), &h, sizeof h);
  format::sealCrc(*bytes);
  EXPECT_REFUSED(refusal(bytes), "sections lie outside the file");

  std::memcpy(&h, bytes->data(), sizeof h);
  h.manifestOffset = 0; // the manifest would be read from the header
  h.dataOffset = 128;
  std::memcpy(bytes->data(), &h, sizeof h);
  format::sealCrc(*bytes);
  EXPECT_REFUSED(refusal(bytes), "sections lie outside the file");
}

TEST(ArtifactLoader, ConstantOffsetsCannotWrap) {
  json m = goodManifest();
  m["constants"][0]["offset"] = UINT64_MAX - 7; // + 16 wraps to 8
  EXPECT_REFUSED(refusal(m), "constant 1 does not fit the data section");
  m["constants"][0]["offset"] = -64;
  EXPECT_REFUSED(refusal(m), "\"offset\" is not a non-negative integer");
  m = goodManifest();
  m["constants"][0]["size"] = 32; // not f32[4]'s bytes
  EXPECT_REFUSED(refusal(m), "32 bytes for f32[4]");
  m = goodManifest();
  m["values"][1]["shape"] = {-1}; // a constant of dynamic shape
  m["functions"][0]["nodes"] = json::array();
  EXPECT_REFUSED(refusal(m), "bytes for f32[-1]");
  m = goodManifest();
  m["constants"].push_back(m["constants"][0]);
  EXPECT_REFUSED(refusal(m), "constant 1 is defined twice");
}

TEST(ArtifactLoader, ShapesCannotOverflow) {
  json m = goodManifest();
  m["values"][2]["shape"] = {int64_t(1) << 62, 4, 4};
  EXPECT_REFUSED(refusal(m), "more elements than fit in 64 bits");
  m["values"][2]["shape"] = {-2};
  EXPECT_REFUSED(refusal(m), "invalid dim -2");
  m["values"][2]["shape"] = json::array();
  for (int i = 0; i < 40; ++i)
    m["values"][2]["shape"].push_back(1);
  EXPECT_REFUSED(refusal(m), "at most 32 dims");
}

TEST(ArtifactLoader, IdsAreInRange) {
  json m = goodManifest();
  m["functions"][0]["inputs"][0]["value"] = 3;
  EXPECT_REFUSED(refusal(m), "input 'x' refers to unknown value 3");
  m = goodManifest();
  m["functions"][0]["outputs"][0]["value"] = uint64_t(1) << 63;
  EXPECT_REFUSED(refusal(m), "output 'y' refers to unknown value");
  m = goodManifest();
  m["functions"][0]["nodes"][0]["in"] = {0, -2};
  EXPECT_REFUSED(refusal(m), "node 'add0' refers to unknown value -2");
  m = goodManifest();
  m["functions"][0]["nodes"][0]["out"] = {7};
  EXPECT_REFUSED(refusal(m), "node 'add0' refers to unknown value 7");
  m = goodManifest();
  m["constants"][0]["value"] = 9;
  EXPECT_REFUSED(refusal(m), "constant refers to unknown value 9");
  m = goodManifest();
  m["functions"][0]["inputs"][0]["dtype"] = "i64"; // its value is f32
  EXPECT_REFUSED(refusal(m), "input 'x' is i64[4] but its value is f32[4]");
}

TEST(ArtifactLoader, ValuesAreDefinedBeforeUse) {
  json m = goodManifest();
  m["functions"][0]["nodes"][0]["in"] = {0, 2}; // reads its own result
  EXPECT_REFUSED(refusal(m), "reads value 2 before anything defines it");
  m = goodManifest();
  m["functions"][0]["nodes"][0]["out"] = {1}; // overwrites the constant
  EXPECT_REFUSED(refusal(m), "redefines value 1");
  m = goodManifest();
  m["functions"][0]["nodes"] = json::array(); // output never computed
  EXPECT_REFUSED(refusal(m), "output 'y' reads value 2 before anything");
}

TEST(ArtifactLoader, KernelBinariesAndSectionsCannotWrap) {
  json m = goodManifest();
  m["sections"]["tokenizer"] = {{"offset", UINT64_MAX}, {"size", 2}};
  EXPECT_REFUSED(refusal(m), "section 'tokenizer' lies outside the data");
  m = goodManifest();
  m["kernels"] = {{{"function", "main"},
                   {"region", "r0"},
                   {"kind", "elementwise"},
                   {"unsupported", "test"},
                   {"binaries",
                    {{"ptx", {{"offset", UINT64_MAX - 3}, {"size", 8}}}}}}};
  EXPECT_REFUSED(refusal(m), "kernel r0 binary ptx lies outside the data");
}

TEST(ArtifactLoader, NestingIsBounded) {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  json m = goodManifest();
  std::string text = m.dump();
  text.insert(text.size() - 1, ",\"x\":" + deep);
  EXPECT_REFUSED(refusal(package(text)), "nested deeper than 64 levels");
  // Brackets inside strings are text, not nesting.
  m["producer"] = std::string(1000, '[');
  EXPECT_EQ(refusal(m), "");
}

TEST(ArtifactLoader, MalformedManifestsAreOneLine) {
  EXPECT_REFUSED(refusal(package("[1, 2]")), "not a JSON object");
  EXPECT_REFUSED(refusal(package("{\"values\": 7}")), "corrupted manifest");
  EXPECT_REFUSED(refusal(package("{")), "corrupted manifest");
  json m = goodManifest();
  m["functions"][0]["nodes"][0]["attrs"] = 5;
  EXPECT_REFUSED(refusal(m), "attrs is not an object");
}

TEST(ArtifactLoader, KvCacheIsValidatedAtLoad) {
  // Refused at load, naming the file, though nothing here uses the cache.
  json m = goodManifest();
  m["kv_cache"] = {{"layout", "paged"}, {"block_tokens", 16}, {"layers", 2},
                   {"kv_heads", 2}, {"head_dim", 8}};
  EXPECT_EQ(refusal(m), "");
  m["kv_cache"]["layers"] = -1;
  EXPECT_REFUSED(refusal(m),
                 "manifest: KV cache: \"kv_cache\".\"layers\" must be a "
                 "positive integer");
  m["kv_cache"]["layers"] = 2;
  m["kv_cache"]["head_dim"] = int64_t(1) << 62;
  EXPECT_REFUSED(refusal(m), "is beyond 64 bits");
  m["kv_cache"]["head_dim"] = 8;
  m["kv_cache"]["layout"] = "ring";
  EXPECT_REFUSED(refusal(m), "unknown layout 'ring'");
  m["kv_cache"]["layout"] = 3;
  EXPECT_REFUSED(refusal(m), "corrupted manifest");
  m["kv_cache"] = "paged";
  EXPECT_REFUSED(refusal(m), "\"kv_cache\" is not an object");
}

TEST(ArtifactLoader, AttributeTypesAreChecked) {
  auto withAttrs = [](json attrs) {
    json m = goodManifest();
    m["functions"][0]["nodes"][0]["attrs"] = std::move(attrs);
    return m;
  };
  EXPECT_EQ(refusal(withAttrs({{"axis", -1},
                               {"scale", 0.5},
                               {"causal", true},
                               {"perm", {1, 0}},
                               {"to", "f16"},
                               {"qcc.name", 7}})),
            "");
  EXPECT_REFUSED(refusal(withAttrs({{"axis", "0"}})),
                 "function 'main', node 'add0' (add): attribute 'axis' is not "
                 "an integer: \"0\"");
  EXPECT_REFUSED(refusal(withAttrs({{"axis", UINT64_MAX}})),
                 "attribute 'axis' is not an integer");
  EXPECT_REFUSED(refusal(withAttrs({{"scale", {1.0}}})),
                 "attribute 'scale' is not a finite number: [1.0]");
  EXPECT_REFUSED(refusal(withAttrs({{"causal", 1}})),
                 "attribute 'causal' is not a boolean");
  EXPECT_REFUSED(refusal(withAttrs({{"perm", {1, 0.5}}})),
                 "attribute 'perm' is not a list of integers");
  EXPECT_REFUSED(refusal(withAttrs({{"granularity", 3}})),
                 "attribute 'granularity' is not a string");
  EXPECT_REFUSED(refusal(withAttrs({{"largest", 0}})),
                 "attribute 'largest' is not a boolean");
  EXPECT_REFUSED(refusal(withAttrs({{"reduction", 1}})),
                 "attribute 'reduction' is not a string");
  // A long value is cut short in the message.
  std::string longMsg =
      refusal(withAttrs({{"axis", std::vector<int>(1000, 1)}}));
  EXPECT_REFUSED(longMsg, "attribute 'axis' is not an integer: [1,1,");
  EXPECT_LT(longMsg.size(), 200u) << longMsg;
}

/// main(x: f32[2, 4]) = qlinear(quantize(x)) with float outlier column 1:
/// int8 weight [3, 4], scales and sums [3], float slice [3, 1].
json outlierManifest(json columns) {
  return json{
      {"format_version", format::kFormatVersion},
      {"values",
       {v("f32", {2, 4}), v("i8", {2, 4}), v("f32", {2, 1}), v("i32", {2, 1}),
        v("i8", {3, 4}), v("f32", {3}), v("i32", {3}), v("f32", {3, 1}),
        v("f32", {2, 3})}},
      {"constants", {c(4, 0, 12), c(5, 64, 12), c(6, 128, 12), c(7, 192, 12)}},
      {"functions",
       {{{"name", "main"},
         {"inputs",
          {{{"name", "x"}, {"value", 0}, {"dtype", "f32"}, {"shape", {2, 4}}}}},
         {"outputs",
          {{{"name", "y"}, {"value", 8}, {"dtype", "f32"}, {"shape", {2, 3}}}}},
         {"nodes",
          {{{"op", "quantize"},
            {"name", "q0"},
            {"in", {0}},
            {"out", {1, 2, 3}},
            {"attrs",
             {{"granularity", "per_token"}, {"outlier_columns", columns}}}},
           {{"op", "qlinear"},
            {"name", "ql0"},
            {"in", {1, 2, 3, 4, 5, 6, 0, 7}},
            {"out", {8}},
            {"attrs", {{"outlier_columns", columns}}}}}}}}},
      {"sections", json::object()}};
}

TEST(ArtifactLoader, OutlierColumnsAreValidatedAtLoad) {
  std::string data(256, '\0'); // four constants, 64-byte aligned
  auto refused = [&](const json &m) { return refusal(package(m.dump(), data)); };
  EXPECT_EQ(refused(outlierManifest({1})), "");
  EXPECT_REFUSED(refused(outlierManifest({4})),
                 "function 'main', node 'q0' (quantize): outlier column 4 is "
                 "outside [0, 4)");
  EXPECT_REFUSED(refused(outlierManifest({-1})), "outlier column -1 is outside");
  EXPECT_REFUSED(refused(outlierManifest({1, 1})),
                 "outlier columns must be ascending and distinct (1 then 1)");
  EXPECT_REFUSED(refused(outlierManifest({0, 1, 2, 3, 3})),
                 "5 outlier columns for K = 4");
  EXPECT_REFUSED(refused(outlierManifest({"1"})),
                 "attribute 'outlier_columns' is not a list of integers");
  // Two columns, but the float slice is [3, 1].
  EXPECT_REFUSED(refused(outlierManifest({1, 2})),
                 "node 'ql0' (qlinear): outlier_weight must be f32 [3, 2]");
  json m = outlierManifest({1});
  m["functions"][0]["nodes"][1]["in"] = {1, 2, 3, 4, 5, 6, 0};
  EXPECT_REFUSED(refused(m), "with outlier columns a qlinear takes 8 or 9 "
                             "operands, not 7");
  m = outlierManifest({1});
  m["functions"][0]["nodes"][1]["in"] = {1, 2, 3, 4, 5, 6, 1, 7};
  EXPECT_REFUSED(refused(m), "outlier_input must be f32 [..., 4]");
  m = goodManifest();
  m["functions"][0]["nodes"][0]["attrs"] = {{"outlier_columns", {0}}};
  EXPECT_REFUSED(refusal(m), "outlier_columns on an op that is no quantize "
                             "or qlinear");
}

/// A hostile artifact may lay two constants over the same bytes: here the
/// int8 weights of two qlinears, [3, 4] and [4, 3], at offset 0. The
/// session packs weights once per bytes and shape (runtime/cpu/Session.h): keyed
/// by the bytes alone, the second qlinear got the first one's packed form
/// and threw "packed weight does not match". Both CPU paths run it and agree
/// bit for bit (the packed qlinear equals the reference's). On CPUs without
/// VNNI nothing is packed, and the test checks only that.
TEST(ArtifactLoader, AliasedWeightsArePackedPerShape) {
  auto quantize = [](const char *name, int x, int q) {
    return json{{"op", "quantize"},
                {"name", name},
                {"in", {x}},
                {"out", {q, q + 1, q + 2}},
                {"attrs", {{"granularity", "per_token"}}}};
  };
  auto qlinear = [](const char *name, int q, int w, int y) {
    return json{{"op", "qlinear"},
                {"name", name},
                {"in", {q, q + 1, q + 2, w, w + 1, w + 2}},
                {"out", {y}}};
  };
  json m{
      {"format_version", format::kFormatVersion},
      {"values",
       {v("f32", {2, 4}), v("i8", {2, 4}), v("f32", {2, 1}), v("i32", {2, 1}),
        v("i8", {3, 4}), v("f32", {3}), v("i32", {3}), v("f32", {2, 3}),
        v("i8", {2, 3}), v("f32", {2, 1}), v("i32", {2, 1}), v("i8", {4, 3}),
        v("f32", {4}), v("i32", {4}), v("f32", {2, 4})}},
      {"constants",
       {c(4, 0, 12), c(5, 64, 12), c(6, 128, 12), c(11, 0, 12),
        c(12, 192, 16), c(13, 256, 16)}},
      {"functions",
       {{{"name", "main"},
         {"inputs",
          {{{"name", "x"}, {"value", 0}, {"dtype", "f32"}, {"shape", {2, 4}}}}},
         {"outputs",
          {{{"name", "y"}, {"value", 14}, {"dtype", "f32"}, {"shape", {2, 4}}}}},
         {"nodes",
          {quantize("q0", 0, 1), qlinear("ql0", 1, 4, 7), quantize("q1", 7, 8),
           qlinear("ql1", 8, 11, 14)}}}}},
      {"sections", json::object()}};
  std::string data(320, '\0');
  const int8_t w[12] = {3, -1, 4, 1, -5, 9, 2, -6, 5, 3, -5, 8};
  std::memcpy(data.data(), w, sizeof w);
  auto put = [&](int offset, const auto &values) {
    std::memcpy(data.data() + offset, values.data(),
                values.size() * sizeof(values[0]));
  };
  // Scales, and each weight row's sum (the zero-point correction's).
  put(64, std::vector<float>{0.02f, 0.03f, 0.05f});
  put(128, std::vector<int32_t>{7, 0, 8});
  put(192, std::vector<float>{0.01f, 0.02f, 0.04f, 0.03f});
  put(256, std::vector<int32_t>{6, 17, -9, 6});
  rt::Artifact a = rt::Artifact::fromBytes(package(m.dump(), data), "a.qpkg");
  rt::Tensor x(rt::DType::F32, {2, 4});
  const float xs[8] = {0.5f, -1.25f, 2.0f, 0.75f, -0.3f, 1.1f, -2.2f, 0.9f};
  std::copy(xs, xs + 8, x.data<float>());
  std::map<rt::CpuKernelPath, rt::Tensor> y;
  rt::CpuKernelPath saved = rt::cpuKernelPath();
  for (rt::CpuKernelPath path :
       {rt::CpuKernelPath::Fast, rt::CpuKernelPath::Reference}) {
    rt::setCpuKernelPath(path);
    rt::Session s(a);
    y[path] = s.run("main", {{"x", x}}).at("y");
  }
  rt::setCpuKernelPath(saved);
  const rt::Tensor &f = y[rt::CpuKernelPath::Fast],
                   &r = y[rt::CpuKernelPath::Reference];
  ASSERT_EQ(f.shape(), (rt::Shape{2, 4}));
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(f.data<float>()[i], r.data<float>()[i]) << i;
}

/// main(x: f32[2, 64]) = linear(x, weight_int4(packed i8[4, 32], scales
/// f16[4, 2], perm i32[64]) group_size 32): constants at 0, 128 and 192.
json int4Manifest(json groupSize) {
  return json{
      {"format_version", format::kFormatVersion},
      {"values",
       {v("f32", {2, 64}), v("i8", {4, 32}), v("f16", {4, 2}), v("i32", {64}),
        v("f32", {4, 64}), v("f32", {2, 4})}},
      {"constants",
       {{{"value", 1}, {"offset", 0}, {"size", 128}},
        {{"value", 2}, {"offset", 128}, {"size", 16}},
        {{"value", 3}, {"offset", 192}, {"size", 256}}}},
      {"functions",
       {{{"name", "main"},
         {"inputs",
          {{{"name", "x"}, {"value", 0}, {"dtype", "f32"}, {"shape", {2, 64}}}}},
         {"outputs",
          {{{"name", "y"}, {"value", 5}, {"dtype", "f32"}, {"shape", {2, 4}}}}},
         {"nodes",
          {{{"op", "weight_int4"},
            {"name", "w0"},
            {"in", {1, 2, 3}},
            {"out", {4}},
            {"attrs", {{"group_size", groupSize}}}},
           {{"op", "linear"}, {"name", "l0"}, {"in", {0, 4}}, {"out", {5}}}}}}}},
      {"sections", json::object()}};
}

TEST(ArtifactLoader, Int4WeightsAreValidatedAtLoad) {
  std::string data(448, '\0');
  for (int32_t j = 0; j < 64; ++j) // the identity permutation
    std::memcpy(&data[192 + 4 * j], &j, 4);
  auto refused = [&](const json &m, const std::string &d) {
    return refusal(package(m.dump(), d));
  };
  EXPECT_EQ(refused(int4Manifest(32), data), "");
  EXPECT_REFUSED(refused(int4Manifest(0), data),
                 "function 'main', node 'w0' (weight_int4): group size 0 must "
                 "be positive and even");
  EXPECT_REFUSED(refused(int4Manifest(48), data),
                 "K = 64 is not a multiple of the group size 48");
  EXPECT_REFUSED(refused(int4Manifest("32"), data), "group_size");
  json m = int4Manifest(32);
  m["functions"][0]["nodes"][0]["attrs"] = json::object();
  EXPECT_REFUSED(refused(m, data), "needs an integer group_size");
  // Scales stored as f32 (same bytes as f16 [4, 4]), a result of the wrong K.
  m = int4Manifest(32);
  m["values"][2]["dtype"] = "f32";
  m["values"][2]["shape"] = {4, 1};
  EXPECT_REFUSED(refused(m, data), "needs i8 packed [N, K/2], f16 scales");
  m = int4Manifest(32);
  m["values"][4]["shape"] = {4, 128};
  m["values"][5]["shape"] = {2, 4};
  EXPECT_REFUSED(refused(m, data), "do not describe one [N, K] weight");
  std::string dup = data;
  int32_t seven = 7;
  std::memcpy(&dup[192 + 4 * 8], &seven, 4); // column 7 twice, 8 never
  EXPECT_REFUSED(refused(int4Manifest(32), dup),
                 "(weight_int4): permutation names column 7 twice");
  m = int4Manifest(32);
  m["functions"][0]["nodes"][0]["in"] = {1};
  EXPECT_REFUSED(refused(m, data), "needs packed, scales and an optional perm");
  // Asymmetric: `asymmetric` makes the last operand the offsets (f16, the
  // scales' shape; the scales' own constant serves here).
  m = int4Manifest(32);
  m["functions"][0]["nodes"][0]["attrs"]["asymmetric"] = true;
  m["functions"][0]["nodes"][0]["in"] = {1, 2, 3, 2};
  EXPECT_EQ(refused(m, data), "");
  m["functions"][0]["nodes"][0]["in"] = {1, 2, 2};
  EXPECT_EQ(refused(m, data), "");
  // Without perm the third operand is the offsets: an i32 [64] is refused.
  m["functions"][0]["nodes"][0]["in"] = {1, 2, 3};
  EXPECT_REFUSED(refused(m, data),
                 "function 'main', node 'w0' (weight_int4): offsets must be "
                 "f16 [4, 2] as the scales, got [64] i32");
  m["functions"][0]["nodes"][0]["in"] = {1, 2, 3, 1};
  EXPECT_REFUSED(refused(m, data), "offsets must be f16 [4, 2] as the scales, "
                                   "got [4, 32] i8");
  m["functions"][0]["nodes"][0]["in"] = {1, 2, 3, 2, 2};
  EXPECT_REFUSED(refused(m, data),
                 "needs packed, scales, an optional perm and offsets");
  m["functions"][0]["nodes"][0]["in"] = {1, 2};
  EXPECT_REFUSED(refused(m, data),
                 "needs packed, scales, an optional perm and offsets");
  m["functions"][0]["nodes"][0]["attrs"]["asymmetric"] = 1;
  EXPECT_REFUSED(refused(m, data), "asymmetric");
}

TEST(ArtifactLoader, OnlyRegularFilesAreRead) {
  std::string dir = testing::TempDir();
  try {
    rt::Artifact::load(dir);
    FAIL() << "a directory was accepted";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"),
              std::string::npos)
        << e.what();
  }
}

// qcc --synthetic-weights (runtime/core/SyntheticWeights.h): records the loader
// expands, and refuses when it cannot.
/// main(x: f32[4, 32]) = x + w, w a synthetic f32[4, 32] (record 0).
json syntheticManifest() {
  json shape = {4, 32};
  json f32 = {{"dtype", "f32"}, {"shape", shape}};
  return json{
      {"format_version", format::kFormatVersion},
      {"values", {f32, f32, f32}},
      {"synthetic",
       {{{"dist", "normal"},
         {"stddev", 0.25},
         {"seed", 99},
         {"dtype", "f32"},
         {"shape", shape}}}},
      {"constants", {{{"value", 1}, {"synthetic", 0}}}},
      {"functions",
       {{{"name", "main"},
         {"inputs",
          {{{"name", "x"}, {"value", 0}, {"dtype", "f32"}, {"shape", shape}}}},
         {"outputs",
          {{{"name", "y"}, {"value", 2}, {"dtype", "f32"}, {"shape", shape}}}},
         {"nodes",
          {{{"op", "add"}, {"name", "add0"}, {"in", {0, 1}}, {"out", {2}}}}}}}},
      {"sections", json::object()}};
}

TEST(ArtifactLoader, SyntheticRecordsAreExpanded) {
  rt::Artifact a = rt::Artifact::fromBytes(
      std::make_shared<std::vector<char>>(
          format::packageFile(syntheticManifest().dump(), "")),
      "synthetic.qpkg");
  EXPECT_EQ(a.syntheticBytes(), 4u * 32 * 4);
  const rt::Tensor *w = a.constant(1);
  ASSERT_NE(w, nullptr);
  std::vector<float> expected(4 * 32);
  rt::synthetic::generate(rt::synthetic::Dist::Normal, 0.25, 99, rt::DType::F32,
                      expected.data(), expected.size());
  EXPECT_EQ(std::memcmp(w->data<float>(), expected.data(),
                        expected.size() * sizeof(float)),
            0);
}

TEST(ArtifactLoader, SyntheticRecordsAreValidated) {
  json m = syntheticManifest();
  m["synthetic"][0]["dist"] = "uniform";
  EXPECT_REFUSED(refusal(m), "synthetic record 0: unknown distribution");
  m = syntheticManifest();
  m["synthetic"][0]["stddev"] = -1;
  EXPECT_REFUSED(refusal(m), "\"stddev\" is not a finite number");
  m["synthetic"][0]["stddev"] = "big";
  EXPECT_REFUSED(refusal(m), "\"stddev\" is not a finite number");
  m = syntheticManifest();
  m["synthetic"][0]["dtype"] = "i32"; // normal cannot fill i32
  EXPECT_REFUSED(refusal(m), "cannot fill dtype \"i32\"");
  m = syntheticManifest();
  m["synthetic"][0]["seed"] = -3;
  EXPECT_REFUSED(refusal(m), "\"seed\" is not a non-negative integer");
  m = syntheticManifest();
  m["synthetic"][0]["shape"] = {4, 16}; // not the value's shape
  EXPECT_REFUSED(refusal(m), "synthetic record 0 is f32[4, 16], the value "
                             "f32[4, 32]");
  m = syntheticManifest();
  m["constants"][0]["synthetic"] = 1;
  EXPECT_REFUSED(refusal(m), "synthetic record 1 does not exist");
  m = syntheticManifest();
  m["synthetic"][0]["shape"] = {int64_t(1) << 40, 1 << 22}; // 2^64 bytes of f32
  EXPECT_REFUSED(refusal(m), "synthetic record 0: sizes overflow 64 bits");
  m = syntheticManifest();
  m["synthetic"][0]["shape"] = {int64_t(1) << 40, 1 << 10}; // 4 PiB of f32
  EXPECT_REFUSED(refusal(m), "exceed half of this machine's memory");
  // The fuzz targets' memory bound applies too: 4 x 32 f32 = 512 bytes is
  // more than half of 1 KiB.
  format::limitMemoryForFuzzing(1000);
  std::string underFuzzLimit = refusal(syntheticManifest());
  format::limitMemoryForFuzzing(UINT64_MAX);
  EXPECT_REFUSED(underFuzzLimit, "exceed half of this machine's memory");
  m = syntheticManifest();
  m["synthetic"] = json::object();
  EXPECT_REFUSED(refusal(m), "\"synthetic\" is not a list");
}


TEST(Checked, Arithmetic) {
  EXPECT_EQ(format::checkedAdd<uint64_t>(UINT64_MAX, 1), std::nullopt);
  EXPECT_EQ(format::checkedMul<int64_t>(int64_t(1) << 62, 4), std::nullopt);
  EXPECT_EQ(format::checkedMul<int64_t>(3, 4), 12);
  EXPECT_TRUE(format::rangeWithin(8, 8, 16));
  EXPECT_FALSE(format::rangeWithin(UINT64_MAX - 7, 16, 64));
  std::vector<int64_t> big{int64_t(1) << 62, 4}, neg{-1, 4}, ok{2, 3};
  EXPECT_EQ(format::checkedNumElements(big), std::nullopt);
  EXPECT_EQ(format::checkedNumElements(neg), std::nullopt);
  EXPECT_EQ(format::checkedBytes(ok, 4), 24u);
  EXPECT_EQ(format::checkedBytes(std::vector<int64_t>{int64_t(1) << 62}, 4),
            std::nullopt);
  EXPECT_GT(format::physicalMemoryBytes(), 0u);
  EXPECT_THROW(format::requireMemory(UINT64_MAX, "x"), std::runtime_error);
}

// ONNX Slice on one axis (the compiler's static shapes, the CPU kernel).
TEST(Checked, SliceAxis) {
  auto eq = [](format::SliceAxis r, int64_t first, int64_t count) {
    EXPECT_EQ(r.first, first);
    EXPECT_EQ(r.count, count);
  };
  const int64_t kMax = std::numeric_limits<int64_t>::max(),
                kMin = std::numeric_limits<int64_t>::min();
  eq(format::sliceAxis(1, 7, 2, 10), 1, 3);       // 1, 3, 5
  eq(format::sliceAxis(-3, kMax, 1, 10), 7, 3);   // 7, 8, 9
  eq(format::sliceAxis(kMin, 4, 1, 10), 0, 4);    // clamped to 0
  eq(format::sliceAxis(8, 2, -3, 10), 8, 2);      // 8, 5
  eq(format::sliceAxis(-1, kMin, -1, 10), 9, 10); // reversed
  eq(format::sliceAxis(5, 5, 1, 10), 5, 0);
  eq(format::sliceAxis(0, 3, 1, 0), 0, 0);        // empty axis
  eq(format::sliceAxis(0, -1, -1, 0), 0, 0);
  // Steps whose ceil(span / step) overflowed span + step - 1 (fuzzed).
  eq(format::sliceAxis(0, kMax, kMax, 8), 0, 1);
  eq(format::sliceAxis(kMax, kMin, kMin, 8), 7, 1);
  eq(format::sliceAxis(kMax, kMin, -kMax, 8), 7, 1);
}

} // namespace
