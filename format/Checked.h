//===- Checked.h - overflow-checked sizes and memory limits -----*- C++ -*-===//
//
// Every size that comes from a file or a flag (an artifact's offsets, a
// tensor's shape, a KV pool) is computed with these, never with a bare `+` or
// `*`: a wrapped sum passes an `offset + size <= file size` check and then
// reads outside the file. docs/THREAT_MODEL.md says where each input is
// checked. Shared by the compiler and the runtime (QccFormat).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_CHECKED_H
#define QCC_FORMAT_CHECKED_H

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qcc::format {

/// a + b, or nullopt when it does not fit T.
template <typename T> std::optional<T> checkedAdd(T a, T b) {
  T r;
  if (__builtin_add_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

/// a * b, or nullopt when it does not fit T.
template <typename T> std::optional<T> checkedMul(T a, T b) {
  T r;
  if (__builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

/// Whether [offset, offset + size) lies within [0, total), without
/// computing a sum that could wrap.
inline bool rangeWithin(uint64_t offset, uint64_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

/// The element count of `shape`: nullopt when a dim is negative or the
/// product overflows int64_t.
std::optional<int64_t> checkedNumElements(std::span<const int64_t> shape);

/// The bytes of `shape` with elements of `elementSize` bytes: nullopt as
/// checkedNumElements, or when the byte count overflows.
std::optional<uint64_t> checkedBytes(std::span<const int64_t> shape,
                                     uint64_t elementSize);

/// One axis of ONNX Slice on a dimension of size `dim` (>= 0): negative
/// `start` / `end` count from the end, then both are clamped; the result is
/// the first index read and the number of elements. `step` must not be 0.
/// Exact for every int64 input (no intermediate overflows, steps of 2^63 - 1
/// and INT64_MIN included): the compiler's static shapes and the CPU slice
/// kernel both use it.
struct SliceAxis {
  int64_t first = 0, count = 0;
};
SliceAxis sliceAxis(int64_t start, int64_t end, int64_t step, int64_t dim);

/// This machine's physical memory in bytes (sysconf), read once.
uint64_t physicalMemoryBytes();

/// The memory inputs may ask for: physicalMemoryBytes(), or less under
/// limitMemoryForFuzzing().
uint64_t usableMemoryBytes();

/// "1.5 GiB"-style text for messages.
std::string byteString(uint64_t bytes);

/// Throws std::runtime_error "<what> needs N bytes; this machine has M bytes
/// of memory" when `bytes` exceeds physicalMemoryBytes(): sizes that come
/// from inputs or flags are refused before anything is allocated.
void requireMemory(uint64_t bytes, const std::string &what);

/// Lowers the memory requireMemory() allows to `bytes` (never above physical
/// memory): the fuzz targets that run artifacts bound every tensor with it,
/// so that a hostile shape is refused instead of computed for minutes.
void limitMemoryForFuzzing(uint64_t bytes);

/// The bytes of the regular file `path`, read only when they fit in memory
/// (requireMemory); throws std::runtime_error "<path>: <why>" otherwise, or
/// when it cannot be read, or is not a regular file (a FIFO or /dev/zero
/// never ends).
std::vector<char> readFileChecked(const std::string &path);

/// The deepest nesting of [ and { in JSON text, outside strings: checked
/// before a parser builds a document from untrusted text (an artifact's
/// manifest, an HTTP request body).
int jsonDepth(std::string_view text);

} // namespace qcc::format

#endif // QCC_FORMAT_CHECKED_H
