//===- CpuW4A8Kernels.cpp - W4A8 linears: int8 x int4 products ------------===//
#include "runtime/cpu/CpuW4A8Kernels.h"

#include "format/Int4.h"
#include "runtime/cpu/CpuChunkPool.h"
#include "runtime/cpu/CpuInt8Gemm.h"
#include "runtime/cpu/CpuQuantKernels.h"
#include "runtime/core/HalfFloat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__x86_64__)
#include "runtime/cpu/X86Intrinsics.h"
#endif

using namespace qcc::rt;
namespace i4 = qcc::format::int4;

namespace {

constexpr int64_t kRows = PackedW4A8Weight::kRows;
constexpr int64_t kStep = PackedW4A8Weight::kStep;
constexpr int64_t kInputRows = 8; // input rows per pass over a weight block

/// The call's activations: codes in the stored order [M][K], their group
/// sums [M][groups], the row scales [M].
struct Codes {
  std::vector<int8_t> a;
  std::vector<int32_t> sums;
  const float *scale = nullptr;
};

/// One row of output rows [n0, n0 + nw) of a block against input rows
/// [m0, m0 + mr): the definition (CpuW4A8Kernels.h), one element at a time.
void blockPlain(const PackedW4A8Weight &w, int64_t b, const Codes &c,
                int64_t m0, int64_t mr, const float *bias, float *Y,
                int64_t N) {
  const int64_t K = w.k, G = w.groupSize, groups = w.groups(),
                steps = K / kStep;
  const uint8_t *blk = w.codes.data() + b * steps * 64;
  const uint16_t *S = w.scales.data() + b * groups * kRows;
  const uint16_t *O =
      w.symmetric ? nullptr : w.offsets.data() + b * groups * kRows;
  for (int64_t r = 0; r < kRows && b * kRows + r < N; ++r)
    for (int64_t m = m0; m < m0 + mr; ++m) {
      const int8_t *a = c.a.data() + m * K;
      const int32_t *t = c.sums.data() + m * groups;
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        int32_t d = 0;
        for (int64_t j = g * G; j < (g + 1) * G; ++j) {
          uint8_t byte = blk[(j / kStep) * 64 + r * 4 + (j % kStep) % 4];
          int32_t u = (j % kStep) < 4 ? (byte & 0xF) : (byte >> 4);
          d += u * (int32_t)a[j];
        }
        if (w.symmetric)
          d -= 8 * t[g];
        acc = std::fma((float)d, halfToFloat(S[g * kRows + r]), acc);
        if (O)
          acc = std::fma((float)t[g], halfToFloat(O[g * kRows + r]), acc);
      }
      float y = acc * c.scale[m];
      Y[m * N + b * kRows + r] = bias ? y + bias[b * kRows + r] : y;
    }
}

