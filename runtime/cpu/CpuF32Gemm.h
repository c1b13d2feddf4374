//===- CpuF32Gemm.h - float32 linears from packed weights -------*- C++ -*-===//
//
// y[m, n] = sum_k x[m, k] * w[n, k] for a constant float32 weight [N, K],
// packed once when the session first runs an entry point (Session.cpp), as
// the int8 GEMM's weights are. Why: BLAS and oneDNN's sgemm pack a linear's
// weight on every call (a full read and write of it per forward pass: 22%
// of SmolLM2's float prefill time went to that), where onnxruntime's MLAS
// packs once at load. The layout:
//
//   blocks of 16 output columns (one zmm); in a block, for each k, the 16
//   columns' values in a row (64 bytes); N padded to 16 with zero weights.
//
// Tiles of up to 12 rows x 32 columns (24 accumulators, 2 weight loads and
// 12 broadcasts per k), up to 4 rows x 64 columns for decode's few rows; K
// in equal slices of at most 1,024, the next strip's weight prefetched into
// L2 meanwhile. Prefill threads over column strips (each thread
// reads its slice of the weight once), decode over parallelChunks. One
// pass over the packed weight serves every row of the batch, and it is read
// in order: the same layout serves the GEMV of batch-1 decode.
//
// AVX-512F only (checked at run time); elsewhere nothing is packed and the
// linear runs on BLAS as before. Sums are in float32 with FMA, K ascending
// per slice: they differ from BLAS's in rounding only (the tests' bound).
//
// --cpu-precision=bf16 (cpuFloatPrecision(), CPUs with AVX512_BF16): the
// weight is packed as bf16 pairs ([blocks][ceil(K / 2)][16] of two bf16 of
// consecutive k, the lower k in the low half; half the bytes) and x is
// rounded to bf16 per call; `vdpbf16ps` adds each pair's two exact products
// to the f32 sums (nearest even, subnormals flushed), twice the f32 FMA's
// multiply rate. The numerics: y = sum_k bf16(x) bf16(w) in f32, the
// relative rounding of x and w 2^-9 each (docs/CPU_BACKEND.md).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUF32GEMM_H
#define QCC_RUNTIME_CPUF32GEMM_H

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "runtime/cpu/PackChunks.h"

namespace qcc::rt {

/// A [N, K] float32 weight in the layout above: float32, or bf16 pairs.
struct PackedF32Weight {
  static constexpr int64_t kCols = 16; ///< columns per block
  int64_t n = 0, k = 0;                ///< the weight's shape
  bool bf16 = false;                   ///< packed as bf16 pairs
  /// [ceil(N / 16)][K][16] floats or [ceil(N / 16)][kPairs()][16] pairs (4
  /// bytes each), 64-byte aligned.
  std::unique_ptr<float[], void (*)(float *)> data{nullptr, nullptr};

  int64_t columnBlocks() const { return (n + kCols - 1) / kCols; }
  int64_t kPairs() const { return (k + 1) / 2; }
  int64_t bytes() const {
    return columnBlocks() * (bf16 ? kPairs() : k) * kCols * 4;
  }
  const float *block(int64_t b) const { return data.get() + b * k * kCols; }
  const uint32_t *pairBlock(int64_t b) const {
    return reinterpret_cast<const uint32_t *>(data.get()) +
           b * kPairs() * kCols;
  }
};

/// Whether this CPU runs the packed kernel (AVX-512F), and its bf16 form
/// (AVX512_BF16).
bool cpuHasAvx512F();
bool cpuHasAvx512Bf16();

/// bf16 of x: nearest even, NaN kept a (quiet) NaN.
uint16_t floatToBf16(float x);

/// The packed form of w [n, k] (row-major, row n at w + n * ldw); nullopt
/// on CPUs without AVX-512F, where the linear keeps BLAS. `done` gets each
/// span of w's rows once packed (runtime/cpu/PackChunks.h).
std::optional<PackedF32Weight> packF32Weight(const float *w, int64_t n,
                                             int64_t k, int64_t ldw,
                                             const SourceDone &done = {});
inline std::optional<PackedF32Weight>
packF32Weight(const float *w, int64_t n, int64_t k,
              const SourceDone &done = {}) {
  return packF32Weight(w, n, k, k, done);
}
/// A linear's weight in the precision cpuFloatPrecision() asks for: bf16
/// pairs on a CPU with AVX512_BF16 under --cpu-precision=bf16, else
/// packF32Weight's.
std::optional<PackedF32Weight> packLinearWeight(const float *w, int64_t n,
                                                int64_t k,
                                                const SourceDone &done = {});

/// C[m, n] (row stride ldc) = sum_k x[m * lda + k] * w[n, k] for m < M,
/// then epilogue(m0, m1, n0, n1) on each block of C by the thread that
/// computed it, while the block is in its cache (sgemmThen's contract).
void f32GemmThen(const float *x, int64_t lda, int64_t M,
                 const PackedF32Weight &w, float *C, int64_t ldc,
                 const std::function<void(int64_t, int64_t, int64_t,
                                          int64_t)> &epilogue);

/// f32GemmThen's product for columns [n0, n1) of w (n0 a multiple of 16)
/// into C[m, n - n0], on the calling thread and without an epilogue: for a
/// caller that threads its own tasks (attention's scores over packed keys).
void f32GemmPackedOnThread(const float *x, int64_t lda, int64_t M,
                           const PackedF32Weight &w, int64_t n0, int64_t n1,
                           float *C, int64_t ldc);

/// C[m, n] = sum_k x[m * lda + k] * b[k * ldb + n] for m < M, n < N (a
/// multiple of 16), k < K, on the calling thread: the same tiles reading a
/// row-major B in place, 16 columns being contiguous already (attention's
/// values). Needs AVX-512F (cpuHasAvx512F).
void f32GemmRowMajorB(const float *x, int64_t lda, int64_t M, const float *b,
                      int64_t ldb, int64_t N, int64_t K, float *C,
                      int64_t ldc);

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPUF32GEMM_H
