//===- ServeTest.cpp - qserve's chat formats, API bodies and metrics ------===//
//
// The HTTP side is tested end to end by test/serve (the openai client); here
// the parts that are plain functions: the chat formats against the strings
// Hugging Face's Jinja templates render for the same conversation (written
// out from the templates of Qwen2 / SmolLM2-Instruct, Llama 3, Llama 2,
// Gemma 3 and Phi-3), the request parser's rules, the Prometheus text.
//
//===----------------------------------------------------------------------===//
#include "serve/ChatTemplate.h"
#include "serve/Metrics.h"
#include "serve/OpenAiApi.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace qcc::serve;
using qcc::rt::Tokenizer;

namespace {

Tokenizer fixture(const std::string &name) {
  std::ifstream in(QCC_SOURCE_DIR "/test/models/tokenizers/" + name + ".json",
                   std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return Tokenizer(ss.str());
}

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."},
    {"user", " Hi "},
    {"assistant", "Hello."},
    {"user", "Who?"}};

} // namespace

TEST(ChatTemplate, DetectedFromSpecialTokens) {
  EXPECT_EQ(detectChatFormat(fixture("smollm")), ChatFormat::ChatML);
  EXPECT_EQ(detectChatFormat(fixture("qwen2")), ChatFormat::ChatML);
  EXPECT_EQ(detectChatFormat(fixture("llama3")), ChatFormat::Llama3);
  EXPECT_EQ(detectChatFormat(fixture("gpt2")), ChatFormat::Plain);
  EXPECT_EQ(detectChatFormat(fixture("llama2")), ChatFormat::Plain);
  EXPECT_EQ(parseChatFormat("gemma"), ChatFormat::Gemma);
  EXPECT_FALSE(parseChatFormat("jinja"));
}

TEST(ChatTemplate, RendersAsTheModelsTemplates) {
  Tokenizer smollm = fixture("smollm"), llama3 = fixture("llama3"),
            gpt2 = fixture("gpt2");
  ChatPrompt chatml = renderChat(ChatFormat::ChatML, kConversation, smollm);
  EXPECT_EQ(chatml.text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi "
            "<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\nWho?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(chatml.stopIds,
            (std::vector<int64_t>{smollm.tokenId("<|im_end|>")}));
  ChatPrompt l3 = renderChat(ChatFormat::Llama3, kConversation, llama3);
  EXPECT_EQ(l3.text,
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWho?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(l3.stopIds, (std::vector<int64_t>{llama3.tokenId("<|eot_id|>")}));
  EXPECT_EQ(renderChat(ChatFormat::Llama2, kConversation, gpt2).text,
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi [/INST] Hello. </s>"
            "<s>[INST] Who? [/INST]");
  EXPECT_EQ(renderChat(ChatFormat::Gemma, kConversation, gpt2).text,
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
            "<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nWho?<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(renderChat(ChatFormat::Phi3, kConversation, gpt2).text,
            "<|system|>\nBe brief.<|end|>\n<|user|>\n Hi <|end|>\n"
            "<|assistant|>\nHello.<|end|>\n<|user|>\nWho?<|end|>\n"
            "<|assistant|>\n");
  ChatPrompt plain = renderChat(ChatFormat::Plain, kConversation, gpt2);
  EXPECT_EQ(plain.text, "System: Be brief.\nUser:  Hi \nAssistant: Hello.\n"
                        "User: Who?\nAssistant:");
  EXPECT_EQ(plain.stopTexts, (std::vector<std::string>{"\nUser:"}));
  EXPECT_THROW(renderChat(ChatFormat::ChatML, {{"tool", "x"}}, smollm),
               std::invalid_argument);
}

TEST(OpenAiApi, ParsesAndRefuses) {
  Tokenizer tok = fixture("gpt2");
  ApiContext c{tok, ChatFormat::Plain, "m", 64, 32};
  ApiRequest r = parseApiRequest(
      R"({"model": "m", "prompt": "hello world", "max_tokens": 5,
          "temperature": 0, "seed": -3, "stop": ["\n", "x"], "stream": true,
          "stream_options": {"include_usage": true}, "top_k": 4,
          "logprobs": null, "n": 1, "presence_penalty": 0})",
      false, c);
  EXPECT_EQ(r.params.prompt, tok.encode("hello world"));
  EXPECT_EQ(r.params.maxNewTokens, 5);
  EXPECT_EQ(r.params.sampler.temperature, 0);
  EXPECT_EQ(r.params.sampler.seed, (uint64_t)-3);
  EXPECT_EQ(r.params.sampler.topK, 4);
  EXPECT_EQ(r.params.stopTexts, (std::vector<std::string>{"\n", "x"}));
  EXPECT_TRUE(r.stream && r.includeUsage && !r.chat);
  // Defaults: OpenAI's temperature 1 and 16 tokens; the chat's own limit.
  r = parseApiRequest(R"({"model": "m", "prompt": [1, 2, 3]})", false, c);
  EXPECT_EQ(r.params.prompt, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(r.params.sampler.temperature, 1.0);
  EXPECT_EQ(r.params.maxNewTokens, 16);
  r = parseApiRequest(
      R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})",
      true, c);
  EXPECT_EQ(r.params.maxNewTokens, 32);
  EXPECT_EQ(r.params.stopTexts, (std::vector<std::string>{"\nUser:"}));

  auto refusal = [&](const std::string &body, bool chat = false) {
    try {
      parseApiRequest(body, chat, c);
    } catch (const ApiError &e) {
      return std::to_string(e.status) + " " + e.param;
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal("{"), "400 ");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "temprature": 1})"), "400 temprature");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "temperature": 2.5})"), "400 temperature");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "top_p": 0})"), "400 top_p");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "max_tokens": 1.5})"), "400 max_tokens");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "max_tokens": 64})"), "400 max_tokens");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "seed": 18446744073709551615})"), "400 seed");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "frequency_penalty": 0.5})"),
            "400 frequency_penalty");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": "x", "stream_options": {"x": 1}})"),
            "400 stream_options.x");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": [[1, 2], [3]]})"), "400 prompt");
  EXPECT_EQ(refusal(R"({"model": "m", "prompt": ""})"), "400 prompt");
  EXPECT_EQ(refusal(R"({"model": "n", "prompt": "x"})"), "404 model");
  EXPECT_EQ(refusal(R"({"model": "m", "messages": [{"role": "user"}], "prompt": "x"})", true),
            "400 prompt");
  EXPECT_EQ(refusal(R"({"model": "m", "messages": [{"role": "bot", "content": "x"}]})", true),
            "400 messages");
  EXPECT_EQ(refusal(std::string(40, '[') + std::string(40, ']')), "400 ");
}

