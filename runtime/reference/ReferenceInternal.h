//===- ReferenceInternal.h - what the kernel families share -----*- C++ -*-===//
//
// Private to the CPU kernels (runtime/reference and runtime/cpu): the operand
// and broadcast helpers every kernel family uses, the formulas of the unary
// ops, and the reference families' kernels. The families: ReferenceKernels.cpp
// (attributes, elementwise ops, the dispatch), ContractionKernels.cpp (the
// reference GEMM, matmul, gemm, reductions, lora), ShapeKernels.cpp (shape and
// data movement), TransformerKernels.cpp (linear, norms, activations,
// softmax, attention, rotary, embedding, moe, the weight decoders),
// QuantKernels.cpp (quantize, qlinear).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_REFERENCE_REFERENCEINTERNAL_H
#define QCC_RUNTIME_REFERENCE_REFERENCEINTERNAL_H

#include "runtime/reference/ReferenceKernels.h"

#include "format/Rotation.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
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

/// A float unary op: f32 in, f32 out; loop(in, out, n) computes the n
/// values (every one: the result is not initialized).
template <typename Loop>
std::vector<Tensor> unaryF32With(OpKind op, const Operands &ops, Loop &&loop) {
  const Tensor &x = need(ops, 0, "input");
  if (x.dtype() != DType::F32)
    unsupported(x.dtype(), opKindName(op));
  Tensor r = Tensor::uninitialized(DType::F32, x.shape());
  loop(x.data<float>(), r.data<float>(), x.numel());
  return std::vector<Tensor>{std::move(r)};
}

/// unaryF32With of fn on each value, on the calling thread.
template <typename F>
std::vector<Tensor> unaryF32(OpKind op, const Operands &ops, F fn) {
  return unaryF32With(op, ops, [&](const float *in, float *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = fn(in[i]);
  });
}

/// Calls apply(fn) with fn the formula of the float unary op `op` (sqrt,
/// reciprocal, erf, tanh, sigmoid, exp, cos, sin, relu, log): the one
/// definition the reference kernel and the CPU backend's threaded one share.
/// Returns false (apply not called) for any other op.
template <typename Apply> bool withUnaryFormula(OpKind op, Apply &&apply) {
  switch (op) {
  case OpKind::Sqrt: apply([](float x) { return std::sqrt(x); }); return true;
  case OpKind::Reciprocal: apply([](float x) { return 1.0f / x; }); return true;
  case OpKind::Erf: apply([](float x) { return std::erf(x); }); return true;
  case OpKind::Tanh:
    apply([](float x) { return qcc::numerics::libmTanh(x); });
    return true;
  case OpKind::Sigmoid:
    apply([](float x) { return qcc::numerics::sigmoid(x); });
    return true;
  case OpKind::Exp:
    apply([](float x) { return qcc::numerics::libmExp(x); });
    return true;
  case OpKind::Cos:
    apply([](float x) { return qcc::numerics::libmCos(x); });
    return true;
  case OpKind::Sin:
    apply([](float x) { return qcc::numerics::libmSin(x); });
    return true;
  case OpKind::Relu:
    apply([](float x) { return qcc::numerics::relu(x); });
    return true;
  case OpKind::Log: apply([](float x) { return std::log(x); }); return true;
  default: return false;
  }
}

enum class Reduction { Sum, Mean, Max };

// Elementwise (ReferenceKernels.cpp)
std::vector<Tensor> binary(OpKind kind, BinOp op, const Operands &ops);

// Contractions and reductions (ContractionKernels.cpp); `gemm` does the
// float products (the reference loops unless the caller hands its own).
std::vector<Tensor> gemmK(const Attrs &attrs, const Operands &ops,
                          Sgemm gemm = reference::sgemm);
std::vector<Tensor> matmulK(const Attrs &, const Operands &ops,
                            Sgemm gemm = reference::sgemm);
std::vector<Tensor> reduce(Reduction kind, const Attrs &attrs, const Operands &ops);

// Shape and data movement (ShapeKernels.cpp)
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

// Transformer ops (TransformerKernels.cpp)

