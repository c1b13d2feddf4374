//===- qrun.cpp - run a qcc artifact --------------------------------------===//
//
//   qrun MODEL.qpkg --input NAME=FILE ... --output-dir DIR
//   qrun MODEL.qpkg --prompt "TEXT" [--prompt "TEXT" ...] [--max-new-tokens N]
//        [--temperature T --top-k K --top-p P --seed S]
//        [--repeat-penalty F --repeat-last-n N] [--no-cache]
//        [--draft DRAFT.qpkg --draft-tokens K] [--lookup N --reference FILE]
//   qrun MODEL.qpkg --prompts-file FILE ...
//   qrun MODEL.qpkg --perplexity FILE.txt
//
// Runs on the CUDA backend when a GPU, its driver and the artifact's kernels
// are there (--backend=auto, the default), else on the CPU reference backend,
// saying which in one line on stderr. Errors are one line on stderr and exit
// status 1. Perplexity, benchmarks with --profile, and --list-kernels are
// runtime libraries (runtime/generate/Perplexity.h, Benchmark.h, KernelListing.h),
// as are the backend choice (Backend.h) and draft models (Speculative.h);
// this file parses options, reads files and prompts, and prints.
//
//===----------------------------------------------------------------------===//
#include "format/Checked.h"
#include "runtime/core/Artifact.h"
#include "runtime/generate/Backend.h"
#include "runtime/generate/Benchmark.h"
#include "runtime/cpu/CpuKernels.h"
#include "runtime/generate/Generator.h"
#include "runtime/core/HalfFloat.h"
#include "runtime/core/KernelListing.h"
#include "runtime/core/KvCache.h"
#include "runtime/generate/Perplexity.h"
#include "runtime/core/Progress.h"
#include "runtime/generate/Sampler.h"
#include "runtime/cpu/Session.h"
#include "runtime/generate/Speculative.h"
#include "runtime/core/TensorIO.h"
#include "runtime/text/Tokenizer.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

using namespace qcc::rt;

