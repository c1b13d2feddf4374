//===- CpuKernels.h - the CPU backend's op kernels --------------*- C++ -*-===//
//
// runCpuKernel: the reference semantics of every op kind
// (runtime/reference/ReferenceKernels.h), with the ops where the profile
// shows time run by faster kernels on the fast and portable paths: threaded,
// vectorized, float GEMMs through BLAS (or oneDNN), weights packed at load.
// Errors throw std::runtime_error with the reason (the session adds the node
// name).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUKERNELS_H
#define QCC_RUNTIME_CPUKERNELS_H

#include "format/HalfFloat.h"
#include "format/device/numerics.h"
#include "runtime/reference/ReferenceKernels.h"

#include <cmath>
#include <functional>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

namespace qcc::rt {

struct PackedF32Weight; // CpuF32Gemm.h

/// Which implementation the CPU backend's kernels run: one knob for all of
/// them. Fast (the default): the fastest this CPU allows (attention skips
/// keys that the causal mask or the sliding window excludes, threads over
/// (batch, head, query block) and reads a KV cache's rows once per kv head
/// for its whole query group; sparse linears run from the compressed form
/// with SIMD intrinsics; qlinears from weights packed at load with AVX-512
/// VNNI, symmetric quantize with AVX-512F: CpuInt8Gemm.h). Portable: the same algorithms without ISA-specific
/// intrinsics (the fallback on CPUs without them, selected by the tests).
/// Reference: the reference kernels themselves (runtime/reference), that the
/// others are tested against (docs/ARCHITECTURE.md, "Semantics, twice");
/// they differ only in the order of float sums and in the fast GELU's erf
/// (numerics::rationalErf, within 4.7e-7), never in integer kernels'
/// results. QCC_CPU_KERNELS=fast|
/// portable|reference in the environment selects the path at startup,
/// `qrun --cpu-kernels` on the command line, setCpuKernelPath() at run time.
enum class CpuKernelPath { Fast, Portable, Reference };
void setCpuKernelPath(CpuKernelPath path);
CpuKernelPath cpuKernelPath();
/// "fast", "portable", "reference"; nullopt for anything else.
std::optional<CpuKernelPath> parseCpuKernelPath(std::string_view name);

/// The precision of float32 linears on the fast path: F32 (the default:
/// float32 products and sums), or Bf16 (`qrun --cpu-precision=bf16`, CPUs
/// with AVX512_BF16: weights packed as bf16, activations rounded to bf16,
/// products summed in float32; CpuF32Gemm.h). Set before weights are packed
/// (a session packs at its first run).
enum class CpuFloatPrecision { F32, Bf16 };
void setCpuFloatPrecision(CpuFloatPrecision precision);
CpuFloatPrecision cpuFloatPrecision();
/// "f32", "bf16"; nullopt for anything else.
std::optional<CpuFloatPrecision> parseCpuFloatPrecision(std::string_view name);
/// While alive, cpuKernelPath() answers `path` on the constructing thread,
/// whatever the process-wide path (the tests compare the paths with it).
class ScopedCpuKernelPath {
public:
  explicit ScopedCpuKernelPath(CpuKernelPath path);
  ~ScopedCpuKernelPath();
  ScopedCpuKernelPath(const ScopedCpuKernelPath &) = delete;
  ScopedCpuKernelPath &operator=(const ScopedCpuKernelPath &) = delete;

private:
  std::optional<CpuKernelPath> previous;
};
const char *cpuKernelPathName(CpuKernelPath path);

/// The CPU backend's threads: one OpenMP pool for the process. Its size is
/// `qrun --threads N`, else OMP_NUM_THREADS, else the CPUs of the affinity
/// mask (sched_getaffinity). OpenBLAS runs on the calling thread only
/// (openblas_set_num_threads(1)): sgemm splits a large product over the
/// pool itself, so that OpenBLAS's own pthread pool and OpenMP's spinning
/// workers never compete for the cores (on 2 cores that fight cost more
/// than either pool gained). The first kernel call sets it up; setting it
/// again resizes the pool. It also tunes glibc's malloc for the process:
/// tensors up to 64 MiB from the heap and freed memory kept (up to 256 MiB)
/// for the next pass, instead of page faults on every fresh tensor.
void setCpuThreads(int threads); // <= 0: from the affinity mask
int cpuThreads();
/// The CPUs this process may run on (its affinity mask), at least 1.
int affinityCpus();

/// C[M,N] = alpha * op(A) op(B) + beta * C with row-major operands (op
/// transposes when asked); K == 0 gives C = beta * C. Outside a parallel
/// region, a product of at least kParallelWork multiply-adds is split over
/// the pool by column blocks (row blocks when N is small), one
/// single-threaded OpenBLAS call per block; inside one, it runs on the
/// calling thread.
void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
           float alpha, const float *A, int64_t lda, const float *B,
           int64_t ldb, float beta, float *C, int64_t ldc);

