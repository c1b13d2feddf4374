//===- ContractionKernels.cpp - the reference GEMM, matmul, gemm, reductions -===//
//
// Float products by the reference GEMM (reference::sgemm: float sums in
// ascending k) unless the caller hands its own (the CPU backend: BLAS);
// reductions in double; lora in double per product.
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/ReferenceInternal.h"

#include "format/Checked.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

using namespace qcc::rt;
using namespace qcc::rt::cpukernels;

void qcc::rt::reference::sgemm(bool transA, bool transB, int64_t M, int64_t N,
                               int64_t K, float alpha, const float *A,
                               int64_t lda, const float *B, int64_t ldb,
                               float beta, float *C, int64_t ldc) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float sum = 0.0f;
      for (int64_t k = 0; k < K; ++k)
        sum += (transA ? A[k * lda + m] : A[m * lda + k]) *
               (transB ? B[n * ldb + k] : B[k * ldb + n]);
      float &c = C[m * ldc + n];
      // beta == 0 ignores C (BLAS's convention: it may be uninitialized).
      c = beta == 0.0f ? alpha * sum : alpha * sum + beta * c;
    }
}

namespace qcc::rt::cpukernels {

std::vector<Tensor> matmulK(const Attrs &, const Operands &ops, Sgemm gemm) {
  const Tensor &a = need(ops, 0, "lhs"), &b = need(ops, 1, "rhs");
  requireF32(a, "lhs");
  requireF32(b, "rhs");
  if (a.rank() < 1 || b.rank() < 1)
    fail("matmul operands must have rank >= 1, got " + str(a.shape()) +
         " and " + str(b.shape()));
  Shape as = a.shape(), bs = b.shape();
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K)
    fail("matmul contraction sizes differ: " + str(a.shape()) + " and " +
         str(b.shape()));
  Shape aBatch(as.begin(), as.end() - 2), bBatch(bs.begin(), bs.end() - 2);
  Shape batch;
  try {
    batch = broadcastShapes({&aBatch, &bBatch});
  } catch (const std::exception &) {
    fail("matmul batch dimensions of " + str(a.shape()) + " and " +
         str(b.shape()) + " do not broadcast");
  }
  Shape outShape = batch;
  if (!aVec)
    outShape.push_back(M);
  if (!bVec)
    outShape.push_back(N);
  Tensor r(DType::F32, outShape);
  const float *A = a.data<float>(), *B = b.data<float>();
  float *C = r.data<float>();
  // rhs without batch dims and lhs batch not broadcast: one GEMM with the
  // batch folded into M.
  if (bBatch.empty() || numElements(bBatch) == 1) {
    if (numElements(aBatch) == numElements(batch)) {
      gemm(false, false, numElements(batch) * M, N, K, 1.0f, A, K, B, N, 0.0f,
            C, N);
      return {std::move(r)};
    }
  }
  std::array<std::vector<int64_t>, 2> st = {broadcastStrides(aBatch, batch),
                                            broadcastStrides(bBatch, batch)};
  bcastLoop<2>(batch, st, [&](int64_t p, const std::array<int64_t, 2> &o) {
    gemm(false, false, M, N, K, 1.0f, A + o[0] * M * K, K, B + o[1] * K * N,
          N, 0.0f, C + p * M * N, N);
  });
  return {std::move(r)};
}

std::vector<Tensor> gemmK(const Attrs &attrs, const Operands &ops, Sgemm gemm) {
  const Tensor &a = need(ops, 0, "a"), &b = need(ops, 1, "b");
  const Tensor *c = opt(ops, 2);
  requireF32(a, "a");
  requireF32(b, "b");
  if (a.rank() != 2 || b.rank() != 2)
    fail("gemm operands must be 2-D, got " + str(a.shape()) + " and " +
         str(b.shape()));
  float alpha = attrs.has("alpha") ? (float)attrs.f("alpha") : 1.0f;
  float beta = attrs.has("beta") ? (float)attrs.f("beta") : 1.0f;
  bool tA = attrs.has("transA") && attrs.b("transA");
  bool tB = attrs.has("transB") && attrs.b("transB");
  int64_t M = tA ? a.dim(1) : a.dim(0), K = tA ? a.dim(0) : a.dim(1);
  int64_t K2 = tB ? b.dim(1) : b.dim(0), N = tB ? b.dim(0) : b.dim(1);
  if (K != K2)
    fail("gemm contraction sizes differ: " + str(a.shape()) +
         (tA ? "^T" : "") + " and " + str(b.shape()) + (tB ? "^T" : ""));
  Tensor r(DType::F32, {M, N});
  float *C = r.data<float>();
  float cBeta = 0.0f;
  if (c) {
    requireF32(*c, "c");
    Shape mn = {M, N};
    if (broadcastShapes({&c->shape(), &mn}) != mn)
      fail("gemm c " + str(c->shape()) + " does not broadcast to " + str(mn));
    Tensor cb = broadcastTo(*c, mn);
    const float *src = cb.data<float>();
    for (int64_t i = 0; i < M * N; ++i)
      C[i] = beta * src[i];
    cBeta = 1.0f;
  }
  gemm(tA, tB, M, N, K, alpha, a.data<float>(), a.dim(1), b.data<float>(),
        b.dim(1), cBeta, C, N);
  return {std::move(r)};
}

