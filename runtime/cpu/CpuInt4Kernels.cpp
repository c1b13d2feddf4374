//===- CpuInt4Kernels.cpp - W4A16 linears on the CPU ----------------------===//
#include "runtime/cpu/CpuInt4Kernels.h"

#include "format/Int4.h"
#include "runtime/cpu/CpuQuantKernels.h"
#include "runtime/core/HalfFloat.h"

#include <algorithm>
#include <stdexcept>

#if defined(__x86_64__)
#include "runtime/cpu/X86Intrinsics.h"
#endif
#include <string>
#include <vector>

using namespace qcc::rt;
namespace i4 = qcc::format::int4;

namespace {

[[noreturn]] void fail(const std::string &why) {
  throw std::runtime_error(why);
}

} // namespace

Int4Weight qcc::rt::int4Weight(const Tensor &packed, const Tensor &scales,
                               const Tensor *perm, const Tensor *offsets,
                               int64_t groupSize) {
  if (scales.dtype() != DType::F16)
    fail(std::string("weight_int4 needs f16 scales, got ") +
         dtypeName(scales.dtype()));
  checkInt4Operands(packed, scales, perm, offsets, groupSize);
  return {&packed, &scales, perm, offsets, groupSize};
}

namespace {

#if defined(__x86_64__)
/// format::int4::dequantize of one row in its stored order (no perm) with
/// AVX2, for group sizes that are multiples of 32: 16 packed bytes (32
/// columns) at a time, nibbles split and interleaved back into column
/// order, decoded by a 16-entry table (pshufb: two's complement, or the
/// nibble itself with offsets), widened to i32 and f32, multiplied by the
/// group's scale and (with offsets) added to its offset, mul then add as
/// format/Int4.cpp: the products are exact, so the same bits
/// (Int4LinearTest).
__attribute__((target("avx2"))) void
dequantizeRowAvx2(const int8_t *packed, const float *scale, const float *offset,
                  int64_t K, int64_t G, float *out) {
  const __m128i codes = offset ? _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                               11, 12, 13, 14, 15)
                               : _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, -8, -7,
                                               -6, -5, -4, -3, -2, -1);
  const __m128i low = _mm_set1_epi8(0x0F);
  for (int64_t j = 0; j < K; j += 32) {
    __m256 s = _mm256_set1_ps(scale[j / G]);
    __m256 m = _mm256_set1_ps(offset ? offset[j / G] : 0.0f);
    __m128i b =
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(packed + j / 2));
    __m128i lo = _mm_and_si128(b, low);
    __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), low);
    __m128i q[2] = {_mm_shuffle_epi8(codes, _mm_unpacklo_epi8(lo, hi)),
                    _mm_shuffle_epi8(codes, _mm_unpackhi_epi8(lo, hi))};
    for (int h = 0; h < 2; ++h)
      for (int e = 0; e < 2; ++e) {
        __m128i eight = e ? _mm_srli_si128(q[h], 8) : q[h];
        __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight));
        __m256 w = _mm256_mul_ps(f, s);
        if (offset)
          w = _mm256_add_ps(w, m);
        _mm256_storeu_ps(out + j + 16 * h + 8 * e, w);
      }
  }
}

bool haveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}
#endif

/// The lanes' fixed sum (CpuInt4Kernels.h).
inline float addLanes(const float *l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/// int4RowDot of one weight row with R input rows at once (the row's loads
/// shared): out[r] = int4RowDot(w, x + r * ldx, K). The lanes of each input
/// row are those of int4RowDot, so the results are the same bits. Compiled
/// for AVX2 too (8 lanes = one register; no FMA, so the same roundings)
/// through the wrappers below: clang 14 (the fuzz build) takes target_clones
/// on plain functions only, not on templates.
template <int R>
inline void rowDots(const float *w, const float *x, int64_t ldx, int64_t K,
                    float *out) {
  float l[R][8] = {};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < 8; ++j)
        l[r][j] += w[k + j] * x[r * ldx + k + j];
  for (; k < K; ++k)
    for (int r = 0; r < R; ++r)
      l[r][k % 8] += w[k] * x[r * ldx + k];
  for (int r = 0; r < R; ++r)
    out[r] = addLanes(l[r]);
}

