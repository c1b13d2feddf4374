//===- ArtifactFormat.h - the .qpkg container, shared ------------*- C++ -*-===//
//
// The byte layout of a .qpkg file, the one definition both sides use: the
// compiler writes it (compiler/ArtifactWriter), the runtime reads it
// (runtime/core/Artifact). This library links no LLVM/MLIR and no BLAS.
//
// Layout (little-endian):
//   [0, 64)        header: magic "QCCPKG\r\n", format version (u32), flags
//                  (u32), manifest offset/size (u64 x2), data offset/size
//                  (u64 x2), file size (u64), CRC-32 (u32) of the whole
//                  file but this field, reserved (u32, 0)
//   manifest       JSON (runtime/core/Artifact.h describes its fields)
//   data           64-byte aligned blobs: weights, tokenizer, kernels
//
// The "\r\n" in the magic catches text-mode transfers; the CRC catches
// truncation and corruption before anything is interpreted. The CRC is no
// defence against a hostile file (anyone can recompute it): the loader
// validates every offset, size and id behind it (docs/THREAT_MODEL.md).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_ARTIFACTFORMAT_H
#define QCC_FORMAT_ARTIFACTFORMAT_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace qcc::format {

inline constexpr char kMagic[8] = {'Q', 'C', 'C', 'P', 'K', 'G', '\r', '\n'};
/// Bumped whenever the manifest or the layout changes meaning; the runtime
/// refuses any other version with one line saying to recompile.
/// 2: typed launch records (format/LaunchRecord.h).
/// 3: the CRC covers the header too (all of the file but the CRC field).
inline constexpr uint32_t kFormatVersion = 3;
inline constexpr size_t kHeaderSize = 64;
inline constexpr size_t kDataAlignment = 64;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t flags;
  uint64_t manifestOffset, manifestSize;
  uint64_t dataOffset, dataSize;
  uint64_t fileSize;
  uint32_t crc32;
  uint32_t reserved;
};
static_assert(sizeof(Header) == kHeaderSize);

/// CRC-32 (zlib's polynomial) of a byte range, continuing `crc` (the CRC of
/// the bytes before it; 0 to start).
uint32_t crc32Of(const void *data, size_t size, uint32_t crc = 0);

/// The CRC a file's header must hold: of all its bytes but the crc32 field.
/// `size` >= kHeaderSize.
uint32_t fileCrc(const char *file, size_t size);
/// The same, over chunks of a few MiB, calling `done(chunk, bytes)` after
/// each: a mapped file's loader drops the pages it has checked, so that the
/// check does not make the whole file resident at once.
uint32_t fileCrc(const char *file, size_t size,
                 const std::function<void(const char *, size_t)> &done);

/// Writes fileCrc into the header of `file` (if it is long enough to have
/// one): what a writer does last.
void sealCrc(std::vector<char> &file);

/// The bytes of a .qpkg file: the header (sizes and CRC filled in), the
/// manifest text and, at the next kDataAlignment boundary, the data section.
std::vector<char> packageFile(std::string_view manifest, std::string_view data);

} // namespace qcc::format

#endif // QCC_FORMAT_ARTIFACTFORMAT_H
