//===- HttpServer.cpp -----------------------------------------------------===//
#include "serve/HttpServer.h"

#include "serve/OpenAiApi.h"

#include <httplib.h>

#include <atomic>
#include <chrono>

using namespace qcc::serve;
using json = nlohmann::json;

namespace {

constexpr const char *kJson = "application/json";

void sendError(httplib::Response &res, int status, const std::string &message,
               const std::string &type, const std::string &param = {}) {
  res.status = status;
  res.set_content(dumpJson(errorBody(message, type, param)), kJson);
}

const char *typeOf(int status) {
  switch (status) {
  case 404:
    return "not_found_error";
  case 413:
    return "request_too_large";
  case 429:
    return "rate_limit_error";
  case 503:
    return "service_unavailable";
  default:
    return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

int64_t unixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Usage usageOf(const Request &r, const Request::Update &u) {
  return {r.promptTokens(), r.cachedPromptTokens(), u.tokens};
}

std::string event(const json &data) { return "data: " + dumpJson(data) + "\n\n"; }

/// One streaming response's progress between calls of the content provider.
struct Stream {
  std::shared_ptr<Request> request;
  ApiRequest api;
  std::string id;
  int64_t created = 0;
  std::string model;
  bool first = true, ended = false;
};

} // namespace

struct OpenAiServer::Impl {
  Impl(Engine &e, const qcc::rt::Tokenizer &t, const ServerOptions &o)
      : engine(e), opts(o),
        context{t, o.chatFormat, o.modelName, e.maxContext(),
                o.chatDefaultMaxTokens, o.loraAdapters} {}

  void routes();
  void complete(const httplib::Request &req, httplib::Response &res, bool chat);

  Engine &engine;
  ServerOptions opts;
  ApiContext context;
  httplib::Server http;
  std::atomic<uint64_t> nextId{1};
  int64_t started = unixNow();
};

void OpenAiServer::Impl::complete(const httplib::Request &req,
                                  httplib::Response &res, bool chat) {
  ApiRequest api;
  std::shared_ptr<Request> request;
  try {
    api = parseApiRequest(req.body, chat, context);
    request = engine.submit(api.params);
  } catch (const ApiError &e) {
    return sendError(res, e.status, e.what(), e.type, e.param);
  } catch (const RequestError &e) {
    return sendError(res, e.status, e.what(), typeOf(e.status));
  }
  std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(nextId++);
  int64_t created = unixNow();
  if (!api.stream) {
    Request::Update u = request->wait();
    if (u.reason == FinishReason::Error)
      return sendError(res, 500, "generation failed: " + u.error,
                       "server_error");
    if (u.reason == FinishReason::Cancelled) // the engine is stopping
      return sendError(res, 503, "the server is shutting down",
                       "service_unavailable");
    res.set_content(dumpJson(responseBody(api, id, created, api.model,
                                          u.text, u.reason,
                                          usageOf(*request, u))),
                    kJson);
    return;
  }
  auto s = std::make_shared<Stream>(
      Stream{request, api, id, created, api.model});
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [s](size_t, httplib::DataSink &sink) {
        if (s->ended) {
          sink.done();
          return true;
        }
        Request::Update u = s->request->take(std::chrono::milliseconds(200));
        std::string out;
        if (!u.text.empty() || (s->first && !u.finished)) {
          out += event(streamChunk(s->api, s->id, s->created, s->model,
                                   u.text, s->first, nullptr));
          s->first = false;
        }
        if (u.finished) {
          if (u.reason == FinishReason::Error) {
            out += event(errorBody("generation failed: " + u.error,
                                   "server_error"));
          } else {
            out += event(streamChunk(s->api, s->id, s->created, s->model, "",
                                     s->first, &u.reason));
            if (s->api.includeUsage)
              out += event(usageChunk(s->api, s->id, s->created, s->model,
                                      usageOf(*s->request, u)));
          }
          out += "data: [DONE]\n\n";
          s->ended = true;
        }
        if (out.empty())
          return sink.is_writable(); // a client gone: false ends the stream
        return sink.write(out.data(), out.size());
      },
      [s](bool) {
        // Ended or broken off: a request still running has no reader left.
        s->request->cancel();
      });
}

void OpenAiServer::Impl::routes() {
  http.set_payload_max_length(opts.maxBodyBytes);
  http.new_task_queue = [n = opts.threads] {
    return new httplib::ThreadPool((size_t)n);
  };
  http.Get("/health", [](const httplib::Request &, httplib::Response &res) {
    res.set_content(R"({"status":"ok"})", kJson);
  });
  http.Get("/v1/models", [this](const httplib::Request &,
                                httplib::Response &res) {
    json models = json::array();
    models.push_back({{"id", opts.modelName},
                      {"object", "model"},
                      {"created", started},
                      {"owned_by", "qcc"},
                      {"max_model_len", engine.maxContext()}});
    // Each LoRA adapter, with its base model as parent (vLLM's form).
    for (const std::string &a : opts.loraAdapters)
      models.push_back({{"id", a},
                        {"object", "model"},
                        {"created", started},
                        {"owned_by", "qcc"},
                        {"parent", opts.modelName},
                        {"max_model_len", engine.maxContext()}});
    res.set_content(dumpJson({{"object", "list"}, {"data", models}}), kJson);
  });
  http.Get("/metrics", [this](const httplib::Request &,
                              httplib::Response &res) {
    res.set_content(renderPrometheus(engine.metrics(), opts.modelName),
                    "text/plain; version=0.0.4");
  });
  http.Post("/v1/completions",
            [this](const httplib::Request &req, httplib::Response &res) {
              complete(req, res, /*chat=*/false);
            });
  http.Post("/v1/chat/completions",
            [this](const httplib::Request &req, httplib::Response &res) {
              complete(req, res, /*chat=*/true);
            });
  // Statuses httplib sets itself (404 no route, 413, 400 bad request line)
  // get the same JSON error body as ours.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request &req, httplib::Response &res) {
    if (!res.body.empty())
      return httplib::Server::HandlerResponse::Unhandled;
    std::string message =
        res.status == 404   ? "no route " + req.method + " " + req.path
        : res.status == 413 ? "the request body is larger than the server "
                              "accepts (--max-body-bytes)"
                            : "the request was refused (HTTP " +
                                  std::to_string(res.status) + ")";
    sendError(res, res.status, message, typeOf(res.status));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request &, httplib::Response &res,
                                std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception &e) {
      message += std::string(": ") + e.what();
    } catch (...) {
    }
    sendError(res, 500, message, "server_error");
  });
}

OpenAiServer::OpenAiServer(Engine &engine, const qcc::rt::Tokenizer &tokenizer,
                           const ServerOptions &options)
    : impl(std::make_unique<Impl>(engine, tokenizer, options)) {
  if (options.threads < 1)
    throw std::runtime_error("--threads-http must be at least 1");
  impl->routes();
}

OpenAiServer::~OpenAiServer() = default;

int OpenAiServer::bind() {
  const ServerOptions &o = impl->opts;
  if (o.port < 0 || o.port > 65535)
    throw std::runtime_error("--port must be in [0, 65535], got " +
                             std::to_string(o.port));
  int port = o.port;
  if (port == 0)
    port = impl->http.bind_to_any_port(o.host);
  else if (!impl->http.bind_to_port(o.host, port))
    port = -1;
  if (port <= 0)
    throw std::runtime_error("cannot listen on " + o.host + ":" +
                             std::to_string(o.port) +
                             " (in use, or not an address of this machine)");
  return port;
}

void OpenAiServer::serve() { impl->http.listen_after_bind(); }

void OpenAiServer::stop() { impl->http.stop(); }
