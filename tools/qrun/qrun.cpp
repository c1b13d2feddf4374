//===- qrun.cpp - run a qcc artifact --------------------------------------===//
//
//   qrun MODEL.qpkg --input NAME=FILE ... --output-dir DIR
//   qrun MODEL.qpkg --prompt "TEXT" [--max-new-tokens N]
//   qrun MODEL.qpkg --perplexity FILE.txt
//
// Runs on the CPU reference backend (the CUDA backend arrives with code
// generation). Errors are one line on stderr and exit status 1.
//
//===----------------------------------------------------------------------===//
#include "runtime/Artifact.h"
#include "runtime/Session.h"
#include "runtime/TensorIO.h"
#include "runtime/Tokenizer.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

using namespace qcc::rt;

namespace {

struct Options {
  std::string model;
  std::vector<std::string> inputs;
  std::string outputDir;
  std::string prompt;
  int maxNewTokens = 32;
  std::string perplexityFile;
  int context = 128;
  std::string function = "main";
  std::vector<int64_t> bench; // batch, seq
  int iterations = 5;
  bool profile = false;
};

/// The model's logits port: the first output with rank 3 [batch, seq, vocab].
const Port &logitsPort(const Function &fn) {
  for (const Port &p : fn.outputs)
    if (p.shape.size() == 3 && p.dtype == DType::F32)
      return p;
  throw std::runtime_error("the model has no [batch, seq, vocab] float "
                           "output to generate from");
}

const Port &idsPort(const Function &fn) {
  if (fn.inputs.size() != 1 || fn.inputs[0].dtype != DType::I64 ||
      fn.inputs[0].shape.size() != 2)
    throw std::runtime_error("text generation needs a model whose only input "
                             "is int64 token ids [batch, seq]");
  return fn.inputs[0];
}

Tokenizer loadTokenizer(const Artifact &a) {
  auto blob = a.section("tokenizer");
  if (!blob)
    throw std::runtime_error(a.path() + ": the artifact has no tokenizer "
                             "(compile with --tokenizer, or put "
                             "tokenizer.model beside the .onnx)");
  return Tokenizer(*blob);
}

/// Logits for `ids` (one sequence): [seq, vocab] as a flat tensor.
Tensor forward(Session &s, const Function &fn, const std::vector<int64_t> &ids) {
  Tensor in(DType::I64, {1, (int64_t)ids.size()});
  std::copy(ids.begin(), ids.end(), in.data<int64_t>());
  auto out = s.run(fn.name, {{idsPort(fn).name, in}});
  return out.at(logitsPort(fn).name);
}

int runTensors(const Options &o, const Artifact &a) {
  Session session(a);
  std::map<std::string, Tensor> inputs;
  for (const std::string &spec : o.inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::runtime_error("--input takes NAME=FILE, got '" + spec + "'");
    inputs[spec.substr(0, eq)] = readTensorFile(spec.substr(eq + 1));
  }
  auto outputs = session.run(o.function, inputs);
  std::filesystem::create_directories(o.outputDir);
  for (const auto &[name, t] : outputs) {
    std::string safe = name;
    std::replace(safe.begin(), safe.end(), '/', '_');
    writeNpy((std::filesystem::path(o.outputDir) / (safe + ".npy")).string(),
             t);
  }
  return 0;
}

int runPrompt(const Options &o, const Artifact &a) {
  Session session(a);
  const Function &fn = a.function(o.function);
  Tokenizer tok = loadTokenizer(a);
  std::vector<int64_t> ids = tok.encode(o.prompt);
  if (ids.empty())
    throw std::runtime_error("the prompt encodes to no tokens");
  std::cout << o.prompt << std::flush;
  std::vector<int64_t> generated;
  auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < o.maxNewTokens; ++step) {
    // Full-sequence recompute over the last `context` tokens (no KV cache yet).
    std::vector<int64_t> window(
        ids.end() - std::min<size_t>(ids.size(), o.context), ids.end());
    Tensor logits = forward(session, fn, window);
    int64_t vocab = logits.dim(-1);
    const float *last = logits.data<float>() + (window.size() - 1) * vocab;
    int64_t next = std::max_element(last, last + vocab) - last;
    if (next == tok.eosId())
      break;
    std::cout << tok.decodePiece(ids, next) << std::flush;
    generated.push_back(next);
    ids.push_back(next);
  }
  double secs = std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - start)
                    .count();
  std::cout << "\n";
  std::cerr << "[qrun] " << generated.size() << " tokens in " << secs
            << " s (" << (secs > 0 ? generated.size() / secs : 0.0)
            << " tokens/s, CPU, full recompute)\n";
  return 0;
}

