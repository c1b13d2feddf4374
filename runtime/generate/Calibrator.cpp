//===- Calibrator.cpp - activation statistics for W8A8 quantization -------===//
#include "runtime/generate/Calibrator.h"
#include "runtime/core/HalfFloat.h"
#include "runtime/cpu/Session.h"
#include "runtime/core/TensorIO.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

using namespace qcc::rt;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string &m) { throw std::runtime_error(m); }

/// Which nodes are observed, and under which id.
struct Targets {
  std::map<const Node *, int64_t> linears, attentions;
};

Targets findTargets(const Function &fn) {
  Targets t;
  bool tagged = false;
  for (const Node &n : fn.nodes)
    tagged |= n.attrs.is_object() && n.attrs.contains("qcc.calib_id");
  int64_t nl = 0, na = 0;
  for (const Node &n : fn.nodes) {
    if (n.kind != OpKind::Linear && n.kind != OpKind::Attention)
      continue;
    bool lin = n.kind == OpKind::Linear;
    int64_t id;
    if (tagged) {
      if (!n.attrs.contains("qcc.calib_id"))
        continue;
      const json &v = n.attrs.at("qcc.calib_id");
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        fail("node '" + n.name + "': qcc.calib_id must be a non-negative "
             "integer, got " + v.dump());
      id = v.get<int64_t>();
    } else {
      id = lin ? nl++ : na++;
    }
    auto &m = lin ? t.linears : t.attentions;
    for (const auto &[other, oid] : m)
      if (oid == id)
        fail("nodes '" + other->name + "' and '" + n.name + "' have the same "
             "qcc.calib_id " + std::to_string(id));
    m[&n] = id;
  }
  if (t.linears.empty() && t.attentions.empty())
    fail("entry point main has no linear or attention nodes to calibrate");
  return t;
}

/// A uniform sample of `capacity` observed rows of one linear input
/// (reservoir sampling, Vitter's algorithm R). Every input draws from the
/// same seeded generator and sees the same rows in the same order, so all
/// inputs keep the same tokens.
struct Reservoir {
  std::vector<float> rows; // [kept, K]
  int64_t seen = 0;
  int64_t lastBatch = -1;  // q/k/v observe one input three times per run
  uint64_t state = 0x9e3779b97f4a7c15ull;