namespace {

struct Options {
  std::string model;
  std::vector<std::string> inputs;
  std::string outputDir;
  std::vector<std::string> prompts;
  std::string promptsFile;
  int maxNewTokens = 32;
  std::string eosToken; // stop token by its text (default: the tokenizer's)
  std::string lora;     // --lora: a runtime adapter of the artifact
  int64_t adapter = 0;  // its index (Artifact::loraAdapterIndex)
  SamplerOptions sampler;
  int64_t kvBlocks = 0;  // paged pool size (0: enough for the batch)
  int64_t maxTokens = 0; // contiguous capacity (0: prompt + new, rounded up)
  bool noCache = false;
  std::string draft;     // speculative decoding: the draft model
  int64_t draftTokens = 4;
  int64_t lookup = 0;    // prompt lookup: n-gram length (0: off)
  std::string reference; // prompt lookup: a text to copy spans from
  std::string perplexityFile;
  int context = 128;
  std::string function = "main";
  std::vector<int64_t> bench; // batch, seq
  std::vector<int64_t> benchGenerate; // batch, context, steps
  int iterations = 5;
  std::string cpuKernels; // --cpu-kernels, else QCC_CPU_KERNELS, else fast
  std::string cpuPrecision = "f32"; // float linears on the fast path
  int threads = 0; // --threads; 0: OMP_NUM_THREADS, else the affinity mask
  bool profile = false;
  std::string profileJson; // also write the --profile table as JSON here
  bool listKernels = false;
  bool devices = false;
  std::string backend = "auto"; // auto | cpu | cuda
  std::string plan = "ops";     // CPU backend: ops | kernels
  bool checkGpu = false;
  bool quiet = false; // errors and requested output only
  bool noMmap = false; // read the artifacts into memory instead of mapping
  uint64_t gpuMemoryLimit = 0; // CUDA: device bytes the session may use
  std::string gpuLayers;        // CUDA: blocks on the GPU, N or auto
};

qcc::rt::FileAccess fileAccess(const Options &o) {
  return o.noMmap ? qcc::rt::FileAccess::Read : qcc::rt::FileAccess::Map;
}

/// --backend, --plan, --check-gpu and --quiet (runtime/generate/Backend.h).
BackendOptions backendOptions(const Options &o) {
  BackendOptions b;
  b.backend = o.backend == "cpu"    ? Backend::Cpu
              : o.backend == "cuda" ? Backend::Cuda
                                    : Backend::Auto;
  b.plan = o.plan == "kernels" ? Session::Plan::Kernels : Session::Plan::Ops;
  b.checkGpu = o.checkGpu;
  b.quiet = o.quiet;
  b.gpuMemoryLimit = o.gpuMemoryLimit;
  if (!o.gpuLayers.empty())
    parseGpuLayers(o.gpuLayers, b); // checked by the option
  return b;
}

/// The backend, its line on stderr unless `quiet` (tensor mode keeps stderr
/// for errors).
std::unique_ptr<Executor> makeExecutor(const Options &o, const Artifact &a,
                                       bool quiet = false,
                                       uint64_t kvCacheBytes = 0) {
  BackendOptions b = backendOptions(o);
  b.quiet |= quiet;
  b.kvCacheBytes = kvCacheBytes;
  return qcc::rt::makeExecutor(a, b, std::cerr);
}

void reportGpu(const Options &o, Executor &e) {
  qcc::rt::reportGpu(e, o.quiet, std::cerr, std::cout);
}

/// A text file's contents (prompts, --perplexity, --reference): a regular
/// file that fits in memory, never an endless device or FIFO.
std::string readTextFile(const std::string &path) {
  std::vector<char> bytes = qcc::format::readFileChecked(path);
  return std::string(bytes.begin(), bytes.end());
}

/// The token that ends a continuation: --eos-token, else the tokenizer's EOS.
int64_t stopToken(const Options &o, const Tokenizer &tok) {
  if (o.eosToken.empty())
    return tok.eosId();
  int64_t id = tok.tokenId(o.eosToken);
  if (id < 0)
    throw std::runtime_error("--eos-token: '" + o.eosToken +
                             "' is not a token of the artifact's tokenizer");
  return id;
}

int runTensors(const Options &o, const Artifact &a) {
  auto exec = makeExecutor(o, a, /*quiet=*/!o.checkGpu);
  Executor &session = *exec;
  std::map<std::string, Tensor> inputs;
  for (const std::string &spec : o.inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::runtime_error("--input takes NAME=FILE, got '" + spec + "'");
    std::string name = spec.substr(0, eq);
    Tensor t = readTensorFile(spec.substr(eq + 1));
    // .npy has no bfloat16: a bf16 input may come as float32, rounded to
    // nearest even here (or exactly, as a bf16 TensorProto .pb).
    for (const Port &p : a.function(o.function).inputs)
      if (p.name == name && p.dtype == DType::BF16 && t.dtype() == DType::F32)
        t = convertFloat(t, DType::BF16);
    inputs[name] = std::move(t);
  }
  // The adapter of every row: a call without a cache carries it alone.
  KvBatch adapters;
  const Function &fn = a.function(o.function);
  if (o.adapter != 0 && !fn.inputs.empty()) {
    auto first = inputs.find(fn.inputs[0].name);
    if (first != inputs.end() && first->second.rank() > 0)
      adapters.adapters.assign((size_t)first->second.dim(0), o.adapter);
  }
  auto outputs = session.run(o.function, inputs,
                             adapters.adapters.empty() ? nullptr : &adapters);
  reportGpu(o, session);
  std::filesystem::create_directories(o.outputDir);
  for (const auto &[name, t] : outputs) {
    std::string safe = name;
    std::replace(safe.begin(), safe.end(), '/', '_');
    writeNpy((std::filesystem::path(o.outputDir) / (safe + ".npy")).string(),
             t);
  }
  return 0;
}

/// Whether stdout holds a streamed continuation without its newline yet:
/// an error then starts on a line of its own.
bool streamOpen = false;

/// Prints a continuation as it comes (one prompt) or each finished
/// sequence as "[i] prompt + continuation" (several).
struct Printer {
  const Tokenizer &tok;
  const std::vector<std::string> &prompts;
  std::vector<std::vector<int64_t>> ids; // prompt + generated, per sequence
  std::vector<std::string> text;         // the continuation, per sequence
  bool stream() const { return prompts.size() == 1; }
  void begin() {
    if (stream()) {
      std::cout << prompts[0] << std::flush;
      streamOpen = true;
    }
  }
  void token(size_t i, int64_t id) {
    std::string piece = tok.decodePiece(ids[i], id);
    ids[i].push_back(id);
    text[i] += piece;
    if (stream())
      std::cout << piece << std::flush;
  }
  void finish(size_t i) {
    if (stream()) {
      std::cout << "\n";
      streamOpen = false;
    } else
      std::cout << "[" << i << "] " << prompts[i] << text[i] << "\n"
                << std::flush;
  }
};

/// --max-new-tokens, the stop token and sampling, printing through `out`.
GenerateOptions generateOptions(const Options &o, const Tokenizer &tok,
                                Printer &out) {
  GenerateOptions g;
  g.maxNewTokens = o.maxNewTokens;
  g.adapter = o.adapter;
  g.eosId = stopToken(o, tok);
  g.sampler = o.sampler;
  g.onToken = [&out](size_t i, int64_t id) { out.token(i, id); };
  g.onFinish = [&out](size_t i) { out.finish(i); };
  return g;
}

/// --draft / --lookup: speculative generation over `cache` (one sequence
/// at a time), with the accepted-tokens statistics on stderr.
GenerateResult generateSpeculative(const Options &o, const Artifact &a,
                                   const Tokenizer &tok, Executor &exec,
                                   KvCache &cache, const KvCacheOptions &copts,
                                   const std::vector<std::vector<int64_t>> &prompts,
                                   const GenerateOptions &g, Printer &out) {
  std::unique_ptr<DraftModel> draft;
  if (!o.draft.empty()) {
    BackendOptions b = backendOptions(o);
    b.quiet = true; // one backend line: the target's
    b.gpuLayers = -1; // the target's layers: a draft model is small
    b.gpuLayersAuto = false;
    draft = std::make_unique<DraftModel>(o.draft, copts, prompts,
                                         o.maxNewTokens, b, std::cerr,
                                         fileAccess(o));
  }
  SpeculativeOptions spec;
  spec.draftTokens = o.draftTokens;
  spec.lookupNgram = o.lookup;
  if (!o.reference.empty())
    spec.reference = tok.encode(readTextFile(o.reference));
  SpeculativeGenerator gen(a, exec, cache, draft.get());
  SpeculativeStats stats;
  out.begin();
  GenerateResult r = gen.generate(prompts, g, spec, &stats);
  if (!o.quiet)
    std::cerr << "[qrun] speculative (" << (draft ? "draft " + o.draft : "")
              << (draft && o.lookup > 0 ? ", " : "")
              << (o.lookup > 0 ? "lookup n=" + std::to_string(o.lookup) : "")
              << ", K=" << o.draftTokens << "): " << stats.steps
              << " verify steps, " << stats.tokensPerStep()
              << " tokens per step, " << stats.accepted << "/"
              << stats.proposed << " drafts accepted ("
              << 100 * stats.acceptanceRate() << "%)\n";
  return r;
}

int runPrompt(const Options &o, const Artifact &a) {
  Tokenizer tok = artifactTokenizer(a);
  std::vector<std::string> texts = o.prompts;
  if (!o.promptsFile.empty()) {
    std::istringstream in(readTextFile(o.promptsFile));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r')
        line.pop_back();
      if (!line.empty())
        texts.push_back(line);
    }
  }
  if (texts.empty())
    throw std::runtime_error("no prompts");
  std::vector<std::vector<int64_t>> prompts;
  for (const std::string &t : texts) {
    prompts.push_back(tok.encode(t));
    if (prompts.back().empty())
      throw std::runtime_error("the prompt '" + t + "' encodes to no tokens");
  }
  Printer out{tok, texts, prompts,
              std::vector<std::string>(texts.size())};
  bool cached = generatesWithCache(a, o.noCache);
  bool speculative = !o.draft.empty() || o.lookup > 0;
  if (speculative && !cached)
    throw std::runtime_error(std::string(o.draft.empty() ? "--lookup" : "--draft") +
                             " verifies drafts over the KV cache: it needs an "
                             "artifact with prefill and decode, without "
                             "--no-cache");
  // A pool beyond memory (--kv-blocks, --max-tokens) is refused before the
  // backend is set up and announced.
  std::optional<KvCacheOptions> copts;
  uint64_t kvBytes = 0; // --gpu-layers auto keeps room for it
  if (cached) {
    copts = generationCacheOptions(*a.kvCache(), prompts, o.maxNewTokens,
                                   o.kvBlocks, o.maxTokens);
    kvBytes = KvCache::poolBytes(*a.kvCache(), *copts); // checks capacity
  }
  auto exec = makeExecutor(o, a, false, kvBytes);
  GenerateOptions g = generateOptions(o, tok, out);
  GenerateResult r;
  size_t cacheBytes = 0;
  if (speculative) {
    KvCache cache(*a.kvCache(), exec->cacheOptions(*copts));
    cacheBytes = cache.bytes();
    r = generateSpeculative(o, a, tok, *exec, cache, *copts, prompts, g, out);
  } else {
    out.begin();
    GenerationMode mode;
    mode.noCache = o.noCache;
    mode.kvBlocks = o.kvBlocks;
    mode.maxTokens = o.maxTokens;
    mode.function = o.function;
    mode.context = o.context;
    r = generateText(a, *exec, prompts, g, mode, &cacheBytes);
  }
  if (!o.quiet && cached)
    std::cerr << "[qrun] prefill: " << r.prefillTokens << " tokens in "
            << r.prefillSeconds << " s (" << r.prefillTokensPerSecond()
            << " tokens/s); decode: " << r.decodeTokens << " tokens in "
            << r.decodeSeconds << " s (" << r.decodeTokensPerSecond()
            << " tokens/s); KV cache: " << a.kvCache()->layout << ", "
            << cacheBytes << " bytes\n";
  else if (!o.quiet)
    std::cerr << "[qrun] " << r.decodeTokens << " tokens in "
              << r.decodeSeconds << " s (" << r.decodeTokensPerSecond()
              << " tokens/s, full recompute)\n";
  reportGpu(o, *exec);
  return 0;
}

