//===- CpuKernelsInternal.h - what the kernel families share ----*- C++ -*-===//
//
// Private to runtime/cpu: the operand and broadcast helpers every kernel
// family uses, and the family kernels that runCpuKernel's switch
// (CpuKernels.cpp) dispatches to. The families: CpuKernels.cpp (attributes,
// elementwise ops, the dispatch), CpuContractionKernels.cpp (sgemm, matmul,
// gemm, reductions), CpuShapeKernels.cpp (shape and data movement),
// CpuTransformerKernels.cpp (linear, norms, activations, softmax, attention,
// rotary, embedding, moe, the weight decoders), CpuAttentionLoops.cpp (the
// attention inner loops), CpuKernelSettings.cpp (threads, the kernel path).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPU_CPUKERNELSINTERNAL_H
#define QCC_RUNTIME_CPU_CPUKERNELSINTERNAL_H

#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/CpuChunkPool.h"
#include "runtime/cpu/CpuF32Gemm.h"

#include <omp.h>

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

namespace qcc::rt::cpukernels {

[[noreturn]] inline void fail(const std::string &why) {
  throw std::runtime_error(why);
}

inline std::string str(const Shape &s) { return shapeString(s); }

inline const Tensor &need(const Operands &ops, size_t i, const char *what) {
  if (i >= ops.size() || !ops[i])
    fail(std::string("missing operand '") + what + "'");
  return *ops[i];
}

inline const Tensor *opt(const Operands &ops, size_t i) {
  return i < ops.size() ? ops[i] : nullptr;
}

[[noreturn]] inline void unsupported(DType t, const char *op) {
  fail(std::string("unsupported dtype ") + dtypeName(t) + " for " + op);
}

inline void requireF32(const Tensor &t, const char *what) {
  if (t.dtype() != DType::F32)
    fail(std::string(what) + " must be f32, got " + dtypeName(t.dtype()));
}

inline int64_t normAxis(int64_t axis, int64_t rank, const char *what = "axis") {
  if (axis < -rank || axis >= rank)
    fail(std::string(what) + " " + std::to_string(axis) +
         " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

/// Calls f(T{}) with T the C++ storage type of `t` (bool as uint8_t).
template <typename F> auto dispatch(DType t, const char *op, F &&f) {
  switch (t) {
  case DType::F32: return f(float{});
  case DType::I64: return f(int64_t{});
  case DType::I32: return f(int32_t{});
  case DType::I8: return f(int8_t{});
  case DType::Bool: return f(uint8_t{});
  default: unsupported(t, op);
  }
}

/// Calls f(U{}) with U an unsigned integer type of the element size (for ops
/// that only move elements).
template <typename F> auto dispatchBytes(DType t, F &&f) {
  switch (dtypeSize(t)) {
  case 1: return f(uint8_t{});
  case 2: return f(uint16_t{});
  case 4: return f(uint32_t{});
  case 8: return f(uint64_t{});
  default: fail("unsupported dtype");
  }
}

/// The int64 values of a 1-D (or scalar) integer tensor (shapes, starts...).
inline std::vector<int64_t> readInts(const Tensor &t, const char *what) {
  std::vector<int64_t> v((size_t)t.numel());
  if (t.dtype() == DType::I64)
    std::copy_n(t.data<int64_t>(), v.size(), v.begin());
  else if (t.dtype() == DType::I32)
    std::copy_n(t.data<int32_t>(), v.size(), v.begin());
  else
    fail(std::string(what) + " must be an integer tensor, got " +
         dtypeName(t.dtype()));
  return v;
}

/// Contiguous row-major strides in elements.
inline std::vector<int64_t> stridesOf(const Shape &s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (int64_t d = (int64_t)s.size() - 1; d >= 0; --d) {
    st[d] = acc;
    // The outermost dimension's product is not a stride; the others must
    // fit (a hostile shape of an op's result, artifact-run fuzzer).
    if (d > 0 && __builtin_mul_overflow(acc, s[d], &acc))
      fail("shape " + str(s) + " has more than 2^63 elements");
  }
  return st;
}

inline Shape broadcastShapes(const std::vector<const Shape *> &shapes) {
  size_t rank = 0;
  for (const Shape *s : shapes)
    rank = std::max(rank, s->size());
  Shape out(rank, 1);
  for (size_t k = 0; k < shapes.size(); ++k) {
    const Shape &s = *shapes[k];
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &o = out[rank - s.size() + i];
      int64_t d = s[i];
      if (d == o || d == 1)
        continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string msg = "operands";
      for (size_t m = 0; m < shapes.size(); ++m)
        msg += (m ? (m + 1 == shapes.size() ? " and " : ", ") : " ") +
               str(*shapes[m]);
      fail(msg + " do not broadcast");
    }
  }
  return out;
}

/// Element strides of `in` viewed as broadcast to `out` (0 where stretched).
inline std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out) {
  std::vector<int64_t> st(out.size(), 0);
  std::vector<int64_t> own = stridesOf(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    st[off + i] = (in[i] == 1 && out[off + i] != 1) ? 0 : own[i];
  return st;
}

/// Visits every index of `out` in row-major order, calling
/// f(linear position, offsets of the N operands under their strides).
template <size_t N, typename F>
inline void bcastLoop(const Shape &out, const std::array<std::vector<int64_t>, N> &st,
               F &&f) {
  int64_t total = numElements(out);
  if (total == 0)
    return;
  std::array<int64_t, N> base{};
  size_t r = out.size();
  if (r == 0) {
    f(int64_t(0), base);
    return;
  }
  int64_t inner = out[r - 1];
  std::array<int64_t, N> innerStride;
  for (size_t k = 0; k < N; ++k)
    innerStride[k] = st[k][r - 1];
  std::vector<int64_t> idx(r - 1, 0);
  int64_t pos = 0;
  for (int64_t outer = 0, nOuter = total / inner; outer < nOuter; ++outer) {
    std::array<int64_t, N> o;
    for (int64_t j = 0; j < inner; ++j, ++pos) {
      for (size_t k = 0; k < N; ++k)
        o[k] = base[k] + j * innerStride[k];
      f(pos, o);
    }
    for (int64_t d = (int64_t)r - 2; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k)
        base[k] += st[k][d];
      if (idx[d] < out[d])
        break;
      for (size_t k = 0; k < N; ++k)
        base[k] -= st[k][d] * out[d];
      idx[d] = 0;
    }
  }
}

/// Copies `in` broadcast to `out` (same dtype) into a new tensor.
inline Tensor broadcastTo(const Tensor &in, const Shape &out) {
  Tensor r(in.dtype(), out);
  dispatchBytes(in.dtype(), [&](auto tag) {
    using U = decltype(tag);
    const U *src = in.data<U>();
    U *dst = r.data<U>();
    bcastLoop<1>(out, {broadcastStrides(in.shape(), out)},
                 [&](int64_t p, const std::array<int64_t, 1> &o) {
                   dst[p] = src[o[0]];
                 });
  });
  return r;
}

enum class BinOp {
  Add, Sub, Mul, Div, Pow, Max, Min,
  Equal, Less, LessEqual, Greater, GreaterEqual, // bool results
  And, Or,                                       // bool operands
};

inline bool isComparison(BinOp op) {
  switch (op) {
  case BinOp::Equal: case BinOp::Less: case BinOp::LessEqual:
  case BinOp::Greater: case BinOp::GreaterEqual:
    return true;
  case BinOp::Add: case BinOp::Sub: case BinOp::Mul: case BinOp::Div:
  case BinOp::Pow: case BinOp::Max: case BinOp::Min: case BinOp::And:
  case BinOp::Or:
    return false;
  }
  return false;
}

template <typename T> bool compare(BinOp op, T a, T b) {
  switch (op) {
  case BinOp::Equal: return a == b;
  case BinOp::Less: return a < b;
  case BinOp::LessEqual: return a <= b;
  case BinOp::Greater: return a > b;
  case BinOp::GreaterEqual: return a >= b;
  default: return false;
  }
}

template <typename T> T intDiv(T a, T b) {
  if (b == 0)
    fail("integer division by zero");
  if constexpr (std::is_signed_v<T>)
    if (b == -1) // avoids the INT_MIN / -1 trap; wraps like two's complement
      return (T)(0 - (std::make_unsigned_t<T>)a);
  return a / b; // C++ truncates toward zero
}

/// -x; for integers wrapping like two's complement (-INT64_MIN is itself, as
/// in onnxruntime), where negating the minimum would be undefined.
template <typename T> T negate(T x) {
  if constexpr (std::is_integral_v<T>)
    return (T)(0 - (uint64_t)x);
  else
    return -x;
}

/// Integer Add / Sub / Mul wrap like two's complement (as onnxruntime's
/// do): computed in uint64_t, where signed overflow would be undefined (and
/// int16 * int16 promotes to an int that can overflow).
template <typename T> T applyBin(BinOp op, T a, T b) {
  constexpr bool kInt = std::is_integral_v<T>;
  using U = uint64_t;
  switch (op) {
  case BinOp::Add:
    if constexpr (kInt)
      return (T)((U)a + (U)b);
    return a + b;
  case BinOp::Sub:
    if constexpr (kInt)
      return (T)((U)a - (U)b);
    return a - b;
  case BinOp::Mul:
    if constexpr (kInt)
      return (T)((U)a * (U)b);
    return a * b;
  case BinOp::Div:
    if constexpr (std::is_floating_point_v<T>)
      return a / b;
    else
      return intDiv(a, b);
  // NaN propagates (numpy maximum / minimum, as onnxruntime).
  case BinOp::Max: return (a != a || a > b) ? a : b;
  case BinOp::Min: return (a != a || a < b) ? a : b;
  default: return T{};
  }
}

/// `kind`'s kernel (its name for errors), computing `op`.

/// A float unary op: f32 in, f32 out.
template <typename F>
std::vector<Tensor> unaryF32(OpKind op, const Operands &ops, F fn) {
  const Tensor &x = need(ops, 0, "input");
  if (x.dtype() != DType::F32)
    unsupported(x.dtype(), opKindName(op));
  Tensor r = Tensor::uninitialized(DType::F32, x.shape()); // every element set
  const float *in = x.data<float>();
  float *out = r.data<float>();
  // Elementwise math (erf, tanh, exp) is the costly part of small models
  // after the GEMMs: spread it over the cores for large tensors.
  int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n >= (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    out[i] = fn(in[i]);
  return std::vector<Tensor>{std::move(r)};
}

/// C[M,N] = alpha * A B + beta * C with row-major A [M,K] (lda) and B (ldb),
/// on the calling thread (OpenBLAS runs single-threaded: setCpuThreads).
void blasSgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
               float alpha, const float *A, int64_t lda, const float *B,
               int64_t ldb, float beta, float *C, int64_t ldc);

/// sgemm (CpuKernels.h), then `epilogue(m0, m1, n0, n1)` on each block of C
/// by the thread that computed it, while the block is still in its cache.
template <typename Epilogue>
void sgemmThen(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
               float alpha, const float *A, int64_t lda, const float *B,
               int64_t ldb, float beta, float *C, int64_t ldc,
               Epilogue epilogue) {
  int threads = omp_in_parallel() ? 1 : cpuThreads();
  const int64_t work = M * N * std::max<int64_t>(K, 1);
  if (threads > 1 && N >= 32 * threads && chunkPoolFits(M, work)) {
    // Decode: column blocks of 16-float multiples, about four per thread.
    int64_t per = (N + 4 * threads - 1) / (4 * threads);
    per = (per + 15) / 16 * 16;
    parallelChunks((N + per - 1) / per, [&](int64_t c) {
      int64_t n0 = c * per, n1 = std::min(N, n0 + per);
      blasSgemm(transA, transB, M, n1 - n0, K, alpha, A, lda,
                B + (transB ? n0 * ldb : n0), ldb, beta, C + n0, ldc);
      epilogue(int64_t(0), M, n0, n1);
    });
    return;
  }
  if (threads <= 1 || work < kParallelWork) {
    blasSgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    epilogue(int64_t(0), M, int64_t(0), N);
    return;
  }
  // Column blocks (each thread reads all of A and its slice of B: a linear's
  // weight is read once) in multiples of 16 floats; row blocks when N is
  // too narrow to give every thread one.
  bool byColumns = N >= 32 * threads;
  int64_t extent = byColumns ? N : M, align = byColumns ? 16 : 1;
  int64_t per = (extent + threads - 1) / threads;
  per = (per + align - 1) / align * align;
#pragma omp parallel num_threads(threads)
  {
    int64_t b0 = std::min(extent, omp_get_thread_num() * per),
            b1 = std::min(extent, b0 + per);
    if (b0 < b1 && byColumns) {
      blasSgemm(transA, transB, M, b1 - b0, K, alpha, A, lda,
                B + (transB ? b0 * ldb : b0), ldb, beta, C + b0, ldc);
      epilogue(int64_t(0), M, b0, b1);
    } else if (b0 < b1) {
      blasSgemm(transA, transB, b1 - b0, N, K, alpha,
                A + (transA ? b0 : b0 * lda), lda, B, ldb, beta,
                C + b0 * ldc, ldc);
      epilogue(b0, b1, int64_t(0), N);
    }
  }
}

/// In-place softmax of n values `stride` apart; a fully masked row becomes
/// zeros (CpuTransformerKernels.cpp).
void softmaxRow(float *v, int64_t n, int64_t stride = 1);

enum class Reduction { Sum, Mean, Max };

// Contractions and reductions (CpuContractionKernels.cpp)
std::vector<Tensor> gemmK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> matmulK(const Attrs &, const Operands &ops);
std::vector<Tensor> reduce(Reduction kind, const Attrs &attrs, const Operands &ops);

// Shape and data movement (CpuShapeKernels.cpp)
std::vector<Tensor> concatK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> constantOfShapeK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> cumsumK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> expandK(const Attrs &, const Operands &ops);
std::vector<Tensor> flattenK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> gatherElementsK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> gatherK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> gatherNdK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> isNaNK(const Attrs &, const Operands &ops);
std::vector<Tensor> nonZeroK(const Attrs &, const Operands &ops);
std::vector<Tensor> oneHotK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> rangeK(const Attrs &, const Operands &ops);
std::vector<Tensor> reshapeK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> scatterElementsK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> scatterNdK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> shapeK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> sliceK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> splitK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> squeezeK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> tileK(const Attrs &, const Operands &ops);
std::vector<Tensor> topKK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> transposeK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> triluK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> unsqueezeK(const Attrs &attrs, const Operands &ops);

// Transformer ops (CpuTransformerKernels.cpp)
std::vector<Tensor> attentionK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> embeddingK(const Attrs &, const Operands &ops);
std::vector<Tensor> geluK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> layerNormK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> linearK(const Operands &ops, const LinearEpilogue &epi, const PackedF32Weight *packed = nullptr);
std::vector<Tensor> moeK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> rmsNormK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> rotaryK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> siluK(const Operands &ops);
std::vector<Tensor> softmaxK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> sparse24K(const Attrs &, const Operands &ops);
std::vector<Tensor> weightInt4K(const Attrs &attrs, const Operands &ops);

} // namespace qcc::rt::cpukernels

#endif // QCC_RUNTIME_CPU_CPUKERNELSINTERNAL_H
