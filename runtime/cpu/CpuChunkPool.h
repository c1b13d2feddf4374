//===- CpuChunkPool.h - small parallel loops that never wait on a sleeper -*- C++ -*-===//
//
// The decode step's kernels are small (a GEMV of a few hundred thousand
// multiply-adds takes tens of microseconds) and come one after another. An
// OpenMP region costs them twice: waking a passive worker is a futex call of
// several microseconds, and its closing barrier waits for every worker, so
// on a busy machine (more runnable threads than cores) a worker the kernel
// has not scheduled holds the step up for a time slice (measured: 2-thread
// W8A8 decode fell from 4,400 to 400-530 tokens/s when the GEMVs ran in
// spinning OpenMP regions beside a compile). Here the caller claims chunks
// itself and waits only for chunks a helper has already begun; helpers spin
// for a short while after their last chunk (the next kernel is usually
// microseconds away), then sleep.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUCHUNKPOOL_H
#define QCC_RUNTIME_CPUCHUNKPOOL_H

#include <cstdint>
#include <functional>

namespace qcc::rt {

/// Runs fn(i) for every i in [0, n), on the calling thread and on the
/// pool's helpers (cpuThreads() - 1 threads, started on first use), in no
/// particular order, and returns when all have run. Inside an OpenMP
/// region, inside a chunk, while another thread uses the pool, or with one
/// thread it runs them in order on the calling thread. The first exception
/// a chunk throws is rethrown here once every claimed chunk has finished.
void parallelChunks(int64_t n, const std::function<void(int64_t)> &fn);

/// Whether a kernel over `rows` rows (tokens) and `work` multiply-adds
/// splits over parallelChunks: decode-sized ones, up to 8 rows, from 2^15
/// multiply-adds (below, a chunk's share is under a microsecond). Prefill's
/// larger kernels use the OpenMP pool; smaller ones stay on the calling
/// thread.
inline bool chunkPoolFits(int64_t rows, int64_t work) {
  return rows <= 8 && work >= (int64_t(1) << 15);
}

} // namespace qcc::rt

#endif