  uint64_t next() { // splitmix64
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  void add(const float *row, int64_t K, int64_t capacity) {
    int64_t kept = (int64_t)rows.size() / K;
    if (kept < capacity) {
      rows.insert(rows.end(), row, row + K);
    } else {
      uint64_t j = next() % (uint64_t)(seen + 1);
      if (j < (uint64_t)capacity)
        std::copy_n(row, K, rows.begin() + (int64_t)j * K);
    }
    ++seen;
  }
};

/// Running maxima, keyed by calib id; Gram matrices keyed by the input
/// value id (linears reading one value share one).
struct Stats {
  std::map<int64_t, std::vector<float>> input;  // linears: [K]
  std::map<int64_t, std::vector<float>> k, v;   // attentions: [Hkv]
  std::map<int64_t, std::vector<float>> kChannels; // attentions: [Hkv * D]
  bool gram = false;                            // accumulate `grams`?
  std::map<int64_t, std::vector<double>> grams; // [K, K], upper triangle
  int64_t sampleRows = 0;                       // rows kept per input
  std::map<int64_t, Reservoir> samples;         // by input value id
  int64_t batch = 0;                            // runs so far
};

/// H += X^T X over the observed rows of x [rows, K] (upper triangle only;
/// mirrored when written). Blocks of H rows stay in cache while the rows of
/// x stream past.
void accumulateGram(std::vector<double> &H, const float *X, int64_t rows,
                    int64_t K, const std::vector<char> &observed) {
  constexpr int64_t kBlock = 16;
  std::vector<double> xd((size_t)K);
  std::vector<int64_t> kept;
  for (int64_t r = 0; r < rows; ++r)
    if (observed[r])
      kept.push_back(r);
  std::vector<double> Xd((size_t)(kept.size() * K));
  for (size_t i = 0; i < kept.size(); ++i)
    for (int64_t k = 0; k < K; ++k)
      Xd[i * K + k] = X[kept[i] * K + k];
  for (int64_t i0 = 0; i0 < K; i0 += kBlock) {
    int64_t i1 = std::min(K, i0 + kBlock);
    for (size_t r = 0; r < kept.size(); ++r) {
      const double *x = &Xd[r * K];
      for (int64_t i = i0; i < i1; ++i) {
        double a = x[i];
        if (a == 0.0)
          continue;
        double *h = &H[(size_t)(i * K)];
        for (int64_t j = i; j < K; ++j)
          h[j] += a * x[j];
      }
    }
  }
}

void maxInto(std::vector<float> &acc, size_t n) {
  if (acc.empty())
    acc.assign(n, 0.0f);
  else if (acc.size() != n)
    fail("a calibrated node changed its channel count between runs (" +
         std::to_string(acc.size()) + " then " + std::to_string(n) + ")");
}

/// Row r of a [rows, C] view of `x` is observed unless the mask says it is
/// padding. `mask` is [B, S] (as bytes != 0) or empty; rows map onto it when
/// x is [B, S, C] or [B*S, C].
class RowFilter {
public:
  RowFilter(const std::vector<uint8_t> *mask, int64_t B, int64_t S)
      : mask(mask), B(B), S(S) {}
  bool observed(const Tensor &x, int64_t row) const {
    if (!mask)
      return true;
    int64_t rows = x.numel() / std::max<int64_t>(x.dim(-1), 1);
    if (rows != B * S || (x.rank() >= 3 && (x.dim(0) != B || x.dim(1) != S)))
      return true; // not per token: observe everything
    return (*mask)[row];
  }

private:
  const std::vector<uint8_t> *mask;
  int64_t B, S;
};

void observe(const Targets &targets, Stats &stats, const RowFilter &filter,
             const Node &node, const Operands &in) {
  if (auto it = targets.linears.find(&node); it != targets.linears.end()) {
    if (in.empty() || !in[0] ||
        (in[0]->dtype() != DType::F32 && !isHalfFloat(in[0]->dtype())))
      fail("node '" + node.name + "': linear input is not a float");
    const Tensor x = convertFloat(*in[0], DType::F32); // f16/bf16 widened
    int64_t K = x.dim(-1), rows = x.numel() / std::max<int64_t>(K, 1);
    auto &acc = stats.input[it->second];
    maxInto(acc, (size_t)K);
    const float *X = x.data<float>();
    std::vector<char> observed((size_t)rows);
    for (int64_t r = 0; r < rows; ++r) {
      if (!(observed[r] = filter.observed(x, r)))
        continue;
      for (int64_t k = 0; k < K; ++k)
        acc[k] = std::max(acc[k], std::fabs(X[r * K + k]));
    }
    if (stats.gram) {
      auto &H = stats.grams[node.inputs.at(0)];
      if (H.empty())
        H.assign((size_t)(K * K), 0.0);
      else if (H.size() != (size_t)(K * K))
        fail("node '" + node.name + "': its input changed width between "
             "runs");
      accumulateGram(H, X, rows, K, observed);
    }
    if (stats.sampleRows > 0) {
      Reservoir &res = stats.samples[node.inputs.at(0)];
      if (!res.rows.empty() && res.rows.size() % (size_t)K != 0)
        fail("node '" + node.name + "': its input changed width between "
             "runs");
      if (res.lastBatch != stats.batch) {
        res.lastBatch = stats.batch;
        for (int64_t r = 0; r < rows; ++r)
          if (observed[r])
            res.add(X + r * K, K, stats.sampleRows);
      }
    }
    return;
  }
  auto it = targets.attentions.find(&node);
  if (it == targets.attentions.end())
    return;
  int64_t Hkv = node.attrs.value("num_kv_heads", (int64_t)0);
  for (int which : {1, 2}) {
    const Tensor *kv = (int64_t)in.size() > which ? in[which] : nullptr;
    if (!kv || (kv->dtype() != DType::F32 && !isHalfFloat(kv->dtype())) ||
        kv->rank() != 3)
      fail("node '" + node.name + "': attention key/value must be float "
           "[B, S, Hkv*D]");
    const Tensor t = convertFloat(*kv, DType::F32);
    int64_t C = t.dim(2), rows = t.dim(0) * t.dim(1);
    if (Hkv <= 0 || C % Hkv != 0)
      fail("node '" + node.name + "': num_kv_heads " + std::to_string(Hkv) +
           " does not divide " + std::to_string(C) + " channels");
    int64_t D = C / Hkv;
    auto &acc = (which == 1 ? stats.k : stats.v)[it->second];
    maxInto(acc, (size_t)Hkv);
    // Keys also per channel (--kv-scales=kivi: keys' outliers sit in fixed
    // channels, KIVI section 3).
    auto &channels = stats.kChannels[it->second];
    if (which == 1)
      maxInto(channels, (size_t)C);
    const float *X = t.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      if (!filter.observed(t, r))
        continue;
      for (int64_t g = 0; g < Hkv; ++g)
        for (int64_t d = 0; d < D; ++d) {
          float x = std::fabs(X[r * C + g * D + d]);
          acc[g] = std::max(acc[g], x);
          if (which == 1)
            channels[g * D + d] = std::max(channels[g * D + d], x);
        }
    }
  }
}

