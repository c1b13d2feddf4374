//===- qrun.cpp - run a qcc artifact --------------------------------------===//
//
//   qrun MODEL.qpkg --input NAME=FILE ... --output-dir DIR
//   qrun MODEL.qpkg --prompt "TEXT" [--prompt "TEXT" ...] [--max-new-tokens N]
//        [--temperature T --top-k K --top-p P --seed S]
//        [--repeat-penalty F --repeat-last-n N] [--no-cache]
//   qrun MODEL.qpkg --prompts-file FILE ...
//   qrun MODEL.qpkg --perplexity FILE.txt
//
// Runs on the CUDA backend when a GPU, its driver and the artifact's kernels
// are there (--backend=auto, the default), else on the CPU reference backend,
// saying which in one line on stderr. Errors are one line on stderr and exit
// status 1.
//
//===----------------------------------------------------------------------===//
#include "runtime/Artifact.h"
#include "runtime/Progress.h"
#include "runtime/CudaDriver.h"
#include "runtime/Generator.h"
#include "runtime/GpuSession.h"
#include "runtime/HalfFloat.h"
#include "runtime/KvCache.h"
#include "runtime/Roofline.h"
#include "runtime/Sampler.h"
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
#include <optional>
#include <sstream>

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
  SamplerOptions sampler;
  int64_t kvBlocks = 0;  // paged pool size (0: enough for the batch)
  int64_t maxTokens = 0; // contiguous capacity (0: prompt + new, rounded up)
  bool noCache = false;
  std::string perplexityFile;
  int context = 128;
  std::string function = "main";
  std::vector<int64_t> bench; // batch, seq
  std::vector<int64_t> benchGenerate; // batch, context, steps
  int iterations = 5;
  bool profile = false;
  std::string profileJson; // also write the --profile table as JSON here
  bool listKernels = false;
  bool devices = false;
  std::string backend = "auto"; // auto | cpu | cuda
  std::string plan = "ops";     // CPU backend: ops | kernels
  bool checkGpu = false;
  bool quiet = false; // errors and requested output only
};

/// The backend --backend asks for, with one line on stderr saying which runs
/// and why (unless `quiet`: tensor mode keeps stderr for errors).
std::unique_ptr<Executor> makeExecutor(const Options &o, const Artifact &a,
                                       bool quiet = false) {
  quiet |= o.quiet;
  auto cpu = [&](const std::string &why) {
    if (!quiet)
      std::cerr << "[qrun] CPU backend: " << why << "\n";
    auto s = std::make_unique<Session>(a);
    if (o.plan == "kernels")
      s->setPlan(Session::Plan::Kernels);
    return s;
  };
  if (o.backend == "cpu")
    return cpu("--backend=cpu" +
               std::string(o.plan == "kernels" ? " (GPU plan, op by op)" : ""));
  std::string why;
  std::shared_ptr<CudaDriver> driver = CudaDriver::load(why);
  if (driver) {
    try {
      auto ctx = std::make_shared<CudaContext>(driver, 0);
      auto g = std::make_unique<GpuSession>(a, ctx);
      g->setCheck(o.checkGpu);
      const CudaDevice &d = ctx->device();
      if (!quiet)
        std::cerr << "[qrun] CUDA backend: " << d.name << " (" << d.arch()
                << "); " << g->planSummary() << "\n";
      return g;
    } catch (const std::exception &e) {
      why = e.what();
    }
  }
  if (o.backend == "cuda")
    throw std::runtime_error("--backend=cuda: " + why);
  return cpu(why);
}

