//===- RooflineReport.cpp - qcc --report ----------------------------------===//
#include "report/RooflineReport.h"

#include "compiler/ArtifactWriter.h"
#include "compiler/Pipeline.h"
#include "runtime/cpu/Session.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace qcc;
using nlohmann::json;

namespace {

llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

bool contains(const std::string &s, const char *part) {
  return s.find(part) != std::string::npos;
}

/// Inputs for one call of `fn`: `batch` rows of `tokens` new tokens after
/// `cached` ones. Dynamic dimensions: the first (or one named *batch*) is
/// the batch, one named *past* the cached tokens (a sum such as optimum's
/// "past_sequence_length + sequence_length", an attention mask's, the
/// cached and the new ones), any other the new tokens.
/// Masks are ones, positions count from `cached`, everything else zeros
/// (token id 0).
std::map<std::string, rt::Tensor> inputsFor(const rt::Function &fn,
                                            int64_t batch, int64_t tokens,
                                            int64_t cached) {
  std::map<std::string, rt::Tensor> inputs;
  for (const rt::Port &p : fn.inputs) {
    rt::Shape shape = p.shape;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] >= 0)
        continue;
      std::string dim = i < p.dims.size() ? p.dims[i] : "";
      shape[i] = i == 0 || contains(dim, "batch") ? batch
                 : contains(dim, "past") && contains(dim, "+") ? cached + tokens
                 : contains(dim, "past")                        ? cached
                                                                : tokens;
    }
    rt::Tensor t(p.dtype, shape);
    bool mask = contains(p.name, "mask"), pos = contains(p.name, "position");
    if ((mask || pos) && !shape.empty() &&
        (p.dtype == rt::DType::I64 || p.dtype == rt::DType::I32)) {
      int64_t n = t.numel(), last = shape.back();
      for (int64_t i = 0; i < n; ++i) {
        int64_t v = mask ? 1 : cached + i % std::max<int64_t>(1, last);
        if (p.dtype == rt::DType::I64)
          t.data<int64_t>()[i] = v;
        else
          t.data<int32_t>()[i] = (int32_t)v;
      }
    }
    inputs[p.name] = std::move(t);
  }
  return inputs;
}

/// Runs `fn` of the GPU plan shape-only and collects its regions.
RooflineFunction analyze(const rt::Artifact &a, const rt::Function &fn,
                         const RooflineReport &r) {
  RooflineFunction out;
  out.name = fn.name;
  out.batch = r.options.batch;
  bool cachedFn = r.kvElementBytes > 0 &&
                  (fn.name == "prefill" || fn.name == "decode");
  out.cached = fn.name == "decode" ? r.options.context : 0;
  out.tokens = fn.name == "decode" ? 1 : r.options.context;
  // A static sequence dimension wins over the assumption.
  if (!fn.inputs.empty() && fn.inputs[0].shape.size() == 2 &&
      fn.inputs[0].shape[1] > 0)
    out.tokens = fn.inputs[0].shape[1];
  if (!fn.inputs.empty() && !fn.inputs[0].shape.empty() &&
      fn.inputs[0].shape[0] > 0)
    out.batch = fn.inputs[0].shape[0];

  rt::Session session(a);
  session.setPlan(rt::Session::Plan::Kernels);
  session.setShapeOnly(true);
  session.setTracer([&](const rt::Session::NodeRun &run) {
    RooflineKernel k;
    k.region = run.node.name;
    if (run.node.body) {
      k.kind = run.node.attrs.value("kind", "kernel");
      for (const rt::Node &inner : run.node.body->nodes)
        k.ops.push_back(rt::opKindName(inner.kind));
    } else if (run.cost.flops > 0) {
      k.kind = "host";
      k.ops.push_back(rt::opKindName(run.node.kind));
    } else {
      ++out.glueNodes;
      return;
    }
    k.cost = run.cost;
    out.kernels.push_back(std::move(k));
  });
  auto inputs = inputsFor(fn, out.batch, out.tokens, out.cached);
  if (cachedFn) {
    const rt::KvCacheConfig &cfg = *a.kvCache();
    rt::KvCacheOptions o;
    int64_t total = out.cached + out.tokens;
    int64_t unit = cfg.roundingTokens();
    o.maxSequences = out.batch;
    o.maxTokens = (total + unit - 1) / unit * unit;
    o.numBlocks = out.batch * (o.maxTokens / unit);
    rt::KvCache cache(cfg, o);
    rt::KvBatch kv{&cache, {}, std::vector<int64_t>(out.batch, out.tokens)};
    for (int64_t b = 0; b < out.batch; ++b) {
      int64_t seq = cache.addSequence();
      cache.reserve(seq, out.cached);
      cache.advance(seq, out.cached);
      kv.seqs.push_back(seq);
    }
    session.run(fn.name, inputs, &kv);
  } else {
    session.run(fn.name, inputs);
  }
  out.seconds.assign(r.targets.size(), 0);
  for (RooflineKernel &k : out.kernels) {
    for (const rt::Peaks &p : r.targets)
      k.seconds.push_back(rt::rooflineSeconds(k.cost, p));
    for (size_t t = 0; t < r.targets.size(); ++t)
      out.seconds[t] += k.seconds[t];
    out.total += k.cost;
  }
  return out;
}

