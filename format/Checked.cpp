//===- Checked.cpp - overflow-checked sizes and memory limits -------------===//
#include "format/Checked.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>

std::optional<int64_t>
qcc::format::checkedNumElements(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    std::optional<int64_t> m = checkedMul(n, d);
    if (!m)
      return std::nullopt;
    n = *m;
  }
  return n;
}

std::optional<uint64_t>
qcc::format::checkedBytes(std::span<const int64_t> shape,
                          uint64_t elementSize) {
  std::optional<int64_t> n = checkedNumElements(shape);
  if (!n)
    return std::nullopt;
  return checkedMul((uint64_t)*n, elementSize);
}

qcc::format::SliceAxis qcc::format::sliceAxis(int64_t start, int64_t end,
                                              int64_t step, int64_t dim) {
  if (dim <= 0)
    return {};
  // Indices below -dim become -1 (then clamped), so start + dim cannot wrap.
  if (start < 0)
    start = start < -dim ? -1 : start + dim;
  if (end < 0)
    end = end < -dim ? -1 : end + dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    // ceil(span / step) as (span - 1) / step + 1: no span + step - 1.
    return {start, end > start ? (end - start - 1) / step + 1 : 0};
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  // |step| in unsigned arithmetic: -INT64_MIN does not fit int64.
  uint64_t span = start > end ? (uint64_t)(start - end) : 0, // <= dim
      magnitude = 0 - (uint64_t)step;
  return {start, span ? (int64_t)((span - 1) / magnitude + 1) : 0};
}

uint64_t qcc::format::physicalMemoryBytes() {
  static const uint64_t bytes = [] {
    long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || pageSize <= 0)
      return UINT64_MAX; // unknown: no limit rather than a wrong one
    return checkedMul((uint64_t)pages, (uint64_t)pageSize).value_or(UINT64_MAX);
  }();
  return bytes;
}

std::string qcc::format::byteString(uint64_t bytes) {
  static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB",
                                      "PiB", "EiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu bytes", (unsigned long long)bytes);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

static std::atomic<uint64_t> memoryLimit{UINT64_MAX};

void qcc::format::limitMemoryForFuzzing(uint64_t bytes) { memoryLimit = bytes; }

uint64_t qcc::format::usableMemoryBytes() {
  return std::min(physicalMemoryBytes(), memoryLimit.load());
}

void qcc::format::requireMemory(uint64_t bytes, const std::string &what) {
  uint64_t have = usableMemoryBytes();
  if (bytes > have)
    throw std::runtime_error(what + " needs " + byteString(bytes) +
                             "; this machine has " + byteString(have) +
                             " of memory");
}

std::vector<char> qcc::format::readFileChecked(const std::string &path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    throw std::runtime_error(path + ": cannot open the file");
  if (!fs::is_regular_file(st))
    throw std::runtime_error(path + ": not a regular file");
  uint64_t size = fs::file_size(path, ec);
  if (ec)
    throw std::runtime_error(path + ": cannot read the file");
  requireMemory(size, path + ": reading the file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(path + ": cannot open the file");
  std::vector<char> bytes(size);
  if (!in.read(bytes.data(), (std::streamsize)size) ||
      in.peek() != std::char_traits<char>::eof())
    throw std::runtime_error(path + ": cannot read the file (did it change "
                             "while being read?)");
  return bytes;
}

int qcc::format::jsonDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}
