//===- Artifact.h - the .qpkg deployment artifact ---------------*- C++ -*-===//
//
// The container (header, magic, version, CRC, data alignment) is
// format/ArtifactFormat.h. The manifest, a JSON object:
//   functions (inputs, outputs, nodes {op, name, in, out, attrs}; op is a
//   name of format/OpKinds.def, and the loader refuses any other), value
//   types, constants (offset/size
//   into data), sections (tokenizer, kernel binaries); with GPU kernels (qcc
//   without --no-cuda): "kernels" [{function, region, kind, entry, launch,
//   binaries: {sm_80|sm_90|ptx: {offset, size}}} or {..., unsupported}]
//   (launch records: format/LaunchRecord.h, parsed and validated at load)
//   and "gpu_functions":
//   the entry points after form-kernels (the CUDA backend's plan, in launch
//   order), kernel regions as nodes {op: "kernel", attrs: {kind, kernel:
//   index into kernels}, body: {args, nodes, yield}}
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_ARTIFACT_H
#define QCC_RUNTIME_ARTIFACT_H

#include "format/ArtifactFormat.h"
#include "format/FileBytes.h"
#include "format/OpKind.h"
#include "format/KernelKinds.h"
#include "format/LaunchRecord.h"
#include "format/KvCacheConfig.h"
#include "runtime/core/Tensor.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace qcc::rt {

/// The manifest's "kv_cache", parsed and validated at load (format/).
using format::KvCacheConfig;

// The container (magic, version, header, CRC) is format/ArtifactFormat.h.
using format::crc32Of;
using format::Header;
using format::kDataAlignment;
using format::kFormatVersion;
using format::kHeaderSize;
using format::kMagic;
using format::OpKind;
using format::opKindName;

/// A named model input or output.
struct Port {
  std::string name;
  int64_t value;
  DType dtype;
  Shape shape;                  // -1 where dynamic
  std::vector<std::string> dims; // symbolic names of dynamic dims ("" if static)
};

struct Node;

/// The ops of a kernel region: its block arguments (bound to the node's
/// inputs), its nodes, and the values it yields (the node's outputs).
struct KernelBody {
  std::vector<int64_t> args;
  std::vector<Node> nodes;
  std::vector<int64_t> yields;
};

struct Node {
  OpKind kind; // messages spell it opKindName(kind)
  std::string name; // the ONNX node (or pass) it came from, for errors
  std::vector<int64_t> inputs; // -1 for an omitted optional operand
  std::vector<int64_t> outputs;
  nlohmann::json attrs;
  /// OpKind::Kernel (GPU plans), and only then: the region; attrs "kind" and
  /// "kernel" (the index into Artifact::kernels(), -1 when none was
  /// compiled).
  std::shared_ptr<const KernelBody> body;
};

/// A compiled kernel region (manifest "kernels").
struct KernelRecord {
  std::string function, region, entry;
  format::KernelKind kind = format::KernelKind::Elementwise;
  std::string unsupported; ///< why no kernel exists ("" when one does)
  format::LaunchRecord launch; ///< validated at load (when supported)
  /// "sm_80" / "sm_90" / "ptx" -> (offset, size) in the data section.
  std::map<std::string, std::pair<uint64_t, uint64_t>> binaries;
};

struct Function {
  std::string name;
  std::vector<Port> inputs, outputs;
  std::vector<Node> nodes;
};

/// How load() reaches the file's bytes (format/FileBytes.h).
enum class FileAccess {
  Map,  ///< mapped read-only: weights are used in place, pages on demand
  Read, ///< copied into memory (qrun --no-mmap)
};

/// A loaded artifact. Constants are views into the file's bytes, which the
/// artifact keeps alive.
class Artifact {
public:
  /// Maps (or reads) and validates `path`; throws std::runtime_error with a
  /// message naming the file and the problem. Validation covers the whole
  /// header and manifest (offsets and sizes without overflow, every id in
  /// range, values defined before use, nesting depth), so code after the
  /// loader may trust what it returns (docs/THREAT_MODEL.md).
  static Artifact load(const std::string &path,
                       FileAccess access = FileAccess::Map);
  /// The same from the file's bytes; `path` names it in errors.
  static Artifact fromFile(std::shared_ptr<const format::FileBytes> file,
                           const std::string &path);
  /// The same from bytes already in memory.
  static Artifact fromBytes(std::shared_ptr<std::vector<char>> bytes,
                            const std::string &path);

