//===- OpenAiApi.cpp ------------------------------------------------------===//
#include "serve/OpenAiApi.h"

#include "format/Checked.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

using namespace qcc::serve;
using json = nlohmann::json;

namespace {

/// Deeper nesting than any valid request has (messages[i].content[j] is 4
/// deep): refused before the parser builds it.
constexpr int kMaxDepth = 16;
/// OpenAI's limit on `stop` sequences.
constexpr size_t kMaxStops = 4;

ApiError bad(const std::string &param, const std::string &message) {
  return ApiError(400, param + ": " + message, param);
}

double number(const json &v, const std::string &name, double lo, double hi,
              bool loOpen = false) {
  if (!v.is_number())
    throw bad(name, "expected a number, got " + std::string(v.type_name()));
  double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi || (loOpen && d == lo))
    throw bad(name, "must be in " + std::string(loOpen ? "(" : "[") +
                        json(lo).dump() + ", " + json(hi).dump() + "], got " +
                        v.dump());
  return d;
}

int64_t integer(const json &v, const std::string &name, int64_t lo,
                int64_t hi) {
  if (!v.is_number_integer())
    throw bad(name, "expected an integer, got " +
                        (v.is_number() ? v.dump() : std::string(v.type_name())));
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > (uint64_t)std::numeric_limits<int64_t>::max())
    throw bad(name, "must be at most " + std::to_string(hi) + ", got " + v.dump());
  int64_t i = v.get<int64_t>();
  if (i < lo || i > hi)
    throw bad(name, "must be in [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "], got " + std::to_string(i));
  return i;
}

bool boolean(const json &v, const std::string &name) {
  if (!v.is_boolean())
    throw bad(name, "expected true or false, got " + std::string(v.type_name()));
  return v.get<bool>();
}

std::string string(const json &v, const std::string &name) {
  if (!v.is_string())
    throw bad(name, "expected a string, got " + std::string(v.type_name()));
  return v.get<std::string>();
}

/// A field qcc does not implement: accepted only at the value that means
/// "off" (so a client's defaults pass, and a request that needs it is told).
void onlyOff(const json &v, const std::string &name) {
  bool off = v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
             (v.is_number() && v.get<double>() == 0) ||
             (v.is_object() && v.empty()) || (v.is_array() && v.empty());
  if (!off)
    throw bad(name, "is not supported by this server");
}

/// A chat message's content: a string, or text parts.
std::string messageContent(const json &v, const std::string &name) {
  if (v.is_string())
    return v.get<std::string>();
  if (v.is_null())
    return "";
  if (!v.is_array())
    throw bad(name, "expected a string or an array of text parts, got " +
                        std::string(v.type_name()));
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string part = name + "[" + std::to_string(i) + "]";
    const json &p = v[i];
    if (!p.is_object() || !p.contains("type") || p["type"] != "text" ||
        !p.contains("text") || p.size() != 2)
      throw bad(part, "only {\"type\": \"text\", \"text\": ...} parts are "
                      "supported");
    text += string(p["text"], part + ".text");
  }
  return text;
}

std::vector<int64_t> tokenIds(const json &v, const std::string &name,
                              const ApiContext &c) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < v.size(); ++i)
    ids.push_back(integer(v[i], name + "[" + std::to_string(i) + "]", 0,
                          c.tokenizer.vocabSize() - 1));
  return ids;
}

/// The prompt of a completion: a string, one string in an array, token ids
/// or one array of token ids (OpenAI's forms, batch size 1).
std::vector<int64_t> completionPrompt(const json &v, const ApiContext &c) {
  if (v.is_string())
    return c.tokenizer.encode(v.get<std::string>());
  if (v.is_array() && v.size() == 1 && v[0].is_string())
    return c.tokenizer.encode(v[0].get<std::string>());
  if (v.is_array() && v.size() == 1 && v[0].is_array())
    return tokenIds(v[0], "prompt[0]", c);
  if (v.is_array() && !v.empty() && v[0].is_number())
    return tokenIds(v, "prompt", c);
  if (v.is_array() && v.size() > 1)
    throw bad("prompt", "one prompt per request (a batch of " +
                            std::to_string(v.size()) +
                            " is not supported; send them concurrently)");
  throw bad("prompt", "expected a string or token ids");
}

} // namespace