int runPerplexity(const Options &o, const Artifact &a) {
  auto exec = makeExecutor(o, a);
  PerplexityOptions p;
  p.function = o.function;
  p.context = o.context;
  p.useCache = !o.noCache;
  p.adapter = o.adapter;
  p.progress = !o.quiet && Progress::stderrIsTerminal();
  PerplexityEvaluator evaluator(a, *exec, p);
  Tokenizer tok = artifactTokenizer(a);
  std::vector<int64_t> ids = tok.encode(readTextFile(o.perplexityFile));
  PerplexityResult r = evaluator.evaluate(ids);
  if (r.predicted == 0)
    throw std::runtime_error(o.perplexityFile + ": too little text");
  std::cout << "perplexity " << r.perplexity << " over " << r.predicted
            << " predicted tokens (" << ids.size() << " tokens, windows of "
            << o.context << ")\n";
  reportGpu(o, *exec);
  return 0;
}

/// --profile's table on stdout (and --profile-json).
void printProfile(const Options &o, const Executor &e,
                  double decodeSeconds = 0) {
  nlohmann::json j = writeProfile(e, o.plan, decodeSeconds, std::cout);
  if (!o.profileJson.empty()) {
    std::ofstream out(o.profileJson);
    if (!out || !(out << j.dump(1) << "\n"))
      throw std::runtime_error(o.profileJson + ": cannot write the profile");
  }
}

