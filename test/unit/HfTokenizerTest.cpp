//===- HfTokenizerTest.cpp - tokenizer.json against the tokenizers library ===//
//
// test/models/tokenizers/*.json are small BPE tokenizers with the pipelines
// of real decoders (GPT-2, Llama 2/3, Mistral, Qwen2, SmolLM, and four that
// cover the remaining normalizers, pre-tokenizers and decoders);
// expected.json holds what the Python `tokenizers` library gives for each
// test text (gen_tokenizers.py writes both; no Python is needed here).
//
//===----------------------------------------------------------------------===//
#include "runtime/text/HfTokenizer.h"
#include "runtime/text/Tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>

using namespace qcc::rt;
using nlohmann::json;

namespace {

const std::string kDir = QCC_SOURCE_DIR "/test/models/tokenizers/";

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const json &expected() {
  static const json e = json::parse(readFile(kDir + "expected.json"));
  return e;
}

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "(no error)";
}

std::string printable(const std::string &s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

bool hasReplacementChar(const std::string &s) {
  return s.find("\xEF\xBF\xBD") != std::string::npos;
}

class HfTokenizerFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTokenizerFixture, MatchesTheTokenizersLibrary) {
  const json &entry = expected()["tokenizers"][GetParam()];
  std::string file = readFile(kDir + entry["file"].get<std::string>());
  Tokenizer tok(file);
  HfTokenizer hf(file);
  ASSERT_TRUE(tok.isHuggingFace());
  const json &texts = expected()["texts"];
  const json &cases = entry["cases"];
  ASSERT_EQ(texts.size(), cases.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    std::string text = texts[i];
    const json &c = cases[i];
    SCOPED_TRACE("text " + std::to_string(i) + ": " + printable(text));
    std::vector<int64_t> ids = tok.encode(text);
    EXPECT_EQ(ids, c["ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(tok.encode(text, /*addSpecialTokens=*/false),
              c["ids_plain"].get<std::vector<int64_t>>());
    std::vector<int64_t> want = c["ids"];
    std::string decoded = c["decoded"];
    EXPECT_EQ(printable(tok.decode(want)), printable(decoded));
    EXPECT_EQ(printable(hf.decode(want, /*skipSpecialTokens=*/false)),
              printable(c["decoded_all"].get<std::string>()));
    // Round trip wherever the library round-trips (decoded == text).
    if (decoded == text) {
      EXPECT_EQ(printable(tok.decode(ids)), printable(text));
    }
    // Streaming: the pieces add up to the whole decode and never hold a
    // broken character.
    std::string streamed;
    std::vector<int64_t> prefix;
    for (int64_t id : want) {
      std::string piece = tok.decodePiece(prefix, id);
      if (!hasReplacementChar(decoded)) {
        EXPECT_FALSE(hasReplacementChar(piece))
            << "piece " << prefix.size() << ": " << printable(piece);
      }
      streamed += piece;
      prefix.push_back(id);
    }
    EXPECT_EQ(printable(streamed), printable(decoded));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfTokenizerFixture,
                         ::testing::Values("gpt2", "llama3", "qwen2", "smollm",
                                           "llama2", "mistral", "misc_a",
                                           "misc_b", "misc_c", "misc_d"));

Tokenizer load(const std::string &name) {
  return Tokenizer(readFile(kDir + name + ".json"));
}

TEST(HfTokenizer, SpecialTokens) {
  Tokenizer qwen = load("qwen2");
  EXPECT_GE(qwen.tokenId("<|im_start|>"), 0);
  EXPECT_EQ(qwen.eosId(), qwen.tokenId("<|im_end|>"));
  EXPECT_EQ(qwen.bosId(), -1);
  EXPECT_EQ(qwen.tokenId("<|no such token|>"), -1);
  EXPECT_EQ(qwen.vocabSize(), qwen.tokenId("</tool_call>") + 1);

  Tokenizer llama3 = load("llama3");
  EXPECT_EQ(llama3.bosId(), llama3.tokenId("<|begin_of_text|>"));
  EXPECT_EQ(llama3.eosId(), llama3.tokenId("<|eot_id|>"));
  EXPECT_EQ(llama3.encode("Hi").front(), llama3.bosId());
  EXPECT_NE(llama3.encode("Hi", false).front(), llama3.bosId());

  Tokenizer llama2 = load("llama2");
  EXPECT_EQ(llama2.bosId(), 1);
  EXPECT_EQ(llama2.eosId(), 2);
  Tokenizer gpt2 = load("gpt2");
  EXPECT_EQ(gpt2.eosId(), gpt2.tokenId("<|endoftext|>"));
}

TEST(HfTokenizer, IllFormedUtf8) {
  // Byte-level BPE encodes any bytes, one byte character each.
  Tokenizer gpt2 = load("gpt2");
  EXPECT_EQ(gpt2.encode("\xFF"),
            std::vector<int64_t>{gpt2.tokenId("\xC3\xBF")});
  std::vector<int64_t> ids = gpt2.encode("a\xE4\xBD\xFF b");
  EXPECT_EQ(gpt2.decode(ids), "a\xEF\xBF\xBD\xEF\xBF\xBD b");
  // byte_fallback: <0xXX> tokens.
  Tokenizer llama2 = load("llama2");
  EXPECT_EQ(llama2.encode("\xFF", false),
            (std::vector<int64_t>{llama2.tokenId("\xE2\x96\x81"),
                                  llama2.tokenId("<0xFF>")}));
  // Normalizers keep ill-formed bytes (NFC).
  Tokenizer qwen = load("qwen2");
  EXPECT_EQ(qwen.encode("e\xCC\x81\xFF", false).size(),
            qwen.encode("\xC3\xA9\xFF", false).size());
}

TEST(HfTokenizer, StreamingHoldsBackPartialCharacters) {
  // 日 is three byte tokens in both: the first two add nothing.
  for (const char *name : {"gpt2", "llama2"}) {
    SCOPED_TRACE(name);
    Tokenizer tok = load(name);
    std::vector<int64_t> ids = tok.encode("\xE6\x97\xA5", false);
    ASSERT_GE(ids.size(), 3u);
    std::vector<int64_t> prefix(ids.begin(), ids.end() - 3);
    std::string text = tok.decode(prefix);
    for (int k = 0; k < 3; ++k) {
      std::string piece = tok.decodePiece(prefix, ids[prefix.size()]);
      EXPECT_EQ(piece, k < 2 ? "" : "\xE6\x97\xA5");
      prefix.push_back(ids[prefix.size()]);
    }
    // An invalid byte is shown once a later token settles it.
    std::vector<int64_t> bad = tok.encode("\xFF", false);
    std::vector<int64_t> a = tok.encode("a", false);
    std::vector<int64_t> stream = bad;
    stream.insert(stream.end(), a.begin(), a.end());
    std::string streamed;
    for (size_t i = 0; i < stream.size(); ++i)
      streamed +=
          tok.decodePiece({stream.begin(), stream.begin() + i}, stream[i]);
    EXPECT_EQ(streamed, tok.decode(stream));
  }
}

json minimal() {
  return json::parse(R"({
    "added_tokens": [{"id": 3, "content": "<s>", "special": true}],
    "normalizer": null, "pre_tokenizer": {"type": "ByteLevel"},
    "post_processor": null, "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
              "merges": ["a b"]}})");
}

