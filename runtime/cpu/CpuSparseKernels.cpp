//===- CpuSparseKernels.cpp - 2:4 sparse linears on the CPU ---------------===//
//
// The sparse GEMM of CpuSparseKernels.h. One loop nest for every element
// type: per weight row n (threaded over n), a sum over the row's groups of
// the two kept values times the x elements at the two positions its
// metadata nibble names. Two accumulators (the first and the second kept
// element of each group) halve the add chain's latency; their order is fixed,
// so a result does not depend on the batch or the thread count. The int8
// dot product has an SSSE3 form too (pshufb gathers the kept x elements),
// chosen at run time; its sums are exact like the scalar loop's. Compiled
// with -ffp-contract=off like CpuQuantKernels.cpp (the qlinear epilogue).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuSparseKernels.h"

#include "runtime/cpu/CpuInt8Gemm.h"
#include "runtime/cpu/CpuQuantKernels.h"
#include "runtime/core/HalfFloat.h"

#include "format/Sparse24.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include "runtime/cpu/X86Intrinsics.h"
#endif

using namespace qcc::rt;
namespace sp = qcc::format::sparse24;


namespace {

[[noreturn]] void fail(const std::string &why) {
  throw std::runtime_error(why);
}

/// Rows of K values: all dims but the last.
int64_t rowsOf(const Tensor &x) {
  int64_t m = 1;
  for (int64_t d = 0; d + 1 < x.rank(); ++d)
    m *= x.dim(d);
  return m;
}

/// Sum over one weight row of values[2g + j] * x[4g + pos_j(g)], j = 0, 1:
/// the first kept elements into a0, the second into a1, then a0 + a1.
/// `widen` reads a value as Acc's type.
template <typename Acc, typename V, typename X, typename Widen>
Acc sparseDot(const V *values, const int32_t *meta, int64_t K, const X *x,
              Widen widen) {
  Acc a0 = 0, a1 = 0;
  for (int64_t c = 0; c < K / sp::kKPerWord; ++c) {
    uint32_t word = (uint32_t)meta[c];
    const V *v = values + c * (sp::kKPerWord / 2);
    const X *xw = x + c * sp::kKPerWord;
    for (int j = 0; j < sp::kGroupsPerWord; ++j, word >>= sp::kBitsPerGroup) {
      const X *xg = xw + j * sp::kGroup;
      a0 += widen(v[2 * j]) * (Acc)xg[word & 3u];
      a1 += widen(v[2 * j + 1]) * (Acc)xg[(word >> 2) & 3u];
    }
  }
  return a0 + a1;
}

/// For every weight row n (values row `vr`, metadata row `mr`) and input
/// row m: store(m, n, dot(vr, mr, m)).
template <typename V, typename Dot, typename Store>
void sparseGemm(const Sparse24Weight &w, int64_t M, Dot dot, Store store) {
  const int64_t N = w.n(), K = w.k();
  const V *values = w.values->data<V>();
  const int32_t *meta = w.meta->data<int32_t>();
  // The dense qlinear's bound (the work counted as its dense MACs), so that
  // the two thread alike (over the process's one pool: setCpuThreads in
  // CpuKernels.h).
#pragma omp parallel for schedule(static) if (M * N * K > kQLinearParallelWork)
  for (int64_t n = 0; n < N; ++n) {
    const V *vr = values + n * sp::valuesCols(K);
    const int32_t *mr = meta + n * sp::metaCols(K);
    for (int64_t m = 0; m < M; ++m)
      store(m, n, dot(vr, mr, m));
  }
}

#if defined(__x86_64__)
/// The int8 dot product with SSSE3 (every x86-64 CPU since 2006; the build
/// targets plain x86-64, so it is chosen at run time): one metadata byte
/// names the kept positions of 8 consecutive k, which are 16 bytes of x
/// widened to int16, and one pshufb gathers their 4 kept elements; pmaddwd
/// multiplies 8 of them with 8 values at a time. Exact int32 sums, as the
/// scalar loop.
struct GatherTable {
  alignas(16) uint8_t control[256][16];
};
const GatherTable &gatherTable() {
  static const GatherTable table = [] {
    GatherTable t{};
    for (int b = 0; b < 256; ++b) {
      int k[4] = {b & 3, (b >> 2) & 3, 4 + ((b >> 4) & 3), 4 + ((b >> 6) & 3)};
      for (int e = 0; e < 4; ++e) {
        t.control[b][2 * e] = (uint8_t)(2 * k[e]);
        t.control[b][2 * e + 1] = (uint8_t)(2 * k[e] + 1);
      }
      for (int i = 8; i < 16; ++i)
        t.control[b][i] = 0x80; // zero
    }
    return t;
  }();
  return table;
}

__attribute__((target("ssse3"))) int32_t
sparseDotI8Ssse3(const int8_t *values, const int32_t *meta, int64_t K,
                 const int16_t *x16, const GatherTable &table) {
  // Little-endian: byte j of a metadata word holds groups 2j and 2j + 1.
  const uint8_t *bytes = reinterpret_cast<const uint8_t *>(meta);
  __m128i acc = _mm_setzero_si128();
  for (int64_t c = 0; c < K / sp::kKPerWord; ++c) {
    const int16_t *xw = x16 + c * sp::kKPerWord;
    __m128i g[4];
    for (int j = 0; j < 4; ++j)
      g[j] = _mm_shuffle_epi8(
          _mm_loadu_si128(reinterpret_cast<const __m128i *>(xw + 8 * j)),
          _mm_load_si128(reinterpret_cast<const __m128i *>(
              table.control[bytes[4 * c + j]])));
    __m128i v = _mm_loadu_si128(
        reinterpret_cast<const __m128i *>(values + c * (sp::kKPerWord / 2)));
    __m128i vlo = _mm_srai_epi16(_mm_unpacklo_epi8(v, v), 8);
    __m128i vhi = _mm_srai_epi16(_mm_unpackhi_epi8(v, v), 8);
    acc =
        _mm_add_epi32(acc, _mm_madd_epi16(_mm_unpacklo_epi64(g[0], g[1]), vlo));
    acc =
        _mm_add_epi32(acc, _mm_madd_epi16(_mm_unpacklo_epi64(g[2], g[3]), vhi));
  }
  acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0x4E));
  acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0xB1));
  return _mm_cvtsi128_si32(acc);
}

