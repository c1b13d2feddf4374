//===- FileBytes.cpp - a file's bytes, mapped or read ---------------------===//
#include "format/FileBytes.h"

#include "format/Checked.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace qcc::format {

std::shared_ptr<const FileBytes> FileBytes::map(const std::string &path) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer; it is
  // refused below instead (no effect on regular files).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw std::runtime_error(path + ": cannot open the file (" +
                             std::strerror(errno) + ")");
  return mapFd(fd, path);
}

std::shared_ptr<const FileBytes> FileBytes::mapCopy(std::string_view bytes) {
  int fd = ::memfd_create("qcc-bytes", MFD_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error(std::string("memfd_create: ") +
                             std::strerror(errno));
  for (size_t at = 0; at < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      throw std::runtime_error(std::string("memfd write: ") +
                               std::strerror(err));
    }
    at += (size_t)n;
  }
  return mapFd(fd, "memfd");
}

std::shared_ptr<const FileBytes> FileBytes::mapFd(int fd,
                                                 const std::string &path) {
  // The descriptor stays open for readAt, closed with the mapping.
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(path + ": not a regular file");
  }
  std::shared_ptr<FileBytes> f(new FileBytes);
  f->size_ = (size_t)st.st_size;
  f->mapped_ = true;
  f->fd_ = fd; // closed by the destructor from here on
  f->path_ = path;
  if (f->size_ > 0) { // mmap refuses a length of 0; an empty file has no bytes
    void *p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      throw std::runtime_error(path + ": cannot map the file (" +
                               std::strerror(err) + ")");
    }
    f->data_ = static_cast<const char *>(p);
  }
  return f;
}

std::shared_ptr<const FileBytes> FileBytes::read(const std::string &path) {
  return hold(std::make_shared<std::vector<char>>(readFileChecked(path)));
}

std::shared_ptr<const FileBytes>
FileBytes::hold(std::shared_ptr<std::vector<char>> bytes) {
  std::shared_ptr<FileBytes> f(new FileBytes);
  f->data_ = bytes->data();
  f->size_ = bytes->size();
  f->held_ = std::move(bytes);
  return f;
}

FileBytes::~FileBytes() {
  if (mapped_ && data_)
    ::munmap(const_cast<char *>(data_), size_);
  if (fd_ >= 0)
    ::close(fd_);
}

void FileBytes::readAt(const void *p, size_t n, void *dst) const {
  auto at = static_cast<const char *>(p);
  if (n == 0)
    return;
  if (!mapped_ || at < data_ || size_t(at - data_) > size_ ||
      n > size_ - size_t(at - data_)) {
    std::memcpy(dst, p, n); // held bytes, or memory that is not the file's
    return;
  }
  auto offset = (off_t)(at - data_);
  for (size_t done = 0; done < n;) {
    ssize_t got = ::pread(fd_, static_cast<char *>(dst) + done, n - done,
                          offset + (off_t)done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      throw std::runtime_error(path_ + ": cannot read the mapped file (" +
                               (got < 0 ? std::string(std::strerror(errno))
                                        : std::string("it has shrunk")) +
                               ")");
    done += (size_t)got;
  }
}

void FileBytes::release(const void *p, size_t n) const {
  if (!mapped_ || !data_)
    return;
  auto begin = reinterpret_cast<uintptr_t>(p),
       base = reinterpret_cast<uintptr_t>(data_);
  if (begin < base || begin - base > size_ || n > size_ - (begin - base))
    return;
  static const uintptr_t page = (uintptr_t)::sysconf(_SC_PAGESIZE);
  uintptr_t first = (begin + page - 1) / page * page,
            last = (begin + n) / page * page;
  if (first < last)
    // Advice, not a requirement: a failure leaves the pages resident.
    ::madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
}

} // namespace qcc::format
