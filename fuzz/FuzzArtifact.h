//===- FuzzArtifact.h - what the artifact fuzz targets check ----*- C++ -*-===//
//
// Shared by fuzz/ArtifactFuzzer.cpp and fuzz/ManifestFuzzer.cpp: loading a
// file's bytes either fails with a std::runtime_error (the one line qrun
// prints) or yields an artifact that code after the loader may trust. The
// second is checked here: every constant, kernel binary and section lies in
// the data section (a synthetic constant: has its value's type), and every
// value id a node or port names has a type.
// Anything else (another exception, a crash, a sanitizer report, a trap
// here) is a bug.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FUZZ_FUZZARTIFACT_H
#define QCC_FUZZ_FUZZARTIFACT_H

#include "format/Checked.h"
#include "runtime/core/Artifact.h"

#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace qcc::fuzz {

/// Traps unless [p, p + n) lies within [lo, hi).
inline void requireWithin(const char *p, size_t n, const char *lo,
                          const char *hi) {
  if (p < lo || p > hi || n > size_t(hi - p))
    __builtin_trap();
}

inline void checkNodes(const rt::Artifact &a,
                       const std::vector<rt::Node> &nodes) {
  for (const rt::Node &n : nodes) {
    for (int64_t id : n.inputs)
      if (id != -1)
        (void)a.valueType(id); // at() throws out_of_range: not caught
    for (int64_t id : n.outputs)
      (void)a.valueType(id);
    if (n.body)
      checkNodes(a, n.body->nodes);
  }
}

/// Loads `bytes` and checks what the loader promises.
inline void loadAndCheck(std::shared_ptr<std::vector<char>> bytes) {
  // Synthetic records may fill up to half of the usable memory: 512 MiB
  // here, under the fuzzers' -rss_limit_mb of 4 GiB.
  static const bool limited =
      (format::limitMemoryForFuzzing(uint64_t(1) << 30), true);
  (void)limited;
  // Mapped, as qrun maps a file: the loader's path for real artifacts.
  std::shared_ptr<const format::FileBytes> file =
      format::FileBytes::mapCopy({bytes->data(), bytes->size()});
  std::optional<rt::Artifact> loaded;
  try {
    loaded = rt::Artifact::fromFile(file, "fuzz.qpkg");
  } catch (const std::runtime_error &) {
    return; // refused with a message: what must happen to bad input
  }
  const rt::Artifact &a = *loaded;
  format::Header h;
  std::memcpy(&h, file->data(), sizeof h);
  const char *data = file->data() + h.dataOffset;
  const char *end = data + h.dataSize;
  // A constant from a synthetic record (qcc --synthetic-weights) lives in the
  // loader's own allocation, of its value's type; every other is its bytes
  // in the data: a view of them, or (a small one of a mapped file,
  // Artifact::kCopyBelowBytes) an exact copy.
  std::vector<bool> synthetic(a.numValues());
  std::vector<uint64_t> offset(a.numValues());
  for (const nlohmann::json &c : a.manifest().at("constants")) {
    size_t id = c.at("value").get<size_t>();
    if (c.contains("synthetic"))
      synthetic.at(id) = true;
    else
      offset.at(id) = c.at("offset").get<uint64_t>();
  }
  for (size_t id = 0; id < a.numValues(); ++id)
    if (const rt::Tensor *c = a.constant((int64_t)id)) {
      if (!synthetic[id]) {
        const char *p = static_cast<const char *>(c->raw());
        requireWithin(data + offset[id], c->bytes(), data, end);
        if (c->bytes() && p != data + offset[id] &&
            (c->isView() || std::memcmp(p, data + offset[id], c->bytes())))
          __builtin_trap();
        continue;
      }
      const auto &[dtype, shape] = a.valueType((int64_t)id);
      if (c->dtype() != dtype || c->shape() != shape)
        __builtin_trap();
    }
  for (const rt::KernelRecord &k : a.kernels())
    for (const auto &[target, range] : k.binaries) {
      std::optional<std::string_view> b = a.kernelBinary(k, target);
      if (!b)
        __builtin_trap();
      requireWithin(b->data(), b->size(), data, end);
    }
  if (auto tok = a.section("tokenizer"))
    requireWithin(tok->data(), tok->size(), data, end);
  for (const rt::Function &f : a.functions()) {
    for (const rt::Port &p : f.inputs)
      (void)a.valueType(p.value);
    for (const rt::Port &p : f.outputs)
      (void)a.valueType(p.value);
    checkNodes(a, f.nodes);
    if (const rt::Function *g = a.gpuFunction(f.name))
      checkNodes(a, g->nodes);
  }
}

} // namespace qcc::fuzz

#endif // QCC_FUZZ_FUZZARTIFACT_H