#if defined(__x86_64__)
#define QCC_W4A8_TARGET                                                        \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/// The same as blockPlain for MR input rows, 16 output rows in the lanes.
template <int MR>
QCC_W4A8_TARGET void blockVnni(const PackedW4A8Weight &w, int64_t b,
                               const Codes &c, int64_t m0, const float *bias,
                               float *Y, int64_t N) {
  const int64_t K = w.k, groups = w.groups(), steps = K / kStep,
                perGroup = w.groupSize / kStep;
  const uint8_t *blk = w.codes.data() + b * steps * 64;
  const uint16_t *S = w.scales.data() + b * groups * kRows;
  const uint16_t *O =
      w.symmetric ? nullptr : w.offsets.data() + b * groups * kRows;
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512 f[MR];
  for (int r = 0; r < MR; ++r)
    f[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m512i d[MR];
    for (int r = 0; r < MR; ++r)
      d[r] = _mm512_setzero_si512();
    for (int64_t j = g * perGroup; j < (g + 1) * perGroup; ++j) {
      __m512i v = _mm512_loadu_si512(blk + j * 64);
      __m512i lo = _mm512_and_si512(v, low);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
      for (int r = 0; r < MR; ++r) {
        const int8_t *a = c.a.data() + (m0 + r) * K + j * kStep;
        int32_t a0, a1;
        std::memcpy(&a0, a, 4);
        std::memcpy(&a1, a + 4, 4);
        d[r] = _mm512_dpbusd_epi32(d[r], lo, _mm512_set1_epi32(a0));
        d[r] = _mm512_dpbusd_epi32(d[r], hi, _mm512_set1_epi32(a1));
      }
    }
    __m512 s = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(S + g * kRows)));
    for (int r = 0; r < MR; ++r) {
      int32_t t = c.sums[(m0 + r) * groups + g];
      if (!O)
        d[r] = _mm512_sub_epi32(d[r], _mm512_set1_epi32(8 * t));
      f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d[r]), s, f[r]);
      if (O)
        f[r] = _mm512_fmadd_ps(
            _mm512_set1_ps((float)t),
            _mm512_cvtph_ps(_mm256_loadu_si256(
                reinterpret_cast<const __m256i *>(O + g * kRows))),
            f[r]);
    }
  }
  const int64_t n0 = b * kRows, nw = std::min(kRows, N - n0);
  const __mmask16 mask = (__mmask16)((1u << nw) - 1);
  for (int r = 0; r < MR; ++r) {
    __m512 y = _mm512_mul_ps(f[r], _mm512_set1_ps(c.scale[m0 + r]));
    if (bias)
      y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(mask, bias + n0));
    _mm512_mask_storeu_ps(Y + (m0 + r) * N + n0, mask, y);
  }
}
#endif

} // namespace

bool qcc::rt::w4a8Packs(const Int4Weight &w) {
  return w.k() % kStep == 0 && w.groupSize % kStep == 0;
}

PackedW4A8Weight qcc::rt::packW4A8Weight(const Int4Weight &w,
                                         const SourceDone &done) {
  if (!w4a8Packs(w))
    throw std::runtime_error("W4A8 packing needs K and the group size to be "
                             "multiples of 8");
  PackedW4A8Weight p;
  p.n = w.n();
  p.k = w.k();
  p.groupSize = w.groupSize;
  p.symmetric = w.offsets == nullptr;
  p.perm = w.perm;
  const int64_t K = p.k, groups = p.groups(), steps = K / kStep,
                pc = i4::packedCols(K);
  p.codes.assign((size_t)(p.blocks() * steps * 64), 0);
  p.scales.assign((size_t)(p.blocks() * groups * kRows), 0);
  if (!p.symmetric)
    p.offsets.assign(p.scales.size(), 0);
  const int8_t *P = w.packed->data<int8_t>();
  const uint16_t *S = w.scales->data<uint16_t>(),
                 *O = w.offsets ? w.offsets->data<uint16_t>() : nullptr;
  const uint32_t flip = p.symmetric ? 8 : 0; // u = q + 8 = nibble ^ 8
  packInChunks(P, p.n, (size_t)pc, kRows, done, [&](int64_t r0, int64_t r1) {
    for (int64_t n = r0; n < r1; ++n) {
      const int64_t b = n / kRows, r = n % kRows;
      uint8_t *blk = p.codes.data() + b * steps * 64;
      for (int64_t j = 0; j < K; ++j) {
        uint32_t u = i4::nibbleAt(P + n * pc, j) ^ flip;
        uint8_t &byte = blk[(j / kStep) * 64 + r * 4 + (j % kStep) % 4];
        byte |= (uint8_t)((j % kStep) < 4 ? u : u << 4);
      }
      for (int64_t g = 0; g < groups; ++g) {
        size_t at = (size_t)((b * groups + g) * kRows + r);
        p.scales[at] = S[n * groups + g];
        if (O)
          p.offsets[at] = O[n * groups + g];
      }
    }
  });
  return p;
}

bool qcc::rt::w4a8RunsVnni() {
  return int4Simd() == Int4Simd::Avx512 && cpuHasVnni();
}