constexpr int64_t kRows = 8; // input rows per rowDots8 call

__attribute__((target_clones("avx2", "default"))) void
rowDots1(const float *w, const float *x, int64_t K, float *out) {
  rowDots<1>(w, x, 0, K, out);
}

__attribute__((target_clones("avx2", "default"))) void
rowDots8(const float *w, const float *x, int64_t ldx, int64_t K, float *out) {
  rowDots<kRows>(w, x, ldx, K, out);
}

} // namespace

void qcc::rt::dequantizeInt4Row(const int8_t *packed, const float *scale,
                                const float *offset, int64_t K, int64_t G,
                                float *out) {
#if defined(__x86_64__)
  if (G % 32 == 0 && haveAvx2())
    return dequantizeRowAvx2(packed, scale, offset, K, G, out);
#endif
  i4::dequantize(packed, scale, offset, nullptr, 1, K, G, out);
}

float qcc::rt::int4RowDot(const float *w, const float *x, int64_t K) {
  float out;
  rowDots1(w, x, K, &out);
  return out;
}

std::vector<Tensor> qcc::rt::int4LinearKernel(const Operands &ops,
                                              const Int4Weight &w) {
  const int64_t N = w.n(), K = w.k(), G = w.groupSize;
  auto [xp, bias] = compressedLinearOperands(ops, N, K);
  const Tensor &x = *xp;
  int64_t M = 1;
  for (int64_t d = 0; d + 1 < x.rank(); ++d)
    M *= x.dim(d);
  Shape out = x.shape();
  out.back() = N;
  Tensor r(DType::F32, out);
  float *Y = r.data<float>();
  const float *X = x.data<float>(), *B = bias ? bias->data<float>() : nullptr;
  const int8_t *P = w.packed->data<int8_t>();
  const uint16_t *S = w.scales->data<uint16_t>(),
                 *O = w.offsets ? w.offsets->data<uint16_t>() : nullptr;
  const int64_t groups = i4::scaleCols(K, G), pc = i4::packedCols(K);
  // Act-order: the input's columns in the stored order, x'[j] = x[perm[j]],
  // once per call, so that every row is dotted in its stored order.
  std::vector<float> permuted;
  if (w.perm) {
    const int32_t *perm = w.perm->data<int32_t>();
    permuted.resize((size_t)(M * K));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < K; ++j)
        permuted[m * K + j] = X[m * K + perm[j]];
    X = permuted.data();
  }
  // Threads as the dense qlinear of the same MACs (setCpuThreads' pool).
#pragma omp parallel if (M * N * K > kQLinearParallelWork)
  {
    std::vector<float> row((size_t)K), scale((size_t)groups),
        offset(O ? (size_t)groups : 0);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t g = 0; g < groups; ++g)
        scale[g] = halfToFloat(S[n * groups + g]);
      for (int64_t g = 0; O && g < groups; ++g)
        offset[g] = halfToFloat(O[n * groups + g]);
      // The row in its stored order (no perm).
      dequantizeInt4Row(P + n * pc, scale.data(), O ? offset.data() : nullptr,
                        K, G, row.data());
      float acc[kRows];
      for (int64_t m = 0; m < M; m += kRows) {
        int64_t rows = std::min(kRows, M - m);
        if (rows == kRows)
          rowDots8(row.data(), X + m * K, K, K, acc);
        else
          for (int64_t r = 0; r < rows; ++r)
            rowDots1(row.data(), X + (m + r) * K, K, &acc[r]);
        for (int64_t r = 0; r < rows; ++r)
          Y[(m + r) * N + n] = B ? acc[r] + B[n] : acc[r];
      }
    }
  }
  return {std::move(r)};
}