TEST(OpenAiApi, ResponseShapes) {
  Tokenizer tok = fixture("gpt2");
  ApiContext c{tok, ChatFormat::Plain, "m", 64, 32};
  ApiRequest chat = parseApiRequest(
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})", true, c);
  auto body = responseBody(chat, "id", 7, "m", "Hey", FinishReason::Length,
                           {5, 4, 2});
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hey");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["total_tokens"], 7);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  auto first = streamChunk(chat, "id", 7, "m", "", true, nullptr);
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  // Broken UTF-8 from a model is replaced, never an exception.
  EXPECT_EQ(dumpJson(nlohmann::json("a\xff")), "\"a\xef\xbf\xbd\"");
}

TEST(Metrics, PrometheusText) {
  MetricsSnapshot s;
  s.totals.timeToFirstToken.observe(0.003);
  s.totals.timeToFirstToken.observe(0.2);
  s.totals.requestsFinished[1] = 2;
  s.cacheUnitsInUse = 3;
  s.cacheUnits = 10;
  std::string text = renderPrometheus(s, "m\"x");
  EXPECT_NE(text.find("qcc_requests_total{model=\"m\\\"x\",finish_reason=\"length\"} 2"),
            std::string::npos);
  EXPECT_NE(text.find("qcc_time_to_first_token_seconds_bucket{model=\"m\\\"x\",le=\"0.0025\"} 0"),
            std::string::npos);
  EXPECT_NE(text.find("qcc_time_to_first_token_seconds_bucket{model=\"m\\\"x\",le=\"0.005\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("qcc_time_to_first_token_seconds_bucket{model=\"m\\\"x\",le=\"+Inf\"} 2"),
            std::string::npos);
  EXPECT_NE(text.find("qcc_kv_cache_units_in_use{model=\"m\\\"x\",unit=\"block\"} 3"),
            std::string::npos);
}
