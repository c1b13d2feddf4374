//===- Roofline.cpp - FLOPs, bytes and roofline times of kernels ----------===//
#include "runtime/core/Roofline.h"

#include "runtime/core/ShapeInference.h"


#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>

using namespace qcc::rt;

const char *qcc::rt::precisionName(Precision p) {
  switch (p) {
  case Precision::F32:
    return "f32";
  case Precision::F16:
    return "f16";
  case Precision::I8:
    return "i8";
  }
  return "?";
}

Cost &Cost::operator+=(const Cost &o) {
  flops += o.flops;
  weightBytes += o.weightBytes;
  activationBytes += o.activationBytes;
  kvBytes += o.kvBytes;
  precision = std::max(precision, o.precision);
  return *this;
}

namespace {

double elements(const Shape &s) { return (double)numElements(s); }

/// Attended (query, key) pairs of one head of one row: query i (of `nq`)
/// sits at key position i + offset and sees keys [lo, hi] of `nk`.
double attendedPairs(int64_t nq, int64_t nk, int64_t offset, bool causal,
                     int64_t window) {
  double pairs = 0;
  for (int64_t i = 0; i < nq; ++i) {
    int64_t hi = causal ? std::min(nk - 1, i + offset) : nk - 1;
    int64_t lo = window > 0 ? std::max<int64_t>(0, i + offset - window + 1) : 0;
    pairs += (double)std::max<int64_t>(0, hi - lo + 1);
  }
  return pairs;
}

/// Per-row (cached, valid) of a kv_attention call over `batch` rows of
/// `seq` tokens (without a KV state: nothing cached, every token valid).
std::pair<int64_t, int64_t> kvRow(const KvState *kv, size_t b, int64_t seq) {
  if (!kv || b >= kv->cached.size() || b >= kv->valid.size())
    return {0, seq};
  return {kv->cached[b], kv->valid[b]};
}

/// The precision an op's FLOPs run at on the GPU: the GEMMs on tensor
/// cores, everything else in f32.
Precision precisionOf(OpKind op) {
  if (op == OpKind::QLinear)
    return Precision::I8;
  if (op == OpKind::Linear || op == OpKind::Moe || op == OpKind::MatMul ||
      op == OpKind::Gemm)
    return Precision::F16;
  return Precision::F32;
}

/// KV cache bytes of a kv_attention op: K and V of the cached tokens it
/// reads (the last `window` only, with a window) and of the tokens it
/// appends.
double kvBytes(const Node &n, const std::vector<Shape> &ops,
               const KvState *kv) {
  if (!kv)
    return 0;
  const Shape &k = operandShape(n, ops, 1, 3);
  int64_t window = n.attrs.value("window", int64_t(0));
  double tokens = 0;
  for (int64_t b = 0; b < k[0]; ++b) {
    auto [cached, valid] = kvRow(kv, b, k[1]);
    tokens += (double)(window > 0 ? std::min(cached, window) : cached) + valid;
  }
  double kvHeads = (double)n.attrs.value("num_kv_heads", int64_t(0));
  return tokens * (2.0 * (double)k[2] * kv->elementBytes +
                   kvHeads * kv->rowScaleBytes);
}

} // namespace

