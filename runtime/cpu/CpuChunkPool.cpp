//===- CpuChunkPool.cpp - small parallel loops that never wait on a sleeper ===//
//
// One job at a time: `state` holds the job's generation (high 32 bits) and
// its next unclaimed chunk (low 32 bits), and every claim is a CAS on it, so
// a helper that read an older generation can never claim a chunk of the
// current job. A finished job is closed (next = kClosed) before the next
// one's fields are written; all accesses are sequentially consistent, so a
// helper's successful claim implies the fields it read belong to that job.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuChunkPool.h"

#include "runtime/cpu/CpuKernels.h"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

using namespace qcc::rt;

namespace {

constexpr uint64_t kClosed = 0xffffffffu;
/// How long a helper spins after its last chunk before it sleeps: about the
/// gap between two kernels of a decode step. Measured on the demo model's
/// W8A8 decode, 2 threads: 20, 200 and 2,000 us give the same tokens/s on an
/// idle machine (+25% over one thread); beside a compile on both cores the
/// longer spins lose 12% and 22% against 20 us, which matches the pool-less
/// code there: a spinning helper takes the caller's share of the cores.
constexpr auto kSpin = std::chrono::microseconds(20);

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

thread_local bool tInChunk = false;

struct Pool {
  std::atomic<uint64_t> state{kClosed};
  std::atomic<uint32_t> generation{0};
  std::atomic<const std::function<void(int64_t)> *> fn{nullptr};
  std::atomic<int64_t> total{0}, done{0};
  std::atomic<int> sleepers{0}, active{0};
  std::mutex caller; ///< one job at a time
  std::mutex errorMutex;
  std::exception_ptr error;
  int started = 0; ///< helpers started (under `caller`)

  /// Claims and runs chunks of generation g until none is left.
  void work(uint32_t g) {
    const std::function<void(int64_t)> *f = fn.load();
    int64_t n = total.load();
    for (;;) {
      uint64_t s = state.load();
      uint64_t next = s & kClosed;
      if ((s >> 32) != g || next >= (uint64_t)n)
        return;
      if (!state.compare_exchange_weak(s, s + 1))
        continue;
      tInChunk = true;
      try {
        (*f)((int64_t)next);
      } catch (...) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (!error)
          error = std::current_exception();
      }
      tInChunk = false;
      done.fetch_add(1);
    }
  }

  /// A helper: takes part in each job while its index is below `active`.
  void helper(int index) {
    uint32_t seen = generation.load();
    for (;;) {
      auto until = std::chrono::steady_clock::now() + kSpin;
      uint32_t g = generation.load();
      for (int i = 0; g == seen; ++i, g = generation.load()) {
        cpuRelax();
        if ((i & 31) == 31 && std::chrono::steady_clock::now() > until) {
          sleepers.fetch_add(1);
          generation.wait(seen); // returns at once if it already changed
          sleepers.fetch_sub(1);
          until = std::chrono::steady_clock::now() + kSpin;
        }
      }
      seen = g;
      if (index < active.load())
        work(g);
    }
  }
};

Pool &pool() {
  static Pool *p = new Pool; // never destroyed: helpers may still be waiting
  return *p;
}

void runInOrder(int64_t n, const std::function<void(int64_t)> &fn) {
  for (int64_t i = 0; i < n; ++i)
    fn(i);
}

} // namespace

void qcc::rt::parallelChunks(int64_t n,
                             const std::function<void(int64_t)> &fn) {
  int threads = cpuThreads();
  if (n <= 1 || threads <= 1 || tInChunk || omp_in_parallel() ||
      n >= (int64_t)kClosed)
    return runInOrder(n, fn);
  Pool &p = pool();
  std::unique_lock<std::mutex> lock(p.caller, std::try_to_lock);
  if (!lock.owns_lock())
    return runInOrder(n, fn);
  while (p.started < threads - 1) {
    std::thread([&p, i = p.started] { p.helper(i); }).detach();
    ++p.started;
  }
  p.active.store(threads - 1);
  p.fn.store(&fn);
  p.total.store(n);
  p.done.store(0);
  uint32_t g = p.generation.load() + 1;
  p.state.store((uint64_t)g << 32);
  p.generation.store(g);
  if (p.sleepers.load() > 0)
    p.generation.notify_all();
  p.work(g);
  while (p.done.load() < n)
    cpuRelax();
  p.state.store((uint64_t)g << 32 | kClosed);
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> errorLock(p.errorMutex);
    std::swap(error, p.error);
  }
  if (error)
    std::rethrow_exception(error);
}
