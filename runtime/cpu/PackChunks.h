//===- PackChunks.h - packing a weight a span at a time ---------*- C++ -*-===//
//
// The CPU backend packs constant weights into its kernels' layouts
// (CpuF32Gemm.h, CpuInt8Gemm.h). Done a span of rows at a time, a packer can
// hand each finished span of the source back (`SourceDone`): the session
// drops a mapped artifact's pages there (Artifact::release), so the source
// and the packed copy of a large weight (an LM head: 113 MB in SmolLM2's
// float32) are never resident together.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_PACKCHUNKS_H
#define QCC_RUNTIME_PACKCHUNKS_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace qcc::rt {

/// Called with each span of a weight's source bytes once they are packed,
/// in order; empty: nobody asks.
using SourceDone = std::function<void(const void *bytes, size_t size)>;

/// Runs pack(r0, r1) over the rows [0, n) of `src` (rows of `rowBytes`
/// bytes apart) in spans of about 4 MiB, each a multiple of `rowAlign`
/// rows (a packed block's rows), calling done() on each span after it.
template <class Pack>
void packInChunks(const void *src, int64_t n, size_t rowBytes,
                  int64_t rowAlign, const SourceDone &done, Pack pack) {
  constexpr size_t kSpanBytes = size_t(4) << 20;
  int64_t rows = std::max<int64_t>(
      1, (int64_t)(kSpanBytes / std::max<size_t>(rowBytes, 1)) / rowAlign);
  rows *= rowAlign;
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    int64_t r1 = std::min(n, r0 + rows);
    pack(r0, r1);
    if (done)
      done(static_cast<const char *>(src) + r0 * rowBytes,
           (size_t)(r1 - r0) * rowBytes);
  }
}

} // namespace qcc::rt

#endif // QCC_RUNTIME_PACKCHUNKS_H
