//===- FileBytes.h - a file's bytes, mapped or read -------------*- C++ -*-===//
//
// What the runtime loads an artifact from: the file mapped read-only (the
// default: the kernel's page cache holds the bytes, pages the process never
// touches are never resident, and pages it is done with can be dropped) or
// copied into memory (qrun --no-mmap; tests and fuzzers that hold a file in
// a vector). Readers see the same const bytes either way, so validation is
// one code path.
//
// A mapped file that another process truncates while it is mapped makes a
// later read fault (SIGBUS), as for any mapped file (llama.cpp's GGUFs,
// shared libraries): docs/THREAT_MODEL.md. The file is mapped MAP_PRIVATE,
// so writes by others after the pages were read do not show, and nothing is
// ever written back.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_FILEBYTES_H
#define QCC_FORMAT_FILEBYTES_H

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace qcc::format {

class FileBytes {
public:
  /// The regular file `path` mapped read-only. Throws std::runtime_error
  /// "<path>: <why>" when it cannot be opened or mapped, or is not a
  /// regular file.
  static std::shared_ptr<const FileBytes> map(const std::string &path);
  /// The regular file `path` read into memory (readFileChecked).
  static std::shared_ptr<const FileBytes> read(const std::string &path);
  /// An anonymous file (memfd) holding `bytes`, mapped as map() maps: the
  /// fuzz targets and tests run the mapped path on bytes they made.
  static std::shared_ptr<const FileBytes> mapCopy(std::string_view bytes);
  /// Bytes already in memory, kept alive by the result.
  static std::shared_ptr<const FileBytes>
  hold(std::shared_ptr<std::vector<char>> bytes);

  ~FileBytes();
  FileBytes(const FileBytes &) = delete;
  FileBytes &operator=(const FileBytes &) = delete;

  const char *data() const { return data_; }
  size_t size() const { return size_; }
  bool mapped() const { return mapped_; }

  /// Copies [p, p + n) of the file to `dst` without mapping it: from a
  /// mapped file by pread (the kernel may map a whole 2 MiB page-cache
  /// folio where a mapped read touches one byte, and reads of a few rows of
  /// a large table then make all of it resident); a memcpy otherwise.
  /// Throws std::runtime_error when the file has shrunk since it was mapped.
  void readAt(const void *p, size_t n, void *dst) const;

  /// Drops the pages that lie wholly inside [p, p + n) from this process's
  /// resident memory, for a range it is done with (a weight the CPU backend
  /// packed into its own layout, a span the loader checksummed): a mapped
  /// file's pages are read again from the page cache if touched later, so
  /// this never changes what a reader sees. Nothing happens for bytes in
  /// memory or outside the file.
  void release(const void *p, size_t n) const;

private:
  FileBytes() = default;
  /// Maps the open file `fd` (closed here either way); `path` names it in
  /// errors.
  static std::shared_ptr<const FileBytes> mapFd(int fd,
                                                const std::string &path);
  const char *data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  int fd_ = -1; ///< the mapped file, for readAt
  std::string path_; ///< for readAt's errors
  std::shared_ptr<std::vector<char>> held_;
};

} // namespace qcc::format

#endif // QCC_FORMAT_FILEBYTES_H