ApiRequest qcc::serve::parseApiRequest(const std::string &body, bool chat,
                                       const ApiContext &c) {
  if (qcc::format::jsonDepth(body) > kMaxDepth)
    throw ApiError(400, "the request body nests deeper than " +
                            std::to_string(kMaxDepth) + " levels");
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error &e) {
    throw ApiError(400, std::string("the request body is not valid JSON: ") +
                            e.what());
  }
  if (!j.is_object())
    throw ApiError(400, "the request body must be a JSON object");

  static const std::set<std::string> common = {
      "model", "max_tokens", "temperature", "top_p", "seed", "stop", "stream",
      "stream_options", "n", "presence_penalty", "frequency_penalty",
      "logit_bias", "logprobs", "user", "top_k", "repetition_penalty"};
  static const std::set<std::string> completionOnly = {"prompt", "echo",
                                                       "best_of", "suffix"};
  static const std::set<std::string> chatOnly = {
      "messages", "max_completion_tokens", "top_logprobs", "tools",
      "tool_choice", "response_format", "parallel_tool_calls"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &k = it.key();
    if (!common.count(k) && !(chat ? chatOnly : completionOnly).count(k))
      throw bad(k, "unknown field");
  }

  ApiRequest r;
  r.chat = chat;
  if (!j.contains("model"))
    throw bad("model", "is required");
  r.model = string(j["model"], "model");
  auto adapter = std::find(c.loraAdapters.begin(), c.loraAdapters.end(),
                           r.model);
  if (adapter != c.loraAdapters.end()) {
    r.params.adapter = adapter - c.loraAdapters.begin() + 1;
  } else if (r.model != c.modelName) {
    std::string served = "'" + c.modelName + "'";
    for (const std::string &a : c.loraAdapters)
      served += ", '" + a + "'";
    throw ApiError(404, "model '" + r.model + "' is not served here (this "
                        "server serves " + served + ")",
                   "model", "model_not_found");
  }

  rt::SamplerOptions &s = r.params.sampler;
  s.temperature = 1.0; // OpenAI's defaults
  s.topP = 1.0;
  auto get = [&](const char *k) -> const json * {
    auto it = j.find(k);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  };
  if (auto *v = get("temperature"))
    s.temperature = number(*v, "temperature", 0, 2);
  if (auto *v = get("top_p"))
    s.topP = number(*v, "top_p", 0, 1, /*loOpen=*/true);
  if (auto *v = get("top_k"))
    s.topK = integer(*v, "top_k", 0, c.tokenizer.vocabSize());
  if (auto *v = get("repetition_penalty"))
    s.repeatPenalty = number(*v, "repetition_penalty", 0, 100, true);
  if (auto *v = get("seed"))
    s.seed = (uint64_t)integer(*v, "seed", std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max());
  else
    s.seed = std::random_device{}() * 0x100000000ull + std::random_device{}();
  for (const char *k : {"presence_penalty", "frequency_penalty"})
    if (auto *v = get(k))
      if (number(*v, k, -2, 2) != 0)
        throw bad(k, "is not supported by this server (use repetition_penalty)");
  if (auto *v = get("n"))
    if (integer(*v, "n", 1, 128) != 1)
      throw bad("n", "only n = 1 is supported");
  for (const char *k : {"logit_bias", "logprobs", "top_logprobs", "tools",
                        "tool_choice", "response_format", "echo", "suffix"})
    if (auto *v = get(k))
      onlyOff(*v, k);
  if (auto *v = get("parallel_tool_calls"))
    boolean(*v, "parallel_tool_calls");
  if (auto *v = get("best_of"))
    if (integer(*v, "best_of", 1, 128) != 1)
      throw bad("best_of", "only best_of = 1 is supported");
  if (auto *v = get("user"))
    string(*v, "user");
  if (auto *v = get("stream"))
    r.stream = boolean(*v, "stream");
  if (auto *v = get("stream_options")) {
    if (!v->is_object())
      throw bad("stream_options", "expected an object");
    for (auto it = v->begin(); it != v->end(); ++it)
      if (it.key() == "include_usage")
        r.includeUsage = boolean(*it, "stream_options.include_usage");
      else
        throw bad("stream_options." + it.key(), "unknown field");
  }
  if (auto *v = get("stop")) {
    if (v->is_string()) {
      r.params.stopTexts.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      if (v->size() > kMaxStops)
        throw bad("stop", "at most " + std::to_string(kMaxStops) +
                              " sequences, got " + std::to_string(v->size()));
      for (size_t i = 0; i < v->size(); ++i)
        r.params.stopTexts.push_back(
            string((*v)[i], "stop[" + std::to_string(i) + "]"));
    } else {
      throw bad("stop", "expected a string or an array of strings");
    }
  }

  int64_t eos = c.tokenizer.eosId();
  if (eos >= 0)
    r.params.stopIds.push_back(eos);
  if (chat) {
    if (!j.contains("messages"))
      throw bad("messages", "is required");
    const json &m = j["messages"];
    if (!m.is_array() || m.empty())
      throw bad("messages", "expected a non-empty array of messages");
    std::vector<ChatMessage> messages;
    for (size_t i = 0; i < m.size(); ++i) {
      std::string name = "messages[" + std::to_string(i) + "]";
      const json &msg = m[i];
      if (!msg.is_object() || !msg.contains("role"))
        throw bad(name, "expected an object with a role and content");
      for (auto it = msg.begin(); it != msg.end(); ++it)
        if (it.key() != "role" && it.key() != "content" && it.key() != "name")
          throw bad(name + "." + it.key(), "is not supported by this server");
      ChatMessage cm{string(msg["role"], name + ".role"),
                     msg.contains("content")
                         ? messageContent(msg["content"], name + ".content")
                         : ""};
      messages.push_back(std::move(cm));
    }
    ChatPrompt p;
    try {
      p = renderChat(c.chatFormat, messages, c.tokenizer);
    } catch (const std::invalid_argument &e) {
      throw ApiError(400, e.what(), "messages");
    }
    r.params.prompt = c.tokenizer.encode(p.text);
    r.params.stopIds.insert(r.params.stopIds.end(), p.stopIds.begin(),
                            p.stopIds.end());
    r.params.stopTexts.insert(r.params.stopTexts.end(), p.stopTexts.begin(),
                              p.stopTexts.end());
  } else {
    if (!j.contains("prompt"))
      throw bad("prompt", "is required");
    r.params.prompt = completionPrompt(j["prompt"], c);
  }
  if (r.params.prompt.empty())
    throw bad(chat ? "messages" : "prompt", "encodes to no tokens");

  const char *limitName = "max_tokens";
  const json *limit = get("max_tokens");
  if (chat && get("max_completion_tokens")) {
    limitName = "max_completion_tokens";
    limit = get(limitName);
  }
  int64_t prompt = (int64_t)r.params.prompt.size();
  if (prompt >= c.maxContext)
    throw ApiError(400, "the prompt has " + std::to_string(prompt) +
                            " tokens; this server's context is " +
                            std::to_string(c.maxContext) + " tokens",
                   chat ? "messages" : "prompt", "context_length_exceeded");
  if (limit) {
    r.params.maxNewTokens = integer(*limit, limitName, 1, c.maxContext);
    if (prompt + r.params.maxNewTokens > c.maxContext)
      throw ApiError(400, "the prompt (" + std::to_string(prompt) +
                              " tokens) plus " + limitName + " (" +
                              std::to_string(r.params.maxNewTokens) +
                              ") exceeds this server's context of " +
                              std::to_string(c.maxContext) + " tokens",
                     limitName, "context_length_exceeded");
  } else {
    r.params.maxNewTokens = std::min<int64_t>(
        chat ? c.chatDefaultMaxTokens : 16, c.maxContext - prompt);
  }
  return r;
}