/// Multiply-adds below which the fast path stays on the calling thread
/// (GEMMs, attention over (batch, head, query block)): below it, waking
/// the pool costs more than it saves.
constexpr int64_t kParallelWork = int64_t(1) << 18;

/// The mask of the first min(count, 16) of 16 lanes (count >= 1): what an
/// AVX-512 loop's last, partial vector of a row covers.
inline uint16_t firstLanes(int64_t count) {
  return count >= 16 ? 0xffff : (uint16_t)((1u << count) - 1);
}

/// The fast path's core. Row r of Q (Q + r * ldq, D floats) attends keys
/// [lo[r], hi[r]) of K (key j at K + j * ldk): scores scale * q.k, softcapped
/// when softcap > 0, plus mask[r * maskRow + j * maskCol] when mask is set,
/// softmax over the range as `softmax` does (an empty or fully masked range
/// gives zeros), then O + r * ldo = sum_j p_j V_j (V + j * ldv). Keys outside
/// every row's range are not read. `scratch` is reused between calls.
/// `packedK`, when given, is K packed as a linear's weight (CpuF32Gemm.h:
/// keys as the output columns, from key 0): the scores come from it.
/// `alibi`, when given, holds row r's ALiBi slope: its scores get
/// numerics::alibi(alibi[r], j, hi[r] - 1) after the softcap (the row's
/// query sits at position hi[r] - 1, as in a KV cache).
void attendRows(int64_t R, int64_t D, const float *Q, int64_t ldq,
                const float *K, int64_t ldk, const float *V, int64_t ldv,
                float scale, float softcap, const int64_t *lo,
                const int64_t *hi, const float *mask, int64_t maskRow,
                int64_t maskCol, float *O, int64_t ldo,
                std::vector<float> &scratch,
                const PackedF32Weight *packedK = nullptr,
                const float *alibi = nullptr);

/// The value of every FP8 E4M3 code (numerics::e4m3ToFloat), for loops that
/// read an FP8 KV cache without AVX-512.
const float *e4m3Values();

/// n f16 values widened to f32 (format::halfToFloat's values, exact), with
/// F16C when `vector` and the CPU has it (CpuInt4Kernels.cpp).
void widenHalves(const uint16_t *h, int64_t n, float *out, bool vector);
/// n f32 values narrowed to f16 (format::floatToHalf's bits: nearest even),
/// with F16C when `vector` and the CPU has it.
void narrowToHalves(const float *x, int64_t n, uint16_t *out, bool vector);

/// Whether a KV cache element type has scales (int8_t, E4M3 codes), as
/// opposed to a float format (float, f16 bits).
template <typename T>
inline constexpr bool kScaledKvElement =
    std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>;

/// A cached K/V element as a float: f32 itself; f16 widened (exact); i8
/// q * s; fp8 the code's value times s (numerics.h's dequantizeSymmetric /
/// dequantizeE4M3: the definitions the CUDA kernels share).
inline float kvElementValue(float v, float) { return v; }
inline float kvElementValue(uint16_t h, float) {
  return format::halfToFloat(h);
}
inline float kvElementValue(int8_t q, float s) {
  return numerics::dequantizeSymmetric(q, s);
}
inline float kvElementValue(uint8_t c, float s) { return e4m3Values()[c] * s; }

/// `count` cached tokens from position `first`, D elements each, contiguous:
/// how a KV cache holds a sequence (a paged cache in runs of its blocks).
template <typename T> struct KvRun {
  int64_t first;
  const T *data;
  int64_t count;
  /// int8 and fp8 values: token j's scale is scales[j * scaleStride]
  /// (stride 0: one scale per head; 1: kivi's per-token scales, stored
  /// beside the run).
  const float *scales = nullptr;
  int64_t scaleStride = 0;
};

