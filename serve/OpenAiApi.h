//===- OpenAiApi.h - OpenAI request and response bodies ---------*- C++ -*-===//
//
// The JSON side of /v1/completions and /v1/chat/completions, apart from
// HTTP so that it is tested on strings: a body is parsed and validated in
// full (every field's type and range; unknown fields and features qcc does
// not have are refused, never silently ignored) into the engine's request,
// and responses and stream chunks are built in OpenAI's shapes.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_SERVE_OPENAIAPI_H
#define QCC_SERVE_OPENAIAPI_H

#include "serve/ChatTemplate.h"
#include "serve/Engine.h"

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace qcc::serve {

/// A request the API refuses: the HTTP status, OpenAI's error `type`, and
/// the field at fault (`param`, empty when none).
struct ApiError : std::runtime_error {
  ApiError(int status, const std::string &message, std::string param = {},
           std::string type = "invalid_request_error")
      : std::runtime_error(message), status(status), param(std::move(param)),
        type(std::move(type)) {}
  int status;
  std::string param, type;
};

/// What parsing needs to know of the server.
struct ApiContext {
  const rt::Tokenizer &tokenizer;
  ChatFormat chatFormat = ChatFormat::Plain;
  std::string modelName;
  int64_t maxContext = 2048;
  /// max_tokens when a chat request gives none (completions: 16, OpenAI's).
  int64_t chatDefaultMaxTokens = 256;
  /// Runtime LoRA adapters, served as models of their names: a request's
  /// `model` picks adapter j + 1 by lora_adapters[j] (vLLM's convention).
  std::vector<std::string> loraAdapters;
};

struct ApiRequest {
  std::string model; ///< as requested: the base model's name or an adapter's
  bool chat = false;
  bool stream = false;
  bool includeUsage = false; ///< stream_options.include_usage
  RequestParams params;
};

/// The body of a completion (`chat` false) or chat completion request.
/// Throws ApiError (400 with the field; 404 for another model's name).
ApiRequest parseApiRequest(const std::string &body, bool chat,
                           const ApiContext &context);

/// OpenAI's usage: prompt tokens (of them, cached: from the prefix cache)
/// and generated tokens.
struct Usage {
  int64_t prompt = 0, cached = 0, completion = 0;
};

/// A whole response: text_completion or chat.completion.
nlohmann::json responseBody(const ApiRequest &request, const std::string &id,
                            int64_t created, const std::string &model,
                            const std::string &text, FinishReason reason,
                            const Usage &usage);

/// One server-sent event's data of a stream: `text` (the chat's first chunk
/// also carries the role), and on the last, `reason`.
nlohmann::json streamChunk(const ApiRequest &request, const std::string &id,
                           int64_t created, const std::string &model,
                           const std::string &text, bool first,
                           const FinishReason *reason);
/// The usage chunk of a stream with include_usage (choices empty).
nlohmann::json usageChunk(const ApiRequest &request, const std::string &id,
                          int64_t created, const std::string &model,
                          const Usage &usage);

/// {"error": {"message", "type", "param", "code"}}.
nlohmann::json errorBody(const std::string &message, const std::string &type,
                         const std::string &param = {});

/// JSON text; invalid UTF-8 in strings (a model's broken bytes) becomes
/// U+FFFD instead of an exception.
std::string dumpJson(const nlohmann::json &value);

} // namespace qcc::serve

#endif // QCC_SERVE_OPENAIAPI_H