/// 1234567 -> "1.23M" (3 significant digits; SI prefixes).
std::string human(double v) {
  static const char *prefixes[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (std::abs(v) >= 999.5 && i < 5)
    v /= 1000, ++i;
  if (i == 0 && v == std::floor(v))
    return std::to_string((int64_t)v);
  const char *digits = v >= 99.95 ? "%.0f" : v >= 9.995 ? "%.1f" : "%.2f";
  return llvm::formatv("{0}{1}", llvm::format(digits, v), prefixes[i]).str();
}

/// Seconds as microseconds (3 significant digits, at least 3 decimals
/// below 1), "*" when `c` (if given) is compute-bound on `p`.
std::string micros(double secs, const rt::Cost *c, const rt::Peaks &p) {
  double us = secs * 1e6;
  bool compute =
      c && c->flops / p.compute(c->precision) > c->bytes() / p.bandwidth;
  const char *digits = us >= 99.95   ? "%.0f"
                       : us >= 9.995 ? "%.1f"
                       : us >= 0.9995 ? "%.2f"
                                      : "%.3f";
  return llvm::formatv("{0}{1}", llvm::format(digits, us), compute ? "*" : " ")
      .str();
}

std::string join(const std::vector<std::string> &parts) {
  std::string s;
  for (const std::string &p : parts)
    s += (s.empty() ? "" : "+") + p;
  return s;
}

std::string callText(const RooflineFunction &f) {
  if (f.name == "decode")
    return llvm::formatv("batch {0}, 1 new token per sequence over {1} "
                         "cached tokens",
                         f.batch, f.cached)
        .str();
  return llvm::formatv("batch {0}, {1} tokens per sequence", f.batch,
                       f.tokens)
      .str();
}

json costJson(const rt::Cost &c, const std::vector<double> &seconds,
              const std::vector<rt::Peaks> &targets) {
  json j{{"precision", rt::precisionName(c.precision)},
         {"flops", c.flops},
         {"weight_bytes", c.weightBytes},
         {"activation_bytes", c.activationBytes},
         {"kv_bytes", c.kvBytes},
         {"bytes", c.bytes()},
         {"intensity", c.intensity()}};
  json secs = json::object(), bound = json::object();
  for (size_t t = 0; t < targets.size() && t < seconds.size(); ++t) {
    const rt::Peaks &p = targets[t];
    secs[p.name] = seconds[t];
    bound[p.name] = c.flops / p.compute(c.precision) > c.bytes() / p.bandwidth
                        ? "compute"
                        : "memory";
  }
  j["seconds"] = secs;
  j["bound"] = bound;
  return j;
}

} // namespace

