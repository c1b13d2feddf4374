//===- RunFuzzer.cpp - fuzz target: manifest + data -> load -> run --------===//
//
// The loader's promise is that code after it may trust what it accepts. This
// target tests the promise where it matters: each artifact the loader accepts
// (input as for artifact-manifest: the manifest's JSON, a NUL byte, the data
// section) is run on the CPU backend, every entry point once, for a tiny
// input: batch 1, at most a few tokens (dynamic dims: the first 1, the others
// kSeq), integer inputs 0, 1, 2, ... along the last dim (valid token ids and
// positions), floats 0.5. Entry points with kv_attention get a KV cache of
// the manifest's kv_cache, one sequence. Every run must end in its outputs or
// a std::runtime_error (the node's error line); a crash, a hang, a sanitizer
// report or another exception is a bug.
//
// The work is bounded: format::limitMemoryForFuzzing caps every tensor (and
// the KV pool) at kMaxBytes, so a hostile shape is refused, not computed.
// Seeds: fuzz/corpus/artifact-run (make_seeds.py --keep-data: the small
// compiled fixtures with their weights, so the seeds run to the end).
//
//===----------------------------------------------------------------------===//
#include "format/ArtifactFormat.h"
#include "format/Checked.h"
#include "runtime/core/Artifact.h"
#include "runtime/core/KvCache.h"
#include "runtime/cpu/Session.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>

using namespace qcc;
using namespace qcc::rt;

namespace {

constexpr uint64_t kMaxBytes = 1 << 20; // per tensor and for the KV pool
constexpr int64_t kSeq = 3;             // tokens of a dynamic sequence dim

bool hasKvAttention(const std::vector<Node> &nodes) {
  return std::any_of(nodes.begin(), nodes.end(), [](const Node &n) {
    return n.kind == OpKind::KvAttention ||
           (n.body && hasKvAttention(n.body->nodes));
  });
}

/// The tiny input of `p`, or nullopt when its static dims are too large.
std::optional<Tensor> tinyInput(const Port &p) {
  Shape shape = p.shape;
  bool first = true;
  for (int64_t &d : shape)
    if (d < 0) {
      d = first ? 1 : kSeq;
      first = false;
    }
  std::optional<uint64_t> bytes = format::checkedBytes(shape, dtypeSize(p.dtype));
  if (!bytes || *bytes > kMaxBytes)
    return std::nullopt;
  Tensor t(p.dtype, shape);
  int64_t last = shape.empty() ? 1 : std::max<int64_t>(shape.back(), 1);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = i % last;
    switch (p.dtype) {
    case DType::I64:
      t.data<int64_t>()[i] = v;
      break;
    case DType::I32:
      t.data<int32_t>()[i] = (int32_t)v;
      break;
    case DType::I8:
      t.data<int8_t>()[i] = (int8_t)(v & 0x7f);
      break;
    case DType::Bool:
      t.data<uint8_t>()[i] = 1;
      break;
    case DType::F8E4M3:
      t.data<uint8_t>()[i] = 0x30; // 0.5 in E4M3
      break;
    case DType::F32:
      t.data<float>()[i] = 0.5f;
      break;
    case DType::F16:
    case DType::BF16:
      t.data<uint16_t>()[i] = 0x3800; // 0.5 in f16; a small number in bf16
      break;
    }
  }
  return t;
}

void runEntryPoint(const Artifact &a, const Function &f) {
  std::map<std::string, Tensor> inputs;
  int64_t tokens = 1;
  for (const Port &p : f.inputs) {
    std::optional<Tensor> t = tinyInput(p);
    if (!t)
      return; // beyond the bound: not run
    if (t->rank() >= 2)
      tokens = std::max(tokens, t->dim(1));
    inputs.emplace(p.name, std::move(*t));
  }
  Session session(a);
  try {
    if (!hasKvAttention(f.nodes)) {
      session.run(f.name, inputs);
      return;
    }
    if (!a.kvCache())
      return; // Session::run refuses it: tested by the unit tests
    const KvCacheConfig &cfg = *a.kvCache(); // parsed and validated at load
    KvCacheOptions o;
    o.maxSequences = 1;
    o.numBlocks = tokens / cfg.blockTokens + 1;
    o.maxTokens = tokens;
    KvCache cache(cfg, o);
    KvBatch kv{&cache, {cache.addSequence()}, {tokens}};
    session.run(f.name, inputs, &kv);
  } catch (const std::runtime_error &) {
    // The one line qrun prints: what must happen to garbage.
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const bool limited = (format::limitMemoryForFuzzing(kMaxBytes), true);
  (void)limited;
  std::string_view in(reinterpret_cast<const char *>(data), size);
  size_t nul = std::min(in.find('\0'), in.size());
  std::vector<char> bytes = format::packageFile(
      in.substr(0, nul), in.substr(std::min(nul + 1, in.size())));
  std::optional<Artifact> a;
  try {
    // Mapped, as qrun maps a file.
    a = Artifact::fromFile(
        format::FileBytes::mapCopy({bytes.data(), bytes.size()}), "fuzz.qpkg");
  } catch (const std::runtime_error &) {
    return 0; // the artifact targets test the refusals
  }
  for (const Function &f : a->functions())
    runEntryPoint(*a, f);
  return 0;
}
