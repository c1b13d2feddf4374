//===- HugePageAllocator.h - buffers on transparent huge pages --*- C++ -*-===//
//
// An allocator for large, long-lived buffers that are read scattered (the KV
// cache's pool): 2 MiB aligned and madvise(MADV_HUGEPAGE), so that where the
// kernel allows transparent huge pages (its default "madvise" mode) one TLB
// entry covers 2 MiB. Decode reads a sequence's blocks scattered over the
// pool, 4 KiB (f32) or 1 KiB (int8) per block and head: with 4 KiB pages
// nearly every run costs a page walk. SmolLM2 W8A8, batch-1 decode after
// 512 tokens, 2 threads, the decode attention's time (best of 4
// interleaved rounds): f32 cache 90.0 -> 75.9 ms, int8 cache 41.2 -> 29.8 ms
// over 32 steps. Smaller buffers, and systems without THP, get ordinary
// memory.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_HUGEPAGEALLOCATOR_H
#define QCC_RUNTIME_HUGEPAGEALLOCATOR_H

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace qcc::rt {

template <typename T> struct HugePageAllocator {
  using value_type = T;
  static constexpr size_t kHugePage = size_t(2) << 20;

  HugePageAllocator() = default;
  template <typename U> HugePageAllocator(const HugePageAllocator<U> &) {}

  T *allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T))
      throw std::bad_array_new_length();
    size_t bytes = n * sizeof(T);
    if (bytes < kHugePage)
      return std::allocator<T>().allocate(n);
    size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void *p = std::aligned_alloc(kHugePage, rounded);
    if (!p)
      throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    ::madvise(p, rounded, MADV_HUGEPAGE); // advice: failure changes nothing
#endif
    return static_cast<T *>(p);
  }
  void deallocate(T *p, size_t n) {
    if (n * sizeof(T) < kHugePage)
      std::allocator<T>().deallocate(p, n);
    else
      std::free(p);
  }
  template <typename U> bool operator==(const HugePageAllocator<U> &) const {
    return true;
  }
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_HUGEPAGEALLOCATOR_H