/// The vocabulary size of `fn`'s logits, which --bench needs static.
int64_t staticVocab(const Function &fn, const std::string &what) {
  int64_t vocab = logitsOutput(fn).shape.back();
  if (vocab <= 0)
    throw std::runtime_error(what);
  return vocab;
}

/// Times generation: B random prompts of CONTEXT tokens, then STEPS new
/// tokens each, through the KV cache (or by full recompute with --no-cache).
int runBenchGenerate(const Options &o, const Artifact &a) {
  if (o.benchGenerate.size() != 3 || o.benchGenerate[0] <= 0 ||
      o.benchGenerate[1] <= 0 || o.benchGenerate[2] <= 0)
    throw std::runtime_error("--bench-generate takes BATCH CONTEXT STEPS");
  int64_t batch = o.benchGenerate[0], context = o.benchGenerate[1],
          steps = o.benchGenerate[2];
  int64_t vocab = staticVocab(a.function("main"),
                              "--bench-generate needs a static vocabulary");
  requireGenerateBenchMemory("--bench-generate", batch, context, steps, vocab);
  auto exec = makeExecutor(o, a);
  exec->enableProfile(o.profile);
  GenerateBench r = benchGenerate(a, *exec, batch, context, steps, vocab,
                                  o.noCache, "--bench-generate", o.adapter);
  if (r.recompute) {
    std::cout << "batch " << batch << " context " << context
              << ": recompute decode " << r.recomputeTokensPerSecond
              << " tokens/s\n";
    if (o.profile)
      printProfile(o, *exec);
    return 0;
  }
  std::cout << "batch " << batch << " context " << context << ": prefill "
            << r.result.prefillTokensPerSecond() << " tokens/s, decode "
            << r.result.decodeTokensPerSecond() << " tokens/s (" << r.layout
            << " cache, " << r.cacheBytes << " bytes)\n";
  reportGpu(o, *exec);
  if (o.profile)
    printProfile(o, *exec, r.result.decodeSeconds);
  return 0;
}