/// With the CUDA backend: what ran where (unless --quiet), and the
/// --check-gpu report.
void reportGpu(const Options &o, Executor &e) {
  auto *g = dynamic_cast<GpuSession *>(&e);
  if (!g)
    return;
  const auto &s = g->stats();
  if (!o.quiet) {
  std::cerr << "[qrun] CUDA: " << s.runs << " runs, " << s.kernelLaunches
            << " kernel launches, " << s.graphCaptures << " graphs captured, "
            << s.graphReplays << " replayed, " << s.hostNodes
            << " nodes on the host";
  for (const auto &[op, n] : s.hostOps)
    std::cerr << " " << op << " x" << n;
  std::cerr << "\n";
  }
  if (g->checks().empty())
    return;
  // Per kind: the worst region (test/e2e/check_gpu.py states the tolerances).
  std::map<std::string, GpuSession::RegionCheck> worst;
  for (const auto &c : g->checks()) {
    auto &w = worst[c.kind];
    double rel = c.maxAbsError / std::max(1.0, c.maxAbsReference);
    double wrel = w.maxAbsError / std::max(1.0, w.maxAbsReference);
    if (w.kind.empty() || rel > wrel || c.mismatchedInts > w.mismatchedInts)
      w = c;
  }
  for (const auto &[kind, c] : worst)
    std::cout << "check " << kind << ": worst region " << c.function << "/"
              << c.region << " max abs error " << c.maxAbsError
              << " (max |cpu| " << c.maxAbsReference << "), integer "
              << "elements off by 1: " << c.offByOneInts << " of "
              << c.intElements << ", off by more: " << c.mismatchedInts
              << "\n";
}

int listDevices() {
  std::string why;
  auto driver = CudaDriver::load(why);
  if (!driver) {
    std::cout << why << "\n";
    return 0;
  }
  std::cout << "CUDA driver " << driver->driverVersion() << "\n";
  for (const CudaDevice &d : driver->devices())
    std::cout << d.ordinal << ": " << d.name << ", " << d.arch() << ", "
              << d.totalMemory / (1 << 20) << " MiB\n";
  return 0;
}

/// The model's logits port: the first float output with rank 3 [batch, seq,
/// vocab].
const Port &logitsPort(const Function &fn) { return logitsOutput(fn); }

/// The logits among `outputs` of `fn`, in f32 (f16/bf16 logits widened).
Tensor logitsOf(const std::map<std::string, Tensor> &outputs,
                const Function &fn) {
  return convertFloat(outputs.at(logitsPort(fn).name), DType::F32);
}

/// The artifact's tokenizer: a tokenizer.json or a SentencePiece model.
Tokenizer loadTokenizer(const Artifact &a) {
  auto blob = a.section("tokenizer");
  if (!blob)
    throw std::runtime_error(a.path() + ": the artifact has no tokenizer "
                             "(compile with --tokenizer, or put "
                             "tokenizer.json or tokenizer.model beside the "
                             ".onnx)");
  return Tokenizer(*blob);
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

/// Logits for `ids` (one sequence): [seq, vocab] as a flat tensor.
Tensor forward(Executor &s, const Function &fn,
               const std::vector<int64_t> &ids) {
  Tensor in(DType::I64, {1, (int64_t)ids.size()});
  std::copy(ids.begin(), ids.end(), in.data<int64_t>());
  return logitsOf(s.run(fn.name, sequenceInputs(fn, in)), fn);
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
  auto outputs = session.run(o.function, inputs);
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

/// Prints a continuation as it comes (one prompt) or each finished
/// sequence as "[i] prompt + continuation" (several).
struct Printer {
  const Tokenizer &tok;
  const std::vector<std::string> &prompts;
  std::vector<std::vector<int64_t>> ids; // prompt + generated, per sequence
  std::vector<std::string> text;         // the continuation, per sequence
  bool stream() const { return prompts.size() == 1; }
  void begin() {
    if (stream())
      std::cout << prompts[0] << std::flush;
  }
  void token(size_t i, int64_t id) {
    std::string piece = tok.decodePiece(ids[i], id);
    ids[i].push_back(id);
    text[i] += piece;
    if (stream())
      std::cout << piece << std::flush;
  }
  void finish(size_t i) {
    if (stream())
      std::cout << "\n";
    else
      std::cout << "[" << i << "] " << prompts[i] << text[i] << "\n"
                << std::flush;
  }
};

bool hasFunction(const Artifact &a, const std::string &name) {
  for (const Function &f : a.functions())
    if (f.name == name)
      return true;
  return false;
}

/// The old path: the whole window recomputed with `main` for every token.
int generateNoCache(const Options &o, const Artifact &a, const Tokenizer &tok,
                    const std::vector<std::vector<int64_t>> &prompts,
                    Printer &out) {
  auto exec = makeExecutor(o, a);
  Executor &session = *exec;
  const Function &fn = a.function(o.function);
  Sampler sampler(o.sampler);
  int64_t eos = stopToken(o, tok);
  int64_t total = 0;
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int64_t> ids = prompts[i];
    for (int step = 0; step < o.maxNewTokens; ++step) {
      std::vector<int64_t> window(
          ids.end() - std::min<size_t>(ids.size(), o.context), ids.end());
      Tensor logits = forward(session, fn, window);
      int64_t vocab = logits.dim(-1);
      const float *last = logits.data<float>() + (window.size() - 1) * vocab;
      int64_t next = sampler.sample(last, vocab, ids);
      if (next == eos)
        break;
      out.token(i, next);
      ids.push_back(next);
      ++total;
    }
    out.finish(i);
  }
  double secs = std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - start)
                    .count();
  if (!o.quiet)
    std::cerr << "[qrun] " << total << " tokens in " << secs << " s ("
            << (secs > 0 ? total / secs : 0.0)
            << " tokens/s, full recompute)\n";
  return 0;
}