std::vector<Tensor> reduce(Reduction kind, const Attrs &attrs,
                           const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  // Integer sums (attention-mask lengths) and maxima (repeat_interleave's
  // largest count) are exact in int64.
  bool integer = x.dtype() == DType::I64 || x.dtype() == DType::I32;
  if (!(integer && kind != Reduction::Mean))
    requireF32(x, "input");
  bool keep = attrs.has("keepdims") ? attrs.b("keepdims") : true;
  int64_t rank = x.rank();
  std::vector<bool> red(rank, false);
  for (int64_t ax : attrs.ints("axes")) {
    int64_t a = normAxis(ax, rank);
    if (red[a])
      fail("axis " + std::to_string(ax) + " is repeated");
    red[a] = true;
  }
  // Empty `axes` reduces nothing (the dialect's verifier agrees: the result
  // rank is the input rank).
  Shape kept(rank), outShape;
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    kept[d] = red[d] ? 1 : x.dim(d);
    if (red[d])
      count *= x.dim(d);
    if (!red[d] || keep)
      outShape.push_back(red[d] ? 1 : x.dim(d));
  }
  if (integer) {
    std::vector<int64_t> outStrides = stridesOf(kept);
    for (int64_t d = 0; d < rank; ++d)
      if (red[d])
        outStrides[d] = 0;
    std::vector<uint64_t> acc((size_t)numElements(kept), 0);
    Tensor r(x.dtype(), outShape);
    dispatch(x.dtype(), "reduce_sum", [&](auto tag) {
      using T = decltype(tag);
      const T *in = x.data<T>();
      T *out = r.data<T>();
      if (kind == Reduction::Max) { // of nothing: the type's lowest value
        std::fill_n(out, r.numel(), std::numeric_limits<T>::lowest());
        bcastLoop<1>(x.shape(), {outStrides},
                     [&](int64_t p, const std::array<int64_t, 1> &o) {
                       out[o[0]] = std::max(out[o[0]], in[p]);
                     });
        return;
      }
      bcastLoop<1>(x.shape(), {outStrides},
                   [&](int64_t p, const std::array<int64_t, 1> &o) {
                     acc[o[0]] += (uint64_t)(int64_t)in[p]; // wraps, no UB
                   });
      for (size_t i = 0; i < acc.size(); ++i)
        out[i] = (T)(int64_t)acc[i];
    });
    return {std::move(r)};
  }
  // Accumulate in double: each input element adds to its output slot.
  bool isMax = kind == Reduction::Max;
  std::vector<double> acc((size_t)numElements(kept),
                          isMax ? -INFINITY : 0.0);
  std::vector<int64_t> outStrides = stridesOf(kept);
  for (int64_t d = 0; d < rank; ++d)
    if (red[d])
      outStrides[d] = 0;
  const float *in = x.data<float>();
  bcastLoop<1>(x.shape(), {outStrides},
               [&](int64_t p, const std::array<int64_t, 1> &o) {
                 double &a = acc[o[0]];
                 if (!isMax)
                   a += in[p];
                 else if (in[p] != in[p] || in[p] > a) // NaN propagates
                   a = a != a ? a : in[p];
               });
  Tensor r(DType::F32, outShape);
  float *out = r.data<float>();
  bool mean = kind == Reduction::Mean;
  for (size_t i = 0; i < acc.size(); ++i)
    out[i] = (float)(mean ? (count ? acc[i] / (double)count : NAN) : acc[i]);
  return {std::move(r)};
}

} // namespace qcc::rt::cpukernels

std::vector<Tensor> qcc::rt::loraKernel(const Operands &ops,
                                        const std::vector<int64_t> &adapters) {
  const Tensor &x = need(ops, 0, "input");
  const Tensor &a = need(ops, 1, "a");
  const Tensor &b = need(ops, 2, "b");
  requireF32(x, "lora input");
  requireF32(a, "lora a");
  requireF32(b, "lora b");
  if (x.rank() < 1 || a.rank() != 3 || b.rank() != 3 || a.dim(0) != b.dim(0) ||
      a.dim(1) != b.dim(2) || a.dim(2) != x.dim(-1))
    fail("lora: input " + shapeString(x.shape()) + ", a " +
         shapeString(a.shape()) + " and b " + shapeString(b.shape()) +
         " are not [..., K], [J, R, K] and [J, N, R]");
  int64_t J = a.dim(0), R = a.dim(1), K = a.dim(2), N = b.dim(1);
  Shape outShape = x.shape();
  outShape.back() = N;
  Tensor y(DType::F32, outShape); // zeros: rows without an adapter
  int64_t rows = K > 0 ? x.numel() / K : 0;
  if (adapters.empty() || rows == 0)
    return {y};
  int64_t seqs = (int64_t)adapters.size();
  if (rows % seqs != 0)
    fail("lora: " + std::to_string(rows) + " rows are not a whole number of "
         "rows for each of the call's " + std::to_string(seqs) +
         " sequences");
  int64_t perSeq = rows / seqs;
  const float *xs = x.data<float>(), *as = a.data<float>(),
              *bs = b.data<float>();
  float *ys = y.data<float>();
  std::vector<double> t((size_t)R);
  for (int64_t s = 0; s < seqs; ++s) {
    int64_t j = adapters[(size_t)s];
    if (j < 0 || j > J)
      fail("lora: adapter " + std::to_string(j) + " of sequence " +
           std::to_string(s) + " is not in [0, " + std::to_string(J) + "]");
    if (j == 0)
      continue;
    const float *aj = as + (j - 1) * R * K, *bj = bs + (j - 1) * N * R;
    for (int64_t row = s * perSeq; row < (s + 1) * perSeq; ++row) {
      const float *xr = xs + row * K;
      for (int64_t r = 0; r < R; ++r) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += (double)aj[r * K + k] * xr[k];
        t[(size_t)r] = acc;
      }
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t r = 0; r < R; ++r)
          acc += (double)bj[n * R + r] * t[(size_t)r];
        ys[row * N + n] = (float)acc;
      }
    }
  }
  return {y};
}