/// The first dim's rows [begin, end) of `t`, copied.
Tensor sliceRows(const Tensor &t, int64_t begin, int64_t end) {
  Shape s = t.shape();
  s[0] = end - begin;
  Tensor r(t.dtype(), s);
  size_t rowBytes = t.bytes() / (size_t)std::max<int64_t>(t.dim(0), 1);
  std::memcpy(r.data<std::byte>(),
              static_cast<const std::byte *>(t.raw()) + begin * rowBytes,
              r.bytes());
  return r;
}

/// A [B, S] mask as bytes (nonzero = observed).
std::vector<uint8_t> maskBytes(const Tensor &m) {
  std::vector<uint8_t> out((size_t)m.numel());
  for (int64_t i = 0; i < m.numel(); ++i) {
    switch (m.dtype()) {
    case DType::I64: out[i] = m.data<int64_t>()[i] != 0; break;
    case DType::I32: out[i] = m.data<int32_t>()[i] != 0; break;
    case DType::F32: out[i] = m.data<float>()[i] != 0.0f; break;
    case DType::I8:
    case DType::Bool: out[i] = m.data<uint8_t>()[i] != 0; break;
    default: fail("attention_mask: unsupported dtype");
    }
  }
  return out;
}

json floats(const std::vector<float> &v) {
  json a = json::array();
  for (float x : v)
    a.push_back(x);
  return a;
}

/// The token-id input of `fn` and its attention_mask (or null).
std::pair<const Port *, const Port *> textPorts(const Function &fn) {
  const Port *ids = nullptr, *mask = nullptr;
  for (const Port &p : fn.inputs) {
    if (p.name == "attention_mask" && p.shape.size() == 2)
      mask = &p;
    else if (!ids && p.dtype == DType::I64 && p.shape.size() == 2)
      ids = &p;
    else
      fail("text calibration needs a model whose inputs are int64 token ids "
           "[batch, seq] (and optionally attention_mask); input '" + p.name +
           "' is neither (use a folder of .npy inputs)");
  }
  if (!ids)
    fail("text calibration needs an int64 token-id input [batch, seq]");
  return {ids, mask};
}

/// A binary file beside the statistics JSON holding one tensor per distinct
/// linear input (linears reading one value share it), one after another;
/// the JSON lists them with their byte offsets.
class Sidecar {
public:
  explicit Sidecar(const std::string &path) : path(path), f(path, std::ios::binary) {
    if (!f)
      fail("cannot write " + path);
  }
  /// The index of input `input`'s tensor; the first time, `write(entry)`
  /// fills its JSON entry and writes it (returning its bytes).
  template <typename Write> size_t indexOf(int64_t input, Write write) {
    auto [it, added] = index.try_emplace(input, sets.size());
    if (added) {
      json entry;
      uint64_t bytes = write(entry);
      entry["offset"] = offset;
      offset += bytes;
      sets.push_back(std::move(entry));
    }
    return it->second;
  }
  template <typename T> uint64_t write(const std::vector<T> &v) {
    f.write(reinterpret_cast<const char *>(v.data()),
            (std::streamsize)(v.size() * sizeof(T)));
    return v.size() * sizeof(T);
  }
  /// Adds the list (as `setsKey`) and the file name (as `fileKey`) to `out`.
  void finish(json &out, const char *setsKey, const char *fileKey) {
    f.flush();
    if (!f)
      fail("cannot write " + path);
    out[setsKey] = sets;
    out[fileKey] = fs::path(path).filename().string();
  }

private:
  std::string path;
  std::ofstream f;
  json sets = json::array();
  std::map<int64_t, size_t> index; // input value id -> sets[i]
  uint64_t offset = 0;
};

} // namespace