std::vector<Tensor> qcc::rt::w4a8LinearKernel(const Operands &ops,
                                              const PackedW4A8Weight &w,
                                              const Tensor &scale) {
  const int64_t N = w.n, K = w.k, G = w.groupSize, groups = w.groups();
  auto [xp, bias] = compressedLinearOperands(ops, N, K);
  const Tensor &x = *xp;
  const int64_t M = x.numel() / K;
  if (scale.dtype() != DType::F32 || scale.numel() != M)
    throw std::runtime_error("W4A8 linear: the input's scales " +
                             shapeString(scale.shape()) +
                             " are not one f32 per row");
  Shape out = x.shape();
  out.back() = N;
  Tensor r(DType::F32, out);
  float *Y = r.data<float>();
  const float *X = x.data<float>(), *B = bias ? bias->data<float>() : nullptr;
  // The codes back from the values (exact: CpuW4A8Kernels.h), in the
  // stored order, and their group sums.
  Codes c;
  c.scale = scale.data<float>();
  c.a.resize((size_t)(M * K));
  c.sums.assign((size_t)(M * groups), 0);
  const int32_t *perm = w.perm ? w.perm->data<int32_t>() : nullptr;
  std::vector<float> row((size_t)K);
  for (int64_t m = 0; m < M; ++m) {
    const float s = c.scale[m];
    if (!(s > 0.0f) || !std::isfinite(s))
      throw std::runtime_error("W4A8 linear: row " + std::to_string(m) +
                               " has the scale " + std::to_string(s));
    // x' = fl(a s) times fl(1 / s) is a within 3 * 127 * 2^-24; adding and
    // subtracting 1.5 * 2^23 rounds that to the integer a (|x' / s| < 2^22).
    const float inv = 1.0f / s, magic = 12582912.0f;
    const float *x = X + m * K;
    if (perm)
      for (int64_t j = 0; j < K; ++j)
        row[j] = x[perm[j]];
    else
      std::copy(x, x + K, row.begin());
    for (int64_t j = 0; j < K; ++j) {
      float v = row[j] * inv;
      v = v > -127.0f ? (v < 127.0f ? v : 127.0f) : -127.0f; // NaN: -127
      row[j] = (v + magic) - magic;
    }
    int8_t *a = c.a.data() + m * K;
    for (int64_t j = 0; j < K; ++j)
      a[j] = (int8_t)row[j];
    int32_t *t = c.sums.data() + m * groups;
    for (int64_t g = 0; g < groups; ++g) {
      int32_t sum = 0;
      for (int64_t j = g * G; j < (g + 1) * G; ++j)
        sum += a[j];
      t[g] = sum;
    }
  }
  const bool vnni = w4a8RunsVnni();
  auto runBlocks = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t m0 = 0; m0 < M; m0 += kInputRows) {
        const int64_t mr = std::min(kInputRows, M - m0);
#if defined(__x86_64__)
        if (vnni) {
          switch (mr) {
          case 1: blockVnni<1>(w, b, c, m0, B, Y, N); break;
          case 2: blockVnni<2>(w, b, c, m0, B, Y, N); break;
          case 3: blockVnni<3>(w, b, c, m0, B, Y, N); break;
          case 4: blockVnni<4>(w, b, c, m0, B, Y, N); break;
          case 5: blockVnni<5>(w, b, c, m0, B, Y, N); break;
          case 6: blockVnni<6>(w, b, c, m0, B, Y, N); break;
          case 7: blockVnni<7>(w, b, c, m0, B, Y, N); break;
          default: blockVnni<8>(w, b, c, m0, B, Y, N); break;
          }
          continue;
        }
#endif
        blockPlain(w, b, c, m0, mr, B, Y, N);
      }
  };
  // Threaded as the W4A16 kernel: decode-sized calls on the chunk pool,
  // larger ones on OpenMP, small ones here.
  const int64_t blocks = w.blocks(), work = M * N * K;
  if (chunkPoolFits(M, work)) {
    const int64_t per = std::max<int64_t>(1, blocks / (4 * cpuThreads()));
    parallelChunks((blocks + per - 1) / per, [&](int64_t ch) {
      runBlocks(ch * per, std::min(blocks, (ch + 1) * per));
    });
  } else {
#pragma omp parallel for schedule(static) if (work > kQLinearParallelWork)
    for (int64_t b = 0; b < blocks; ++b)
      runBlocks(b, b + 1);
  }
  return {std::move(r)};
}
