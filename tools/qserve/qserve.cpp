//===- qserve.cpp - serve an artifact over the OpenAI API -----------------===//
//
//   qserve MODEL.qpkg [--host 127.0.0.1] [--port 8000] [--max-sequences 16]
//          [--max-context N] [--kv-blocks N] [--prefill-chunk 256] ...
//
// Loads the artifact, sets up the backend (as qrun does: CUDA when it can
// run, else the CPU), starts the continuous-batching engine
// (serve/Engine.h) and serves /v1/completions, /v1/chat/completions,
// /v1/models, /health and /metrics (serve/HttpServer.h) until SIGINT or
// SIGTERM. docs/SERVING.md has the API, the limits and the measurements.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/Artifact.h"
#include "runtime/generate/Backend.h"
#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/CpuF32Gemm.h"
#include "runtime/text/Tokenizer.h"
#include "serve/ChatTemplate.h"
#include "serve/Engine.h"
#include "serve/HttpServer.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <unistd.h>
#include <thread>

using namespace qcc;

namespace {

int stopPipe[2] = {-1, -1};

void onStopSignal(int) {
  int saved = errno;
  [[maybe_unused]] ssize_t n = write(stopPipe[1], "x", 1);
  errno = saved;
}

struct Options {
  std::string model;
  std::string modelName; // default: the artifact's file name without .qpkg
  serve::ServerOptions server;
  serve::EngineOptions engine;
  std::string chatTemplate = "auto";
  std::string backend = "auto";
  std::string gpuLayers; // N or auto (qrun's)
  uint64_t gpuMemoryLimit = 0; // qrun's --gpu-memory-limit
  std::string cpuKernels;
  std::string cpuPrecision = "f32"; // qrun's --cpu-precision
  int threads = 0;
  bool quiet = false;
};

} // namespace