/// A linear's operands checked (weight [N, K] f32, bias [N], the epilogue's
/// residual of the output's shape) and its output allocated.
struct LinearArgs {
  const Tensor &x, &w;
  const Tensor *bias;
  int64_t M, N, K;
  Tensor out;
};
LinearArgs checkLinear(const Operands &ops, const LinearEpilogue &epi);

/// A norm's operands checked: rows of D values, gamma (and beta).
struct NormArgs {
  const float *in, *gamma, *beta; // beta: layer_norm only, optional
  int64_t rows, D;
  double eps;
  Tensor out;
};
NormArgs checkNorm(const Attrs &attrs, const Operands &ops, bool layer);
/// One row of layer_norm / rms_norm given its statistics (the mean and the
/// variance, or the mean square): the formula both paths share.
inline void layerNormRow(NormArgs &a, int64_t row, double mean,
                         double var) {
  const float *v = a.in + row * a.D;
  float *out = a.out.data<float>() + row * a.D;
  double inv = 1.0 / std::sqrt(var + a.eps);
  for (int64_t d = 0; d < a.D; ++d)
    out[d] = (float)((v[d] - mean) * inv * a.gamma[d] +
                     (a.beta ? a.beta[d] : 0.0));
}
inline void rmsNormRow(NormArgs &a, int64_t row, double meanSquare) {
  const float *v = a.in + row * a.D;
  float *out = a.out.data<float>() + row * a.D;
  double inv = 1.0 / std::sqrt(meanSquare + a.eps);
  for (int64_t d = 0; d < a.D; ++d)
    out[d] = (float)(v[d] * inv * a.gamma[d]);
}

/// An attention's operands and attributes checked, its output allocated.
struct AttentionArgs {
  int64_t B, H, Hkv, Sq, Skv, D;
  float scale;
  bool causal;
  int64_t window;
  float softcap;
  const float *Q, *K, *V, *M; // M: the additive mask, or null
  std::vector<int64_t> mst;   // the mask's strides broadcast to [B, H, Sq, Skv]
  Tensor out;                 // [B, Sq, H * D]
};
AttentionArgs checkAttention(const Attrs &attrs, const Operands &ops);

/// A linear as the moe kernel runs it on each expert's rows.
using ExpertLinear =
    std::function<Tensor(const Tensor &rows, const Tensor &weight)>;

std::vector<Tensor> attentionK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> embeddingK(const Attrs &, const Operands &ops);
std::vector<Tensor> geluK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> layerNormK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> moeK(const Attrs &attrs, const Operands &ops,
                         const ExpertLinear &linear);
std::vector<Tensor> rmsNormK(const Attrs &attrs, const Operands &ops);
/// qcc.hadamard's operand checked: rows of K values, the rotation of K and
/// the seed (format/Rotation.h).
struct HadamardArgs {
  const float *in;
  int64_t rows, K;
  format::Rotation rotation;
  Tensor out;
};
HadamardArgs checkHadamard(const Attrs &attrs, const Operands &ops);
/// One row of qcc.hadamard, x Q in double (`scratch` holds K doubles): the
/// formula both paths share.
inline void hadamardRow(const HadamardArgs &a, int64_t row,
                        std::vector<double> &scratch) {
  const float *x = a.in + row * a.K;
  scratch.assign(x, x + a.K);
  a.rotation.rotateRow(scratch);
  float *y = const_cast<Tensor &>(a.out).data<float>() + row * a.K;
  for (int64_t k = 0; k < a.K; ++k)
    y[k] = (float)scratch[k];
}
std::vector<Tensor> hadamardK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> rotaryK(const Attrs &attrs, const Operands &ops);
std::vector<Tensor> siluK(const Operands &ops);
/// softmax over an axis, each row by `row` (the reference's unless given).
std::vector<Tensor> softmaxK(const Attrs &attrs, const Operands &ops,
                             void (*row)(float *, int64_t, int64_t) =
                                 reference::softmaxRow);
std::vector<Tensor> sparse24K(const Attrs &, const Operands &ops);
std::vector<Tensor> weightInt4K(const Attrs &attrs, const Operands &ops);

} // namespace qcc::rt::cpukernels

#endif // QCC_RUNTIME_REFERENCE_REFERENCEINTERNAL_H
