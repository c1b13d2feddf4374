//===- CpuInt4Kernels.cpp - W4A16 linears on the CPU ----------------------===//
#include "runtime/CpuInt4Kernels.h"

#include "format/Int4.h"
#include "runtime/CpuQuantKernels.h"
#include "runtime/HalfFloat.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

using namespace qcc::rt;
namespace i4 = qcc::format::int4;

namespace {

[[noreturn]] void fail(const std::string &why) {
  throw std::runtime_error(why);
}

} // namespace

int64_t qcc::rt::checkInt4Operands(const Tensor &packed, const Tensor &scales,
                                   const Tensor *perm, int64_t groupSize) {
  if (packed.rank() != 2 || packed.dtype() != DType::I8 || scales.rank() != 2)
    fail("weight_int4 needs i8 packed [N, K/2] and scales [N, K/G], got " +
         shapeString(packed.shape()) + " " + dtypeName(packed.dtype()) +
         " and " + shapeString(scales.shape()));
  int64_t n = packed.dim(0), k = packed.dim(1) * 2;
  if (std::string why = i4::groupSizeError(k, groupSize); !why.empty())
    fail("weight_int4: " + why);
  if (scales.dim(0) != n || scales.dim(1) != i4::scaleCols(k, groupSize))
    fail("weight_int4 packed " + shapeString(packed.shape()) + " and scales " +
         shapeString(scales.shape()) + " do not describe an [N, K] weight in "
         "groups of " + std::to_string(groupSize));
  if (perm) {
    if (perm->dtype() != DType::I32 || perm->shape() != Shape{k})
      fail("weight_int4 perm must be i32 [" + std::to_string(k) + "], got " +
           shapeString(perm->shape()) + " " + dtypeName(perm->dtype()));
    if (std::string why = i4::permutationError(perm->data<int32_t>(), k);
        !why.empty())
      fail("weight_int4: " + why);
  }
  return k;
}

Int4Weight qcc::rt::int4Weight(const Tensor &packed, const Tensor &scales,
                               const Tensor *perm, int64_t groupSize) {
  if (scales.dtype() != DType::F16)
    fail(std::string("weight_int4 needs f16 scales, got ") +
         dtypeName(scales.dtype()));
  checkInt4Operands(packed, scales, perm, groupSize);
  return {&packed, &scales, perm, groupSize};
}

namespace {

/// The lanes' fixed sum (CpuInt4Kernels.h).
inline float addLanes(const float *l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/// int4RowDot of one weight row with R input rows at once (the row's loads
/// shared): out[r] = int4RowDot(w, x + r * ldx, K). The lanes of each input
/// row are those of int4RowDot, so the results are the same bits. Compiled
/// for AVX2 too (8 lanes = one register; no FMA, so the same roundings).
template <int R>
__attribute__((target_clones("avx2", "default"))) void
rowDots(const float *w, const float *x, int64_t ldx, int64_t K, float *out) {
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

} // namespace

float qcc::rt::int4RowDot(const float *w, const float *x, int64_t K) {
  float out;
  rowDots<1>(w, x, 0, K, &out);
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
  const uint16_t *S = w.scales->data<uint16_t>();
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
    std::vector<float> row((size_t)K), scale((size_t)groups);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t g = 0; g < groups; ++g)
        scale[g] = halfToFloat(S[n * groups + g]);
      // The row in its stored order (no perm).
      i4::dequantize(P + n * pc, scale.data(), nullptr, 1, K, G, row.data());
      constexpr int64_t kRows = 8;
      float acc[kRows];
      for (int64_t m = 0; m < M; m += kRows) {
        int64_t rows = std::min(kRows, M - m);
        if (rows == kRows)
          rowDots<kRows>(row.data(), X + m * K, K, K, acc);
        else
          for (int64_t r = 0; r < rows; ++r)
            rowDots<1>(row.data(), X + (m + r) * K, 0, K, &acc[r]);
        for (int64_t r = 0; r < rows; ++r)
          Y[(m + r) * N + n] = B ? acc[r] + B[n] : acc[r];
      }
    }
  }
  return {std::move(r)};
}