double qcc::rt::opFlops(const Node &n, const std::vector<Shape> &ops,
                        const std::vector<Shape> &results, const KvState *kv) {
  auto perElement = [&](double flops) {
    return results.empty() ? 0 : flops * elements(results[0]);
  };
  // No default: a new OpKind without a case does not compile (-Wswitch).
  switch (n.kind) {
  case OpKind::Linear:
  case OpKind::QLinear: {
    const Shape &x = operandShape(n, ops, 0, 1);
    const Shape &w = operandShape(n, ops, weightOperand(n.kind), 2);
    double k = (double)x.back();
    return 2.0 * (elements(x) / std::max(1.0, k)) * (double)w[0] * k;
  }
  case OpKind::Lora: {
    // Every row adapted: x A^T (R K) then B (N R) per row.
    const Shape &x = operandShape(n, ops, 0, 1);
    const Shape &a = operandShape(n, ops, 1, 3);
    const Shape &b = operandShape(n, ops, 2, 3);
    double k = (double)std::max<int64_t>(1, x.back());
    return 2.0 * (elements(x) / k) * (double)a[1] * (k + (double)b[1]);
  }
  case OpKind::Moe: {
    // Each of the T k routes runs one expert: 2 I H per matrix.
    const Shape &ids = operandShape(n, ops, 1, 2);
    const Shape &up = operandShape(n, ops, 3, 3);
    bool gated = ops.size() > 5 && !ops[5].empty();
    return 2.0 * elements(ids) * (gated ? 3 : 2) * (double)up[1] *
           (double)up[2];
  }
  case OpKind::MatMul:
  case OpKind::Gemm: {
    const Shape &a = operandShape(n, ops, 0, 1);
    // ONNX Gemm's A is [M, K], or [K, M] with transA.
    bool transA = n.kind == OpKind::Gemm &&
                  n.attrs.value("transA", int64_t(0)) != 0;
    double k = (double)(transA ? a.front() : a.back());
    return results.empty() ? 0 : 2.0 * elements(results[0]) * k;
  }
  case OpKind::Attention:
  case OpKind::KvAttention: {
    const Shape &q = operandShape(n, ops, 0, 3);
    const Shape &k = operandShape(n, ops, 1, 3);
    int64_t heads = n.attrs.value("num_heads", int64_t(1));
    double d = (double)q[2] / (double)std::max<int64_t>(1, heads);
    int64_t window = n.attrs.value("window", int64_t(0));
    double pairs = 0;
    for (int64_t b = 0; b < q[0]; ++b) {
      if (n.kind == OpKind::Attention) {
        pairs += attendedPairs(q[1], k[1], k[1] - q[1],
                               n.attrs.value("causal", false), window);
        continue;
      }
      auto [cached, valid] = kvRow(kv, b, q[1]);
      pairs += attendedPairs(valid, cached + valid, cached, true, window);
    }
    return 4.0 * d * (double)heads * pairs;
  }
  case OpKind::LayerNorm:
    return 8.0 * elements(operandShape(n, ops, 0, 1));
  case OpKind::RmsNorm:
    return 4.0 * elements(operandShape(n, ops, 0, 1));
  case OpKind::Hadamard: {
    // Per value: log2(n) butterfly adds and m multiply-adds of the DCT
    // factor (format/Rotation.h, K = n m).
    const Shape &x = operandShape(n, ops, 0, 1);
    int64_t m = x.empty() ? 1 : std::max<int64_t>(x.back(), 1), stages = 0;
    while (m % 2 == 0) {
      m /= 2;
      ++stages;
    }
    return (double)(stages + 2 * m) * elements(x);
  }
  case OpKind::Rotary: {
    const Shape &x = operandShape(n, ops, 0, 1);
    int64_t headDim = n.attrs.value("head_dim", int64_t(0));
    if (headDim <= 0)
      throw std::runtime_error("node '" + n.name + "' (rotary): no head_dim");
    int64_t rotated = n.attrs.value("rotary_dim", headDim);
    return 3.0 * elements(x) / (double)headDim * (double)rotated;
  }
  case OpKind::Quantize:
    return 3.0 * elements(operandShape(n, ops, 0, 0));
  case OpKind::Softmax:
    return 5.0 * elements(operandShape(n, ops, 0, 0));
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
  case OpKind::ReduceMax:
    return elements(operandShape(n, ops, 0, 0));
  // Elementwise: FLOPs per result element.
  case OpKind::Gelu:
    return perElement(8);
  case OpKind::Silu:
    return perElement(4);
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Pow:
  case OpKind::Max:
  case OpKind::Min:
  case OpKind::Where:
  case OpKind::Sqrt:
  case OpKind::Reciprocal:
  case OpKind::Erf:
  case OpKind::Tanh:
  case OpKind::Sigmoid:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Cos:
  case OpKind::Sin:
  case OpKind::Relu:
  case OpKind::Neg:
  case OpKind::Abs:
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::LessEqual:
  case OpKind::Greater:
  case OpKind::GreaterEqual:
  case OpKind::And:
  case OpKind::Or:
  case OpKind::Not:
  case OpKind::IsNaN:
  case OpKind::WeightInt4: // one multiply per dequantized weight
    return perElement(1);
  // Embedding, casts and shape glue move data only; a kernel node's cost is
  // its body's (nodeCost).
  case OpKind::Embedding:
  case OpKind::Sparse24:
  case OpKind::Cast:
  case OpKind::CumSum:
  case OpKind::Transpose:
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
  case OpKind::Concat:
  case OpKind::Split:
  case OpKind::Slice:
  case OpKind::Gather:
  case OpKind::GatherElements:
  case OpKind::GatherNd:
  case OpKind::ScatterNd:
  case OpKind::ScatterElements:
  case OpKind::Tile:
  case OpKind::TopK:
  case OpKind::OneHot:
  case OpKind::NonZero:
  case OpKind::Shape:
  case OpKind::ConstantOfShape:
  case OpKind::Range:
  case OpKind::Expand:
  case OpKind::Trilu:
  case OpKind::Kernel:
    return 0;
  }
  return 0;
}