int runPerplexity(const Options &o, const Artifact &a) {
  Session session(a);
  const Function &fn = a.function(o.function);
  Tokenizer tok = loadTokenizer(a);
  std::ifstream in(o.perplexityFile);
  if (!in)
    throw std::runtime_error(o.perplexityFile + ": cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<int64_t> ids = tok.encode(ss.str());
  // Non-overlapping windows of `context` tokens; inside a window each token
  // after the first is predicted from the tokens before it in the window.
  double nll = 0;
  int64_t count = 0;
  for (size_t begin = 0; begin + 1 < ids.size(); begin += o.context) {
    size_t end = std::min(ids.size(), begin + o.context);
    std::vector<int64_t> window(ids.begin() + begin, ids.begin() + end);
    Tensor logits = forward(session, fn, window);
    int64_t vocab = logits.dim(-1);
    for (size_t t = 0; t + 1 < window.size(); ++t) {
      const float *row = logits.data<float>() + t * vocab;
      float mx = *std::max_element(row, row + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v)
        sum += std::exp((double)row[v] - mx);
      nll -= (double)row[window[t + 1]] - mx - std::log(sum);
      ++count;
    }
  }
  if (count == 0)
    throw std::runtime_error(o.perplexityFile + ": too little text");
  std::cout << "perplexity " << std::exp(nll / count) << " over " << count
            << " predicted tokens (" << ids.size()
            << " tokens, windows of " << o.context << ")\n";
  return 0;
}

/// Times forward passes over random token ids: prints tokens/s.
int runBench(const Options &o, const Artifact &a) {
  Session session(a);
  const Function &fn = a.function(o.function);
  const Port &ids = idsPort(fn);
  session.enableProfile(o.profile);
  if (o.bench.size() != 2 || o.bench[0] <= 0 || o.bench[1] <= 0)
    throw std::runtime_error("--bench takes BATCH SEQ");
  int64_t batch = o.bench[0], seq = o.bench[1];
  int64_t vocab = logitsPort(fn).shape.back();
  if (vocab <= 0)
    throw std::runtime_error("--bench needs a static vocabulary size");
  Tensor in(DType::I64, {batch, seq});
  uint64_t x = 88172645463325252ull; // xorshift: fixed, no <random> state
  for (int64_t i = 0; i < batch * seq; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    in.data<int64_t>()[i] = (int64_t)(x % (uint64_t)vocab);
  }
  session.run(fn.name, {{ids.name, in}}); // warm-up
  std::vector<double> times;
  for (int i = 0; i < o.iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    session.run(fn.name, {{ids.name, in}});
    times.push_back(std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - t0)
                        .count());
  }
  std::sort(times.begin(), times.end());
  double median = times[times.size() / 2];
  std::cout << "batch " << batch << " seq " << seq << ": median "
            << median * 1e3 << " ms over " << times.size()
            << " runs, tokens/s " << batch * seq / median << "\n";
  if (o.profile) {
    double total = 0;
    for (const auto &[op, secs, calls] : session.profile())
      total += secs;
    std::cout << "time per op kind over all " << o.iterations + 1
              << " runs:\n";
    for (const auto &[op, secs, calls] : session.profile())
      std::cout << "  " << op << ": " << secs * 1e3 << " ms ("
                << 100 * secs / total << "%, " << calls << " calls)\n";
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  CLI::App app{"qrun: run a qcc artifact (.qpkg) on the CPU reference backend"};
  app.add_option("model", o.model, "The artifact written by qcc -o")->required();
  app.add_option("--input", o.inputs,
                 "NAME=FILE: a model input from .npy or ONNX TensorProto .pb "
                 "(repeatable)");
  app.add_option("--output-dir", o.outputDir,
                 "Write each output as DIR/<output name>.npy");
  app.add_option("--prompt", o.prompt,
                 "Generate a continuation of TEXT (greedy)");
  app.add_option("--max-new-tokens", o.maxNewTokens,
                 "Tokens to generate for --prompt")
      ->capture_default_str();
  app.add_option("--perplexity", o.perplexityFile,
                 "Print the perplexity of a text file's contents");
  app.add_option("--context", o.context,
                 "Tokens of context per forward pass for --prompt and "
                 "--perplexity (at most the model's positions)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--bench", o.bench,
                 "BATCH SEQ: time forward passes over random token ids")
      ->expected(2);
  app.add_option("--iterations", o.iterations, "Timed runs for --bench")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--profile", o.profile,
               "With --bench: print the time spent in each op kind");
  app.add_option("--function", o.function, "Entry point to run")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    Artifact a = Artifact::load(o.model);
    // Tensor mode: --input ... --output-dir, or --output-dir alone for a
    // model without inputs.
    bool tensors = !o.inputs.empty() || !o.outputDir.empty();
    int modes = tensors + !o.prompt.empty() + !o.perplexityFile.empty() +
                !o.bench.empty();
    if (modes != 1)
      throw std::runtime_error("choose one of --input (with --output-dir), "
                               "--prompt, --perplexity or --bench");
    if (!o.bench.empty())
      return runBench(o, a);
    if (tensors) {
      if (o.outputDir.empty())
        throw std::runtime_error("--input needs --output-dir");
      return runTensors(o, a);
    }
    if (!o.prompt.empty())
      return runPrompt(o, a);
    return runPerplexity(o, a);
  } catch (const std::exception &e) {
    std::cerr << "qrun: error: " << e.what() << "\n";
    return 1;
  }
}