SparseLinears qcc::sparseLinearReport(const rt::Artifact &a,
                                      const RooflineOptions &options,
                                      const std::vector<rt::Peaks> &targets) {
  SparseLinears out;
  out.decodeRows = options.batch;
  out.prefillRows = options.batch * options.context;
  const rt::Function *fn = nullptr;
  for (const char *name : {"prefill", "main", "decode"})
    for (const rt::Function &f : a.functions())
      if (!fn && f.name == name)
        fn = &f;
  if (!fn)
    return out;
  auto times = [&](const rt::Cost &c) {
    std::vector<double> t;
    for (const rt::Peaks &p : targets)
      t.push_back(rt::rooflineSeconds(c, p));
    return t;
  };
  std::vector<double> decodeDense(targets.size()), decodeSparse(targets.size()),
      prefillDense(targets.size()), prefillSparse(targets.size());
  auto speedup = [&](const rt::SparseLinearCost &c, std::vector<double> &dense,
                     std::vector<double> &sparse) {
    std::vector<double> d = times(c.dense), s = times(c.sparse), x;
    for (size_t t = 0; t < targets.size(); ++t) {
      dense[t] += d[t];
      sparse[t] += s[t];
      x.push_back(s[t] > 0 ? d[t] / s[t] : 0);
    }
    return x;
  };
  for (auto &[index, weight] : rt::compressedWeights(a, *fn)) {
    const rt::Node &node = fn->nodes[index];
    SparseLinearRow r;
    r.node = node.name;
    r.op = rt::opKindName(node.kind);
    r.n = weight.values->dim(0);
    r.k = weight.values->dim(1) * 2;
    r.decode = rt::sparseLinearCost(a, node, weight, out.decodeRows);
    r.prefill = rt::sparseLinearCost(a, node, weight, out.prefillRows);
    r.decodeSpeedup = speedup(r.decode, decodeDense, decodeSparse);
    r.prefillSpeedup = speedup(r.prefill, prefillDense, prefillSparse);
    out.total.decode.dense += r.decode.dense;
    out.total.decode.sparse += r.decode.sparse;
    out.total.prefill.dense += r.prefill.dense;
    out.total.prefill.sparse += r.prefill.sparse;
    out.rows.push_back(std::move(r));
  }
  out.total.node = "total";
  for (size_t t = 0; t < targets.size(); ++t) {
    out.total.decodeSpeedup.push_back(
        decodeSparse[t] > 0 ? decodeDense[t] / decodeSparse[t] : 0);
    out.total.prefillSpeedup.push_back(
        prefillSparse[t] > 0 ? prefillDense[t] / prefillSparse[t] : 0);
  }
  return out;
}

llvm::Expected<RooflineReport>
qcc::buildRooflineReport(mlir::ModuleOp module, llvm::StringRef model,
                         const RooflineOptions &options) {
  if (options.batch < 1 || options.context < 1)
    return error("--report-batch and --report-context must be at least 1");
  auto plan = formKernelPlan(module);
  if (!plan)
    return plan.takeError();
  ArtifactOptions ao;
  ao.sourceName = model.str();
  ao.gpuPlan = **plan;
  auto bytes = serializeArtifact(module, model, ao);
  if (!bytes)
    return bytes.takeError();
  RooflineReport r;
  r.model = model.str();
  r.options = options;
  try {
    rt::Artifact a = rt::Artifact::fromBytes(
        std::make_shared<std::vector<char>>(std::move(*bytes)), model.str());
    if (a.kvCache()) {
      const rt::KvCacheConfig &cfg = *a.kvCache();
      r.kvElementBytes = (double)cfg.elementBytes();
      if (cfg.maxPositions > 0 && r.options.context >= cfg.maxPositions) {
        r.options.context = cfg.maxPositions - 1;
        r.note = llvm::formatv("context capped at {0} tokens: the model has "
                               "{1} positions",
                               r.options.context, cfg.maxPositions)
                     .str();
      }
    }
    r.targets = rt::gpuPeaks();
    if (options.cpu)
      r.targets.push_back(rt::cpuPeaks());
    auto analyzeAll = [&](RooflineReport &at) {
      at.functions.clear();
      for (const char *name : {"main", "prefill", "decode"})
        if (const rt::Function *fn = a.gpuFunction(name))
          at.functions.push_back(analyze(a, *fn, at));
    };
    try {
      analyzeAll(r);
    } catch (const std::exception &e) {
      // A model whose shapes hold only up to its own limit (an encoder's
      // learned positions, a bias table): the longest context below the
      // asked one at which they hold, found by bisection, and a note that
      // says so; none at all is the error.
      std::string why = e.what();
      int64_t good = 0, bad = r.options.context;
      while (bad - good > 1) {
        RooflineReport probe = r;
        probe.options.context = good + (bad - good) / 2;
        try {
          analyzeAll(probe);
          good = probe.options.context;
        } catch (const std::exception &) {
          bad = probe.options.context;
        }
      }
      if (good == 0)
        throw;
      r.note = llvm::formatv("context capped at {0} tokens, the longest at "
                             "which the model's shapes hold (at {1}: {2})",
                             good, r.options.context, why)
                   .str();
      r.options.context = good;
      analyzeAll(r);
    }
    r.sparse = sparseLinearReport(a, r.options, rt::gpuPeaks());
  } catch (const std::exception &e) {
    return error(model + ": roofline report: " + e.what());
  }
  return r;
}