/// Times forward passes over random token ids: prints tokens/s.
int runBench(const Options &o, const Artifact &a) {
  const Function &fn = a.function(o.function);
  if (o.bench.size() != 2 || o.bench[0] <= 0 || o.bench[1] <= 0)
    throw std::runtime_error("--bench takes BATCH SEQ");
  int64_t vocab =
      staticVocab(fn, "--bench needs a static vocabulary size");
  requireBenchMemory("--bench", o.bench[0], o.bench[1], vocab);
  auto exec = makeExecutor(o, a);
  exec->enableProfile(o.profile);
  ForwardBench r =
      benchForward(*exec, fn, o.bench[0], o.bench[1], vocab, o.iterations);
  std::cout << "batch " << r.batch << " seq " << r.seq << ": median "
            << r.median() * 1e3 << " ms over " << r.seconds.size()
            << " runs, tokens/s " << r.tokensPerSecond() << "\n";
  if (o.profile)
    printProfile(o, *exec); // over all o.iterations + 1 runs
  return 0;
}

/// A finite number in [lo, hi] (or (lo, hi] when `loOpen`), said in one
/// short line: CLI11's numeric checks let nan and inf through and print the
/// largest double in their messages.
CLI::Validator finiteIn(double lo, double hi, bool loOpen) {
  std::string range = (loOpen ? "(" : "[") + CLI::detail::to_string(lo) +
                      ", " +
                      (std::isinf(hi) ? std::string("inf)")
                                      : CLI::detail::to_string(hi) + "]");
  return CLI::Validator(
      [=](std::string &text) -> std::string {
        char *end = nullptr;
        double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(v) || v > hi ||
            (loOpen ? v <= lo : v < lo))
          return "must be a finite number in " + range + ", got '" + text +
                 "'";
        return "";
      },
      "FLOAT in " + range);
}
const double kInf = std::numeric_limits<double>::infinity();

/// An integer >= 0, said in one short line (CLI::NonNegativeNumber's message
/// prints the largest double).
const CLI::Validator countValidator(
    [](std::string &text) -> std::string {
      char *end = nullptr;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || v < 0)
        return "must be an integer >= 0, got '" + text + "'";
      return "";
    },
    "INT>=0");

} // namespace

/// The CPU backend's OpenMP workers wait passively (futex) unless the user
/// says otherwise: with libgomp's default spinning, a 2-thread forward pass
/// ran 3x slower on a busy 2-core machine (every barrier waits out a time
/// slice) and the spinning takes cores from other processes. libgomp reads
/// OMP_WAIT_POLICY once, when it loads, so qrun sets it and executes itself
/// again before anything else runs; on failure it goes on as it is.
static void waitPassivelyUnlessTold(char **argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT"))
    return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);
}

