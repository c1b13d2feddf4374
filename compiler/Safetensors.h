//===- Safetensors.h - reading .safetensors files --------------*- C++ -*-===//
//
// The safetensors format (Hugging Face): an 8-byte little-endian header
// length N, N bytes of JSON naming each tensor's dtype, shape and
// [begin, end) byte offsets into the data that follows. PEFT saves adapters
// in it (compiler/LoraAdapter.h). Everything in the header is checked
// against the file before a byte of data is read.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_COMPILER_SAFETENSORS_H
#define QCC_COMPILER_SAFETENSORS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace qcc {

/// The largest header the format allows (the reference reader's limit).
inline constexpr uint64_t kMaxSafetensorsHeader = 100u << 20;

struct SafetensorsTensor {
  std::string dtype; ///< "F32", "F16", "BF16", "F64", ... as written
  std::vector<int64_t> shape;
  llvm::StringRef bytes; ///< into the file's buffer
  int64_t elements() const;
};

class SafetensorsFile {
public:
  /// Reads and checks `path`; errors are one line naming the file, the
  /// tensor and the reason.
  static llvm::Expected<SafetensorsFile> read(llvm::StringRef path);
  /// parse for bytes held in memory (tests, fuzzing); `name` names them.
  static llvm::Expected<SafetensorsFile> parse(
      std::unique_ptr<llvm::MemoryBuffer> buffer, llvm::StringRef name);

  const std::map<std::string, SafetensorsTensor> &tensors() const {
    return tensors_;
  }
  const std::string &path() const { return path_; }
  /// A float tensor's values widened (F16, BF16) or narrowed (F64) to f32;
  /// an error naming it for other dtypes.
  llvm::Expected<std::vector<float>> floats(const std::string &name) const;

private:
  std::unique_ptr<llvm::MemoryBuffer> buffer_;
  std::string path_;
  std::map<std::string, SafetensorsTensor> tensors_;
};

} // namespace qcc

#endif // QCC_COMPILER_SAFETENSORS_H
