//===- CpuInt8Gemm.h - the int8 GEMM behind the CPU's qlinear ---*- C++ -*-===//
//
// C[m, n] = sum_k x[m, k] * w[n, k] in int32, exact, for a constant weight
// packed once when the session first runs an entry point (Session.cpp), not
// per call. The packed layout serves both kernels:
//
//   blocks of 16 output columns; in a block, for each group of 4 k, the 16
//   columns' 4 bytes in a row (64 bytes: one zmm register, what vpdpbusd
//   multiplies); K padded to a multiple of 4 and N to 16 with zero weights.
//
// Fast, on CPUs with AVX-512 VNNI (checked at run time): vpdpbusd multiplies
// unsigned by signed bytes, so the activations go in as x + 128 (x xor 0x80)
// and each accumulator starts at -128 * sum_k w[n, k] (precomputed at
// packing). vpdpbusd is the wrapping (not the saturating) form: two's
// complement int32 arithmetic is exact modulo 2^32, so the result is the
// exact sum whenever that fits int32: |sum| <= 128 * 128 * K < 2^31 for
// K <= 131071 (qlinear refuses K > 65535, QLinearEpilogue::check).
// Tiles of up to 8 rows x 32 columns (16 accumulators): each weight byte is
// read once per 8 rows, so batch-1..8 decode reads the weights once per
// step. Threaded (OpenMP) over tiles, column strips outermost.
// AMX, on CPUs with AMX-INT8 that the OS lets the process use: more than 8
// rows with K a multiple of 64 run as 32 x 32 blocks of tile multiplies
// (_tile_dpbssd, signed x signed, from the same packed weight: its 16
// groups of a column block are a B tile), exact as above.
// Portable (the knob in CpuKernels.h, and Fast on CPUs without VNNI): no
// packing; four rows at a time against each dense weight row, K contiguous,
// in plain C++ that compilers vectorize. Reference: the dense qlinear of
// CpuQuantKernels.cpp, one row by one column.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUINT8GEMM_H
#define QCC_RUNTIME_CPUINT8GEMM_H

#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/PackChunks.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace qcc::rt {

/// A [N, K] int8 weight in the layout above.
struct PackedI8Weight {
  static constexpr int64_t kCols = 16; ///< columns per block
  static constexpr int64_t kGroup = 4; ///< k per vpdpbusd lane
  struct alignas(64) Block {
    int8_t b[kCols * kGroup];
  };
  int64_t n = 0, k = 0;   ///< the weight's shape
  int64_t groups = 0;     ///< ceil(K / 4)
  std::vector<Block> blocks;   ///< [ceil(N / 16)][groups]
  std::vector<int32_t> colSum; ///< sum_k w[n, k], padded to 16 with zeros

  int64_t columnBlocks() const { return (n + kCols - 1) / kCols; }
  int64_t bytes() const { return (int64_t)blocks.size() * sizeof(Block); }
};

/// `done` gets each span of w's rows once packed (runtime/cpu/PackChunks.h).
PackedI8Weight packI8Weight(const int8_t *w, int64_t n, int64_t k,
                            const SourceDone &done = {});

/// Whether this CPU runs the fast kernel (AVX-512 F/BW/VL + VNNI).
bool cpuHasVnni();

/// Whether prefill-sized GEMMs run on AMX tiles (AMX-INT8, granted by the
/// OS; QCC_CPU_AMX=0 turns it off): from the same packed weight, exact.
bool cpuHasAmxInt8();

/// The packed form of a constant [N, K] weight for `path`: for Fast on a
/// CPU with VNNI; nullopt otherwise (the portable kernel reads the dense
/// weight).
std::optional<PackedI8Weight> packForPath(const int8_t *w, int64_t n,
                                          int64_t k, CpuKernelPath path,
                                          const SourceDone &done = {});

/// C[m, n] (row stride N) = sum_k x[m * K + k] * w[n * K + k], exact: from
/// `packed` when given (VNNI), else portably from the dense `w`.
void i8Gemm(const int8_t *x, int64_t M, const int8_t *w,
            const PackedI8Weight *packed, int64_t N, int64_t K, int32_t *C);

/// qlinear(...) (attributes and operands as qlinearKernel's,
/// CpuQuantKernels.h) on the fast or portable path: from `packed` (the
/// packed ops[3]) when given, else the portable kernel; with outlier columns
/// the mixed GEMM (plus a float GEMM on the gathered columns, vectorized).
/// Equals qlinearKernel bit for bit; with `epilogue`, equals qlinearKernel
/// followed by the fast path's gelu or add (LinearEpilogue), applied to each
/// block as its tile finishes.
std::vector<Tensor> fastQLinearKernel(const Attrs &attrs, const Operands &ops,
                                      const PackedI8Weight *packed,
                                      const LinearEpilogue &epilogue = {});

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPUINT8GEMM_H