void qcc::rt::checkTextInputs(const Function &fn) { textPorts(fn); }

std::vector<CalibrationBatch>
qcc::rt::textBatches(const Function &fn, const std::vector<int64_t> &tokens,
                     int64_t samples, int64_t seqLen,
                     const std::string &source) {
  auto [ids, mask] = textPorts(fn);
  int64_t T = (int64_t)tokens.size(), L = seqLen, N = samples;
  if (T < L)
    fail(source + ": " + std::to_string(T) + " tokens, fewer than --seq-len " +
         std::to_string(L));
  std::vector<CalibrationBatch> out;
  for (int64_t first = 0; first < N; first += kCalibrationBatch) {
    int64_t bs = std::min(kCalibrationBatch, N - first);
    Tensor t(DType::I64, {bs, L});
    for (int64_t i = 0; i < bs; ++i) {
      int64_t w = first + i;
      int64_t start = N == 1 ? 0 : w * (T - L) / (N - 1);
      std::copy_n(tokens.begin() + start, L, t.data<int64_t>() + i * L);
    }
    CalibrationBatch b{{ids->name, t}};
    if (mask) {
      Tensor m(mask->dtype, {bs, L});
      // Fill with ones of the mask's type.
      for (int64_t i = 0; i < bs * L; ++i) {
        switch (mask->dtype) {
        case DType::I64: m.data<int64_t>()[i] = 1; break;
        case DType::I32: m.data<int32_t>()[i] = 1; break;
        case DType::F32: m.data<float>()[i] = 1.0f; break;
        default: m.data<uint8_t>()[i] = 1; break;
        }
      }
      b.emplace(mask->name, m);
    }
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<CalibrationBatch>
qcc::rt::npyBatches(const Function &fn, const std::string &folder,
                    int64_t &samples, int64_t &seqLen, bool quiet) {
  std::map<std::string, Tensor> all;
  int64_t avail = -1;
  for (const Port &p : fn.inputs) {
    fs::path f = fs::path(folder) / (p.name + ".npy");
    if (!fs::exists(f))
      fail(folder + ": no " + p.name + ".npy for model input '" + p.name +
           "'");
    Tensor t = readTensorFile(f.string());
    if (t.rank() < 1)
      fail(f.string() + ": needs a first dimension over samples");
    if (avail >= 0 && t.dim(0) != avail)
      fail(f.string() + ": " + std::to_string(t.dim(0)) + " samples, but " +
           std::to_string(avail) + " in the other inputs");
    avail = t.dim(0);
    all.emplace(p.name, std::move(t));
  }
  if (avail <= 0)
    fail(folder + ": no samples");
  if (avail < samples) {
    if (!quiet)
      std::cerr << "qcc-calib: " << folder << " holds " << avail
                << " samples; using them all\n";
    samples = avail;
  }
  const Tensor &first = all.begin()->second;
  seqLen = first.rank() >= 2 ? first.dim(1) : 1;
  std::vector<CalibrationBatch> out;
  for (int64_t b = 0; b < samples; b += kCalibrationBatch) {
    int64_t e = std::min(samples, b + kCalibrationBatch);
    CalibrationBatch batch;
    for (const auto &[name, t] : all)
      batch.emplace(name, sliceRows(t, b, e));
    out.push_back(std::move(batch));
  }
  return out;
}

struct Calibrator::State {
  State(const Artifact &a, bool gram, int64_t sampleRows)
      : targets(findTargets(a.function("main"))), session(a) {
    stats.gram = gram;
    stats.sampleRows = sampleRows;
  }
  Targets targets;
  Stats stats;
  Session session;
};

Calibrator::Calibrator(const Artifact &a, bool pruningStats,
                       int64_t sampleRows)
    : state(std::make_unique<State>(a, pruningStats, sampleRows)) {}
Calibrator::~Calibrator() = default;
size_t Calibrator::linears() const { return state->targets.linears.size(); }
size_t Calibrator::attentions() const {
  return state->targets.attentions.size();
}

int64_t Calibrator::run(const CalibrationBatch &b) {
  std::vector<uint8_t> mask;
  int64_t B = b.begin()->second.dim(0), S = 0;
  bool masked = false;
  if (auto it = b.find("attention_mask"); it != b.end()) {
    if (it->second.rank() != 2)
      fail("attention_mask must be [batch, seq], got " +
           shapeString(it->second.shape()));
    mask = maskBytes(it->second);
    B = it->second.dim(0);
    S = it->second.dim(1);
    masked = true;
  }
  RowFilter filter(masked ? &mask : nullptr, B, S);
  state->session.setObserver([&](const Node &node, const Operands &in,
                                 const std::vector<Tensor> &) {
    observe(state->targets, state->stats, filter, node, in);
  });
  state->session.run("main", b);
  ++state->stats.batch;
  return B;
}

json Calibrator::statistics(int64_t samples, int64_t seqLen,
                            const std::string &gramPath,
                            const std::string &samplePath) const {
  const Targets &targets = state->targets;
  const Stats &stats = state->stats;
  json out = {{"samples", samples},
              {"seq_len", seqLen},
              {"linears", json::object()},
              {"attentions", json::object()}};
  for (const auto &[node, id] : targets.linears) {
    auto it = stats.input.find(id);
    if (it == stats.input.end())
      fail("linear '" + node->name + "' (qcc.calib_id " + std::to_string(id) +
           ") never ran");
    out["linears"][std::to_string(id)] = {{"input_absmax", floats(it->second)}};
  }
  if (stats.gram) {
    if (gramPath.empty())
      fail("pruning statistics need a file for the Gram matrices");
    Sidecar file(gramPath);
    for (const auto &[node, id] : targets.linears) {
      int64_t input = node->inputs.at(0);
      const std::vector<double> &H = stats.grams.at(input);
      int64_t K = (int64_t)stats.input.at(id).size();
      json &l = out["linears"][std::to_string(id)];
      l["gram"] = file.indexOf(input, [&](json &entry) {
        // Mirror the upper triangle and write the full matrix.
        std::vector<double> full(H);
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < i; ++j)
            full[i * K + j] = full[j * K + i];
        entry = {{"k", K}};
        return file.write(full);
      });
      std::vector<float> norms((size_t)K);
      for (int64_t j = 0; j < K; ++j)
        norms[j] = (float)std::sqrt(std::max(H[j * K + j], 0.0));
      l["input_l2norm"] = floats(norms);
    }
    file.finish(out, "grams", "gram_file");
  }
  if (stats.sampleRows > 0) {
    if (samplePath.empty())
      fail("activation samples need a file for the rows");
    Sidecar file(samplePath);
    for (const auto &[node, id] : targets.linears) {
      int64_t input = node->inputs.at(0);
      int64_t K = (int64_t)stats.input.at(id).size();
      out["linears"][std::to_string(id)]["samples"] =
          file.indexOf(input, [&](json &entry) {
            const std::vector<float> &rows = stats.samples.at(input).rows;
            entry = {{"k", K},
                     {"rows", (int64_t)rows.size() / std::max<int64_t>(K, 1)}};
            return file.write(rows);
          });
    }
    file.finish(out, "sample_sets", "sample_file");
  }
  for (const auto &[node, id] : targets.attentions) {
    if (!stats.k.count(id))
      fail("attention '" + node->name + "' (qcc.calib_id " +
           std::to_string(id) + ") never ran");
    out["attentions"][std::to_string(id)] = {
        {"k_absmax", floats(stats.k.at(id))},
        {"v_absmax", floats(stats.v.at(id))},
        {"k_channel_absmax", floats(stats.kChannels.at(id))}};
  }
  return out;
}