int runPrompt(const Options &o, const Artifact &a) {
  Tokenizer tok = loadTokenizer(a);
  std::vector<std::string> texts = o.prompts;
  if (!o.promptsFile.empty()) {
    std::ifstream in(o.promptsFile);
    if (!in)
      throw std::runtime_error(o.promptsFile + ": cannot open the file");
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
  bool cached = !o.noCache && hasFunction(a, "decode") &&
                hasFunction(a, "prefill") && a.manifest().contains("kv_cache");
  if (!cached) {
    out.begin();
    return generateNoCache(o, a, tok, prompts, out);
  }

  KvCacheConfig cfg = KvCacheConfig::fromJson(a.manifest().at("kv_cache"));
  KvCacheOptions copts;
  copts.maxSequences = (int64_t)prompts.size();
  int64_t longest = 0, blocks = 0;
  for (const auto &p : prompts) {
    int64_t need = (int64_t)p.size() + o.maxNewTokens;
    longest = std::max(longest, need);
    blocks += (need + cfg.blockTokens - 1) / cfg.blockTokens;
  }
  cfg.checkContext(longest, "the longest prompt plus --max-new-tokens");
  copts.numBlocks = o.kvBlocks > 0 ? o.kvBlocks : blocks;
  int64_t round = cfg.blockTokens > 0 ? cfg.blockTokens : 16;
  copts.maxTokens = o.maxTokens > 0
                        ? o.maxTokens
                        : (longest + round - 1) / round * round;
  auto exec = makeExecutor(o, a);
  KvCache cache(cfg, exec->cacheOptions(copts));
  Generator gen(a, *exec, cache);
  GenerateOptions g;
  g.maxNewTokens = o.maxNewTokens;
  g.eosId = stopToken(o, tok);
  g.sampler = o.sampler;
  g.onToken = [&](size_t i, int64_t id) { out.token(i, id); };
  g.onFinish = [&](size_t i) { out.finish(i); };
  out.begin();
  GenerateResult r = gen.generate(prompts, g);
  if (!o.quiet)
    std::cerr << "[qrun] prefill: " << r.prefillTokens << " tokens in "
            << r.prefillSeconds << " s (" << r.prefillTokensPerSecond()
            << " tokens/s); decode: " << r.decodeTokens << " tokens in "
            << r.decodeSeconds << " s (" << r.decodeTokensPerSecond()
            << " tokens/s); KV cache: " << cfg.layout << ", " << cache.bytes()
            << " bytes\n";
  reportGpu(o, *exec);
  return 0;
}

int runPerplexity(const Options &o, const Artifact &a) {
  auto exec = makeExecutor(o, a);
  Executor &session = *exec;
  const Function &fn = a.function(o.function);
  // With a KV cache, each window goes through `prefill` (attending over the
  // cache, so an int8 cache's rounding counts); else through `main`.
  bool cached = !o.noCache && hasFunction(a, "prefill") &&
                a.manifest().contains("kv_cache");
  std::optional<KvCache> cache;
  if (cached) {
    KvCacheConfig cfg = KvCacheConfig::fromJson(a.manifest().at("kv_cache"));
    cfg.checkContext(o.context, "--context");
    KvCacheOptions copts;
    copts.maxSequences = 1;
    copts.maxTokens = (o.context + cfg.blockTokens - 1) / cfg.blockTokens *
                      cfg.blockTokens;
    copts.numBlocks = copts.maxTokens / cfg.blockTokens;
    cache.emplace(cfg, session.cacheOptions(copts));
  }
  auto windowLogits = [&](const std::vector<int64_t> &window) {
    if (!cached)
      return forward(session, fn, window);
    const Function &pre = a.function("prefill");
    int64_t n = window.size();
    Tensor ids(DType::I64, {1, n}), pos(DType::I64, {1, n});
    for (int64_t t = 0; t < n; ++t) {
      ids.data<int64_t>()[t] = window[t];
      pos.data<int64_t>()[t] = t;
    }
    int64_t seq = cache->addSequence();
    KvBatch batch{&*cache, {seq}, {n}};
    Tensor logits = logitsOf(
        session.run("prefill",
                    {{pre.inputs[0].name, ids}, {pre.inputs[1].name, pos}},
                    &batch),
        pre);
    cache->release(seq);
    return logits;
  };
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
  int64_t windows = ids.size() < 2 ? 0 : (ids.size() - 2) / o.context + 1;
  Progress progress("perplexity windows", windows,
                    !o.quiet && Progress::stderrIsTerminal());
  for (size_t begin = 0; begin + 1 < ids.size(); begin += o.context) {
    progress.update(begin / o.context);
    size_t end = std::min(ids.size(), begin + o.context);
    std::vector<int64_t> window(ids.begin() + begin, ids.begin() + end);
    Tensor logits = windowLogits(window);
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
  progress.clear();
  if (count == 0)
    throw std::runtime_error(o.perplexityFile + ": too little text");
  std::cout << "perplexity " << std::exp(nll / count) << " over " << count
            << " predicted tokens (" << ids.size()
            << " tokens, windows of " << o.context << ")\n";
  reportGpu(o, session);
  return 0;
}

/// The CPU session for --profile (which times nodes on the CPU backend).
Session *profiledSession(const Options &o, Executor &e) {
  auto *cpu = dynamic_cast<Session *>(&e);
  if (o.profile && !cpu)
    throw std::runtime_error("--profile times nodes on the CPU backend "
                             "(use --backend=cpu)");
  if (cpu)
    cpu->enableProfile(o.profile);
  return cpu;
}

/// --profile: per entry point and node kind (a kernel region's kind with
/// --plan=kernels, else the op), achieved time, bandwidth and FLOP/s, as MBU
/// and MFU against this CPU's measured peaks (runtime/Roofline.h); with a
/// decode, the whole decode step's MBU over `decodeSeconds`.
void printProfile(const Options &o, const Session &s,
                  double decodeSeconds = 0) {
  const Peaks &peak = cpuPeaks();
  auto rows = s.profile();
  std::map<std::string, double> fnSeconds;
  std::map<std::string, Cost> fnCost;
  for (const auto &r : rows) {
    fnSeconds[r.function] += r.seconds;
    fnCost[r.function] += r.cost;
  }
  char line[256];
  std::cout << "profile (" << (o.plan == "kernels" ? "GPU plan" : "op plan")
            << " on the CPU; peaks measured here: " << peak.bandwidth / 1e9
            << " GB/s, f32 " << peak.f32 / 1e9 << " GFLOP/s, i8 "
            << peak.i8 / 1e9 << " GOP/s)\n";
  std::snprintf(line, sizeof line, "  %-8s %-14s %6s %9s %6s %9s %9s %6s %6s\n",
                "function", "kind", "calls", "ms", "time%", "GB/s", "GFLOP/s",
                "MBU%", "MFU%");
  std::cout << line;
  nlohmann::json j = {{"schema", "qrun-profile/1"},
                      {"plan", o.plan},
                      {"peaks",
                       {{"bandwidth", peak.bandwidth},
                        {"f32", peak.f32},
                        {"f16", peak.f16},
                        {"i8", peak.i8}}},
                      {"rows", nlohmann::json::array()}};
  auto emit = [&](const std::string &fn, const std::string &kind,
                  int64_t calls, double secs, const Cost &c) {
    double bw = secs > 0 ? c.bytes() / secs : 0;
    double fl = secs > 0 ? c.flops / secs : 0;
    double mbu = bw / peak.bandwidth, mfu = fl / peak.compute(c.precision);
    std::string n = calls > 0 ? std::to_string(calls) : "";
    std::snprintf(line, sizeof line,
                  "  %-8s %-14s %6s %9.3f %6.1f %9.3f %9.3f %6.1f %6.1f\n",
                  fn.c_str(), kind.c_str(), n.c_str(), secs * 1e3,
                  fnSeconds[fn] > 0 ? 100 * secs / fnSeconds[fn] : 0.0,
                  bw / 1e9, fl / 1e9, 100 * mbu, 100 * mfu);
    std::cout << line;
    j["rows"].push_back({{"function", fn},
                         {"kind", kind},
                         {"calls", calls},
                         {"seconds", secs},
                         {"precision", precisionName(c.precision)},
                         {"flops", c.flops},
                         {"bytes", c.bytes()},
                         {"intensity", c.intensity()},
                         {"bytes_per_second", bw},
                         {"flops_per_second", fl},
                         {"mbu", mbu},
                         {"mfu", mfu}});
  };
  for (const auto &r : rows)
    emit(r.function, r.kind, r.calls, r.seconds, r.cost);
  for (const auto &[fn, secs] : fnSeconds)
    emit(fn, "(all nodes)", 0, secs, fnCost[fn]);
  if (decodeSeconds > 0 && fnCost.count("decode")) {
    double mbu = fnCost["decode"].bytes() / decodeSeconds / peak.bandwidth;
    std::cout << "decode step MBU (all bytes of the decode steps over their "
                 "wall time): "
              << 100 * mbu << "%\n";
    j["decode_mbu"] = mbu;
  }
  if (!o.profileJson.empty()) {
    std::ofstream out(o.profileJson);
    if (!out || !(out << j.dump(1) << "\n"))
      throw std::runtime_error(o.profileJson + ": cannot write the profile");
  }
}

/// Times forward passes over random token ids: prints tokens/s.
/// Times generation: B random prompts of CONTEXT tokens, then STEPS new
/// tokens each, through the KV cache (or by full recompute with --no-cache).
int runBenchGenerate(const Options &o, const Artifact &a) {
  if (o.benchGenerate.size() != 3 || o.benchGenerate[0] <= 0 ||
      o.benchGenerate[1] <= 0 || o.benchGenerate[2] <= 0)
    throw std::runtime_error("--bench-generate takes BATCH CONTEXT STEPS");
  int64_t batch = o.benchGenerate[0], context = o.benchGenerate[1],
          steps = o.benchGenerate[2];
  const Function &main = a.function("main");
  int64_t vocab = logitsPort(main).shape.back();
  if (vocab <= 0)
    throw std::runtime_error("--bench-generate needs a static vocabulary");
  uint64_t x = 88172645463325252ull; // xorshift: fixed prompts
  std::vector<std::vector<int64_t>> prompts(batch);
  for (auto &p : prompts)
    for (int64_t i = 0; i < context; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      p.push_back((int64_t)(x % (uint64_t)vocab));
    }
  auto exec = makeExecutor(o, a);
  Executor &session = *exec;
  Session *cpu = profiledSession(o, session);
  if (o.noCache) {
    // Each step recomputes the whole sequence: [B, context + i].
    std::vector<std::vector<int64_t>> ids = prompts;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t step = 0; step < steps; ++step) {
      int64_t len = ids[0].size();
      Tensor in(DType::I64, {batch, len});
      for (int64_t b = 0; b < batch; ++b)
        std::copy(ids[b].begin(), ids[b].end(),
                  in.data<int64_t>() + b * len);
      Tensor logits = logitsOf(session.run("main", sequenceInputs(main, in)),
                               main);
      for (int64_t b = 0; b < batch; ++b) {
        const float *row = logits.data<float>() + ((b + 1) * len - 1) * vocab;
        ids[b].push_back(std::max_element(row, row + vocab) - row);
      }
    }
    double secs = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
    std::cout << "batch " << batch << " context " << context
              << ": recompute decode " << batch * steps / secs
              << " tokens/s\n";
    if (o.profile)
      printProfile(o, *cpu);
    return 0;
  }
  KvCacheConfig cfg = KvCacheConfig::fromJson(a.manifest().at("kv_cache"));
  cfg.checkContext(context + steps + 1, "--bench-generate");
  KvCacheOptions copts;
  copts.maxSequences = batch;
  int64_t need = context + steps + 1;
  copts.maxTokens = (need + cfg.blockTokens - 1) / cfg.blockTokens *
                    cfg.blockTokens;
  copts.numBlocks = batch * ((need + cfg.blockTokens - 1) / cfg.blockTokens);
  KvCache cache(cfg, session.cacheOptions(copts));
  Generator gen(a, session, cache);
  GenerateOptions g;
  g.maxNewTokens = steps + 1; // the first comes from the prefill
  GenerateResult r = gen.generate(prompts, g);
  std::cout << "batch " << batch << " context " << context << ": prefill "
            << r.prefillTokensPerSecond() << " tokens/s, decode "
            << r.decodeTokensPerSecond() << " tokens/s (" << cfg.layout
            << " cache, " << cache.bytes() << " bytes)\n";
  reportGpu(o, session);
  if (o.profile)
    printProfile(o, *cpu, r.decodeSeconds);
  return 0;
}

int runBench(const Options &o, const Artifact &a) {
  auto exec = makeExecutor(o, a);
  Executor &session = *exec;
  Session *cpu = profiledSession(o, session);
  const Function &fn = a.function(o.function);
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
  auto inputs = sequenceInputs(fn, in);
  session.run(fn.name, inputs); // warm-up
  std::vector<double> times;
  for (int i = 0; i < o.iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    session.run(fn.name, inputs);
    times.push_back(std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - t0)
                        .count());
  }
  std::sort(times.begin(), times.end());
  double median = times[times.size() / 2];
  std::cout << "batch " << batch << " seq " << seq << ": median "
            << median * 1e3 << " ms over " << times.size()
            << " runs, tokens/s " << batch * seq / median << "\n";
  if (o.profile)
    printProfile(o, *cpu); // over all o.iterations + 1 runs
  return 0;
}