int main(int argc, char **argv) {
  Options o;
  CLI::App app{"qserve: serve a qcc artifact over the OpenAI API (HTTP/1.1): "
               "/v1/completions, /v1/chat/completions (streaming by "
               "server-sent events), /v1/models, /health, /metrics. Requests "
               "join and leave the running batch at step boundaries "
               "(continuous batching over the paged KV cache). Stops on "
               "SIGINT or SIGTERM."};
  app.add_option("model", o.model, "The .qpkg artifact (a decoder with a KV cache)")
      ->required();
  app.add_option("--host", o.server.host, "Address to listen on")
      ->capture_default_str();
  app.add_option("--port", o.server.port,
                 "TCP port (0: a free one, printed on stderr)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--model-name", o.modelName,
                 "The model id clients send and /v1/models lists (default: "
                 "the artifact's file name without .qpkg)");
  app.add_option("--max-sequences", o.engine.maxSequences,
                 "Requests in the running batch at once")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--max-context", o.engine.maxContext,
                 "Prompt + max_tokens of one request, in tokens (default: the "
                 "model's max_positions, else 2048)")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--kv-blocks", o.engine.kvBlocks,
                 "Paged KV cache blocks (default: --max-sequences requests of "
                 "--max-context tokens); a request is admitted when the "
                 "blocks for its prompt + max_tokens are free")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--prefill-chunk", o.engine.prefillChunk,
                 "Prompt tokens per prefill call between decode steps")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-queue", o.engine.maxQueue,
                 "Requests waiting for admission; more get 429")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  bool noPrefixCache = false;
  app.add_flag("--no-prefix-cache", noPrefixCache,
               "Do not share the KV blocks of prompt prefixes seen before "
               "(prefix caching is on for paged caches by default)");
  app.add_option("--http-threads", o.server.threads,
                 "Connections served at once (each streaming client holds "
                 "one; more wait for a free one)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--max-body-bytes", o.server.maxBodyBytes,
                 "Largest request body; larger get 413")
      ->check(CLI::Range(size_t(1), size_t(1) << 30))
      ->capture_default_str();
  app.add_option("--chat-template", o.chatTemplate,
                 "Chat format of /v1/chat/completions: auto (by the "
                 "tokenizer's special tokens) or one of " +
                     serve::chatFormatList())
      ->capture_default_str();
  app.add_option("--chat-max-tokens", o.server.chatDefaultMaxTokens,
                 "max_tokens of a chat request that gives none")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--backend", o.backend, "auto, cpu or cuda (as qrun's)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--gpu-layers", o.gpuLayers,
                 "CUDA backend: N or auto, as qrun's: the first N blocks on "
                 "the GPU, the rest on the CPU")
      ->check(CLI::Validator(
          [](std::string &v) {
            rt::BackendOptions scratch;
            return rt::parseGpuLayers(v, scratch);
          },
          "N|auto"));
  app.add_option("--gpu-memory-limit", o.gpuMemoryLimit,
                 "CUDA backend: BYTES (e.g. 512MiB) of device memory, as "
                 "qrun's: weights that do not fit are streamed")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--cpu-precision", o.cpuPrecision,
                 "CPU backend: f32 (default) or bf16, as qrun's")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--cpu-kernels", o.cpuKernels,
                 "CPU backend: fast (default), portable or reference")
      ->check(CLI::IsMember({"fast", "portable", "reference"}));
  app.add_option("--threads", o.threads,
                 "CPU backend: compute threads (default: OMP_NUM_THREADS, "
                 "else the CPUs this process may run on)")
      ->check(CLI::Range(1, 4096));
  bool noMmap = false;
  app.add_flag("--no-mmap", noMmap,
               "Read the artifact into memory instead of mapping it (as "
               "qrun's)");
  app.add_flag("--quiet", o.quiet, "No backend and listening lines");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    std::cerr << "qserve: error: " << e.what() << " (see --help)\n";
    return 1;
  }

  o.engine.prefixCache = !noPrefixCache;

  // SIGINT/SIGTERM write a byte to a pipe that one thread reads to stop the
  // server (a handler may do no more; threads that libraries started before
  // main would take a signal left at its default action).
  if (pipe(stopPipe) != 0) {
    std::cerr << "qserve: error: pipe: " << std::strerror(errno) << "\n";
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A client that disconnects mid-write must not end the process.
  std::signal(SIGPIPE, SIG_IGN);

  try {
    if (!o.cpuKernels.empty())
      rt::setCpuKernelPath(*rt::parseCpuKernelPath(o.cpuKernels));
    if (o.cpuPrecision == "bf16" && !rt::cpuHasAvx512Bf16())
      throw std::runtime_error("--cpu-precision=bf16 needs a CPU with bf16 dot "
                               "products (AVX512_BF16); this one has none");
    rt::setCpuFloatPrecision(*rt::parseCpuFloatPrecision(o.cpuPrecision));
    if (o.threads > 0)
      rt::setCpuThreads(o.threads);
    rt::Artifact artifact = rt::Artifact::load(
        o.model, noMmap ? rt::FileAccess::Read : rt::FileAccess::Map);
    serve::Engine::checkServable(artifact);
    rt::Tokenizer tokenizer = rt::artifactTokenizer(artifact);
    o.server.loraAdapters = artifact.loraAdapters();
    o.server.modelName = o.modelName.empty()
                             ? std::filesystem::path(o.model).stem().string()
                             : o.modelName;
    for (const std::string &a : o.server.loraAdapters)
      if (a == o.server.modelName)
        throw std::runtime_error("the model name '" + a + "' is also a LoRA "
                                 "adapter's name (--model-name picks another)");
    if (o.chatTemplate == "auto") {
      o.server.chatFormat = serve::detectChatFormat(tokenizer);
    } else if (auto f = serve::parseChatFormat(o.chatTemplate)) {
      o.server.chatFormat = *f;
    } else {
      throw std::runtime_error("--chat-template: '" + o.chatTemplate +
                               "' is not auto or one of " +
                               serve::chatFormatList());
    }
    rt::BackendOptions b;
    b.backend = o.backend == "cpu"    ? rt::Backend::Cpu
                : o.backend == "cuda" ? rt::Backend::Cuda
                                      : rt::Backend::Auto;
    b.quiet = o.quiet;
    b.tool = "qserve";
    if (o.gpuMemoryLimit && o.backend == "cpu")
      throw std::runtime_error("--gpu-memory-limit bounds the GPU's memory: "
                               "it needs the CUDA backend, not "
                               "--backend=cpu");
    b.gpuMemoryLimit = o.gpuMemoryLimit;
    if (!o.gpuLayers.empty()) {
      if (o.backend == "cpu")
        throw std::runtime_error("--gpu-layers splits a model between the "
                                 "GPU and the CPU: it needs the CUDA "
                                 "backend, not --backend=cpu");
      rt::parseGpuLayers(o.gpuLayers, b); // checked by the option
      b.kvCacheBytes = rt::KvCache::poolBytes(
          *artifact.kvCache(), serve::Engine::cacheOptions(artifact, o.engine));
    }
    auto executor = rt::makeExecutor(artifact, b, std::cerr);
    serve::Engine engine(artifact, *executor, tokenizer, o.engine);
    serve::OpenAiServer server(engine, tokenizer, o.server);
    int port = server.bind();
    if (!o.quiet)
      std::cerr << "[qserve] " << o.server.modelName << " on http://"
                << o.server.host << ":" << port << " (chat format "
                << serve::chatFormatName(o.server.chatFormat)
                << ", context " << engine.maxContext() << " tokens, "
                << o.engine.maxSequences << " sequences)" << std::endl;
    std::thread stopper([&] {
      char byte;
      while (read(stopPipe[0], &byte, 1) < 0 && errno == EINTR)
        ;
      server.stop();
    });
    server.serve();
    // serve() also returns when the socket fails: let the stopper go.
    onStopSignal(0);
    stopper.join();
    if (!o.quiet)
      std::cerr << "[qserve] stopped" << std::endl;
    return 0;
  } catch (const std::exception &e) {
    std::cerr << "qserve: error: " << e.what() << "\n";
    return 1;
  }
}