/// kv_attention's rows straight over the cache's runs, without gathering
/// them into one buffer first (for decode the copy cost twice the
/// attention). Row r attends positions [lo[r], hi[r]), which the runs cover;
/// int8 elements read as q * kScales[d] (keys: D scales, one per channel)
/// and q * the value run's scale of the token; no mask. Each row's scores,
/// softmax and weighted sum are computed alone, in an order fixed by its
/// own range: the same bits whatever the other rows, R, or how the range
/// is split into runs (the batch invariance docs/SERVING.md states).
/// `alibi` as attendRows's.
void attendRuns(int64_t R, int64_t D, const float *Q, int64_t ldq,
                const std::vector<KvRun<float>> &keys,
                const std::vector<KvRun<float>> &values, float scale,
                float softcap, const int64_t *lo, const int64_t *hi, float *O,
                int64_t ldo, std::vector<float> &scratch,
                const float *alibi = nullptr);
/// The same over an f16 (T = uint16_t; kScales null), int8 (T = int8_t) or
/// FP8 (T = uint8_t, E4M3 codes) cache (instantiated for those three in
/// CpuAttentionLoops.cpp).
template <typename T>
void attendRuns(int64_t R, int64_t D, const float *Q, int64_t ldq,
                const std::vector<KvRun<T>> &keys,
                const std::vector<KvRun<T>> &values, const float *kScales,
                float scale, float softcap, const int64_t *lo,
                const int64_t *hi, float *O, int64_t ldo,
                std::vector<float> &scratch, const float *alibi = nullptr);

/// attendRuns's three phases, for kv_attention's decode split: several
/// threads share one (sequence, kv head) by key ranges, then rows, then
/// column blocks, and each row gets attendRuns's bits whatever the split (a
/// score depends only on its key, a softmax on its whole row, a column's
/// weighted sum on that column). Only where attendRunsSplit(D) (the AVX-512
/// path, D % 16 == 0); elsewhere the phases throw.
bool attendRunsSplit(int64_t D);
/// S[r * lds + j - s0] = scale * q_r . k_j for the keys j in [a, e) (the
/// runs cover them); kScales as attendRuns's (null for float and f16).
template <typename T>
void attendRunScores(int64_t R, int64_t D, const float *Q, int64_t ldq,
                     const std::vector<KvRun<T>> &keys, const float *kScales,
                     float scale, int64_t a, int64_t e, float *S, int64_t lds,
                     int64_t s0);
/// A row's scores of positions [lo, hi), row[0] being lo's, become its
/// attention weights: softcap, the ALiBi bias (slope null: none), softmax.
void attendRowSoftmax(float *row, int64_t lo, int64_t hi, float softcap,
                      const float *alibiSlope);
/// Columns [c0, c1) (multiples of 16) of O's rows: row r's weights
/// S[r * lds + j - s0] times the values over its positions [lo[r], hi[r]).
template <typename T>
void attendRunColumns(int64_t R, int64_t D, const std::vector<KvRun<T>> &values,
                      const int64_t *lo, const int64_t *hi, const float *S,
                      int64_t lds, int64_t s0, int64_t c0, int64_t c1,
                      float *O, int64_t ldo);

/// linear (operands input, weight, optional bias), then `epilogue`; on the
/// fast path from `packed` (the weight packed at load, CpuF32Gemm.h) when
/// given, else from the weight through BLAS.
std::vector<Tensor> linearWithEpilogue(const Operands &ops,
                                       const LinearEpilogue &epilogue,
                                       const PackedF32Weight *packed = nullptr);
/// The fast path's exact GELU (the gelu op's, bit for bit) in place over
/// `rows` rows of `cols` floats, `ld` apart: what an epilogue applies.
void geluErfInPlace(float *y, int64_t cols, int64_t ld, int64_t rows);
/// `epi` over rows [m0, m0 + rows) and columns [n0, n0 + cols) of y (N
/// floats a row, and so its residual and factor): bit for bit the fast
/// path's gelu or silu, then add or mul, as separate ops. The one epilogue
/// of the float and the int8 GEMMs.
void applyLinearEpilogue(const LinearEpilogue &epi, float *y, int64_t N,
                         int64_t m0, int64_t rows, int64_t n0, int64_t cols);

/// Runs the kernel of `op` on the current path: reference::runKernel on the
/// reference path, and for the ops without a faster kernel; the faster one
/// otherwise (CpuKernels.cpp lists them).
std::vector<Tensor> runCpuKernel(OpKind op, const Attrs &attrs,
                                 const Operands &operands);

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPUKERNELS_H