static void printSparseLinears(const RooflineReport &r,
                               llvm::raw_ostream &os) {
  const SparseLinears &s = r.sparse;
  if (s.rows.empty())
    return;
  const std::vector<rt::Peaks> &gpus = rt::gpuPeaks();
  os << "\n2:4 sparse linears, dense -> compressed (weights: values + "
        "metadata; FLOPs: the multiply-adds run; decode "
     << s.decodeRows << " rows, prefill " << s.prefillRows
     << " rows; speedup = dense / sparse roofline time)\n";
  os << llvm::formatv("  {0,-24} {1,-7} {2,11} {3,17} {4,17}", "linear", "op",
                      "N x K", "weight B", "prefill FLOPs");
  for (const rt::Peaks &p : gpus)
    os << llvm::formatv(" {0,8} {1,8}", p.name + " dec", p.name + " pre");
  os << "\n";
  auto row = [&](const SparseLinearRow &l, llvm::StringRef shape) {
    os << llvm::formatv(
        "  {0,-24} {1,-7} {2,11} {3,17} {4,17}", l.node, l.op, shape,
        human(l.decode.dense.weightBytes) + " -> " +
            human(l.decode.sparse.weightBytes),
        human(l.prefill.dense.flops) + " -> " + human(l.prefill.sparse.flops));
    for (size_t t = 0; t < gpus.size(); ++t)
      os << llvm::formatv(" {0,8} {1,8}",
                          llvm::formatv("{0:F2}x", l.decodeSpeedup[t]).str(),
                          llvm::formatv("{0:F2}x", l.prefillSpeedup[t]).str());
    os << "\n";
  };
  for (const SparseLinearRow &l : s.rows)
    row(l, llvm::formatv("{0}x{1}", l.n, l.k).str());
  row(s.total, llvm::formatv("{0} linears", s.rows.size()).str());
}

void qcc::printRooflineReport(const RooflineReport &r, llvm::raw_ostream &os) {
  os << "roofline report for " << r.model
     << " (counts: docs/ROOFLINE.md; time = max(FLOPs / peak, bytes / "
        "bandwidth); * = compute-bound)\n";
  for (const rt::Peaks &p : r.targets)
    os << llvm::formatv("  {0,-5} {1,8}B/s  f16 {2,7}FLOP/s  i8 {3,7}OP/s  "
                        "f32 {4,7}FLOP/s  ({5})\n",
                        p.name, human(p.bandwidth), human(p.f16), human(p.i8),
                        human(p.f32), p.source);
  if (!r.note.empty())
    os << "  note: " << r.note << "\n";
  for (const RooflineFunction &f : r.functions) {
    os << "\n" << f.name << ": " << callText(f);
    if (r.kvElementBytes > 0 && f.name != "main")
      os << llvm::formatv(" (KV cache {0} bytes per element)",
                          (int64_t)r.kvElementBytes);
    os << "\n";
    os << llvm::formatv("  {0,-6} {1,-13} {2,-4} {3,8} {4,8} {5,8} {6,8} "
                        "{7,7}",
                        "region", "kind", "prec", "FLOPs", "weights",
                        "act B", "KV B", "FLOP/B");
    for (const rt::Peaks &p : r.targets)
      os << llvm::formatv(" {0,10}", p.name + " us");
    os << "  ops\n";
    auto row = [&](llvm::StringRef region, llvm::StringRef kind,
                   const rt::Cost &c, const std::vector<double> &seconds,
                   llvm::StringRef ops, bool bound) {
      os << llvm::formatv("  {0,-6} {1,-13} {2,-4} {3,8} {4,8} {5,8} {6,8} "
                          "{7,7}",
                          region, kind, rt::precisionName(c.precision),
                          human(c.flops), human(c.weightBytes),
                          human(c.activationBytes), human(c.kvBytes),
                          llvm::format("%.2f", c.intensity()));
      for (size_t t = 0; t < r.targets.size(); ++t)
        os << llvm::formatv(
            " {0,10}", micros(seconds[t], bound ? &c : nullptr, r.targets[t]));
      os << "  " << ops << "\n";
    };
    for (const RooflineKernel &k : f.kernels)
      row(k.region, k.kind, k.cost, k.seconds, join(k.ops), true);
    row("total", llvm::formatv("{0} kernels", f.kernels.size()).str(),
        f.total, f.seconds,
        llvm::formatv("(+{0} glue nodes on the host)", f.glueNodes).str(),
        false);
    int64_t tokens = f.batch * f.tokens;
    os << "  roofline tokens/s:";
    for (size_t t = 0; t < r.targets.size(); ++t)
      os << " " << r.targets[t].name << " "
         << human(f.seconds[t] > 0 ? tokens / f.seconds[t] : 0);
    os << "\n";
    if (f.name == "decode") {
      os << "  decode step at the bandwidth limit (" << human(f.total.bytes())
         << "B per step), tokens/s:";
      for (const rt::Peaks &p : r.targets)
        os << " " << p.name << " "
           << human(tokens * p.bandwidth / f.total.bytes());
      os << "\n";
    }
  }
  printSparseLinears(r, os);
}

