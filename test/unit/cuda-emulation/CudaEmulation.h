//===- CudaEmulation.h - run a device template's CTAs on the host --------===//
//
// launch(grid, threads, body): for each CTA in grid order, `threads` host
// threads run body() with their threadIdx.x and the CTA's blockIdx (x fastest),
// __syncthreads being a barrier over them (qcc/common.cuh in this folder).
// One CTA at a time, so __shared__ statics are the CTA's shared memory.
// Slow (a thread per CUDA thread): for small shapes, to check a template's
// indexing, tiling, edges and synchronization against the CPU kernel before
// a GPU runs it. Include the template after this header.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_TEST_CUDA_EMULATION_H
#define QCC_TEST_CUDA_EMULATION_H

#include "qcc/common.cuh"

#include <functional>
#include <thread>
#include <vector>

namespace qcc::emu {

inline void launch(Dim3 grid, unsigned threads, const std::function<void()> &body) {
  gridSize = grid;
  blockSize = {threads, 1, 1};
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        std::barrier<> barrier((std::ptrdiff_t)threads);
        ctaBarrier = &barrier;
        std::vector<std::thread> cta;
        for (unsigned t = 0; t < threads; ++t)
          cta.emplace_back([&, t] {
            threadIndex = {t, 0, 0};
            blockIndex = {x, y, z};
            body();
            // A thread that returned early still takes part in the
            // barriers the others wait at (a CTA-uniform return has none).
            barrier.arrive_and_drop();
          });
        for (std::thread &th : cta)
          th.join();
      }
}

} // namespace qcc::emu

#endif // QCC_TEST_CUDA_EMULATION_H
