//===- ArtifactFormat.cpp - the .qpkg container ---------------------------===//
#include "format/ArtifactFormat.h"

#include <zlib.h>

#include <algorithm>

uint32_t qcc::format::crc32Of(const void *data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const Bytef *p = static_cast<const Bytef *>(data);
  while (size > 0) { // zlib takes uInt lengths
    uInt chunk = (uInt)std::min<size_t>(size, 1u << 30);
    crc = crc32(crc, p, chunk);
    p += chunk;
    size -= chunk;
  }
  return (uint32_t)crc;
}