Cost qcc::rt::nodeCost(const Artifact &a, const Node &node,
                       const std::vector<Shape> &ops,
                       const std::vector<Shape> &results, const KvState *kv,
                       const CompressedWeight *compressed) {
  Cost c;
  // Operand index -> bytes actually read, for embedding tables (only the
  // gathered rows move) and a compressed weight.
  std::map<size_t, double> gathered;
  if (compressed && compressed->operand >= 0)
    gathered[compressed->operand] = compressed->bytes();
  // Values of a region's body that a sparse_2_4 op makes.
  std::set<int64_t> sparseWeights;
  auto account = [&](const Node &n, const std::vector<Shape> &in,
                     const std::vector<Shape> &out,
                     const std::function<int(int64_t)> &operandOf) {
    // A 2:4 sparse weight: half the multiply-adds (Roofline.h).
    int w = weightOperand(n.kind);
    bool sparse = &n == &node ? compressed && compressed->sparse24
                              : w >= 0 && w < (int)n.inputs.size() &&
                                    sparseWeights.count(n.inputs[w]) > 0;
    c.flops += opFlops(n, in, out, kv) * (sparse ? 0.5 : 1.0);
    if (n.kind == OpKind::Sparse24)
      sparseWeights.insert(n.outputs.begin(), n.outputs.end());
    c.precision = std::max(c.precision, precisionOf(n.kind));
    if (n.kind == OpKind::KvAttention)
      c.kvBytes += kvBytes(n, in, kv);
    if (n.kind == OpKind::Moe && in.size() > 4 && in[1].size() == 2 &&
        in[3].size() == 3 && in[3][0] > 0) {
      // Only the experts routed to are read: at most T k of the E (every
      // route of a token goes to another expert; tokens may share one).
      double experts = (double)in[3][0];
      double active = std::min(experts, elements(in[1]));
      for (size_t w = 3; w < n.inputs.size() && w < in.size(); ++w) {
        int index = operandOf(n.inputs[w]);
        if (index >= 0 && n.inputs[w] >= 0)
          gathered[index] = elements(in[w]) * active / experts *
                            (double)dtypeSize(a.valueType(n.inputs[w]).first);
      }
    }
    if (n.kind == OpKind::Embedding && !n.inputs.empty() && !out.empty()) {
      int index = operandOf(n.inputs[0]);
      if (index >= 0)
        gathered[index] =
            elements(out[0]) * (double)dtypeSize(a.valueType(n.inputs[0]).first);
    }
  };
  if (node.body) {
    std::map<int64_t, Shape> shapes = inferBodyShapes(node, ops);
    auto operandOf = [&](int64_t id) {
      const auto &args = node.body->args;
      auto it = std::find(args.begin(), args.end(), id);
      return it == args.end() ? -1 : (int)(it - args.begin());
    };
    for (const Node &inner : node.body->nodes) {
      std::vector<Shape> in, out;
      for (int64_t id : inner.inputs)
        in.push_back(id >= 0 ? shapes.at(id) : Shape());
      for (int64_t id : inner.outputs)
        out.push_back(shapes.at(id));
      account(inner, in, out, operandOf);
    }
  } else {
    account(node, ops, results, [&](int64_t id) {
      auto it = std::find(node.inputs.begin(), node.inputs.end(), id);
      return it == node.inputs.end() ? -1 : (int)(it - node.inputs.begin());
    });
  }
  std::set<int64_t> seen;
  for (size_t i = 0; i < node.inputs.size() && i < ops.size(); ++i) {
    int64_t id = node.inputs[i];
    if (id < 0 || !seen.insert(id).second)
      continue;
    auto g = gathered.find(i);
    double bytes = g != gathered.end()
                       ? g->second
                       : elements(ops[i]) *
                             (double)dtypeSize(a.valueType(id).first);
    bool weight = a.constant(id) || (compressed && (int)i == compressed->operand);
    (weight ? c.weightBytes : c.activationBytes) += bytes;
  }
  for (size_t r = 0; r < node.outputs.size() && r < results.size(); ++r)
    c.activationBytes += elements(results[r]) *
                         (double)dtypeSize(a.valueType(node.outputs[r]).first);
  // Empty results: the launch is skipped (GpuSession) and the CPU kernels
  // loop over no rows, so nothing is read. This is a mixture-of-experts
  // expert no token was routed to: only the active experts' weights count.
  if (!results.empty() &&
      std::all_of(results.begin(), results.end(),
                  [](const Shape &s) { return elements(s) == 0; })) {
    c.weightBytes = 0;
    c.activationBytes = 0;
  }
  return c;
}