json qcc::rooflineReportJson(const RooflineReport &r) {
  json targets = json::array();
  for (const rt::Peaks &p : r.targets)
    targets.push_back({{"name", p.name},
                       {"bandwidth", p.bandwidth},
                       {"f32", p.f32},
                       {"f16", p.f16},
                       {"i8", p.i8},
                       {"source", p.source}});
  json functions = json::array();
  for (const RooflineFunction &f : r.functions) {
    json kernels = json::array();
    for (const RooflineKernel &k : f.kernels) {
      json j = costJson(k.cost, k.seconds, r.targets);
      j["region"] = k.region;
      j["kind"] = k.kind;
      j["ops"] = k.ops;
      kernels.push_back(j);
    }
    json fj{{"name", f.name},
            {"batch", f.batch},
            {"tokens", f.tokens},
            {"cached", f.cached},
            {"glue_nodes", f.glueNodes},
            {"kernels", kernels},
            {"total", costJson(f.total, f.seconds, r.targets)}};
    json tps = json::object(), bw = json::object();
    double tokens = (double)(f.batch * f.tokens);
    for (size_t t = 0; t < r.targets.size(); ++t) {
      tps[r.targets[t].name] = f.seconds[t] > 0 ? tokens / f.seconds[t] : 0;
      bw[r.targets[t].name] = f.total.bytes() > 0
                                  ? tokens * r.targets[t].bandwidth /
                                        f.total.bytes()
                                  : 0;
    }
    fj["tokens_per_second"] = tps;
    fj["tokens_per_second_at_bandwidth"] = bw;
    functions.push_back(fj);
  }
  json j{{"schema", "qcc-roofline/1"},
         {"model", r.model},
         {"batch", r.options.batch},
         {"context", r.options.context},
         {"kv_element_bytes", r.kvElementBytes},
         {"targets", targets},
         {"functions", functions}};
  if (!r.note.empty())
    j["note"] = r.note;
  if (!r.sparse.rows.empty()) {
    const std::vector<rt::Peaks> &gpus = rt::gpuPeaks();
    auto rowJson = [&](const SparseLinearRow &l) {
      json dec = json::object(), pre = json::object();
      for (size_t t = 0; t < gpus.size(); ++t) {
        dec[gpus[t].name] = l.decodeSpeedup[t];
        pre[gpus[t].name] = l.prefillSpeedup[t];
      }
      auto side = [](const rt::Cost &c) {
        return json{{"flops", c.flops},
                    {"weight_bytes", c.weightBytes},
                    {"activation_bytes", c.activationBytes}};
      };
      return json{{"node", l.node},
                  {"op", l.op},
                  {"n", l.n},
                  {"k", l.k},
                  {"decode", {{"dense", side(l.decode.dense)},
                              {"sparse", side(l.decode.sparse)},
                              {"speedup", dec}}},
                  {"prefill", {{"dense", side(l.prefill.dense)},
                               {"sparse", side(l.prefill.sparse)},
                               {"speedup", pre}}}};
    };
    json rows = json::array();
    for (const SparseLinearRow &l : r.sparse.rows)
      rows.push_back(rowJson(l));
    json total = rowJson(r.sparse.total);
    total.erase("n");
    total.erase("k");
    total.erase("op");
    total.erase("node");
    j["sparse_linears"] = {{"decode_rows", r.sparse.decodeRows},
                           {"prefill_rows", r.sparse.prefillRows},
                           {"linears", rows},
                           {"total", total}};
  }
  return j;
}