  const std::string &path() const { return path_; }
  const nlohmann::json &manifest() const { return manifest_; }
  const std::vector<Function> &functions() const { return functions_; }
  const Function &function(const std::string &name) const;
  /// The CUDA backend's plan of an entry point (after form-kernels), if the
  /// artifact has kernels.
  const Function *gpuFunction(const std::string &name) const;
  const std::vector<KernelRecord> &kernels() const { return kernels_; }
  /// The bytes of a kernel binary ("sm_80", "sm_90", "ptx"), if present.
  std::optional<std::string_view> kernelBinary(const KernelRecord &k,
                                               const std::string &target) const;
  size_t numValues() const { return valueTypes_.size(); }
  /// The element type and (possibly dynamic: -1) shape of value `id`.
  const std::pair<DType, Shape> &valueType(int64_t id) const {
    return valueTypes_.at(id);
  }
  /// The constant tensor held by value `id`, if it is one.
  const Tensor *constant(int64_t id) const;
  /// Whether the file is mapped (FileAccess::Map), its constants views of
  /// the page cache.
  bool mapped() const { return file_ && file_->mapped(); }
  /// The file's size in bytes.
  uint64_t fileSize() const { return file_ ? file_->size() : 0; }
  /// Drops the resident pages wholly inside [p, p + n) of the file's bytes,
  /// for a backend that keeps a weight in a layout of its own (the CPU
  /// backend's packed GEMM weights): then the weight is resident once.
  /// Reading it afterwards still works (the pages come back from the page
  /// cache). Nothing happens when the file is not mapped.
  void release(const void *p, size_t n) const { file_->release(p, n); }
  /// Copies [p, p + n) of a constant's bytes to `dst` without mapping them
  /// (format/FileBytes::readAt): how the CPU backend reads rows of a large
  /// mapped table (an embedding), so that they do not make it resident.
  void read(const void *p, size_t n, void *dst) const {
    file_->readAt(p, n, dst);
  }
  /// Constants smaller than this are copied out of a mapped file at load
  /// (format/FileBytes::readAt), the file's pages then dropped: scales,
  /// norms, biases are read at every step, and each would otherwise keep a
  /// page-cache folio of up to 2 MiB of the weights around it resident.
  /// Larger ones (weights, tables) stay views of the mapping.
  static constexpr uint64_t kCopyBelowBytes = 64 << 10;
  /// Bytes of weights expanded from synthetic records at load (qcc
  /// --synthetic-weights: a benchmark artifact whose outputs mean nothing;
  /// 0 for an ordinary one).
  uint64_t syntheticBytes() const { return syntheticBytes_; }
  /// The bytes of a named section (e.g. "tokenizer"), if present.
  std::optional<std::string_view> section(const std::string &name) const;
  /// The manifest's "kv_cache", parsed and validated once at load; null
  /// when the artifact has no KV cache.
  /// The runtime LoRA adapters compiled beside the base weights, in
  /// qcc.lora's order: adapter j + 1 of a sequence is lora_adapters[j]
  /// (docs/LORA.md). Empty: none.
  const std::vector<std::string> &loraAdapters() const { return loraAdapters_; }
  /// The 1-based adapter index of `name` ("" or "base": 0); throws naming
  /// the adapters there are.
  int64_t loraAdapterIndex(const std::string &name) const;
  const KvCacheConfig *kvCache() const {
    return kvCache_ ? &*kvCache_ : nullptr;
  }

private:
  std::string path_;
  std::shared_ptr<const format::FileBytes> file_;
  nlohmann::json manifest_;
  std::vector<Function> functions_, gpuFunctions_;
  std::vector<KernelRecord> kernels_;
  std::vector<std::pair<DType, Shape>> valueTypes_;
  std::vector<std::optional<Tensor>> constants_;
  /// The expanded synthetic weights the constants above may view.
  std::vector<std::shared_ptr<void>> synthetic_;
  uint64_t syntheticBytes_ = 0;
  /// "sections": name -> (offset, size) in the data, validated at load.
  std::map<std::string, std::pair<uint64_t, uint64_t>> sections_;
  std::optional<KvCacheConfig> kvCache_;
  std::vector<std::string> loraAdapters_;
  uint64_t dataOffset_ = 0;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_ARTIFACT_H
