//===- LoraMerge.cpp - where a LoRA adapter's updates go in an ONNX graph -===//
#include "compiler/LoraMerge.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

using qcc::LoraFactors;
using qcc::LoraTarget;

namespace {

llvm::Error fail(const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// "/model/model/layers.0/self_attn/q_proj/MatMul" -> "model.model.layers.0.
/// self_attn.q_proj": the exporters' node names are the module path, '/'
/// separated, then the op.
std::string modulePathOfNode(llvm::StringRef name) {
  if (!name.consume_front("/"))
    return "";
  size_t slash = name.rfind('/');
  if (slash == llvm::StringRef::npos)
    return "";
  std::string path = name.take_front(slash).str();
  std::replace(path.begin(), path.end(), '/', '.');
  return path;
}

bool endsWithModule(llvm::StringRef candidate, llvm::StringRef module) {
  if (candidate == module)
    return true;
  return candidate.size() > module.size() && candidate.ends_with(module) &&
         candidate[candidate.size() - module.size() - 1] == '.';
}

bool isFloat(int32_t type) {
  return type == onnx::TensorProto_DataType_FLOAT ||
         type == onnx::TensorProto_DataType_FLOAT16 ||
         type == onnx::TensorProto_DataType_BFLOAT16;
}

/// A weight a MatMul / Gemm / Gather reads: the initializer at the end of
/// the chain, the names along it, and its orientation.
struct WeightUse {
  const onnx::NodeProto *reader;
  LoraFactors::Kind kind;
  std::string initializer; ///< empty: the chain ends in a computed value
  std::string stoppedAt;   ///< then: the value it ends in
  bool transposed = false; ///< stored as the update's transpose
  std::vector<std::string> names; ///< module-path candidates
  std::vector<std::string> chain; ///< the values from the initializer on
};

class Graph {
public:
  explicit Graph(const onnx::GraphProto &g) : g(g) {
    for (const auto &t : g.initializer())
      initializers[t.name()] = &t;
    for (const auto &n : g.node()) {
      for (const auto &o : n.output())
        producers[o] = &n;
      for (const auto &i : n.input())
        ++readers[i];
    }
    for (const auto &o : g.output())
      ++readers[o.name()];
  }

  std::vector<WeightUse> weightUses() const {
    std::vector<WeightUse> uses;
    for (const auto &n : g.node()) {
      bool linear = (n.op_type() == "MatMul" || n.op_type() == "Gemm") &&
                    n.domain().empty() && n.input_size() >= 2;
      bool embedding = n.op_type() == "Gather" && n.domain().empty() &&
                       n.input_size() == 2 && axisOf(n) == 0;
      if (!linear && !embedding)
        continue;
      WeightUse use{&n,
                    linear ? LoraFactors::Kind::Linear
                           : LoraFactors::Kind::Embedding,
                    "", "", false, {}, {}};
      // MatMul's right operand is [in, out]; Gemm's too unless transB.
      use.transposed = linear && !(n.op_type() == "Gemm" && transB(n));
      addName(use, modulePathOfNode(n.name()));
      std::string v = n.input(linear ? 1 : 0);
      for (int depth = 0; depth < 8 && !initializers.count(v); ++depth) {
        auto p = producers.find(v);
        if (p == producers.end())
          break;
        const onnx::NodeProto &q = *p->second;
        bool flips = q.op_type() == "Transpose" && isSwap2d(q);
        if (!flips && q.op_type() != "Cast" && q.op_type() != "Identity")
          break;
        if (flips)
          use.transposed = !use.transposed;
        use.chain.push_back(v);
        addName(use, modulePathOfNode(q.name()));
        v = q.input(0);
      }
      if (auto it = initializers.find(v); it != initializers.end()) {
        use.initializer = v;
        use.chain.push_back(v);
        llvm::StringRef name(v);
        if (name.consume_back(".weight"))
          addName(use, name.str());
      } else {
        use.stoppedAt = v;
      }
      uses.push_back(std::move(use));
    }
    return uses;
  }

  const onnx::TensorProto &initializer(const std::string &name) const {
    return *initializers.at(name);
  }
  int readersOf(const std::string &value) const {
    auto it = readers.find(value);
    return it == readers.end() ? 0 : it->second;
  }

private:
  static void addName(WeightUse &use, std::string name) {
    if (!name.empty())
      use.names.push_back(std::move(name));
  }
  static int64_t axisOf(const onnx::NodeProto &n) {
    for (const auto &a : n.attribute())
      if (a.name() == "axis")
        return a.i();
    return 0;
  }
  static bool transB(const onnx::NodeProto &n) {
    for (const auto &a : n.attribute())
      if (a.name() == "transB")
        return a.i() != 0;
    return false;
  }
  /// A Transpose of a matrix: perm [1, 0] (or none, which reverses).
  static bool isSwap2d(const onnx::NodeProto &n) {
    for (const auto &a : n.attribute())
      if (a.name() == "perm")
        return a.ints_size() == 2 && a.ints(0) == 1 && a.ints(1) == 0;
    return true; // checked against the initializer's rank below
  }

  const onnx::GraphProto &g;
  std::map<std::string, const onnx::TensorProto *> initializers;
  std::map<std::string, const onnx::NodeProto *> producers;
  std::map<std::string, int> readers;
};

} // namespace

llvm::Expected<std::vector<LoraTarget>>
qcc::findLoraTargets(const onnx::GraphProto &graph, const LoraAdapter &adapter) {
  Graph g(graph);
  std::vector<WeightUse> uses = g.weightUses();
  std::vector<LoraTarget> targets;
  std::set<std::string> taken;
  for (const LoraFactors &f : adapter.modules) {
    std::string about = adapter.dir + ": module '" + f.module + "'";
    const char *what = f.kind == LoraFactors::Kind::Linear
                           ? "MatMul or Gemm"
                           : "Gather (embedding)";
    std::vector<const WeightUse *> found;
    for (const WeightUse &u : uses) {
      if (u.kind != f.kind ||
          !llvm::any_of(u.names, [&](const std::string &n) {
            return endsWithModule(n, f.module);
          }))
        continue;
      if (u.initializer.empty())
        return fail(about + ": node '" + u.reader->name() +
                    "' reads its weight from '" + u.stoppedAt +
                    "', which is computed, not an initializer (a quantized "
                    "or folded export): merge the adapter before exporting");
      if (llvm::none_of(found, [&](const WeightUse *w) {
            return w->initializer == u.initializer;
          }))
        found.push_back(&u);
    }
    if (found.empty())
      return fail(about + ": no " + what + " in the model reads it (qcc finds "
                  "a module by the node names the legacy exporter, optimum "
                  "and onnxruntime's builder write, or by its weight's name; "
                  "this export keeps neither, or the module is fused)");
    if (found.size() > 1)
      return fail(about + ": matches more than one weight ('" +
                  found[0]->initializer + "' and '" + found[1]->initializer +
                  "')");
    const WeightUse &u = *found[0];
    for (const auto &attr : u.reader->attribute())
      if ((attr.name() == "alpha" && attr.f() != 1.0f) ||
          (attr.name() == "transA" && attr.i() != 0))
        return fail(about + ": its Gemm '" + u.reader->name() + "' has " +
                    attr.name() + " " +
                    (attr.name() == "alpha" ? fmt::format("{}", attr.f())
                                            : std::to_string(attr.i())) +
                    "; qcc applies adapters to Gemms of alpha 1 without "
                    "transA");
    const onnx::TensorProto &t = g.initializer(u.initializer);
    if (!isFloat(t.data_type()))
      return fail(about + ": its weight '" + u.initializer +
                  "' is not float (f32, f16, bf16): merge the adapter before "
                  "quantizing");
    int64_t rows = u.transposed ? f.cols : f.rows;
    int64_t cols = u.transposed ? f.rows : f.cols;
    if (t.dims_size() != 2 || t.dims(0) != rows || t.dims(1) != cols)
      return fail(about + fmt::format(": its weight '{}' is [{}], but the "
                                      "adapter's update is [{}, {}] ({})",
                                      u.initializer, fmt::join(t.dims(), ", "),
                                      rows, cols,
                                      u.transposed ? "in, out" : "out, in"));
    // Each value from the initializer to the reader has that one reader.
    for (const std::string &v : u.chain)
      if (g.readersOf(v) != 1)
        return fail(about + ": its weight '" + u.initializer +
                    "' is also read elsewhere (tied weights): merging would "
                    "change the other reader too");
    if (!taken.insert(u.initializer).second)
      return fail(about + ": its weight '" + u.initializer +
                  "' is another module's too");
    targets.push_back({&f, u.reader, u.initializer, u.transposed});
  }
  return targets;
}

void qcc::addLoraUpdate(const LoraTarget &target, std::vector<float> &weight) {
  const LoraFactors &f = *target.factors;
  std::vector<float> delta = f.delta();
  for (int64_t r = 0; r < f.rows; ++r)
    for (int64_t c = 0; c < f.cols; ++c)
      weight[target.transposed ? (size_t)(c * f.rows + r)
                               : (size_t)(r * f.cols + c)] +=
          delta[(size_t)(r * f.cols + c)];
}