namespace {

json usageJson(const Usage &u) {
  return {{"prompt_tokens", u.prompt},
          {"completion_tokens", u.completion},
          {"total_tokens", u.prompt + u.completion},
          {"prompt_tokens_details", {{"cached_tokens", u.cached}}}};
}

json envelope(const ApiRequest &r, const std::string &id, int64_t created,
              const std::string &model, bool chunk) {
  return {{"id", id},
          {"object", r.chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                            : "text_completion"},
          {"created", created},
          {"model", model},
          {"system_fingerprint", "qcc"}};
}

} // namespace

json qcc::serve::responseBody(const ApiRequest &r, const std::string &id,
                              int64_t created, const std::string &model,
                              const std::string &text, FinishReason reason,
                              const Usage &usage) {
  json body = envelope(r, id, created, model, false);
  json choice = {{"index", 0}, {"finish_reason", finishReasonName(reason)},
                 {"logprobs", nullptr}};
  if (r.chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  body["choices"] = json::array({choice});
  body["usage"] = usageJson(usage);
  return body;
}

json qcc::serve::streamChunk(const ApiRequest &r, const std::string &id,
                             int64_t created, const std::string &model,
                             const std::string &text, bool first,
                             const FinishReason *reason) {
  json body = envelope(r, id, created, model, true);
  json choice = {{"index", 0},
                 {"finish_reason",
                  reason ? json(finishReasonName(*reason)) : json(nullptr)},
                 {"logprobs", nullptr}};
  if (r.chat) {
    json delta = json::object();
    if (first)
      delta["role"] = "assistant";
    if (!text.empty() || (first && !reason))
      delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  body["choices"] = json::array({choice});
  return body;
}

json qcc::serve::usageChunk(const ApiRequest &r, const std::string &id,
                            int64_t created, const std::string &model,
                            const Usage &usage) {
  json body = envelope(r, id, created, model, true);
  body["choices"] = json::array();
  body["usage"] = usageJson(usage);
  return body;
}

json qcc::serve::errorBody(const std::string &message, const std::string &type,
                           const std::string &param) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", nullptr}}}};
}

std::string qcc::serve::dumpJson(const json &value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}