std::map<size_t, CompressedWeight>
qcc::rt::compressedWeights(const Artifact &a, const Function &fn) {
  std::map<int64_t, const Node *> producer; // dense weight -> sparse_2_4
  for (const Node &n : fn.nodes)
    if (n.kind == OpKind::Sparse24 && n.inputs.size() == 2 &&
        n.outputs.size() == 1 && a.constant(n.inputs[0]) &&
        a.constant(n.inputs[1]))
      producer[n.outputs[0]] = &n;
  std::map<size_t, CompressedWeight> out;
  for (size_t i = 0; i < fn.nodes.size() && !producer.empty(); ++i) {
    const Node &n = fn.nodes[i];
    int w = weightOperand(n.kind);
    if (w < 0 || (int)n.inputs.size() <= w)
      continue;
    auto p = producer.find(n.inputs[w]);
    if (p != producer.end())
      out[i] = {w, a.constant(p->second->inputs[0]),
                a.constant(p->second->inputs[1])};
  }
  return out;
}

SparseLinearCost qcc::rt::sparseLinearCost(const Artifact &a,
                                           const Node &linear,
                                           const CompressedWeight &weight,
                                           int64_t M) {
  // The operands' shapes at M rows: x [M, K] (with its per-token scale and
  // zero point [M, 1] for a qlinear), the weight [N, K], per-N vectors [N].
  const int64_t N = weight.values->dim(0), K = weight.values->dim(1) * 2;
  std::vector<Shape> in;
  for (size_t i = 0; i < linear.inputs.size(); ++i) {
    bool perN = linear.kind == OpKind::Linear ? i == 2 : i >= 4;
    Shape s = (int)i == weight.operand ? Shape{N, K}
              : perN                   ? Shape{N}
              : i == 0                 ? Shape{M, K}
                                       : Shape{M, 1};
    in.push_back(linear.inputs[i] < 0 ? Shape() : s);
  }
  std::vector<Shape> out = {{M, N}};
  SparseLinearCost c;
  c.sparse = nodeCost(a, linear, in, out, nullptr, &weight);
  // Dense: the [N, K] weight a constant, read whole.
  c.dense = nodeCost(a, linear, in, out);
  double dense = (double)(N * K) * (double)dtypeSize(weight.values->dtype());
  c.dense.activationBytes -= dense;
  c.dense.weightBytes += dense;
  return c;
}

double Peaks::compute(Precision p) const {
  switch (p) {
  case Precision::F32:
    return f32;
  case Precision::F16:
    return f16;
  case Precision::I8:
    return i8;
  }
  return f32;
}

const std::vector<Peaks> &qcc::rt::gpuPeaks() {
  // Dense (non-sparse) peaks. NVIDIA H100 Tensor Core GPU datasheet, SXM5
  // column: HBM3 3.35 TB/s, FP32 67 TFLOPS, FP16/BF16 tensor 1,979 TFLOPS
  // and INT8 tensor 3,958 TOPS "with sparsity" (dense: half). NVIDIA H200
  // Tensor Core GPU datasheet, SXM: HBM3e 4.8 TB/s, the same compute. The
  // dense figures and bandwidths are those of docs/REFERENCES.md
  // ("Hardware ceilings") and docs/ROOFLINE.md.
  static const std::vector<Peaks> peaks = {
      {"H100", 3.35e12, 67e12, 989e12, 1979e12,
       "NVIDIA H100 SXM5 datasheet (dense)"},
      {"H200", 4.8e12, 67e12, 989e12, 1979e12,
       "NVIDIA H200 SXM datasheet (dense)"},
  };
  return peaks;
}

Peaks qcc::rt::gpuPeaksFor(const std::string &deviceName,
                           const std::function<double()> &measureBandwidth) {
  for (const Peaks &p : gpuPeaks())
    if (deviceName.find(p.name) != std::string::npos)
      return p;
  Peaks p;
  p.name = deviceName;
  p.bandwidth = measureBandwidth();
  p.source = "device-to-device copy measured here; no datasheet peaks";
  return p;
}

std::string qcc::rt::profileKind(const Node &node) {
  return node.body ? node.attrs.value("kind", "kernel")
                   : opKindName(node.kind);
}

void NodeProfile::add(const std::string &function, const std::string &kind,
                      double seconds, const Cost &cost) {
  ProfileRow &row = byKind[{function, kind}];
  row.function = function;
  row.kind = kind;
  ++row.calls;
  row.seconds += seconds;
  row.cost += cost;
}

std::vector<ProfileRow> NodeProfile::rows() const {
  std::vector<ProfileRow> out;
  for (const auto &[key, row] : byKind)
    out.push_back(row);
  std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) {
    return a.function != b.function ? a.function < b.function
                                    : a.seconds > b.seconds;
  });
  return out;
}

double qcc::rt::rooflineSeconds(const Cost &c, const Peaks &p) {
  double compute = p.compute(c.precision);
  double t = p.bandwidth > 0 ? c.bytes() / p.bandwidth : 0;
  return std::max(t, compute > 0 ? c.flops / compute : 0);
}
