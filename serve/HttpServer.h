//===- HttpServer.h - the OpenAI API over HTTP/1.1 --------------*- C++ -*-===//
//
// The routes of `qserve` on cpp-httplib (Debian's libcpp-httplib-dev):
//
//   POST /v1/completions, /v1/chat/completions   (stream: server-sent events)
//   GET  /v1/models, /health, /metrics (Prometheus text)
//
// Every error is one JSON body {"error": {...}} with its status: 400 (bad
// JSON, a bad field, a prompt beyond the context), 404 (no such route or
// model), 413 (a body over --max-body-bytes), 429 (the queue is full), 500
// (a failed step), 503 (shutting down). A streaming client that goes away
// cancels its request at the next step; its blocks return to the pool.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_SERVE_HTTPSERVER_H
#define QCC_SERVE_HTTPSERVER_H

#include "serve/ChatTemplate.h"
#include "serve/Engine.h"

#include <memory>
#include <string>

namespace qcc::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000; ///< 0: any free port (bind() says which)
  /// Connections served at once (each streaming client holds one).
  int threads = 128;
  size_t maxBodyBytes = 1 << 20;
  std::string modelName;
  /// The artifact's runtime LoRA adapters (Artifact::loraAdapters): each is
  /// served as a model of its own name (docs/LORA.md).
  std::vector<std::string> loraAdapters;
  ChatFormat chatFormat = ChatFormat::Plain;
  int64_t chatDefaultMaxTokens = 256;
};

class OpenAiServer {
public:
  OpenAiServer(Engine &engine, const rt::Tokenizer &tokenizer,
               const ServerOptions &options);
  ~OpenAiServer();
  /// Binds host:port; returns the port. Throws one line when it cannot.
  int bind();
  /// Serves until stop() (from another thread).
  void serve();
  void stop();

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace qcc::serve

#endif // QCC_SERVE_HTTPSERVER_H