bool haveSsse3() {
  static const bool have = __builtin_cpu_supports("ssse3");
  return have;
}
#endif

} // namespace

static std::atomic<int> gSparseMode{-1}; // -1: not yet read from the env

SparseMode qcc::rt::sparseMode() {
  if (gSparseMode.load() < 0) {
    const char *env = std::getenv("QCC_CPU_SPARSE");
    std::string v = env ? env : "auto";
    int mode = v == "sparse" ? (int)SparseMode::Sparse
               : v == "dense" ? (int)SparseMode::Dense
                              : (int)SparseMode::Auto;
    int unset = -1;
    gSparseMode.compare_exchange_strong(unset, mode);
  }
  return (SparseMode)gSparseMode.load();
}

void qcc::rt::setSparseMode(SparseMode mode) { gSparseMode = (int)mode; }

bool qcc::rt::sparseRunsDense() {
  if (cpuKernelPath() != CpuKernelPath::Fast || !cpuHasVnni())
    return false; // the dense kernels are the portable ones: keep sparse
  return sparseMode() != SparseMode::Sparse;
}

Sparse24Weight qcc::rt::sparseWeight(const Tensor &values, const Tensor &meta,
                                     bool checkMeta) {
  if (values.rank() != 2 || meta.rank() != 2 || meta.dtype() != DType::I32)
    fail("sparse_2_4 needs values [N, K/2] and i32 meta [N, K/32], got " +
         shapeString(values.shape()) + " and " + shapeString(meta.shape()) +
         " " + dtypeName(meta.dtype()));
  Sparse24Weight w{&values, &meta};
  if (w.k() % sp::kKAlignment != 0 || meta.dim(0) != w.n() ||
      meta.dim(1) != sp::metaCols(w.k()))
    fail("sparse_2_4 values " + shapeString(values.shape()) + " and meta " +
         shapeString(meta.shape()) +
         " do not describe an [N, K] weight with "
         "K a multiple of " +
         std::to_string(sp::kKAlignment));
  if (checkMeta)
    if (auto why = sp::validateMeta(meta.data<int32_t>(), w.n(), w.k()))
      fail("sparse_2_4: " + *why);
  return w;
}