/// --list-kernels: the artifact's kernels, per entry point in the GPU plan's
/// launch order.
int listKernels(const Artifact &a) {
  std::vector<const Function *> plans;
  for (const Function &f : a.functions())
    if (const Function *g = a.gpuFunction(f.name))
      plans.push_back(g);
  if (plans.empty()) {
    std::cout << "no GPU kernels (compiled with --no-cuda or without CUDA)\n";
    return 0;
  }
  std::sort(plans.begin(), plans.end(),
            [](const Function *x, const Function *y) { return x->name < y->name; });
  for (const Function *fn : plans) {
    std::vector<const KernelRecord *> launches;
    for (const Node &n : fn->nodes)
      if (n.body && n.attrs.value("kernel", int64_t(-1)) >= 0)
        launches.push_back(&a.kernels()[n.attrs["kernel"].get<size_t>()]);
    std::cout << "function " << fn->name << ": " << launches.size()
              << " launches\n";
    for (const KernelRecord *k : launches) {
      std::cout << "  " << k->region << " " << qcc::format::spelling(k->kind);
      if (!k->unsupported.empty()) {
        std::cout << " unsupported: " << k->unsupported << "\n";
        continue;
      }
      std::cout << " " << k->entry;
      for (const char *t : {"sm_80", "sm_90", "ptx"}) {
        auto it = k->binaries.find(t);
        std::cout << " " << t << "="
                  << (it == k->binaries.end() ? 0 : it->second.second);
      }
      size_t smem = 0;
      for (const auto &step : k->launch.steps)
        smem = std::max<size_t>(smem, step.dynamicSmem);
      std::cout << " smem=" << smem << "\n";
    }
  }
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

int main(int argc, char **argv) {
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
      ->group(kText);
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
                 "KV cache, or by recompute with --no-cache)")
      ->expected(3)
      ->group(kBench);
  app.add_flag("--devices", o.devices,
               "List the CUDA devices (or say why there are none) and exit")
      ->group(kBackend);
  app.add_flag("--profile", o.profile,
               "With --bench or --bench-generate (CPU backend): per op or "
               "kernel kind, time, GB/s, FLOP/s, MBU and MFU against this "
               "CPU's measured peaks (docs/ROOFLINE.md)")
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
  if (o.devices)
    return listDevices();
  if (!o.profileJson.empty())
    o.profile = true;
  if (o.model.empty()) {
    std::cerr << "qrun: error: no artifact given (see --help)\n";
    return 1;
  }

  try {
    Artifact a = Artifact::load(o.model);
    if (o.listKernels)
      return listKernels(a);
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
    std::cerr << "qrun: error: " << e.what() << "\n";
    return 1;
  }
}
