//===- CpuChunkPoolTest.cpp - parallelChunks ------------------------------===//
#include "runtime/cpu/CpuChunkPool.h"
#include "runtime/cpu/CpuKernels.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace qcc::rt;

namespace {

/// Restores the pool's size after a test that changes it.
struct ThreadsGuard {
  int before = cpuThreads();
  ~ThreadsGuard() { setCpuThreads(before); }
};

} // namespace

TEST(CpuChunkPool, RunsEveryChunkOnce) {
  ThreadsGuard guard;
  for (int threads : {1, 2, 3}) {
    setCpuThreads(threads);
    // Many small jobs back to back, as a decode step's kernels come: each
    // chunk runs exactly once per job, and a job's chunks never run after
    // parallelChunks returned (the counts are read right away).
    for (int64_t n : {0, 1, 2, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      for (int job = 0; job < 50; ++job) {
        parallelChunks(n, [&](int64_t i) { hits[i].fetch_add(1); });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[i].load(), job + 1)
              << threads << " threads, n=" << n << ", chunk " << i;
      }
    }
  }
}

TEST(CpuChunkPool, UsesTheHelpers) {
  ThreadsGuard guard;
  setCpuThreads(2);
  // Chunks long enough for a helper to claim some (it spins or wakes
  // within microseconds): some job runs a chunk off this thread. Up to 200
  // jobs (0.64 s), so that a loaded machine's scheduler has time to run the
  // helper at all; the loop ends at the first such chunk.
  std::thread::id self = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  for (int job = 0; job < 200 && elsewhere == 0; ++job)
    parallelChunks(16, [&](int64_t) {
      auto until = std::chrono::steady_clock::now() +
                   std::chrono::microseconds(200);
      while (std::chrono::steady_clock::now() < until) {
      }
      if (std::this_thread::get_id() != self)
        elsewhere.fetch_add(1);
    });
  EXPECT_GT(elsewhere.load(), 0);
}

TEST(CpuChunkPool, NestedAndConcurrentCallsRunInOrder) {
  ThreadsGuard guard;
  setCpuThreads(2);
  // A call from inside a chunk, and calls from two threads at once (one of
  // them gets the pool, the other runs its chunks itself): all complete.
  std::atomic<int64_t> sum{0};
  auto job = [&] {
    for (int k = 0; k < 100; ++k)
      parallelChunks(8, [&](int64_t i) {
        parallelChunks(4, [&](int64_t j) { sum.fetch_add(i * 4 + j); });
      });
  };
  std::thread other(job);
  job();
  other.join();
  // 2 threads x 100 jobs x sum(0..31)
  EXPECT_EQ(sum.load(), 2 * 100 * (31 * 32 / 2));
}

TEST(CpuChunkPool, RethrowsAfterTheOtherChunks) {
  ThreadsGuard guard;
  setCpuThreads(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(parallelChunks(32,
                              [&](int64_t i) {
                                ran.fetch_add(1);
                                if (i == 5)
                                  throw std::runtime_error("chunk 5");
                              }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 32); // the other chunks still ran
  // The pool is usable afterwards, without the old error.
  std::atomic<int> again{0};
  parallelChunks(8, [&](int64_t) { again.fetch_add(1); });
  EXPECT_EQ(again.load(), 8);
}