std::vector<Tensor> qcc::rt::sparseLinearKernel(const Operands &ops,
                                                const Sparse24Weight &w) {
  const int64_t N = w.n();
  auto [xp, bias] = compressedLinearOperands(ops, N, w.k());
  const Tensor &x = *xp;
  Shape out = x.shape();
  out.back() = N;
  Tensor r(DType::F32, out);
  float *Y = r.data<float>();
  const float *B = bias ? bias->data<float>() : nullptr;
  auto store = [&](int64_t m, int64_t n, float acc) {
    Y[m * N + n] = B ? acc + B[n] : acc;
  };
  const float *X = x.data<float>();
  const int64_t M = rowsOf(x);
  const int64_t K = w.k();
  auto gemm = [&](auto value, auto widen) {
    using V = decltype(value);
    sparseGemm<V>(
        w, M,
        [&](const V *vr, const int32_t *mr, int64_t m) {
          return sparseDot<float>(vr, mr, K, X + m * K, widen);
        },
        store);
  };
  switch (w.values->dtype()) {
  case DType::F32:
    gemm(float(), [](float v) { return v; });
    break;
  case DType::F16:
    gemm(uint16_t(), halfToFloat);
    break;
  case DType::BF16:
    gemm(uint16_t(), bf16ToFloat);
    break;
  default:
    fail(std::string("sparse linear values must be f32, f16 or bf16, got ") +
         dtypeName(w.values->dtype()));
  }
  return {std::move(r)};
}

std::vector<Tensor> qcc::rt::sparseQLinearKernel(const Operands &ops,
                                                 const Sparse24Weight &w) {
  if (w.values->dtype() != DType::I8)
    fail(std::string("sparse qlinear values must be i8, got ") +
         dtypeName(w.values->dtype()));
  // No outlier columns: the compiler never gives a 2:4 weight any.
  static const nlohmann::json kNone = nlohmann::json::object();
  const QLinearEpilogue e = QLinearEpilogue::check(Attrs(kNone), ops, w.n(), w.k());
  Tensor r(DType::F32, e.resultShape);
  float *Y = r.data<float>();
  auto store = [&](int64_t m, int64_t n, int32_t acc) {
    Y[m * e.N + n] = e(acc, m, n);
  };
  const int64_t K = e.K;
#if defined(__x86_64__)
  if (haveSsse3() && cpuKernelPath() != CpuKernelPath::Portable) {
    // x widened to int16 once for all the weight rows.
    std::vector<int16_t> x16((size_t)(e.M * K));
    for (size_t i = 0; i < x16.size(); ++i)
      x16[i] = e.x[i];
    const GatherTable &table = gatherTable();
    sparseGemm<int8_t>(
        w, e.M,
        [&](const int8_t *vr, const int32_t *mr, int64_t m) {
          return sparseDotI8Ssse3(vr, mr, K, x16.data() + m * K, table);
        },
        store);
    return {std::move(r)};
  }
#endif
  sparseGemm<int8_t>(
      w, e.M,
      [&](const int8_t *vr, const int32_t *mr, int64_t m) {
        return sparseDot<int32_t>(vr, mr, K, e.x + m * K,
                                  [](int8_t v) { return (int32_t)v; });
      },
      store);
  return {std::move(r)};
}