int main(int argc, char **argv) {
  waitPassivelyUnlessTold(argv);
  Options o;
  CLI::App app{"qrun: run a qcc artifact (.qpkg) on a GPU (CUDA backend) or "
               "on the CPU reference backend"};
  // --help in groups, as a user reaches for them.
  const std::string kTensors = "Tensors in, tensors out";
  const std::string kText = "Text: generation and perplexity";
  const std::string kCache = "KV cache";
  const std::string kBench = "Benchmarks";
  const std::string kBackend = "Backend and diagnostics";
  app.add_option("model", o.model, "The artifact written by qcc -o")->required();
  app.add_option("--input", o.inputs,
                 "NAME=FILE: a model input from .npy or ONNX TensorProto .pb "
                 "(repeatable)")
      ->group(kTensors);
  app.add_option("--output-dir", o.outputDir,
                 "Write each output as DIR/<output name>.npy")
      ->group(kTensors);
  app.add_option("--prompt", o.prompts,
                 "Generate a continuation of TEXT (repeatable: a batch)")
      ->group(kText);
  app.add_option("--prompts-file", o.promptsFile,
                 "Prompts to continue, one per line (a batch)")
      ->group(kText);
  app.add_option("--max-new-tokens", o.maxNewTokens,
                 "Tokens to generate for each prompt")
      ->capture_default_str()
      ->check(countValidator)
      ->group(kText);
  app.add_option("--lora", o.lora,
                 "Run with this LoRA adapter of the artifact (compiled with "
                 "qcc --lora-adapter NAME=DIR; docs/LORA.md)");
  app.add_option("--eos-token", o.eosToken,
                 "Stop a continuation at this token, given by its text (e.g. "
                 "\"<|im_end|>\"; default: the tokenizer's EOS)")
      ->group(kText);
  app.add_option("--temperature", o.sampler.temperature,
                 "Sampling temperature (0: greedy)")
      ->capture_default_str()
      ->check(finiteIn(0, kInf, /*loOpen=*/false))
      ->group(kText);
  app.add_option("--top-k", o.sampler.topK,
                 "Sample among the K most likely tokens (0: all)")
      ->capture_default_str()
      ->check(countValidator)
      ->group(kText);
  app.add_option("--top-p", o.sampler.topP,
                 "Nucleus sampling: the smallest set of tokens with "
                 "probability >= P")
      ->capture_default_str()
      ->check(finiteIn(0, 1, /*loOpen=*/true))
      ->group(kText);
  app.add_option("--repeat-penalty", o.sampler.repeatPenalty,
                 "Divide the positive logits of tokens seen in the last "
                 "--repeat-last-n tokens by F, multiply the negative ones "
                 "(1: off; llama.cpp's convention)")
      ->capture_default_str()
      ->check(finiteIn(0, kInf, /*loOpen=*/true))
      ->group(kText);
  app.add_option("--repeat-last-n", o.sampler.repeatLastN,
                 "Tokens of each sequence (prompt included) that "
                 "--repeat-penalty looks back over (0: none)")
      ->capture_default_str()
      ->check(countValidator)
      ->group(kText);
  app.add_option("--seed", o.sampler.seed, "Sampling seed")
      ->capture_default_str()
      ->group(kText);
  app.add_option("--kv-blocks", o.kvBlocks,
                 "Paged KV cache: blocks in the pool (default: enough for "
                 "every prompt plus --max-new-tokens)")
      ->check(CLI::PositiveNumber)
      ->group(kCache);
  app.add_option("--max-tokens", o.maxTokens,
                 "Contiguous KV cache: tokens per sequence (default: the "
                 "longest prompt plus --max-new-tokens, rounded up)")
      ->check(CLI::PositiveNumber)
      ->group(kCache);
  app.add_flag("--no-cache", o.noCache,
               "Recompute the whole sequence with `main` for every token "
               "(also used when the artifact has no decode entry point)")
      ->group(kCache);
  const std::string kSpec = "Speculative decoding (docs/SPECULATIVE.md)";
  app.add_option("--draft", o.draft,
                 "DRAFT.qpkg: a smaller model with the same tokenizer drafts "
                 "--draft-tokens tokens per step; the model verifies them in "
                 "one pass (same output distribution; greedy: same tokens)")
      ->check(CLI::ExistingFile)
      ->group(kSpec);
  app.add_option("--draft-tokens", o.draftTokens,
                 "K: tokens drafted (or looked up) per verify step, 1..64")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(64)))
      ->group(kSpec);
  app.add_option("--lookup", o.lookup,
                 "N: prompt lookup (LLMA): draft the tokens that followed the "
                 "last N (down to 1) generated tokens in the prompt and "
                 "--reference text, 1..16")
      ->check(CLI::Range(int64_t(1), int64_t(16)))
      ->group(kSpec);
  app.add_option("--reference", o.reference,
                 "FILE: text that --lookup also copies spans from")
      ->check(CLI::ExistingFile)
      ->group(kSpec);
  app.add_option("--perplexity", o.perplexityFile,
                 "Print the perplexity of a text file's contents")
      ->group(kText);
  app.add_option("--context", o.context,
                 "Tokens of context per forward pass for --prompt and "
                 "--perplexity (at most the model's positions)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(kText);
  app.add_option("--bench", o.bench,
                 "BATCH SEQ: time forward passes over random token ids")
      ->expected(2)
      ->group(kBench);
  app.add_option("--iterations", o.iterations, "Timed runs for --bench")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(kBench);
  app.add_option("--bench-generate", o.benchGenerate,
                 "BATCH CONTEXT STEPS: time prefill and decode (through the "
                 "KV cache, after the same run as a warm-up; or by recompute "
                 "with --no-cache)")
      ->expected(3)
      ->group(kBench);
  app.add_flag("--devices", o.devices,
               "List the CUDA devices (or say why there are none) and exit")
      ->group(kBackend);
  app.add_flag("--profile", o.profile,
               "With --bench or --bench-generate: per op or kernel kind, "
               "time, GB/s, FLOP/s, MBU and MFU against this CPU's measured "
               "peaks or the GPU's datasheet (docs/ROOFLINE.md)")
      ->group(kBench);
  app.add_option("--profile-json", o.profileJson,
                 "FILE: also write the --profile table as JSON (for "
                 "bench/roofline_plot.py)")
      ->group(kBench);
  app.add_option("--function", o.function, "Entry point to run")
      ->capture_default_str()
      ->group(kTensors);
  app.add_flag("--list-kernels", o.listKernels,
               "List the artifact's GPU kernels (per entry point: region, "
               "kind, entry, binary sizes) and exit")
      ->group(kBackend);
  app.add_option("--backend", o.backend,
                 "auto: CUDA when a GPU, its driver and the artifact's "
                 "kernels are there, else the CPU (saying why); cpu; cuda "
                 "(an error when it cannot run)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str()
      ->group(kBackend);
  app.add_option("--plan", o.plan,
                 "CPU backend: ops (the op-by-op plan) or kernels (the GPU "
                 "plan, each kernel region run op by op: checks the plan)")
      ->check(CLI::IsMember({"ops", "kernels"}))
      ->capture_default_str()
      ->group(kBackend);
  app.add_option("--cpu-kernels", o.cpuKernels,
                 "CPU backend: fast (default), portable (no SIMD intrinsics) "
                 "or reference (the op-by-op kernels fast is tested against); "
                 "also QCC_CPU_KERNELS")
      ->check(CLI::IsMember({"fast", "portable", "reference"}))
      ->group(kBackend);
  app.add_option("--cpu-precision", o.cpuPrecision,
                 "CPU backend: f32 (default) or bf16: float32 linears with "
                 "weights and activations rounded to bf16 and float32 sums, "
                 "twice the multiply rate and half the weight bytes (CPUs "
                 "with AVX512_BF16; docs/CPU_BACKEND.md)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->group(kBackend);
  app.add_option("--threads", o.threads,
                 "CPU backend: threads of its one pool (GEMMs, attention, "
                 "elementwise ops); default OMP_NUM_THREADS, else the CPUs "
                 "this process may run on (its affinity mask)")
      ->check(CLI::Range(1, 4096))
      ->group(kBackend);
  app.add_flag("--no-mmap", o.noMmap,
               "Read the artifact (and a --draft model) into memory instead "
               "of mapping it: weights the CPU backend packs then stay "
               "resident twice (docs/MEMORY.md)")
      ->group(kBackend);
  app.add_option("--gpu-memory-limit", o.gpuMemoryLimit,
                 "CUDA backend: BYTES (e.g. 512MiB, 2GB) of device memory the "
                 "session may use; weights that do not fit are streamed from "
                 "page-locked host memory, copied on a second stream while "
                 "the kernels before their node run (the most recently read "
                 "evicted), embedding rows are looked up on the host, and "
                 "decode leaves CUDA graphs at the first eviction (without "
                 "it, streaming starts when the GPU runs out of memory; "
                 "docs/MEMORY.md)")
      ->transform(CLI::AsSizeValue(false))
      ->group(kBackend);
  app.add_option("--gpu-layers", o.gpuLayers,
                 "CUDA backend: N or auto. Run the first N transformer blocks "
                 "on the GPU and the rest (with the final norm and the LM "
                 "head) on the CPU backend, as llama.cpp's -ngl; their "
                 "weights and keys and values stay in host memory. auto: as "
                 "many as fit in the GPU's free memory beside the KV cache "
                 "(docs/MEMORY.md)")
      ->check(CLI::Validator(
          [](std::string &v) {
            BackendOptions scratch;
            return parseGpuLayers(v, scratch);
          },
          "N|auto"))
      ->group(kBackend);
  app.add_flag("--check-gpu", o.checkGpu,
               "CUDA backend: compare every kernel region's results with the "
               "CPU backend on the same operands and print the worst error "
               "per kernel kind")
      ->group(kBackend);
  app.add_flag("--quiet", o.quiet,
               "Errors and the requested output only: no backend line, no "
               "timing summaries, no progress line")
      ->group(kBackend);
  app.get_option("model")->required(false);
  app.set_version_flag("--version", std::string("qrun ") + QCC_VERSION +
                                        " (artifact format " +
                                        std::to_string(kFormatVersion) + ")");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success &e) { // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    // One line, exit status 1, as for every other bad input.
    std::cerr << "qrun: error: " << e.what() << " (see --help)\n";
    return 1;
  }
  if (o.cpuKernels.empty())
    if (const char *env = std::getenv("QCC_CPU_KERNELS"))
      if (!parseCpuKernelPath(env)) {
        std::cerr << "qrun: error: QCC_CPU_KERNELS='" << env
                  << "' is not fast, portable or reference\n";
        return 1;
      }
  if (!o.cpuKernels.empty())
    setCpuKernelPath(*parseCpuKernelPath(o.cpuKernels));
  if (o.cpuPrecision == "bf16" && !cpuHasAvx512Bf16()) {
    std::cerr << "qrun: error: --cpu-precision=bf16 needs a CPU with bf16 "
                 "dot products (AVX512_BF16); this one has none\n";
    return 1;
  }
  setCpuFloatPrecision(*parseCpuFloatPrecision(o.cpuPrecision));
  if (o.threads > 0)
    setCpuThreads(o.threads);
  if (o.devices) {
    listDevices(std::cout);
    return 0;
  }
  if (!o.gpuLayers.empty() && o.backend == "cpu") {
    std::cerr << "qrun: error: --gpu-layers splits a model between the GPU "
                 "and the CPU: it needs the CUDA backend, not --backend=cpu\n";
    return 1;
  }
  if (o.gpuMemoryLimit && o.backend == "cpu") {
    std::cerr << "qrun: error: --gpu-memory-limit bounds the GPU's memory: "
                 "it needs the CUDA backend, not --backend=cpu\n";
    return 1;
  }
  if (!o.reference.empty() && o.lookup == 0) {
    std::cerr << "qrun: error: --reference needs --lookup N (see --help)\n";
    return 1;
  }
  if ((!o.draft.empty() || o.lookup > 0) && o.prompts.empty() &&
      o.promptsFile.empty()) {
    std::cerr << "qrun: error: --draft and --lookup generate text: they need "
                 "--prompt or --prompts-file (see --help)\n";
    return 1;
  }
  if (!o.profileJson.empty())
    o.profile = true;
  if (o.model.empty()) {
    std::cerr << "qrun: error: no artifact given (see --help)\n";
    return 1;
  }

  try {
    Artifact a = Artifact::load(o.model, fileAccess(o));
    o.adapter = a.loraAdapterIndex(o.lora);
    if (a.syntheticBytes() && !o.quiet)
      std::cerr << "[qrun] synthetic weights (qcc --synthetic-weights): "
                << a.syntheticBytes() / (1 << 20)
                << " MiB generated from seeds; outputs are meaningless, "
                   "speed is the real model's\n";
    if (o.listKernels) {
      listKernels(a, std::cout);
      return 0;
    }
    // Tensor mode: --input ... --output-dir, or --output-dir alone for a
    // model without inputs.
    bool tensors = !o.inputs.empty() || !o.outputDir.empty();
    bool prompt = !o.prompts.empty() || !o.promptsFile.empty();
    int modes = tensors + prompt + !o.perplexityFile.empty() +
                !o.bench.empty() + !o.benchGenerate.empty();
    if (modes != 1)
      throw std::runtime_error("choose one of --input (with --output-dir), "
                               "--prompt / --prompts-file, --perplexity or "
                               "--bench");
    if (o.adapter != 0 && !o.bench.empty())
      throw std::runtime_error("--lora does not apply to --bench (a forward "
                               "pass of the base model); --bench-generate "
                               "takes it");
    if (!o.benchGenerate.empty())
      return runBenchGenerate(o, a);
    if (!o.bench.empty())
      return runBench(o, a);
    if (tensors) {
      if (o.outputDir.empty())
        throw std::runtime_error("--input needs --output-dir");
      return runTensors(o, a);
    }
    if (prompt)
      return runPrompt(o, a);
    return runPerplexity(o, a);
  } catch (const std::exception &e) {
    if (streamOpen)
      std::cout << std::endl;
    std::cerr << "qrun: error: " << e.what() << "\n";
    return 1;
  }
}