std::string errorFor(const json &j) {
  return errorOf([&] { Tokenizer t(j.dump()); });
}

TEST(HfTokenizer, Minimal) {
  Tokenizer t(minimal().dump());
  EXPECT_EQ(t.encode("ab<s>ba"), (std::vector<int64_t>{2, 3, 1, 0}));
  json pairs = minimal();
  pairs["model"]["merges"] = json::parse(R"([["a", "b"]])");
  EXPECT_EQ(Tokenizer(pairs.dump()).encode("ab"), (std::vector<int64_t>{2}));
  // Leading whitespace still reads as JSON.
  EXPECT_TRUE(Tokenizer("\n  " + minimal().dump()).isHuggingFace());
}

TEST(HfTokenizer, Errors) {
  EXPECT_EQ(errorOf([] {
              Tokenizer t("{\"model\": ");
            }).rfind("tokenizer.json: malformed JSON: ", 0),
            0u);
  EXPECT_EQ(errorOf([] { Tokenizer t("{}"); }), "tokenizer.json: no 'model'");
  json j = minimal();
  j["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
  EXPECT_EQ(errorFor(j),
            "tokenizer.json: pre_tokenizer type 'UnicodeScripts' is not "
            "supported");
  j = minimal();
  j["pre_tokenizer"] = json::parse(
      R"({"type": "Sequence", "pretokenizers": [{"type": "FixedLength"}]})");
  EXPECT_EQ(errorFor(j), "tokenizer.json: pre_tokenizer.pretokenizers[0] type "
                         "'FixedLength' is not supported");
  j = minimal();
  j["normalizer"] = {{"type", "Precompiled"}};
  EXPECT_EQ(errorFor(j),
            "tokenizer.json: normalizer type 'Precompiled' is not supported");
  j = minimal();
  j["decoder"] = {{"type", "CTC"}};
  EXPECT_EQ(errorFor(j), "tokenizer.json: decoder type 'CTC' is not supported");
  j = minimal();
  j["post_processor"] = {{"type", "Whatever"}};
  EXPECT_EQ(errorFor(j), "tokenizer.json: post_processor type 'Whatever' is "
                         "not supported");
  j = minimal();
  j["model"]["type"] = "WordPiece";
  EXPECT_EQ(errorFor(j), "tokenizer.json: model type 'WordPiece' is not "
                         "supported (only BPE)");
  j = minimal();
  j["model"]["merges"] = {"a c"};
  EXPECT_EQ(errorFor(j), "tokenizer.json: model.merges[0]: 'c' is not in the "
                         "vocabulary");
  j = minimal();
  j["model"]["merges"] = {"a b c"};
  EXPECT_EQ(errorFor(j), "tokenizer.json: model.merges[0] must be two tokens "
                         "separated by one space");
  j = minimal();
  j["model"]["vocab"]["a"] = "zero";
  EXPECT_EQ(errorFor(j), "tokenizer.json: model.vocab[\"a\"] must be a token "
                         "id (a non-negative integer)");
  j = minimal();
  j["pre_tokenizer"] = json::parse(
      R"({"type": "Split", "pattern": {"Regex": "(unclosed"},
          "behavior": "Isolated", "invert": false})");
  EXPECT_EQ(errorFor(j).rfind("tokenizer.json: pre_tokenizer.pattern: cannot "
                              "compile the regex '(unclosed'",
                              0),
            0u);
  j = minimal();
  j["added_tokens"][0].erase("content");
  EXPECT_EQ(errorFor(j), "tokenizer.json: added_tokens[0] has no 'content'");
  EXPECT_EQ(errorOf([] { HfTokenizer t("[1, 2]"); }),
            "tokenizer.json: the top level must be an object");
}

TEST(Tokenizer, SentencePieceStillLoads) {
  Tokenizer sp(readFile(QCC_SOURCE_DIR "/examples/austen/tokenizer.model"));
  EXPECT_FALSE(sp.isHuggingFace());
  std::string text = "It was a truth universally acknowledged.";
  std::vector<int64_t> ids = sp.encode(text);
  ASSERT_FALSE(ids.empty());
  EXPECT_NE(ids.front(), sp.bosId()); // SentencePiece: no BOS, as before
  EXPECT_EQ(sp.decode(ids), text);
  std::string streamed;
  std::vector<int64_t> prefix;
  for (int64_t id : ids) {
    streamed += sp.decodePiece(prefix, id);
    prefix.push_back(id);
  }
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(sp.tokenId("<no such piece>"), -1);
  EXPECT_EQ(sp.tokenId("</s>"), sp.eosId());
}

// Encode speed on the demo model's held-out text (about 350 KB):
//   qcc-tokenizer-tests --gtest_also_run_disabled_tests
//       --gtest_filter='*EncodeSpeed*'
TEST(HfTokenizer, DISABLED_EncodeSpeed) {
  std::string text = readFile(QCC_SOURCE_DIR "/examples/austen/heldout.txt");
  for (const char *name :
       {"gpt2", "llama3", "qwen2", "smollm", "llama2", "mistral"}) {
    Tokenizer tok = load(name);
    for (int run = 0; run < 2; ++run) { // cold, then with the word cache
      auto t0 = std::chrono::steady_clock::now();
      std::vector<int64_t> ids = tok.encode(text);
      double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      std::printf("%-8s %s: %zu tokens in %.3f s: %.0f tokens/s, %.1f MB/s\n",
                  name, run ? "warm" : "cold", ids.size(), s, ids.size() / s,
                  text.size() / s / 1e6);
    }
  }
}

} // namespace
