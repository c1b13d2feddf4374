//===- ArtifactFormat.cpp - the .qpkg container ---------------------------===//
#include "format/ArtifactFormat.h"

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

uint32_t qcc::format::crc32Of(const void *data, size_t size, uint32_t seed) {
  uLong crc = seed;
  const Bytef *p = static_cast<const Bytef *>(data);
  while (size > 0) { // zlib takes uInt lengths
    uInt chunk = (uInt)std::min<size_t>(size, 1u << 30);
    crc = crc32(crc, p, chunk);
    p += chunk;
    size -= chunk;
  }
  return (uint32_t)crc;
}

uint32_t qcc::format::fileCrc(const char *file, size_t size) {
  constexpr size_t field = offsetof(Header, crc32);
  constexpr size_t after = field + sizeof(Header::crc32);
  return crc32Of(file + after, size - after, crc32Of(file, field));
}

uint32_t
qcc::format::fileCrc(const char *file, size_t size,
                     const std::function<void(const char *, size_t)> &done) {
  constexpr size_t field = offsetof(Header, crc32);
  constexpr size_t after = field + sizeof(Header::crc32);
  constexpr size_t chunk = size_t(8) << 20;
  uint32_t crc = crc32Of(file, field);
  for (size_t at = after; at < size; at += chunk) {
    size_t n = std::min(chunk, size - at);
    crc = crc32Of(file + at, n, crc);
    done(file + at, n);
  }
  return crc;
}

void qcc::format::sealCrc(std::vector<char> &file) {
  if (file.size() < kHeaderSize)
    return;
  uint32_t crc = fileCrc(file.data(), file.size());
  std::memcpy(file.data() + offsetof(Header, crc32), &crc, sizeof crc);
}

std::vector<char> qcc::format::packageFile(std::string_view manifest,
                                           std::string_view data) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof h.magic);
  h.version = kFormatVersion;
  h.manifestOffset = kHeaderSize;
  h.manifestSize = manifest.size();
  h.dataOffset = (h.manifestOffset + h.manifestSize + kDataAlignment - 1) /
                 kDataAlignment * kDataAlignment;
  h.dataSize = data.size();
  h.fileSize = h.dataOffset + h.dataSize;
  std::vector<char> file(h.fileSize, '\0');
  std::memcpy(file.data() + h.manifestOffset, manifest.data(), manifest.size());
  std::memcpy(file.data() + h.dataOffset, data.data(), data.size());
  std::memcpy(file.data(), &h, sizeof h);
  sealCrc(file);
  return file;
}
