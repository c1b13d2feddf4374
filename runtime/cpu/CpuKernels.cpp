//===- CpuKernels.cpp - the CPU reference backend's op kernels ------------===//
//
// The reference semantics of every qcc op (see dialects/QccOps.td). Kernels
// are written to be obviously right; float GEMMs go through OpenBLAS
// (cblas_sgemm, split over the process's OpenMP pool by sgemm). Where the
// profile shows time (linear, gelu, layer_norm, add, attention) the fast
// path (cpuKernelPath() != Reference) threads and vectorizes; the reference
// path keeps the simple loops it is tested against. Result shapes always
// come from the operands' actual shapes.
//
// Element types: f32, i64, i32, i8 and bool (stored as one byte, 0 or 1).
// f16/bf16 are storage types: computeInF32 (at the end of this file) widens
// them to f32 around every kernel but those that only move elements and cast,
// which take them as they are; kernels called directly reject them with
// "unsupported dtype".
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/CpuChunkPool.h"
#include "runtime/cpu/CpuDnnl.h"
#include "runtime/cpu/CpuF32Gemm.h"

#include "format/Checked.h"
#include "runtime/cpu/CpuQuantKernels.h"
#include "runtime/core/HalfFloat.h"

#include "format/Int4.h"
#include "runtime/cpu/CpuInt4Kernels.h"
#include "format/Sparse24.h"

#include <cblas.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "runtime/cpu/X86Intrinsics.h"
#define QCC_HAVE_AVX512_ATTENTION 1
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <numeric>
#include <stdexcept>

using namespace qcc::rt;
using nlohmann::json;

//===----------------------------------------------------------------------===//
// Attrs
//===----------------------------------------------------------------------===//

static const json &attrAt(const json &j, const char *name) {
  if (!j.is_object() || !j.contains(name))
    throw std::runtime_error(std::string("missing attribute '") + name + "'");
  return j.at(name);
}

int64_t Attrs::i(const char *name) const {
  const json &v = attrAt(j, name);
  if (v.is_boolean())
    return v.get<bool>() ? 1 : 0;
  if (!v.is_number_integer())
    throw std::runtime_error(std::string("attribute '") + name +
                             "' is not an integer: " + v.dump());
  return v.get<int64_t>();
}

int64_t Attrs::i(const char *name, int64_t dflt) const {
  return has(name) ? i(name) : dflt;
}

double Attrs::f(const char *name) const {
  const json &v = attrAt(j, name);
  if (!v.is_number())
    throw std::runtime_error(std::string("attribute '") + name +
                             "' is not a number: " + v.dump());
  return v.get<double>();
}

double Attrs::f(const char *name, double dflt) const {
  return has(name) ? f(name) : dflt;
}

bool Attrs::b(const char *name) const {
  const json &v = attrAt(j, name);
  if (v.is_boolean())
    return v.get<bool>();
  if (v.is_number_integer())
    return v.get<int64_t>() != 0;
  throw std::runtime_error(std::string("attribute '") + name +
                           "' is not a boolean: " + v.dump());
}

std::string Attrs::s(const char *name, const std::string &dflt) const {
  if (!has(name))
    return dflt;
  const json &v = j.at(name);
  if (!v.is_string())
    throw std::runtime_error(std::string("attribute '") + name +
                             "' is not a string: " + v.dump());
  return v.get<std::string>();
}

/// Attribute `name` of `j` as an array of T, each element passing `ok`.
template <typename T>
static std::vector<T> arrayAttr(const json &j, const char *name,
                                bool (json::*ok)() const noexcept,
                                const char *what) {
  const json &v = attrAt(j, name);
  auto bad = [&] {
    return std::runtime_error(std::string("attribute '") + name + "' is not " +
                              what + ": " + v.dump());
  };
  if (!v.is_array())
    throw bad();
  std::vector<T> out;
  for (const json &e : v) {
    if (!(e.*ok)())
      throw bad();
    out.push_back(e.get<T>());
  }
  return out;
}

std::vector<int64_t> Attrs::ints(const char *name) const {
  return arrayAttr<int64_t>(j, name, &json::is_number_integer,
                            "an integer array");
}

std::vector<float> Attrs::floats(const char *name) const {
  return arrayAttr<float>(j, name, &json::is_number, "a number array");
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

[[noreturn]] void fail(const std::string &why) {
  throw std::runtime_error(why);
}

std::string str(const Shape &s) { return shapeString(s); }

const Tensor &need(const Operands &ops, size_t i, const char *what) {
  if (i >= ops.size() || !ops[i])
    fail(std::string("missing operand '") + what + "'");
  return *ops[i];
}

const Tensor *opt(const Operands &ops, size_t i) {
  return i < ops.size() ? ops[i] : nullptr;
}

[[noreturn]] void unsupported(DType t, const char *op) {
  fail(std::string("unsupported dtype ") + dtypeName(t) + " for " + op);
}

void requireF32(const Tensor &t, const char *what) {
  if (t.dtype() != DType::F32)
    fail(std::string(what) + " must be f32, got " + dtypeName(t.dtype()));
}

int64_t normAxis(int64_t axis, int64_t rank, const char *what = "axis") {
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
std::vector<int64_t> readInts(const Tensor &t, const char *what) {
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
std::vector<int64_t> stridesOf(const Shape &s) {
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

Shape broadcastShapes(const std::vector<const Shape *> &shapes) {
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
std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out) {
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
void bcastLoop(const Shape &out, const std::array<std::vector<int64_t>, N> &st,
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
Tensor broadcastTo(const Tensor &in, const Shape &out) {
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

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

enum class BinOp {
  Add, Sub, Mul, Div, Pow, Max, Min,
  Equal, Less, LessEqual, Greater, GreaterEqual, // bool results
  And, Or,                                       // bool operands
};

bool isComparison(BinOp op) {
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
std::vector<Tensor> binary(OpKind kind, BinOp op, const Operands &ops) {
  const Tensor &a = need(ops, 0, "lhs"), &b = need(ops, 1, "rhs");
  const char *name = opKindName(kind);
  Shape out = broadcastShapes({&a.shape(), &b.shape()});
  std::array<std::vector<int64_t>, 2> st = {broadcastStrides(a.shape(), out),
                                            broadcastStrides(b.shape(), out)};
  if (op == BinOp::Pow) {
    requireF32(a, "pow base");
    Tensor r(DType::F32, out);
    const float *x = a.data<float>();
    float *y = r.data<float>();
    dispatch(b.dtype(), name, [&](auto tag) {
      using E = decltype(tag);
      const E *e = b.data<E>();
      bcastLoop<2>(out, st, [&](int64_t p, const std::array<int64_t, 2> &o) {
        y[p] = std::pow(x[o[0]], (float)e[o[1]]);
      });
    });
    return {std::move(r)};
  }
  if (a.dtype() != b.dtype())
    fail(std::string("operand dtypes differ: ") + dtypeName(a.dtype()) +
         " and " + dtypeName(b.dtype()));
  if (isComparison(op)) {
    Tensor r(DType::Bool, out);
    uint8_t *y = r.data<uint8_t>();
    dispatch(a.dtype(), name, [&](auto tag) {
      using T = decltype(tag);
      const T *x = a.data<T>(), *z = b.data<T>();
      bcastLoop<2>(out, st, [&](int64_t p, const std::array<int64_t, 2> &o) {
        y[p] = compare<T>(op, x[o[0]], z[o[1]]);
      });
    });
    return {std::move(r)};
  }
  if (op == BinOp::And || op == BinOp::Or) {
    if (a.dtype() != DType::Bool)
      unsupported(a.dtype(), name);
    Tensor r(DType::Bool, out);
    const uint8_t *x = a.data<uint8_t>(), *z = b.data<uint8_t>();
    uint8_t *y = r.data<uint8_t>();
    bool isAnd = op == BinOp::And;
    bcastLoop<2>(out, st, [&](int64_t p, const std::array<int64_t, 2> &o) {
      y[p] = isAnd ? (x[o[0]] && z[o[1]]) : (x[o[0]] || z[o[1]]);
    });
    return {std::move(r)};
  }
  if (a.dtype() == DType::Bool)
    unsupported(a.dtype(), name);
  Tensor r = Tensor::uninitialized(a.dtype(), out); // every element set
  if (a.dtype() == DType::F32 && a.shape() == b.shape() &&
      (op == BinOp::Add || op == BinOp::Sub || op == BinOp::Mul ||
       op == BinOp::Div) &&
      cpuKernelPath() != CpuKernelPath::Reference) {
    // Same shapes (the residual adds): a flat loop that vectorizes, over
    // the pool when large; the same float operation per element.
    const float *x = a.data<float>(), *z = b.data<float>();
    float *y = r.data<float>();
    int64_t n = r.numel();
#pragma omp parallel for schedule(static) if (n >= (1 << 16))
    for (int64_t i = 0; i < n; ++i)
      y[i] = applyBin<float>(op, x[i], z[i]);
    return {std::move(r)};
  }
  dispatch(a.dtype(), name, [&](auto tag) {
    using T = decltype(tag);
    const T *x = a.data<T>(), *z = b.data<T>();
    T *y = r.data<T>();
    bcastLoop<2>(out, st, [&](int64_t p, const std::array<int64_t, 2> &o) {
      y[p] = applyBin<T>(op, x[o[0]], z[o[1]]);
    });
  });
  return {std::move(r)};
}

std::vector<Tensor> whereK(const Attrs &, const Operands &ops) {
  const Tensor &c = need(ops, 0, "condition"), &a = need(ops, 1, "lhs"),
               &b = need(ops, 2, "rhs");
  if (c.dtype() != DType::Bool)
    fail(std::string("condition must be bool, got ") + dtypeName(c.dtype()));
  if (a.dtype() != b.dtype())
    fail(std::string("operand dtypes differ: ") + dtypeName(a.dtype()) +
         " and " + dtypeName(b.dtype()));
  Shape out = broadcastShapes({&c.shape(), &a.shape(), &b.shape()});
  Tensor r(a.dtype(), out);
  std::array<std::vector<int64_t>, 3> st = {broadcastStrides(c.shape(), out),
                                            broadcastStrides(a.shape(), out),
                                            broadcastStrides(b.shape(), out)};
  const uint8_t *cond = c.data<uint8_t>();
  dispatchBytes(a.dtype(), [&](auto tag) {
    using U = decltype(tag);
    const U *x = a.data<U>(), *z = b.data<U>();
    U *y = r.data<U>();
    bcastLoop<3>(out, st, [&](int64_t p, const std::array<int64_t, 3> &o) {
      y[p] = cond[o[0]] ? x[o[1]] : z[o[2]];
    });
  });
  return {std::move(r)};
}

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

/// A unary op over every numeric dtype (not bool): `fn` is written once for
/// all element types.
template <typename F>
std::vector<Tensor> unaryNumeric(OpKind op, const Operands &ops, F fn) {
  const char *name = opKindName(op);
  const Tensor &x = need(ops, 0, "input");
  if (x.dtype() == DType::Bool)
    unsupported(x.dtype(), name);
  Tensor r(x.dtype(), x.shape());
  dispatch(x.dtype(), name, [&](auto tag) {
    using T = decltype(tag);
    const T *in = x.data<T>();
    T *out = r.data<T>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i)
      out[i] = fn(in[i]);
  });
  return std::vector<Tensor>{std::move(r)};
}

std::vector<Tensor> notK(const Attrs &, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  if (x.dtype() != DType::Bool)
    unsupported(x.dtype(), "not");
  Tensor r(DType::Bool, x.shape());
  const uint8_t *in = x.data<uint8_t>();
  uint8_t *out = r.data<uint8_t>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    out[i] = !in[i];
  return {std::move(r)};
}

std::vector<Tensor> castK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  std::string toName = attrs.s("to", "");
  DType to;
  if (toName.empty())
    fail("missing attribute 'to' (the result dtype)");
  if (!parseDType(toName, to))
    fail("unknown dtype '" + toName + "' in attribute 'to'");
  // f16/bf16 are storage types: a cast from one widens it to f32 (exact)
  // first; a cast to one goes to f32 and rounds once to nearest even (an
  // integer beyond 2^24 rounds twice, to f32 and then to bf16).
  if (isHalfFloat(x.dtype())) {
    Tensor wide = convertFloat(x, DType::F32);
    return castK(attrs, {&wide});
  }
  if (isHalfFloat(to)) {
    static const json toF32 = {{"to", "f32"}};
    Tensor wide = castK(Attrs(toF32), {&x})[0];
    return {convertFloat(wide, to)};
  }
  Tensor r(to, x.shape());
  int64_t n = x.numel();
  dispatch(x.dtype(), "cast", [&](auto in) {
    using S = decltype(in);
    const S *src = x.data<S>();
    dispatch(to, "cast", [&](auto outTag) {
      using D = decltype(outTag);
      D *dst = r.data<D>();
      for (int64_t i = 0; i < n; ++i) {
        if (to == DType::Bool)
          dst[i] = src[i] != S(0);
        else
          dst[i] = static_cast<D>(src[i]); // float -> int truncates
      }
    });
  });
  return {std::move(r)};
}

//===----------------------------------------------------------------------===//
// Contractions and reductions
//===----------------------------------------------------------------------===//

/// C[M,N] = alpha * A B + beta * C with row-major A [M,K] (lda) and B (ldb),
/// on the calling thread (OpenBLAS runs single-threaded: setCpuThreads).
void blasSgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
               float alpha, const float *A, int64_t lda, const float *B,
               int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0)
    return;
  if (K == 0) { // BLAS may leave C untouched; define it: C = beta * C
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        C[m * ldc + n] = beta == 0.0f ? 0.0f : beta * C[m * ldc + n];
    return;
  }
  if (M == 1) { // a GEMV (batch-1 decode): BLAS's gemm would pack B first
    cblas_sgemv(CblasRowMajor, transB ? CblasNoTrans : CblasTrans,
                (blasint)(transB ? N : K), (blasint)(transB ? K : N), alpha, B,
                (blasint)ldb, A, (blasint)(transA ? lda : 1), beta, C, 1);
    return;
  }
  if (dnnlSgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
    return;
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, (blasint)M, (blasint)N,
              (blasint)K, alpha, A, (blasint)lda, B, (blasint)ldb, beta, C,
              (blasint)ldc);
}

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

std::vector<Tensor> matmulK(const Attrs &, const Operands &ops) {
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
      sgemm(false, false, numElements(batch) * M, N, K, 1.0f, A, K, B, N, 0.0f,
            C, N);
      return {std::move(r)};
    }
  }
  std::array<std::vector<int64_t>, 2> st = {broadcastStrides(aBatch, batch),
                                            broadcastStrides(bBatch, batch)};
  bcastLoop<2>(batch, st, [&](int64_t p, const std::array<int64_t, 2> &o) {
    sgemm(false, false, M, N, K, 1.0f, A + o[0] * M * K, K, B + o[1] * K * N,
          N, 0.0f, C + p * M * N, N);
  });
  return {std::move(r)};
}

std::vector<Tensor> gemmK(const Attrs &attrs, const Operands &ops) {
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
  sgemm(tA, tB, M, N, K, alpha, a.data<float>(), a.dim(1), b.data<float>(),
        b.dim(1), cBeta, C, N);
  return {std::move(r)};
}

enum class Reduction { Sum, Mean, Max };

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

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

std::vector<Tensor> transposeK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  std::vector<int64_t> perm = attrs.ints("perm");
  int64_t rank = x.rank();
  if ((int64_t)perm.size() != rank)
    fail("perm has " + std::to_string(perm.size()) + " entries for input " +
         str(x.shape()));
  std::vector<bool> seen(rank, false);
  Shape out(rank);
  std::vector<int64_t> inSt = stridesOf(x.shape()), st(rank);
  for (int64_t i = 0; i < rank; ++i) {
    int64_t p = normAxis(perm[i], rank, "perm entry");
    if (seen[p])
      fail("perm is not a permutation");
    seen[p] = true;
    out[i] = x.dim(p);
    st[i] = inSt[p];
  }
  Tensor r(x.dtype(), out);
  dispatchBytes(x.dtype(), [&](auto tag) {
    using U = decltype(tag);
    const U *src = x.data<U>();
    U *dst = r.data<U>();
    bcastLoop<1>(out, {st}, [&](int64_t p, const std::array<int64_t, 1> &o) {
      dst[p] = src[o[0]];
    });
  });
  return {std::move(r)};
}

std::vector<Tensor> reshapeK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  std::vector<int64_t> spec = readInts(need(ops, 1, "shape"), "shape");
  bool allowZero = attrs.has("allowzero") && attrs.b("allowzero");
  Shape out(spec.size());
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allowZero) {
      if ((int64_t)i >= x.rank())
        fail("reshape of " + str(x.shape()) + " to " + str(spec) +
             ": a 0 at index " + std::to_string(i) + " has no input dim");
      d = x.dim(i);
    } else if (d == -1) {
      if (infer >= 0)
        fail("reshape to " + str(spec) + " has more than one -1");
      infer = (int64_t)i;
      continue;
    } else if (d < -1) {
      fail("reshape to " + str(spec) + " has a negative dimension");
    }
    out[i] = d;
    std::optional<int64_t> product = qcc::format::checkedMul(known, d);
    if (!product) // a hostile shape: its product cannot be an element count
      fail("reshape to " + str(spec) + ": the dimensions' product overflows");
    known = *product;
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      fail("cannot reshape " + str(x.shape()) + " (" +
           std::to_string(x.numel()) + " elements) to " + str(spec));
    out[infer] = x.numel() / known;
  }
  if (numElements(out) != x.numel())
    fail("cannot reshape " + str(x.shape()) + " (" +
         std::to_string(x.numel()) + " elements) to " + str(spec));
  return {x.reshaped(out)};
}

std::vector<Tensor> flattenK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  int64_t axis = attrs.i("axis");
  int64_t rank = x.rank();
  if (axis < -rank || axis > rank)
    fail("flatten axis " + std::to_string(axis) + " is out of range for " +
         str(x.shape()));
  if (axis < 0)
    axis += rank;
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.dim(d);
  int64_t inner = 1;
  for (int64_t d = axis; d < rank; ++d)
    inner *= x.dim(d);
  return {x.reshaped({outer, inner})};
}

std::vector<Tensor> squeezeK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  int64_t rank = x.rank();
  std::vector<bool> drop(rank, false);
  std::vector<int64_t> axes = attrs.has("axes") ? attrs.ints("axes")
                                                : std::vector<int64_t>{};
  if (axes.empty()) { // ONNX: no axes removes every dimension of size 1
    for (int64_t d = 0; d < rank; ++d)
      drop[d] = x.dim(d) == 1;
  }
  for (int64_t a : axes) {
    int64_t d = normAxis(a, rank);
    if (x.dim(d) != 1)
      fail("cannot squeeze dimension " + std::to_string(a) + " of " +
           str(x.shape()) + ": its size is not 1");
    drop[d] = true;
  }
  Shape out;
  for (int64_t d = 0; d < rank; ++d)
    if (!drop[d])
      out.push_back(x.dim(d));
  return {x.reshaped(out)};
}

std::vector<Tensor> unsqueezeK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  std::vector<int64_t> axes = attrs.ints("axes");
  int64_t outRank = x.rank() + (int64_t)axes.size();
  std::vector<bool> ins(outRank, false);
  for (int64_t a : axes) {
    int64_t d = normAxis(a, outRank);
    if (ins[d])
      fail("unsqueeze axis " + std::to_string(a) + " is repeated");
    ins[d] = true;
  }
  Shape out;
  int64_t k = 0;
  for (int64_t d = 0; d < outRank; ++d)
    out.push_back(ins[d] ? 1 : x.dim(k++));
  return {x.reshaped(out)};
}

std::vector<Tensor> concatK(const Attrs &attrs, const Operands &ops) {
  if (ops.empty())
    fail("concat needs at least one input");
  for (size_t i = 0; i < ops.size(); ++i)
    need(ops, i, "inputs");
  const Tensor &first = *ops[0];
  int64_t rank = first.rank();
  int64_t axis = normAxis(attrs.i("axis"), rank);
  Shape out = first.shape();
  out[axis] = 0;
  for (const Tensor *t : ops) {
    bool ok = t->rank() == rank && t->dtype() == first.dtype();
    for (int64_t d = 0; ok && d < rank; ++d)
      ok = d == axis || t->dim(d) == first.dim(d);
    if (!ok) {
      std::string shapes;
      for (const Tensor *u : ops)
        shapes += (shapes.empty() ? "" : ", ") + str(u->shape()) + " " +
                  dtypeName(u->dtype());
      fail("cannot concatenate along axis " + std::to_string(axis) + ": " +
           shapes);
    }
    out[axis] += t->dim(axis);
  }
  Tensor r(first.dtype(), out);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= out[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= out[d];
  size_t es = dtypeSize(first.dtype());
  std::byte *dst = r.data<std::byte>();
  size_t rowOut = (size_t)(out[axis] * inner) * es;
  size_t at = 0;
  for (const Tensor *t : ops) {
    size_t chunk = (size_t)(t->dim(axis) * inner) * es;
    const std::byte *src = t->data<std::byte>();
    for (int64_t o = 0; o < outer && chunk; ++o)
      std::memcpy(dst + o * rowOut + at, src + o * chunk, chunk);
    at += chunk;
  }
  return {std::move(r)};
}

std::vector<Tensor> splitK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  int64_t rank = x.rank();
  int64_t axis = normAxis(attrs.i("axis"), rank);
  std::vector<int64_t> sizes = attrs.ints("sizes");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      fail("split sizes must be non-negative, got " + str(sizes));
    total += s;
  }
  if (total != x.dim(axis))
    fail("split sizes " + str(sizes) + " do not add up to dimension " +
         std::to_string(axis) + " of " + str(x.shape()));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.dim(d);
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= x.dim(d);
  size_t es = dtypeSize(x.dtype());
  size_t rowIn = (size_t)(x.dim(axis) * inner) * es;
  const std::byte *src = x.data<std::byte>();
  std::vector<Tensor> results;
  size_t at = 0;
  for (int64_t s : sizes) {
    Shape out = x.shape();
    out[axis] = s;
    Tensor r(x.dtype(), out);
    size_t chunk = (size_t)(s * inner) * es;
    std::byte *dst = r.data<std::byte>();
    for (int64_t o = 0; o < outer && chunk; ++o)
      std::memcpy(dst + o * chunk, src + o * rowIn + at, chunk);
    at += chunk;
    results.push_back(std::move(r));
  }
  return results;
}

std::vector<Tensor> sliceK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  std::vector<int64_t> starts = readInts(need(ops, 1, "starts"), "starts");
  std::vector<int64_t> ends = readInts(need(ops, 2, "ends"), "ends");
  int64_t rank = x.rank();
  std::vector<int64_t> axes = attrs.has("axes") ? attrs.ints("axes")
                                                : std::vector<int64_t>{};
  std::vector<int64_t> steps = attrs.has("steps") ? attrs.ints("steps")
                                                  : std::vector<int64_t>{};
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back((int64_t)i);
  if (steps.empty())
    steps.assign(axes.size(), 1);
  if (starts.size() != axes.size() || ends.size() != axes.size() ||
      steps.size() != axes.size())
    fail("slice has " + std::to_string(starts.size()) + " starts, " +
         std::to_string(ends.size()) + " ends, " +
         std::to_string(axes.size()) + " axes and " +
         std::to_string(steps.size()) + " steps");
  Shape out = x.shape();
  std::vector<int64_t> first(rank, 0), step(rank, 1);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = normAxis(axes[i], rank);
    if (seen[a])
      fail("slice axis " + std::to_string(axes[i]) + " is repeated");
    seen[a] = true;
    if (steps[i] == 0)
      fail("slice step must not be 0");
    qcc::format::SliceAxis r =
        qcc::format::sliceAxis(starts[i], ends[i], steps[i], x.dim(a));
    out[a] = r.count;
    first[a] = r.first;
    step[a] = steps[i];
  }
  std::vector<int64_t> inSt = stridesOf(x.shape()), st(rank);
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    st[d] = inSt[d] * step[d];
    if (out[d] > 0)
      base += first[d] * inSt[d];
  }
  Tensor r(x.dtype(), out);
  dispatchBytes(x.dtype(), [&](auto tag) {
    using U = decltype(tag);
    const U *src = x.data<U>() + (numElements(out) ? base : 0);
    U *dst = r.data<U>();
    bcastLoop<1>(out, {st}, [&](int64_t p, const std::array<int64_t, 1> &o) {
      dst[p] = src[o[0]];
    });
  });
  return {std::move(r)};
}

std::vector<Tensor> gatherK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  const Tensor &idxT = need(ops, 1, "indices");
  int64_t rank = x.rank();
  if (rank == 0)
    fail("gather input must have rank >= 1");
  int64_t axis = normAxis(attrs.i("axis", 0), rank);
  std::vector<int64_t> idx = readInts(idxT, "indices");
  int64_t dim = x.dim(axis);
  for (int64_t &i : idx) {
    int64_t orig = i;
    if (i < 0)
      i += dim;
    if (i < 0 || i >= dim)
      fail("gather index " + std::to_string(orig) + " is out of range for " +
           "dimension " + std::to_string(axis) + " of " + str(x.shape()));
  }
  Shape out(x.shape().begin(), x.shape().begin() + axis);
  out.insert(out.end(), idxT.shape().begin(), idxT.shape().end());
  out.insert(out.end(), x.shape().begin() + axis + 1, x.shape().end());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.dim(d);
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= x.dim(d);
  Tensor r(x.dtype(), out);
  size_t es = dtypeSize(x.dtype());
  size_t chunk = (size_t)inner * es;
  const std::byte *src = x.data<std::byte>();
  std::byte *dst = r.data<std::byte>();
  for (int64_t o = 0; o < outer && chunk; ++o)
    for (size_t j = 0; j < idx.size(); ++j)
      std::memcpy(dst + (o * (int64_t)idx.size() + (int64_t)j) * chunk,
                  src + (o * dim + idx[j]) * chunk, chunk);
  return {std::move(r)};
}

/// GatherElements' and ScatterElements' walk: f(p, at) for every position p
/// of `idxT` (row-major), `at` the element of `x` at p's coordinates but
/// along `axis`, where indices[p] (negative from the end) stands. An index
/// out of range is an error naming `op`.
template <typename F>
void forEachIndexedElement(const Tensor &x, const Tensor &idxT, int64_t axis,
                           const char *op, F &&f) {
  std::vector<int64_t> idx = readInts(idxT, "indices");
  std::vector<int64_t> xs = stridesOf(x.shape());
  std::array<std::vector<int64_t>, 1> st = {xs};
  st[0][axis] = 0; // the index supplies the axis coordinate
  int64_t dim = x.dim(axis);
  bcastLoop<1>(idxT.shape(), st,
               [&](int64_t p, const std::array<int64_t, 1> &o) {
                 int64_t i = idx[p] < 0 ? idx[p] + dim : idx[p];
                 if (i < 0 || i >= dim)
                   fail(std::string(op) + " index " + std::to_string(idx[p]) +
                        " is out of range for dimension " +
                        std::to_string(axis) + " of " + str(x.shape()));
                 f(p, o[0] + i * xs[axis]);
               });
}

std::vector<Tensor> gatherElementsK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  const Tensor &idxT = need(ops, 1, "indices");
  int64_t rank = x.rank();
  if (rank == 0 || idxT.rank() != rank)
    fail("gather_elements input and indices must have the same rank >= 1, "
         "got " + str(x.shape()) + " and " + str(idxT.shape()));
  int64_t axis = normAxis(attrs.i("axis", 0), rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && idxT.dim(d) > x.dim(d))
      fail("gather_elements indices " + str(idxT.shape()) +
           " exceed the input " + str(x.shape()) + " off the axis");
  Tensor r(x.dtype(), idxT.shape());
  dispatchBytes(x.dtype(), [&](auto tag) {
    using U = decltype(tag);
    const U *src = x.data<U>();
    U *dst = r.data<U>();
    forEachIndexedElement(x, idxT, axis, "gather_elements",
                          [&](int64_t p, int64_t at) { dst[p] = src[at]; });
  });
  return {std::move(r)};
}

std::vector<Tensor> gatherNdK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  const Tensor &idxT = need(ops, 1, "indices");
  int64_t b = attrs.i("batch_dims", 0);
  if (idxT.rank() < 1 || b < 0 || b >= idxT.rank() || b > x.rank())
    fail("gather_nd batch_dims " + std::to_string(b) + " does not fit " +
         str(x.shape()) + " and indices " + str(idxT.shape()));
  int64_t r = idxT.dim(-1);
  if (b + r > x.rank())
    fail("gather_nd index tuples of length " + std::to_string(r) +
         " exceed the input " + str(x.shape()));
  for (int64_t d = 0; d < b; ++d)
    if (idxT.dim(d) != x.dim(d))
      fail("gather_nd batch dimensions differ: " + str(x.shape()) + " and " +
           str(idxT.shape()));
  std::vector<int64_t> idx = readInts(idxT, "indices");
  Shape out(idxT.shape().begin(), idxT.shape().end() - 1);
  out.insert(out.end(), x.shape().begin() + b + r, x.shape().end());
  int64_t batch = 1, tuples = 1, slice = 1;
  for (int64_t d = 0; d < b; ++d)
    batch *= x.dim(d);
  for (int64_t d = b; d < idxT.rank() - 1; ++d)
    tuples *= idxT.dim(d);
  for (int64_t d = b + r; d < x.rank(); ++d)
    slice *= x.dim(d);
  std::vector<int64_t> st = stridesOf(x.shape());
  Tensor res(x.dtype(), out);
  size_t es = dtypeSize(x.dtype());
  const std::byte *src = x.data<std::byte>();
  std::byte *dst = res.data<std::byte>();
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t t = 0; t < tuples; ++t) {
      const int64_t *tuple = &idx[(size_t)((i * tuples + t) * r)];
      int64_t offset = b ? i * st[b - 1] : 0;
      for (int64_t k = 0; k < r; ++k) {
        int64_t dim = x.dim(b + k), v = tuple[k] < 0 ? tuple[k] + dim : tuple[k];
        if (v < 0 || v >= dim)
          fail("gather_nd index " + std::to_string(tuple[k]) +
               " is out of range for dimension " + std::to_string(b + k) +
               " of " + str(x.shape()));
        offset += v * st[b + k];
      }
      std::memcpy(dst + (size_t)((i * tuples + t) * slice) * es,
                  src + (size_t)offset * es, (size_t)slice * es);
    }
  return {std::move(res)};
}

/// The scatter ops' reductions (ONNX's `reduction`).
enum class ScatterReduce { None, Add, Mul, Max, Min };

ScatterReduce scatterReduction(const Attrs &attrs, const char *op) {
  std::string name = attrs.s("reduction", "none");
  if (name == "none")
    return ScatterReduce::None;
  if (name == "add")
    return ScatterReduce::Add;
  if (name == "mul")
    return ScatterReduce::Mul;
  if (name == "max")
    return ScatterReduce::Max;
  if (name == "min")
    return ScatterReduce::Min;
  fail(std::string(op) + " reduction '" + name +
       "' is not none, add, mul, max or min");
}

/// a = a (reduction) b. Integers wrap (applyBin); max and min keep `a` only
/// when it wins the comparison, so a NaN update replaces it and a NaN
/// element gives way to the update (onnxruntime's order of operands); for
/// bool (uint8_t) add and max are "or", mul and min "and".
template <typename T> void scatterCombine(ScatterReduce r, T &a, T b) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    if (r == ScatterReduce::None)
      a = b;
    else if (r == ScatterReduce::Add || r == ScatterReduce::Max)
      a = a | b;
    else
      a = a & b;
  } else {
    switch (r) {
    case ScatterReduce::None: a = b; break;
    case ScatterReduce::Add: a = applyBin(BinOp::Add, a, b); break;
    case ScatterReduce::Mul: a = applyBin(BinOp::Mul, a, b); break;
    case ScatterReduce::Max: a = a > b ? a : b; break;
    case ScatterReduce::Min: a = a < b ? a : b; break;
    }
  }
}

std::vector<Tensor> scatterNdK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  const Tensor &idxT = need(ops, 1, "indices");
  const Tensor &up = need(ops, 2, "updates");
  if (idxT.rank() < 1 || up.dtype() != x.dtype())
    fail("scatter_nd indices must have rank >= 1 and updates the input's "
         "dtype");
  int64_t r = idxT.dim(-1);
  if (r > x.rank())
    fail("scatter_nd index tuples of length " + std::to_string(r) +
         " exceed the input " + str(x.shape()));
  Shape want(idxT.shape().begin(), idxT.shape().end() - 1);
  want.insert(want.end(), x.shape().begin() + r, x.shape().end());
  if (up.shape() != want)
    fail("scatter_nd updates " + str(up.shape()) + " must be " + str(want));
  ScatterReduce red = scatterReduction(attrs, "scatter_nd");
  // It moves f16 / bf16 elements as they are (MovesElements); a reduction
  // computes in f32 and rounds once.
  if (red != ScatterReduce::None && isHalfFloat(x.dtype())) {
    Tensor wideX = convertFloat(x, DType::F32),
           wideUp = convertFloat(up, DType::F32);
    Operands wide = {&wideX, &idxT, &wideUp};
    return {convertFloat(scatterNdK(attrs, wide).at(0), x.dtype())};
  }
  std::vector<int64_t> idx = readInts(idxT, "indices");
  std::vector<int64_t> st = stridesOf(x.shape());
  // Tuples: the indices' leading dims (also when a tuple is empty, r = 0:
  // each then addresses the whole input).
  int64_t slice = 1, tuples = 1;
  for (int64_t d = 0; d + 1 < idxT.rank(); ++d)
    tuples *= idxT.dim(d);
  for (int64_t d = r; d < x.rank(); ++d)
    slice *= x.dim(d);
  Tensor res(x.dtype(), x.shape());
  size_t es = dtypeSize(x.dtype());
  std::byte *dst = res.data<std::byte>();
  if (x.bytes())
    std::memcpy(dst, x.data<std::byte>(), x.bytes());
  const std::byte *src = up.data<std::byte>();
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = 0;
    for (int64_t k = 0; k < r; ++k) {
      int64_t v = idx[(size_t)(t * r + k)], dim = x.dim(k);
      int64_t at = v < 0 ? v + dim : v;
      if (at < 0 || at >= dim)
        fail("scatter_nd index " + std::to_string(v) +
             " is out of range for dimension " + std::to_string(k) + " of " +
             str(x.shape()));
      offset += at * st[k];
    }
    if (red == ScatterReduce::None) {
      std::memcpy(dst + (size_t)offset * es, src + (size_t)(t * slice) * es,
                  (size_t)slice * es);
      continue;
    }
    dispatch(x.dtype(), "scatter_nd", [&](auto tag) {
      using T = decltype(tag);
      T *a = res.data<T>() + offset;
      const T *b = up.data<T>() + t * slice;
      for (int64_t j = 0; j < slice; ++j)
        scatterCombine(red, a[j], b[j]);
    });
  }
  return {std::move(res)};
}

std::vector<Tensor> scatterElementsK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  const Tensor &idxT = need(ops, 1, "indices");
  const Tensor &up = need(ops, 2, "updates");
  int64_t rank = x.rank();
  if (rank == 0 || idxT.rank() != rank)
    fail("scatter_elements input and indices must have the same rank >= 1, "
         "got " +
         str(x.shape()) + " and " + str(idxT.shape()));
  if (up.shape() != idxT.shape() || up.dtype() != x.dtype())
    fail("scatter_elements updates " + str(up.shape()) + " " +
         dtypeName(up.dtype()) + " must have the indices' shape " +
         str(idxT.shape()) + " and the input's dtype " + dtypeName(x.dtype()));
  int64_t axis = normAxis(attrs.i("axis", 0), rank);
  // Off the axis an index position is also the position written.
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && idxT.dim(d) > x.dim(d))
      fail("scatter_elements indices " + str(idxT.shape()) +
           " exceed the input " + str(x.shape()) + " off the axis");
  ScatterReduce red = scatterReduction(attrs, "scatter_elements");
  Tensor res(x.dtype(), x.shape());
  if (x.bytes())
    std::memcpy(res.data<std::byte>(), x.data<std::byte>(), x.bytes());
  dispatch(x.dtype(), "scatter_elements", [&](auto tag) {
    using T = decltype(tag);
    T *dst = res.data<T>();
    const T *src = up.data<T>();
    forEachIndexedElement(x, idxT, axis, "scatter_elements",
                          [&](int64_t p, int64_t at) {
                            scatterCombine(red, dst[at], src[p]);
                          });
  });
  return {std::move(res)};
}

/// ONNX Tile: repeats[d] copies of the input along every dimension d.
std::vector<Tensor> tileK(const Attrs &, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  const Tensor &repT = need(ops, 1, "repeats");
  if (repT.rank() != 1)
    fail("tile repeats must be a vector, got " + str(repT.shape()));
  std::vector<int64_t> reps = readInts(repT, "repeats");
  int64_t rank = x.rank();
  if ((int64_t)reps.size() != rank)
    fail("tile needs one repeat per dimension of " + str(x.shape()) + ", got " +
         str(reps));
  Shape out = x.shape();
  for (int64_t d = 0; d < rank; ++d) {
    if (reps[d] < 0)
      fail("tile repeats " + str(reps) + " hold a negative count");
    std::optional<int64_t> n = qcc::format::checkedMul(x.dim(d), reps[d]);
    if (!n)
      fail("tile of " + str(x.shape()) + " by " + str(reps) +
           " has more elements than fit in 64 bits");
    out[d] = *n;
  }
  Tensor r(x.dtype(), out); // refuses a result too large for memory
  int64_t total = r.numel();
  if (total == 0)
    return {std::move(r)};
  // An odometer over the result; `in` is its coordinate modulo the input's
  // shape and `offset` that element's position in the input. A result size
  // is a multiple of the input's: both wrap together.
  std::vector<int64_t> st = stridesOf(x.shape()), at(rank, 0), in(rank, 0);
  int64_t offset = 0;
  dispatchBytes(x.dtype(), [&](auto tag) {
    using U = decltype(tag);
    const U *src = x.data<U>();
    U *dst = r.data<U>();
    for (int64_t p = 0; p < total; ++p) {
      dst[p] = src[offset];
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++in[d] == x.dim(d)) {
          in[d] = 0;
          offset -= (x.dim(d) - 1) * st[d];
        } else {
          offset += st[d];
        }
        if (++at[d] < out[d])
          break;
        at[d] = 0;
      }
    }
  });
  return {std::move(r)};
}

/// ONNX TopK along `axis`: the k largest (or smallest) elements in that
/// order, of equal ones the lower index first. NaN is greater than every
/// number and equal to NaN, which is the order onnxruntime's CPU kernel
/// gives (NaNs first for largest, last for smallest).
std::vector<Tensor> topKK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  const Tensor &kT = need(ops, 1, "k");
  if (x.rank() < 1)
    fail("top_k input must have rank >= 1, got " + str(x.shape()));
  if (kT.rank() > 1 || kT.numel() != 1)
    fail("top_k k must hold one element, got " + str(kT.shape()));
  int64_t axis = normAxis(attrs.i("axis", -1), x.rank());
  int64_t k = readInts(kT, "k")[0], dim = x.dim(axis);
  if (k < 0 || k > dim)
    fail("top_k k = " + std::to_string(k) + " is out of range for dimension " +
         std::to_string(axis) + " of " + str(x.shape()));
  bool largest = !attrs.has("largest") || attrs.b("largest");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.dim(d);
  Shape out = x.shape();
  out[axis] = k;
  Tensor values(x.dtype(), out), indices(DType::I64, out);
  if (values.numel() == 0)
    return {std::move(values), std::move(indices)};
  dispatch(x.dtype(), "top_k", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, uint8_t>) {
      unsupported(x.dtype(), "top_k");
    } else {
      auto greater = [](T a, T b) {
        if constexpr (std::is_floating_point_v<T>)
          return std::isnan(a) ? !std::isnan(b) : !std::isnan(b) && a > b;
        else
          return a > b;
      };
      const T *src = x.data<T>();
      T *dv = values.data<T>();
      int64_t *di = indices.data<int64_t>();
      std::vector<int64_t> order((size_t)dim);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const T *lane = src + o * dim * inner + i;
          std::iota(order.begin(), order.end(), int64_t(0));
          // A strict total order: by value, then by index.
          auto before = [&](int64_t a, int64_t b) {
            T va = lane[a * inner], vb = lane[b * inner];
            if (largest ? greater(va, vb) : greater(vb, va))
              return true;
            if (largest ? greater(vb, va) : greater(va, vb))
              return false;
            return a < b;
          };
          std::partial_sort(order.begin(), order.begin() + k, order.end(),
                            before);
          for (int64_t j = 0; j < k; ++j) {
            int64_t at = (o * k + j) * inner + i;
            dv[at] = lane[order[j] * inner];
            di[at] = order[j];
          }
        }
    }
  });
  return {std::move(values), std::move(indices)};
}

/// The elements of a numeric tensor as int64: integers as they are, floats
/// truncated toward zero; `invalid` for a NaN or a float outside int64.
std::vector<int64_t> truncatedInts(const Tensor &t, const char *op,
                                   int64_t invalid) {
  std::vector<int64_t> out((size_t)t.numel());
  dispatch(t.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T *v = t.data<T>();
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_floating_point_v<T>)
        out[i] = v[i] >= -0x1p63 && v[i] < 0x1p63 ? (int64_t)v[i] : invalid;
      else
        out[i] = (int64_t)v[i];
    }
  });
  return out;
}

/// ONNX OneHot (version 11): `off` everywhere but `on` where the coordinate
/// along the new axis is the index (negative from the end; outside
/// [-depth, depth) none is).
std::vector<Tensor> oneHotK(const Attrs &attrs, const Operands &ops) {
  const Tensor &idxT = need(ops, 0, "indices");
  const Tensor &depthT = need(ops, 1, "depth");
  const Tensor &valT = need(ops, 2, "values");
  if (idxT.dtype() == DType::Bool || depthT.dtype() == DType::Bool)
    fail("one_hot indices and depth must be numbers, not bool");
  if (depthT.rank() > 1 || depthT.numel() != 1)
    fail("one_hot depth must hold one element, got " + str(depthT.shape()));
  if (valT.rank() != 1 || valT.numel() != 2)
    fail("one_hot values must be a pair [off, on], got " + str(valT.shape()));
  constexpr int64_t kInvalid = std::numeric_limits<int64_t>::min();
  int64_t depth = truncatedInts(depthT, "one_hot", kInvalid)[0];
  if (depth < 1)
    fail("one_hot depth must be at least 1, got " +
         (depth == kInvalid ? std::string("a value outside int64")
                            : std::to_string(depth)));
  int64_t rank = idxT.rank();
  int64_t axis = normAxis(attrs.i("axis", -1), rank + 1);
  Shape out = idxT.shape();
  out.insert(out.begin() + axis, depth);
  Tensor r(valT.dtype(), out); // refuses a depth too large for memory
  // kInvalid + depth stays negative: an out-of-range index, `off`.
  std::vector<int64_t> idx = truncatedInts(idxT, "one_hot", kInvalid);
  int64_t inner = 1;
  for (int64_t d = axis; d < rank; ++d)
    inner *= idxT.dim(d);
  dispatchBytes(valT.dtype(), [&](auto tag) {
    using U = decltype(tag);
    U off = valT.data<U>()[0], on = valT.data<U>()[1];
    U *dst = r.data<U>();
    std::fill_n(dst, r.numel(), off);
    for (size_t p = 0; p < idx.size(); ++p) {
      int64_t v = idx[p] < 0 ? idx[p] + depth : idx[p];
      if (v < 0 || v >= depth)
        continue;
      int64_t o = (int64_t)p / inner, i = (int64_t)p % inner;
      dst[(o * depth + v) * inner + i] = on;
    }
  });
  return {std::move(r)};
}

/// ONNX NonZero: the coordinates of the non-zero elements, one column each,
/// in row-major order (a scalar counts as one element of a vector).
std::vector<Tensor> nonZeroK(const Attrs &, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  int64_t rank = x.rank();
  std::vector<int64_t> hits;
  dispatch(x.dtype(), "non_zero", [&](auto tag) {
    using T = decltype(tag);
    const T *v = x.data<T>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i)
      if (v[i] != T(0)) // NaN is non-zero, -0.0 is zero
        hits.push_back(i);
  });
  int64_t count = (int64_t)hits.size();
  Tensor r(DType::I64, {std::max<int64_t>(rank, 1), count});
  int64_t *out = r.data<int64_t>();
  for (int64_t j = 0; j < count; ++j) {
    int64_t rest = hits[j];
    for (int64_t d = rank - 1; d >= 0; --d) {
      out[d * count + j] = rest % x.dim(d);
      rest /= x.dim(d);
    }
    if (rank == 0)
      out[j] = 0;
  }
  return {std::move(r)};
}

std::vector<Tensor> cumsumK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  int64_t rank = x.rank();
  if (rank == 0)
    fail("cumsum input must have rank >= 1");
  int64_t axis = normAxis(attrs.i("axis", 0), rank);
  bool exclusive = attrs.has("exclusive") && attrs.b("exclusive");
  bool reverse = attrs.has("reverse") && attrs.b("reverse");
  int64_t outer = 1, n = x.dim(axis), inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.dim(d);
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= x.dim(d);
  Tensor r(x.dtype(), x.shape());
  if (x.dtype() == DType::Bool)
    unsupported(x.dtype(), "cumsum");
  dispatch(x.dtype(), "cumsum", [&](auto tag) {
    using T = decltype(tag);
    // Integers sum exactly; floats in double, rounded once per output.
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    const T *in = x.data<T>();
    T *out = r.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        Acc acc = 0;
        for (int64_t k = 0; k < n; ++k) {
          int64_t j = reverse ? n - 1 - k : k;
          int64_t at = (o * n + j) * inner + i;
          if (exclusive) {
            out[at] = (T)acc;
            acc += in[at];
          } else {
            acc += in[at];
            out[at] = (T)acc;
          }
        }
      }
  });
  return {std::move(r)};
}

std::vector<Tensor> isNaNK(const Attrs &, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  requireF32(x, "input");
  Tensor r(DType::Bool, x.shape());
  const float *in = x.data<float>();
  uint8_t *out = r.data<uint8_t>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    out[i] = std::isnan(in[i]);
  return {std::move(r)};
}


std::vector<Tensor> shapeK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  int64_t rank = x.rank();
  auto clampIdx = [&](int64_t v) {
    if (v < 0)
      v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  int64_t start = clampIdx(attrs.i("start", 0));
  int64_t end = attrs.has("end") ? clampIdx(attrs.i("end")) : rank;
  int64_t n = std::max<int64_t>(end - start, 0);
  Tensor r(DType::I64, {n});
  for (int64_t i = 0; i < n; ++i)
    r.data<int64_t>()[i] = x.dim(start + i);
  return {std::move(r)};
}

Shape shapeFrom(const Tensor &t, const char *what) {
  Shape s = readInts(t, what);
  for (int64_t d : s)
    if (d < 0)
      fail(std::string(what) + " " + str(s) + " has a negative dimension");
  return s;
}

std::vector<Tensor> constantOfShapeK(const Attrs &attrs, const Operands &ops) {
  Shape out = shapeFrom(need(ops, 0, "shape"), "shape");
  DType dt = DType::F32;
  double fv = 0.0;
  int64_t iv = 0;
  if (attrs.has("value")) {
    const json &v = attrs.raw("value");
    std::string name = v.value("dtype", std::string("f32"));
    if (!parseDType(name, dt))
      fail("constant_of_shape: unknown value dtype '" + name + "'");
    const json &vals = v.at("values");
    if (vals.size() != 1)
      fail("constant_of_shape: value must have one element, got " +
           std::to_string(vals.size()));
    if (vals[0].is_number_integer())
      iv = vals[0].get<int64_t>(), fv = (double)iv;
    else {
      fv = vals[0].get<double>();
      // A float value fills a float tensor (iv unused); converting one
      // outside int64's range (a mask's -3.4e38) would be undefined.
      if (std::isfinite(fv) && std::fabs(fv) < 9.2e18)
        iv = (int64_t)fv;
    }
  }
  if (isHalfFloat(dt)) { // a storage type: filled in f32, rounded once
    Tensor r(DType::F32, out);
    std::fill_n(r.data<float>(), r.numel(), (float)fv);
    return {convertFloat(r, dt)};
  }
  Tensor r(dt, out);
  dispatch(dt, "constant_of_shape", [&](auto tag) {
    using T = decltype(tag);
    T v;
    if constexpr (std::is_floating_point_v<T>)
      // Past the type's range (a hostile artifact's value): infinity,
      // not an undefined conversion.
      v = std::fabs(fv) > (double)std::numeric_limits<T>::max()
              ? std::copysign(std::numeric_limits<T>::infinity(), (T)(fv > 0 ? 1 : -1))
              : (T)fv;
    else
      v = dt == DType::Bool ? (T)(iv != 0) : (T)iv;
    std::fill_n(r.data<T>(), r.numel(), v);
  });
  return {std::move(r)};
}

std::vector<Tensor> rangeK(const Attrs &, const Operands &ops) {
  const Tensor &s = need(ops, 0, "start"), &l = need(ops, 1, "limit"),
               &d = need(ops, 2, "delta");
  for (const Tensor *t : {&s, &l, &d})
    if (t->numel() != 1)
      fail("range operands must be scalars, got " + str(t->shape()));
  if (s.dtype() != l.dtype() || s.dtype() != d.dtype())
    fail("range operand dtypes differ");
  std::vector<Tensor> out;
  dispatch(s.dtype(), "range", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, uint8_t>) {
      unsupported(s.dtype(), "range");
    } else {
      T start = s.data<T>()[0], limit = l.data<T>()[0], delta = d.data<T>()[0];
      if (delta == 0)
        fail("range delta must not be 0");
      // Hostile constants (artifact-run fuzzer): the count is checked before
      // it is converted or allocated; 2^31 elements is far above any
      // position range.
      constexpr int64_t kMaxRange = int64_t(1) << 31;
      auto tooLarge = [&] {
        fail("range from " + std::to_string(start) + " to " +
             std::to_string(limit) + " by " + std::to_string(delta) +
             " has more than 2^31 elements");
      };
      int64_t n;
      if constexpr (std::is_floating_point_v<T>) {
        double c = std::ceil(((double)limit - start) / delta);
        if (!(c <= (double)kMaxRange)) // also NaN
          tooLarge();
        n = c > 0 ? (int64_t)c : 0;
      } else { // exact integer ceil division
        int64_t num, den = delta;
        if (__builtin_sub_overflow((int64_t)limit, (int64_t)start, &num) ||
            (num == std::numeric_limits<int64_t>::min() && den == -1))
          tooLarge();
        n = num / den + ((num % den != 0) && ((num < 0) == (den < 0)));
        if (n > kMaxRange)
          tooLarge();
      }
      n = std::max<int64_t>(n, 0);
      Tensor r(s.dtype(), {n});
      for (int64_t i = 0; i < n; ++i)
        r.data<T>()[i] = (T)(start + (T)i * delta);
      out.push_back(std::move(r));
    }
  });
  return out;
}

std::vector<Tensor> expandK(const Attrs &, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  Shape target = shapeFrom(need(ops, 1, "shape"), "shape");
  Shape out = broadcastShapes({&x.shape(), &target});
  return {broadcastTo(x, out)};
}

std::vector<Tensor> triluK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  if (x.rank() < 2)
    fail("trilu input must have rank >= 2, got " + str(x.shape()));
  bool upper = attrs.b("upper");
  int64_t k = attrs.i("k", 0);
  int64_t R = x.dim(-2), C = x.dim(-1), batch = x.numel() / std::max<int64_t>(R * C, 1);
  if (R * C == 0)
    batch = 0;
  Tensor r(x.dtype(), x.shape());
  size_t es = dtypeSize(x.dtype());
  const std::byte *src = x.data<std::byte>();
  std::byte *dst = r.data<std::byte>(); // zero-initialized
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j) {
        bool keep = upper ? j - i >= k : j - i <= k;
        if (keep) {
          size_t off = (size_t)((b * R + i) * C + j) * es;
          std::memcpy(dst + off, src + off, es);
        }
      }
  return {std::move(r)};
}

//===----------------------------------------------------------------------===//
// Transformer ops
//===----------------------------------------------------------------------===//

/// GELU (exact form) over n floats, in place, with the rational erf:
/// compiled for AVX-512 and AVX2 besides the baseline (the loop vectorizes;
/// the libm's erff does not), picked at load by the CPU.
__attribute__((target_clones("avx512f", "avx2", "default"))) void
geluRationalInPlace(float *v, int64_t n, int64_t ld, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    float *row = v + r * ld;
    for (int64_t i = 0; i < n; ++i)
      row[i] = qcc::numerics::geluErfWith(row[i], qcc::numerics::RationalErf());
  }
}

std::vector<Tensor> linearK(const Operands &ops, const LinearEpilogue &epi,
                            const PackedF32Weight *packed = nullptr) {
  const Tensor &x = need(ops, 0, "input"), &w = need(ops, 1, "weight");
  const Tensor *bias = opt(ops, 2);
  requireF32(x, "input");
  requireF32(w, "weight");
  if (x.rank() < 1 || w.rank() != 2 || w.dim(1) != x.dim(-1))
    fail("linear input " + str(x.shape()) + " and weight " + str(w.shape()) +
         " do not match (weight must be [N, K] with K the input's last dim)");
  int64_t K = w.dim(1), N = w.dim(0), M = x.numel() / std::max<int64_t>(K, 1);
  if (K == 0) {
    M = 1;
    for (int64_t d = 0; d + 1 < x.rank(); ++d)
      M *= x.dim(d);
  }
  Shape out = x.shape();
  out.back() = N;
  if (bias) {
    requireF32(*bias, "bias");
    if (bias->numel() != N || bias->rank() != 1)
      fail("linear bias " + str(bias->shape()) + " must be [" +
           std::to_string(N) + "]");
  }
  const float *res = nullptr;
  if (epi.residual) {
    requireF32(*epi.residual, "residual");
    if (epi.residual->shape() != out)
      fail("linear residual " + str(epi.residual->shape()) + " must be " +
           str(out));
    res = epi.residual->data<float>();
  }
  Tensor r = Tensor::uninitialized(DType::F32, out); // every element set
  float *y = r.data<float>();
  if (cpuKernelPath() == CpuKernelPath::Reference) {
    float beta = 0.0f;
    if (bias) {
      for (int64_t m = 0; m < M; ++m)
        std::memcpy(y + m * N, bias->data<float>(), N * sizeof(float));
      beta = 1.0f;
    }
    sgemm(false, true, M, N, K, 1.0f, x.data<float>(), K, w.data<float>(), K,
          beta, y, N);
    for (int64_t i = 0; i < M * N; ++i) { // the epilogue, as separate ops do
      if (epi.gelu)
        y[i] = qcc::numerics::geluErf(y[i]);
      if (res)
        y[i] += res[i];
    }
    return {std::move(r)};
  }
  // Fast: bias, GELU and residual in one pass over each block of the output
  // as its thread finishes it (the kernel plan's GEMM + epilogue region).
  const float *b = bias ? bias->data<float>() : nullptr;
  auto epilogue = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    if (b)
      for (int64_t m = m0; m < m1; ++m)
        for (int64_t n = n0; n < n1; ++n)
          y[m * N + n] += b[n];
    if (epi.gelu)
      geluRationalInPlace(y + m0 * N + n0, n1 - n0, N, m1 - m0);
    if (res)
      for (int64_t m = m0; m < m1; ++m)
        for (int64_t n = n0; n < n1; ++n)
          y[m * N + n] += res[m * N + n];
  };
  if (packed && packed->n == N && packed->k == K) {
    f32GemmThen(x.data<float>(), K, M, *packed, y, N, epilogue);
    return {std::move(r)};
  }
  // A weight the session did not pack (computed at run time, e.g. widened
  // from f16): packed here, so that every linear runs the same kernel and a
  // row's sums do not depend on M (BLAS picks its blocking by shape; batch
  // invariance, docs/SERVING.md). Without AVX-512, BLAS.
  if (std::optional<PackedF32Weight> p = packF32Weight(w.data<float>(), N, K))
    f32GemmThen(x.data<float>(), K, M, *p, y, N, epilogue);
  else
    sgemmThen(false, true, M, N, K, 1.0f, x.data<float>(), K,
              w.data<float>(), K, 0.0f, y, N, epilogue);
  return {std::move(r)};
}

void checkVec(const Tensor &t, int64_t D, const char *what,
              const Tensor &x) {
  requireF32(t, what);
  if (t.numel() != D)
    fail(std::string(what) + " " + str(t.shape()) + " must have " +
         std::to_string(D) + " elements (the last dim of input " +
         str(x.shape()) + ")");
}

std::vector<Tensor> layerNormK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input"), &g = need(ops, 1, "gamma");
  const Tensor *bt = opt(ops, 2);
  requireF32(x, "input");
  if (x.rank() < 1)
    fail("layer_norm input must have rank >= 1");
  int64_t D = x.dim(-1);
  checkVec(g, D, "gamma", x);
  if (bt)
    checkVec(*bt, D, "beta", x);
  double eps = attrs.f("epsilon");
  Tensor r(DType::F32, x.shape());
  const float *in = x.data<float>(), *gm = g.data<float>();
  const float *be = bt ? bt->data<float>() : nullptr;
  float *out = r.data<float>();
  int64_t rows = D ? x.numel() / D : 0;
  // Rows are independent: the fast path spreads them over the pool, with
  // the same arithmetic per row.
  bool threaded = cpuKernelPath() != CpuKernelPath::Reference &&
                  rows > 1 && rows * D >= (1 << 20);
  bool simd = cpuKernelPath() != CpuKernelPath::Reference;
#pragma omp parallel for schedule(static) if (threaded)
  for (int64_t row = 0; row < rows; ++row) {
    const float *v = in + row * D;
    // The fast path sums in vector lanes (double sums in another order);
    // the reference path one value after another.
    double mean = 0, var = 0;
    if (simd) {
#pragma omp simd reduction(+ : mean)
      for (int64_t d = 0; d < D; ++d)
        mean += v[d];
    } else {
      for (int64_t d = 0; d < D; ++d)
        mean += v[d];
    }
    mean /= (double)D;
    if (simd) { // two-pass: no cancellation
#pragma omp simd reduction(+ : var)
      for (int64_t d = 0; d < D; ++d)
        var += (v[d] - mean) * (v[d] - mean);
    } else {
      for (int64_t d = 0; d < D; ++d)
        var += (v[d] - mean) * (v[d] - mean);
    }
    var /= (double)D;
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t d = 0; d < D; ++d)
      out[row * D + d] =
          (float)((v[d] - mean) * inv * gm[d] + (be ? be[d] : 0.0));
  }
  return {std::move(r)};
}

std::vector<Tensor> rmsNormK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input"), &g = need(ops, 1, "gamma");
  requireF32(x, "input");
  if (x.rank() < 1)
    fail("rms_norm input must have rank >= 1");
  int64_t D = x.dim(-1);
  checkVec(g, D, "gamma", x);
  double eps = attrs.f("epsilon");
  Tensor r(DType::F32, x.shape());
  const float *in = x.data<float>(), *gm = g.data<float>();
  float *out = r.data<float>();
  int64_t rows = D ? x.numel() / D : 0;
  bool simd = cpuKernelPath() != CpuKernelPath::Reference;
  for (int64_t row = 0; row < rows; ++row) {
    const float *v = in + row * D;
    double ss = 0; // fast path: in vector lanes, as layer_norm
    if (simd) {
#pragma omp simd reduction(+ : ss)
      for (int64_t d = 0; d < D; ++d)
        ss += (double)v[d] * v[d];
    } else {
      for (int64_t d = 0; d < D; ++d)
        ss += (double)v[d] * v[d];
    }
    double inv = 1.0 / std::sqrt(ss / (double)D + eps);
    for (int64_t d = 0; d < D; ++d)
      out[row * D + d] = (float)(v[d] * inv * gm[d]);
  }
  return {std::move(r)};
}

/// qcc.moe: per expert, the rows routed to it gathered (in token order),
/// its GEMMs run over them with the linear kernel on views of the stacked
/// weights, the results scaled by their gates and added to their rows,
/// expert by expert in increasing order (the order the exporters' loops
/// add them). An expert no row is routed to is not read.
std::vector<Tensor> moeK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input"), &ids = need(ops, 1, "expert_ids"),
               &gates = need(ops, 2, "gates"), &up = need(ops, 3, "up_weight"),
               &down = need(ops, 4, "down_weight");
  const Tensor *gate = opt(ops, 5);
  requireF32(x, "moe input");
  requireF32(gates, "moe gates");
  requireF32(up, "moe up_weight");
  requireF32(down, "moe down_weight");
  if (gate)
    requireF32(*gate, "moe gate_weight");
  if (x.rank() != 2 || ids.dtype() != DType::I64 || ids.rank() != 2 ||
      gates.shape() != ids.shape() || ids.dim(0) != x.dim(0) ||
      up.rank() != 3 || down.rank() != 3 || up.dim(2) != x.dim(1) ||
      down.dim(0) != up.dim(0) || down.dim(1) != x.dim(1) ||
      down.dim(2) != up.dim(1) || (gate && gate->shape() != up.shape()))
    fail("moe operands do not match: input " + str(x.shape()) +
         ", expert_ids " + str(ids.shape()) + ", gates " +
         str(gates.shape()) + ", up " + str(up.shape()) + ", down " +
         str(down.shape()) + " (need [T, H], [T, k] i64, [T, k], [E, I, H], "
         "[E, H, I])");
  const int64_t T = x.dim(0), H = x.dim(1), k = ids.dim(1), E = up.dim(0),
                I = up.dim(1);
  const std::string act = attrs.s("activation", "");
  float (*activation)(float) = nullptr;
  if (act == "silu")
    activation = qcc::numerics::silu;
  else if (act == "gelu")
    activation = qcc::numerics::geluErf;
  else if (act == "gelu_tanh")
    activation = qcc::numerics::geluTanh;
  else if (act == "relu")
    activation = qcc::numerics::relu;
  else
    fail("moe activation \"" + act + "\" is none of silu, gelu, gelu_tanh, relu");
  std::vector<std::vector<int64_t>> routes(E); // route t * k + j per expert
  const int64_t *id = ids.data<int64_t>();
  for (int64_t r = 0; r < T * k; ++r) {
    if (id[r] < 0 || id[r] >= E)
      fail("moe: expert id " + std::to_string(id[r]) + " of token " +
           std::to_string(r / k) + " is outside [0, " + std::to_string(E) +
           ")");
    routes[id[r]].push_back(r);
  }
  Tensor out(DType::F32, {T, H});
  float *y = out.data<float>();
  const float *in = x.data<float>(), *g = gates.data<float>();
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = (int64_t)routes[e].size();
    if (n == 0)
      continue;
    Tensor rows = Tensor::uninitialized(DType::F32, {n, H});
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(rows.data<float>() + i * H, in + routes[e][i] / k * H,
                  H * sizeof(float));
    auto expert = [&](const Tensor &w, int64_t outDim, int64_t inDim) {
      return Tensor::view(DType::F32, {outDim, inDim},
                          w.data<float>() + e * outDim * inDim);
    };
    Tensor upW = expert(up, I, H), downW = expert(down, H, I);
    Tensor h = std::move(linearK({&rows, &upW}, {})[0]);
    float *hv = h.data<float>();
    if (gate) {
      Tensor gateW = expert(*gate, I, H);
      Tensor a = std::move(linearK({&rows, &gateW}, {})[0]);
      const float *av = a.data<float>();
      for (int64_t i = 0; i < n * I; ++i)
        hv[i] = activation(av[i]) * hv[i];
    } else {
      for (int64_t i = 0; i < n * I; ++i)
        hv[i] = activation(hv[i]);
    }
    Tensor d = std::move(linearK({&h, &downW}, {})[0]);
    const float *dv = d.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t route = routes[e][i];
      float *row = y + route / k * H;
      for (int64_t c = 0; c < H; ++c)
        row[c] += dv[i * H + c] * g[route];
    }
  }
  return {std::move(out)};
}

std::vector<Tensor> geluK(const Attrs &attrs, const Operands &ops) {
  std::string approx = attrs.s("approximate", "none");
  // The formulas are the CUDA kernels' (format/device/numerics.h).
  if (approx == "none" && cpuKernelPath() != CpuKernelPath::Reference) {
    const Tensor &x = need(ops, 0, "input");
    requireF32(x, "input");
    Tensor r(DType::F32, x.shape());
    const float *in = x.data<float>();
    float *v = r.data<float>();
    int64_t n = r.numel(), block = 1 << 14;
#pragma omp parallel for schedule(static) if (n >= 2 * block)
    for (int64_t i = 0; i < n; i += block) {
      std::memcpy(v + i, in + i, std::min(block, n - i) * sizeof(float));
      geluRationalInPlace(v + i, std::min(block, n - i), 0, 1);
    }
    return {std::move(r)};
  }
  if (approx == "none")
    return unaryF32(OpKind::Gelu, ops,
                    [](float x) { return qcc::numerics::geluErf(x); });
  if (approx == "tanh")
    return unaryF32(OpKind::Gelu, ops,
                    [](float x) { return qcc::numerics::geluTanh(x); });
  fail("gelu: unknown approximate '" + approx + "' (expected none or tanh)");
}

#ifdef QCC_HAVE_AVX512_ATTENTION
/// glibc's libmvec expf, 16 lanes (AVX-512): within 2.6 ulp of exp over
/// [-104, 0] (measured on every 7th float; std::exp's expf: 0.5).
/// (Declared with its target: clang refuses a 512-bit argument otherwise.)
extern "C" __attribute__((target("avx512f"))) __m512 _ZGVeN16v_expf(__m512);

/// exp of 16 floats by libmvec, 0 where x < -87.3 (exp(x) < FLT_MIN: a
/// subnormal or 0; -inf: a masked key or a row's tail lanes). libmvec
/// computes such lanes again one at a time with the scalar expf: 4% of
/// SmolLM2's prefill at 512 tokens, whose causal rows all end in a tail.
__attribute__((target("avx512f"))) inline __m512 expNormal(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3f);
  // NaN compares "not less" and stays NaN through max(lo, x).
  __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ);
  return _mm512_maskz_mov_ps(keep, _ZGVeN16v_expf(_mm512_max_ps(lo, x)));
}

/// softmaxRow (below) of a contiguous row on the fast path: the same max,
/// all-masked convention and double sums, with exp 16 values at a time.
/// The low and high 8 lanes of x as doubles.
__attribute__((target("avx512f"))) inline __m512d lowHalfPd(__m512 x) {
  return _mm512_cvtps_pd(_mm512_castps512_ps256(x));
}
__attribute__((target("avx512f"))) inline __m512d highHalfPd(__m512 x) {
  return _mm512_cvtps_pd(
      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
}

__attribute__((target("avx512f"))) void softmaxRowAvx512(float *v,
                                                          int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  auto tail = [&](int64_t i) { return firstLanes(n - i); };
  __m512 mx = ninf;
  for (int64_t i = 0; i < n; i += 16)
    mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(ninf, tail(i), v + i));
  const float m = _mm512_reduce_max_ps(mx);
  if (m == -std::numeric_limits<float>::infinity()) {
    std::fill(v, v + n, 0.0f);
    return;
  }
  const __m512 mv = _mm512_set1_ps(m);
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) { // lanes past n: exp(-inf) = 0
    __m512 e =
        expNormal(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, tail(i), v + i), mv));
    _mm512_mask_storeu_ps(v + i, tail(i), e);
    s0 = _mm512_add_pd(s0, lowHalfPd(e));
    s1 = _mm512_add_pd(s1, highHalfPd(e));
  }
  // e / sum as e * (1 / sum) in double: within an ulp of double before
  // the rounding to float (a double division per element was most of this
  // loop's time).
  const __m512d inv =
      _mm512_set1_pd(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)));
  for (int64_t i = 0; i < n; i += 16) {
    __m512 e = _mm512_maskz_loadu_ps(tail(i), v + i);
    __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(lowHalfPd(e), inv)),
           hi = _mm512_cvtpd_ps(_mm512_mul_pd(highHalfPd(e), inv));
    __m512 r = _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi),
        1));
    _mm512_mask_storeu_ps(v + i, tail(i), r);
  }
}
#endif

#ifdef QCC_HAVE_AVX512_ATTENTION
/// silu (numerics::silu: x / (1 + exp(-x)), one division) of n floats on
/// the fast path, exp 16 at a time by libmvec: the scalar loop's libm expf
/// was 5% of SmolLM2's float prefill.
__attribute__((target("avx512f"))) void siluAvx512(const float *x, float *y,
                                                   int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = firstLanes(n - i);
    __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    __m512 e = expNormal(_mm512_sub_ps(_mm512_setzero_ps(), v));
    _mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(v, _mm512_add_ps(one, e)));
  }
}
#endif

std::vector<Tensor> siluK(const Operands &ops) {
#ifdef QCC_HAVE_AVX512_ATTENTION
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  const Tensor &x = need(ops, 0, "input");
  if (avx512 && x.dtype() == DType::F32 &&
      cpuKernelPath() == CpuKernelPath::Fast) {
    Tensor r = Tensor::uninitialized(DType::F32, x.shape());
    const int64_t n = x.numel(), chunk = 1 << 14; // 16 floats at a time
#pragma omp parallel for schedule(static) if (n >= (1 << 16))
    for (int64_t c = 0; c < n; c += chunk)
      siluAvx512(x.data<float>() + c, r.data<float>() + c,
                 std::min(chunk, n - c));
    return {std::move(r)};
  }
#endif
  return unaryF32(OpKind::Silu, ops,
                  [](float x) { return qcc::numerics::silu(x); });
}

/// In-place softmax of n values. Convention (both for `softmax` and inside
/// `attention`): a row whose every value is -inf (fully masked) becomes all
/// zeros rather than NaN, so that padding rows do not poison later ops. Sums
/// are accumulated in double. The fast path's contiguous rows:
/// softmaxRowAvx512.
void softmaxRow(float *v, int64_t n, int64_t stride = 1) {
#ifdef QCC_HAVE_AVX512_ATTENTION
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (stride == 1 && avx512 && cpuKernelPath() == CpuKernelPath::Fast)
    return softmaxRowAvx512(v, n);
#endif
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i)
    mx = std::max(mx, v[i * stride]);
  if (mx == -std::numeric_limits<float>::infinity()) {
    for (int64_t i = 0; i < n; ++i)
      v[i * stride] = 0.0f;
    return;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    float e = std::exp(v[i * stride] - mx);
    v[i * stride] = e;
    sum += e;
  }
  for (int64_t i = 0; i < n; ++i)
    v[i * stride] = (float)(v[i * stride] / sum);
}

std::vector<Tensor> softmaxK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  requireF32(x, "input");
  if (x.rank() == 0)
    fail("softmax input must have rank >= 1");
  int64_t axis = normAxis(attrs.i("axis", -1), x.rank());
  int64_t n = x.dim(axis), outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.dim(d);
  Tensor r(DType::F32, x.shape());
  std::memcpy(r.data<float>(), x.data<float>(), x.bytes());
  float *v = r.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      softmaxRow(v + o * n * inner + i, n, inner);
  return {std::move(r)};
}

/// `attention` as the dialect docs say it, one (batch, head) at a time over
/// every key: the reference path (CpuKernelPath::Reference).
void attentionReference(int64_t B, int64_t H, int64_t Hkv, int64_t Sq,
                        int64_t Skv, int64_t D, float scale, bool causal,
                        int64_t window, float softcap, const float *Q,
                        const float *K, const float *V, const float *M,
                        const std::vector<int64_t> &mst, float *O) {
  std::vector<float> S((size_t)(Sq * Skv));
  const float ninf = -std::numeric_limits<float>::infinity();
  int64_t group = H / Hkv;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      int64_t g = h / group;
      const float *Qh = Q + b * Sq * H * D + h * D;
      const float *Kg = K + b * Skv * Hkv * D + g * D;
      const float *Vg = V + b * Skv * Hkv * D + g * D;
      // S = scale * Q_h K_g^T
      sgemm(false, true, Sq, Skv, D, scale, Qh, H * D, Kg, Hkv * D, 0.0f,
            S.data(), Skv);
      for (int64_t i = 0; i < Sq; ++i) {
        float *row = S.data() + i * Skv;
        if (softcap > 0.0f)
          for (int64_t j = 0; j < Skv; ++j)
            row[j] = qcc::numerics::softcap(row[j], softcap);
        if (M) {
          const float *mrow = M + b * mst[0] + h * mst[1] + i * mst[2];
          for (int64_t j = 0; j < Skv; ++j)
            row[j] += mrow[j * mst[3]];
        }
        if (causal)
          for (int64_t j = std::max<int64_t>(i + (Skv - Sq) + 1, 0); j < Skv;
               ++j)
            row[j] = ninf;
        if (window > 0) // keys at or before position i + off - window
          for (int64_t j = 0; j < std::min(i + (Skv - Sq) - window + 1, Skv);
               ++j)
            row[j] = ninf;
        softmaxRow(row, Skv); // fully masked rows become zeros (see above)
      }
      // O_h = P V_g
      sgemm(false, false, Sq, D, Skv, 1.0f, S.data(), Skv, Vg, Hkv * D, 0.0f,
            O + b * Sq * H * D + h * D, H * D);
    }
}

/// The fast path: tasks of (batch, head, block of kQueryBlock queries), each
/// over only the keys its rows may see (attendRows).
void attentionFast(int64_t B, int64_t H, int64_t Hkv, int64_t Sq, int64_t Skv,
                   int64_t D, float scale, bool causal, int64_t window,
                   float softcap, const float *Q, const float *K,
                   const float *V, const float *M,
                   const std::vector<int64_t> &mst, float *O) {
  constexpr int64_t kQueryBlock = 32;
  int64_t blocks = (Sq + kQueryBlock - 1) / kQueryBlock, group = H / Hkv;
  int64_t tasks = B * H * blocks, off = Skv - Sq;
  // Each (batch, kv head)'s keys packed once for the score tiles, as a
  // linear's weight (every head of the group and query block reads them).
  std::vector<std::optional<PackedF32Weight>> packedK(
      Sq >= 4 && cpuHasAvx512F() ? B * Hkv : 0);
#pragma omp parallel if (tasks > 1 && B * H * Sq * Skv * D >= kParallelWork)
  {
    std::vector<float> scratch;
    std::array<int64_t, kQueryBlock> lo, hi;
#pragma omp for schedule(static)
    for (int64_t p = 0; p < (int64_t)packedK.size(); ++p)
      packedK[p] = packF32Weight(K + (p / Hkv) * Skv * Hkv * D + p % Hkv * D,
                                 Skv, D, Hkv * D);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      int64_t b = task / (H * blocks), h = task / blocks % H;
      int64_t i0 = task % blocks * kQueryBlock;
      int64_t R = std::min(kQueryBlock, Sq - i0), g = h / group;
      for (int64_t r = 0; r < R; ++r) {
        int64_t i = i0 + r; // sees keys (i + off - window, i + off]
        hi[r] = causal ? std::clamp<int64_t>(i + off + 1, 0, Skv) : Skv;
        lo[r] = window > 0 ? std::clamp<int64_t>(i + off - window + 1, 0, Skv)
                           : 0;
      }
      attendRows(R, D, Q + (b * Sq + i0) * H * D + h * D, H * D,
                 K + b * Skv * Hkv * D + g * D, Hkv * D,
                 V + b * Skv * Hkv * D + g * D, Hkv * D, scale, softcap,
                 lo.data(), hi.data(),
                 M ? M + b * mst[0] + h * mst[1] + i0 * mst[2] : nullptr,
                 M ? mst[2] : 0, M ? mst[3] : 0,
                 O + (b * Sq + i0) * H * D + h * D, H * D, scratch,
                 packedK.empty() || !packedK[b * Hkv + g]
                     ? nullptr
                     : &*packedK[b * Hkv + g]);
    }
  }
}

std::vector<Tensor> attentionK(const Attrs &attrs, const Operands &ops) {
  const Tensor &q = need(ops, 0, "query"), &k = need(ops, 1, "key"),
               &v = need(ops, 2, "value");
  const Tensor *mask = opt(ops, 3);
  for (auto [t, n] : {std::pair{&q, "query"}, {&k, "key"}, {&v, "value"}}) {
    requireF32(*t, n);
    if (t->rank() != 3)
      fail(std::string(n) + " must be [B, S, heads * D], got " +
           str(t->shape()));
  }
  int64_t H = attrs.i("num_heads"), Hkv = attrs.i("num_kv_heads");
  float scale = (float)attrs.f("scale");
  bool causal = attrs.b("causal");
  int64_t window = attrs.i("window", 0);
  float softcap = (float)attrs.f("softcap", 0.0);
  if (H <= 0 || Hkv <= 0 || H % Hkv != 0)
    fail("num_heads " + std::to_string(H) +
         " must be a positive multiple of num_kv_heads " + std::to_string(Hkv));
  int64_t B = q.dim(0), Sq = q.dim(1), Skv = k.dim(1);
  if (q.dim(2) % H != 0)
    fail("query " + str(q.shape()) + ": last dim is not a multiple of " +
         std::to_string(H) + " heads");
  int64_t D = q.dim(2) / H;
  if (k.dim(0) != B || v.dim(0) != B || v.dim(1) != Skv ||
      k.dim(2) != Hkv * D || v.dim(2) != Hkv * D)
    fail("attention shapes do not match: query " + str(q.shape()) + ", key " +
         str(k.shape()) + ", value " + str(v.shape()) + " with " +
         std::to_string(H) + " heads and " + std::to_string(Hkv) +
         " kv heads of size " + std::to_string(D));
  Shape full = {B, H, Sq, Skv};
  std::vector<int64_t> mst;
  const float *M = nullptr;
  if (mask) {
    requireF32(*mask, "mask");
    if (mask->rank() > 4 || broadcastShapes({&mask->shape(), &full}) != full)
      fail("mask " + str(mask->shape()) + " does not broadcast to " +
           str(full));
    mst = broadcastStrides(mask->shape(), full);
    M = mask->data<float>();
  }
  Tensor r(DType::F32, {B, Sq, H * D});
  const float *Q = q.data<float>(), *K = k.data<float>(), *V = v.data<float>();
  float *O = r.data<float>();
  (cpuKernelPath() != CpuKernelPath::Reference ? attentionFast
                                                : attentionReference)(
      B, H, Hkv, Sq, Skv, D, scale, causal, window, softcap, Q, K, V, M, mst,
      O);
  return {std::move(r)};
}

std::vector<Tensor> rotaryK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input"), &c = need(ops, 1, "cos"),
               &s = need(ops, 2, "sin");
  requireF32(x, "input");
  requireF32(c, "cos");
  requireF32(s, "sin");
  int64_t D = attrs.i("head_dim");
  // R: the rotated leading part of each head; the rest passes through.
  int64_t R = attrs.i("rotary_dim", D);
  if (x.rank() != 3 || D <= 0 || x.dim(2) % D != 0 || R <= 0 || R % 2 != 0 ||
      R > D)
    fail("rotary input " + str(x.shape()) + " must be [B, S, H * " +
         std::to_string(D) + "] with an even rotary_dim " +
         std::to_string(R) + " <= head_dim");
  int64_t B = x.dim(0), S = x.dim(1), H = x.dim(2) / D;
  if (c.shape() != s.shape())
    fail("rotary cos " + str(c.shape()) + " and sin " + str(s.shape()) +
         " differ");
  bool batched = c.rank() == 3;
  if (!((c.rank() == 2 && c.dim(0) == S && c.dim(1) == R) ||
        (batched && (c.dim(0) == B || c.dim(0) == 1) && c.dim(1) == S &&
         c.dim(2) == R)))
    fail("rotary cos/sin " + str(c.shape()) + " must be [" +
         std::to_string(S) + ", " + std::to_string(R) + "] or [" +
         std::to_string(B) + ", " + std::to_string(S) + ", " +
         std::to_string(R) + "] for input " + str(x.shape()));
  int64_t cbStride = batched && c.dim(0) == B ? S * R : 0;
  Tensor r(DType::F32, x.shape());
  const float *in = x.data<float>(), *cs = c.data<float>(),
              *sn = s.data<float>();
  float *out = r.data<float>();
  int64_t half = R / 2;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < S; ++p) {
      const float *cr = cs + b * cbStride + p * R;
      const float *sr = sn + b * cbStride + p * R;
      for (int64_t h = 0; h < H; ++h) {
        const float *xv = in + (b * S + p) * H * D + h * D;
        float *y = out + (b * S + p) * H * D + h * D;
        for (int64_t d = 0; d < R; ++d) {
          float rot = d < half ? -xv[d + half] : xv[d - half];
          y[d] = xv[d] * cr[d] + rot * sr[d];
        }
        std::copy(xv + R, xv + D, y + R);
      }
    }
  return {std::move(r)};
}

std::vector<Tensor> embeddingK(const Attrs &, const Operands &ops) {
  return embeddingKernel(ops, [](const void *p, size_t n, void *dst) {
    std::memcpy(dst, p, n);
  });
}

} // namespace

std::vector<Tensor> qcc::rt::embeddingKernel(const Operands &ops,
                                             const ReadBytes &read) {
  const Tensor &t = need(ops, 0, "table"), &idsT = need(ops, 1, "ids");
  if (t.rank() != 2)
    fail("embedding table must be [V, E], got " + str(t.shape()));
  int64_t V = t.dim(0), E = t.dim(1);
  std::vector<int64_t> ids = readInts(idsT, "ids");
  for (int64_t id : ids)
    if (id < 0 || id >= V)
      fail("token id " + std::to_string(id) + " is out of range [0, " +
           std::to_string(V) + ")");
  Shape out = idsT.shape();
  out.push_back(E);
  Tensor r(t.dtype(), out);
  size_t row = (size_t)E * dtypeSize(t.dtype());
  const std::byte *src = t.data<std::byte>();
  std::byte *dst = r.data<std::byte>();
  for (size_t i = 0; i < ids.size() && row; ++i)
    read(src + ids[i] * row, row, dst + i * row);
  return {std::move(r)};
}

namespace {

/// The dense weight of a 2:4 compressed one (format/Sparse24.h): the
/// reference semantics of qcc.sparse_2_4.
std::vector<Tensor> sparse24K(const Attrs &, const Operands &ops) {
  namespace sp = qcc::format::sparse24;
  const Tensor &values = need(ops, 0, "values"), &meta = need(ops, 1, "meta");
  if (values.rank() != 2 || meta.rank() != 2 || meta.dtype() != DType::I32)
    fail("sparse_2_4 needs values [N, K/2] and i32 meta [N, K/32], got " +
         str(values.shape()) + " and " + str(meta.shape()));
  int64_t n = values.dim(0), k = values.dim(1) * 2;
  if (k % sp::kKAlignment != 0 || meta.dim(0) != n ||
      meta.dim(1) != sp::metaCols(k))
    fail("sparse_2_4 values " + str(values.shape()) + " and meta " +
         str(meta.shape()) + " do not describe an [N, K] weight with K a "
         "multiple of " + std::to_string(sp::kKAlignment));
  if (auto why = sp::validateMeta(meta.data<int32_t>(), n, k))
    fail("sparse_2_4: " + *why);
  Tensor r(values.dtype(), {n, k});
  sp::decompress(values.raw(), meta.data<int32_t>(), n, k,
                 dtypeSize(values.dtype()), r.data<std::byte>());
  return {std::move(r)};
}

/// The float weight of a packed int4 one (format/Int4.h): the reference
/// semantics of qcc.weight_int4 (scales and offsets widened to f32 by
/// computeInF32). Operands packed, scales, [perm], [offsets]: `asymmetric`
/// says the last is offsets (format::int4::operandSlots).
std::vector<Tensor> weightInt4K(const Attrs &attrs, const Operands &ops) {
  namespace i4 = qcc::format::int4;
  i4::OperandSlots slots = i4::operandSlots(
      ops.size(), attrs.has("asymmetric") && attrs.b("asymmetric"));
  if (!slots.error.empty())
    fail("weight_int4 " + slots.error);
  const Tensor &packed = need(ops, 0, "packed"), &scales = need(ops, 1, "scales");
  const Tensor *perm =
      slots.perm >= 0 ? &need(ops, slots.perm, "perm") : nullptr;
  const Tensor *offsets =
      slots.offsets >= 0 ? &need(ops, slots.offsets, "offsets") : nullptr;
  int64_t g = attrs.i("group_size");
  if (scales.dtype() != DType::F32) // f16 in the artifact, widened here
    fail(std::string("weight_int4 scales must be f16, got ") +
         dtypeName(scales.dtype()));
  checkInt4Operands(packed, scales, perm, offsets, g);
  int64_t n = packed.dim(0), k = packed.dim(1) * 2;
  Tensor r(DType::F32, {n, k});
  i4::dequantize(packed.data<int8_t>(), scales.data<float>(),
                 offsets ? offsets->data<float>() : nullptr,
                 perm ? perm->data<int32_t>() : nullptr, n, k, g,
                 r.data<float>());
  return {std::move(r)};
}

} // namespace

std::pair<const Tensor *, const Tensor *>
qcc::rt::compressedLinearOperands(const Operands &ops, int64_t N, int64_t K) {
  if (ops.empty() || !ops[0])
    fail("missing operand 'input'");
  const Tensor &x = *ops[0];
  const Tensor *bias = ops.size() > 2 ? ops[2] : nullptr;
  if (x.dtype() != DType::F32)
    fail(std::string("input must be f32, got ") + dtypeName(x.dtype()));
  if (x.rank() < 1 || x.dim(-1) != K)
    fail("linear input " + str(x.shape()) + " and weight [" +
         std::to_string(N) + ", " + std::to_string(K) +
         "] do not match (weight must be [N, K] with K the input's last dim)");
  if (bias &&
      (bias->dtype() != DType::F32 || bias->rank() != 1 || bias->dim(0) != N))
    fail("linear bias " + str(bias->shape()) + " " + dtypeName(bias->dtype()) +
         " must be f32 [" + std::to_string(N) + "]");
  return {&x, bias};
}

void qcc::rt::geluErfInPlace(float *y, int64_t cols, int64_t ld,
                             int64_t rows) {
  geluRationalInPlace(y, cols, ld, rows);
}

std::vector<Tensor>
qcc::rt::linearWithEpilogue(const Operands &ops,
                            const LinearEpilogue &epilogue,
                            const PackedF32Weight *packed) {
  return linearK(ops, epilogue, packed);
}

void qcc::rt::sgemm(bool transA, bool transB, int64_t M, int64_t N,
                    int64_t K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C,
                    int64_t ldc) {
  sgemmThen(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
            [](int64_t, int64_t, int64_t, int64_t) {});
}

int qcc::rt::affinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  return std::max(1, omp_get_num_procs());
}

static std::atomic<int> gCpuThreads{0};
static std::once_flag gCpuThreadsOnce;

void qcc::rt::setCpuThreads(int threads) {
  if (threads <= 0)
    threads = affinityCpus();
  // Activations up to 64 MiB from the heap, and freed memory kept up to
  // 256 MiB: glibc's defaults return them to the kernel, and each forward
  // pass then paid page faults and kernel zeroing for every fresh tensor
  // (measured: 18-22% of SmolLM2's float prefill at 512 tokens).
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
  openblas_set_num_threads(1);
  omp_set_num_threads(threads);
  gCpuThreads = threads;
}

int qcc::rt::cpuThreads() {
  std::call_once(gCpuThreadsOnce, [] {
    if (gCpuThreads == 0) // OMP_NUM_THREADS, else the affinity mask
      setCpuThreads(std::getenv("OMP_NUM_THREADS") ? omp_get_max_threads()
                                                   : 0);
  });
  return gCpuThreads;
}

std::optional<CpuKernelPath> qcc::rt::parseCpuKernelPath(std::string_view name) {
  for (CpuKernelPath p : {CpuKernelPath::Fast, CpuKernelPath::Portable,
                          CpuKernelPath::Reference})
    if (name == cpuKernelPathName(p))
      return p;
  return std::nullopt;
}

const char *qcc::rt::cpuKernelPathName(CpuKernelPath path) {
  switch (path) {
  case CpuKernelPath::Fast:
    return "fast";
  case CpuKernelPath::Portable:
    return "portable";
  case CpuKernelPath::Reference:
    return "reference";
  }
  return "?";
}

// An unknown QCC_CPU_KERNELS value leaves the default here; qrun refuses it
// with one line before it runs anything.
static CpuKernelPath initialCpuKernelPath() {
  const char *env = std::getenv("QCC_CPU_KERNELS");
  return env ? parseCpuKernelPath(env).value_or(CpuKernelPath::Fast)
             : CpuKernelPath::Fast;
}
static std::atomic<CpuKernelPath> gCpuKernelPath{initialCpuKernelPath()};

static thread_local std::optional<CpuKernelPath> tCpuKernelPath;

void qcc::rt::setCpuKernelPath(CpuKernelPath path) { gCpuKernelPath = path; }
CpuKernelPath qcc::rt::cpuKernelPath() {
  return tCpuKernelPath ? *tCpuKernelPath : gCpuKernelPath.load();
}

qcc::rt::ScopedCpuKernelPath::ScopedCpuKernelPath(CpuKernelPath path)
    : previous(tCpuKernelPath) {
  tCpuKernelPath = path;
}
qcc::rt::ScopedCpuKernelPath::~ScopedCpuKernelPath() {
  tCpuKernelPath = previous;
}

void qcc::rt::attendRows(int64_t R, int64_t D, const float *Q, int64_t ldq,
                         const float *K, int64_t ldk, const float *V,
                         int64_t ldv, float scale, float softcap,
                         const int64_t *lo, const int64_t *hi,
                         const float *mask, int64_t maskRow, int64_t maskCol,
                         float *O, int64_t ldo, std::vector<float> &scratch,
                         const PackedF32Weight *packedK, const float *alibi) {
  // Each row's range without the keys its mask sets to -inf at either end
  // (a causal or padding mask given as a tensor): exp(-inf) adds nothing.
  std::vector<int64_t> range(2 * (size_t)R);
  for (int64_t r = 0; r < R; ++r) {
    int64_t a = lo[r], e = std::max(lo[r], hi[r]);
    const float *m = mask ? mask + r * maskRow : nullptr;
    const float ninf = -std::numeric_limits<float>::infinity();
    while (m && e > a && m[(e - 1) * maskCol] == ninf)
      --e;
    while (m && a < e && m[a * maskCol] == ninf)
      ++a;
    range[2 * r] = a;
    range[2 * r + 1] = e;
  }
  // Keys [j0, j1) hold every row's range; S is R x n over them.
  int64_t j0 = std::numeric_limits<int64_t>::max(), j1 = 0;
  for (int64_t r = 0; r < R; ++r)
    if (range[2 * r] < range[2 * r + 1]) {
      j0 = std::min(j0, range[2 * r]);
      j1 = std::max(j1, range[2 * r + 1]);
    }
  if (j1 <= j0) { // nothing to attend: zeros, as fully masked rows are
    for (int64_t r = 0; r < R; ++r)
      std::fill(O + r * ldo, O + r * ldo + D, 0.0f);
    return;
  }
  bool few = R < 4;
  // The packed keys' tiles start at multiples of 16: the keys before j0
  // become part of S, outside every row's range (zeros below).
  const bool tiles = !few && packedK;
  if (tiles)
    j0 -= j0 % 16;
  // Values through the same tiles where D is whole 16-float blocks.
  const bool valueTiles = !few && D % 16 == 0 && cpuHasAvx512F();
  int64_t n = j1 - j0;
  scratch.resize((size_t)(R * n));
  float *S = scratch.data();
  // GEMMs in chunks of keys with M*N*K <= 2^18, which OpenBLAS runs on the
  // calling thread (interface/gemm.c): the caller's OpenMP threads share the
  // cores, rather than each call also spreading over OpenBLAS's pool.
  // A few rows (decode): plain loops, which beat a BLAS call per row.
  int64_t chunk = std::max<int64_t>(16, (int64_t(1) << 18) / (R * D));
  if (tiles) {
    f32GemmPackedOnThread(Q, ldq, R, *packedK, j0, j1, S, n);
    for (int64_t i = 0; i < R * n; ++i)
      S[i] *= scale;
  } else if (few)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < n; ++j) {
        const float *q = Q + r * ldq, *k = K + (j0 + j) * ldk;
        float dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t d = 0; d < D; ++d)
          dot += q[d] * k[d];
        S[r * n + j] = scale * dot;
      }
  else
    for (int64_t c = 0; c < n; c += chunk) // S = scale * Q K^T
      sgemm(false, true, R, std::min(chunk, n - c), D, scale, Q, ldq,
            K + (j0 + c) * ldk, ldk, 0.0f, S + c, n);
  for (int64_t r = 0; r < R; ++r) {
    float *row = S + r * n;
    int64_t a = std::clamp(range[2 * r] - j0, int64_t(0), n),
            e = std::clamp(range[2 * r + 1] - j0, a, n);
    std::fill(row, row + a, 0.0f);
    std::fill(row + e, row + n, 0.0f);
    if (softcap > 0.0f)
      for (int64_t j = a; j < e; ++j)
        row[j] = qcc::numerics::softcap(row[j], softcap);
    if (alibi)
      for (int64_t j = a; j < e; ++j)
        row[j] += qcc::numerics::alibi(alibi[r], j0 + j, hi[r] - 1);
    if (mask)
      for (int64_t j = a; j < e; ++j)
        row[j] += mask[r * maskRow + (j0 + j) * maskCol];
    softmaxRow(row + a, e - a); // fully masked rows become zeros
  }
  if (few)
    for (int64_t r = 0; r < R; ++r) {
      float *o = O + r * ldo;
      std::fill(o, o + D, 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        float p = S[r * n + j];
        const float *v = V + (j0 + j) * ldv;
#pragma omp simd
        for (int64_t d = 0; d < D; ++d)
          o[d] += p * v[d];
      }
    }
  else if (valueTiles)
    f32GemmRowMajorB(S, n, R, V + j0 * ldv, ldv, D, n, O, ldo);
  else
    for (int64_t c = 0; c < n; c += chunk) // O = P V
      sgemm(false, false, R, D, std::min(chunk, n - c), 1.0f, S + c, n,
            V + (j0 + c) * ldv, ldv, c == 0 ? 0.0f : 1.0f, O, ldo);
}

// The few-row attention's inner loops over one run of the cache, compiled
// for AVX-512 and AVX2 besides the baseline (picked at load by the CPU).
// int8 elements are dequantized as (float)q * s in the loop, the value
// attendRows would read from a gathered buffer.
namespace {

/// s[j] = scale * sum_d q[d] * key(j, d) over the run's keys j.
template <typename Key>
inline void scoresOver(const float *q, int64_t count, int64_t D, float scale,
                       float *s, Key key) {
  for (int64_t j = 0; j < count; ++j) {
    float dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t d = 0; d < D; ++d)
      dot += q[d] * key(j, d);
    s[j] = scale * dot;
  }
}

/// o[d] += p[j] * value(j, d) over the run's keys j.
template <typename Value>
inline void weightedSumOver(const float *p, int64_t count, int64_t D, float *o,
                            Value value) {
  for (int64_t j = 0; j < count; ++j)
#pragma omp simd
    for (int64_t d = 0; d < D; ++d)
      o[d] += p[j] * value(j, d);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
runScores(const float *q, const float *k, int64_t count, int64_t D,
          float scale, float *s) {
  scoresOver(q, count, D, scale, s,
             [&](int64_t j, int64_t d) { return k[j * D + d]; });
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
runScores(const float *q, const int8_t *k, const float *ks, int64_t count,
          int64_t D, float scale, float *s) {
  scoresOver(q, count, D, scale, s, [&](int64_t j, int64_t d) {
    return (float)k[j * D + d] * ks[d];
  });
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
runWeightedSum(const float *p, const float *v, int64_t count, int64_t D,
               float *o) {
  weightedSumOver(p, count, D, o,
                  [&](int64_t j, int64_t d) { return v[j * D + d]; });
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
runWeightedSum(const float *p, const int8_t *v, const float *vs,
               int64_t vsStride, int64_t count, int64_t D, float *o) {
  weightedSumOver(p, count, D, o, [&](int64_t j, int64_t d) {
    return (float)v[j * D + d] * vs[j * vsStride];
  });
}

#ifdef QCC_HAVE_AVX512_ATTENTION
// The same loops with AVX-512F intrinsics for head sizes that are multiples
// of 16 (the fast path): one horizontal sum per key instead of the serial
// one the compiler emits for the loops above, and the output row held in
// registers over the keys. The int8 scales are applied to the other factor
// ((q * ks) . k, (p * vs) v): float products in another order, as the fast
// path's sums already are.
#define QCC_AVX512_ATTENTION_TARGET __attribute__((target("avx512f")))

QCC_AVX512_ATTENTION_TARGET inline __m512 load16(const float *p) {
  return _mm512_loadu_ps(p);
}
QCC_AVX512_ATTENTION_TARGET inline __m512 load16(const int8_t *p) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

/// o[0, 16 NC) += sum_j p[j] v_j[0, 16 NC), v_j = v[j * D + ...] (int8:
/// times vs[j * vsStride] first), one FMA per j in order from o: the
/// products and order of the tiled path's P V (f32GemmRowMajorB over the
/// dequantized values), so that a row's sum is the same bits on either path.
template <int NC, typename T>
QCC_AVX512_ATTENTION_TARGET void
weightedSumAvx512(const float *p, const T *v, const float *vs,
                  int64_t vsStride, int64_t count, int64_t D, float *o) {
  __m512 acc[NC];
  for (int c = 0; c < NC; ++c)
    acc[c] = _mm512_loadu_ps(o + 16 * c);
  for (int64_t j = 0; j < count; ++j) {
    __m512 pj = _mm512_set1_ps(p[j]);
    for (int c = 0; c < NC; ++c) {
      __m512 vj = load16(v + j * D + 16 * c);
      if (vs)
        vj = _mm512_mul_ps(vj, _mm512_set1_ps(vs[j * vsStride]));
      acc[c] = _mm512_fmadd_ps(pj, vj, acc[c]);
    }
  }
  for (int c = 0; c < NC; ++c)
    _mm512_storeu_ps(o + 16 * c, acc[c]);
}

/// weightedSumAvx512 over all D columns, 64 at a time.
template <typename T>
void weightedSumAvx512(const float *p, const T *v, const float *vs,
                       int64_t vsStride, int64_t count, int64_t D, float *o) {
  for (int64_t d = 0; d < D; d += 64) {
    const T *vd = v + d;
    switch (std::min<int64_t>(D - d, 64) / 16) {
    case 4: weightedSumAvx512<4>(p, vd, vs, vsStride, count, D, o + d); break;
    case 3: weightedSumAvx512<3>(p, vd, vs, vsStride, count, D, o + d); break;
    case 2: weightedSumAvx512<2>(p, vd, vs, vsStride, count, D, o + d); break;
    default: weightedSumAvx512<1>(p, vd, vs, vsStride, count, D, o + d);
    }
  }
}

/// The 16 x 16 floats of r transposed in place (r[i][j] = old r[j][i]).
QCC_AVX512_ATTENTION_TARGET inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // In each 128-bit lane L, r[i + e] gets element 4L + e of rows i..i+3.
  for (int i = 0; i < 16; i += 4)
    for (int k = 0; k < 2; ++k) {
      __m512d a = _mm512_castps_pd(t[i + k]), b = _mm512_castps_pd(t[i + k + 2]);
      r[i + 2 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[i + 2 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  for (int i = 0; i < 16; i += 8)
    for (int k = 0; k < 4; ++k) {
      t[i + k] = _mm512_shuffle_f32x4(r[i + k], r[i + k + 4], 0x88);
      t[i + k + 4] = _mm512_shuffle_f32x4(r[i + k], r[i + k + 4], 0xDD);
    }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0x88);
    r[k + 8] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0xDD);
  }
}

/// s[r][j] = scale * q_r . k_j for up to 16 keys (k_j at k + j * D; int8:
/// times ks[d] first) and R <= 3 rows, each dot as f32GemmPackedOnThread
/// sums it: from 0, one FMA per d in ascending order (the keys transposed in
/// registers so that 16 keys' sums run in the lanes), then times scale.
/// Decode's scores are therefore the bits the tiled prefill path gives.
template <typename T>
QCC_AVX512_ATTENTION_TARGET void
scoresGemmOrder(int R, const float *const q[3], const T *k, const float *ks,
                int64_t count, int64_t D, float scale, float *const s[3]) {
  __m512 acc[3] = {_mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  for (int64_t d0 = 0; d0 < D; d0 += 16) {
    __m512 rows[16];
    for (int64_t j = 0; j < 16; ++j) {
      if (j >= count) {
        rows[j] = _mm512_setzero_ps();
        continue;
      }
      rows[j] = load16(k + j * D + d0);
      if (ks)
        rows[j] = _mm512_mul_ps(rows[j], _mm512_loadu_ps(ks + d0));
    }
    transpose16(rows); // rows[i]: element d0 + i of the 16 keys
    for (int i = 0; i < 16; ++i)
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r][d0 + i]), rows[i], acc[r]);
  }
  const __m512 sv = _mm512_set1_ps(scale);
  for (int r = 0; r < R; ++r)
    _mm512_mask_storeu_ps(s[r], firstLanes(count), _mm512_mul_ps(acc[r], sv));
}

bool haveAvx512Attention(int64_t D) {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has && D % 16 == 0 && cpuKernelPath() == CpuKernelPath::Fast;
}
#endif

/// Calls fn(run, offset, n) for the part [offset, offset + n) of each run
/// that lies inside positions [a, e).
template <typename T, typename F>
void forRunsIn(const std::vector<KvRun<T>> &runs, int64_t a, int64_t e,
               F &&fn) {
  for (const KvRun<T> &run : runs) {
    int64_t from = std::max(a, run.first),
            to = std::min(e, run.first + run.count);
    if (from < to)
      fn(run, from - run.first, to - from);
  }
}

#ifdef QCC_HAVE_AVX512_ATTENTION
/// attendRuns on AVX-512 (D % 16 == 0): the scores of all rows over the
/// union of their ranges, three rows per pass over the keys, then each
/// row's softmax and weighted sum over its own range.
template <typename T>
void attendRunsAvx512(int64_t R, int64_t D, const float *Q, int64_t ldq,
                      const std::vector<KvRun<T>> &keys,
                      const std::vector<KvRun<T>> &values, const float *kScales,
                      float scale, float softcap, const int64_t *lo,
                      const int64_t *hi, float *O, int64_t ldo,
                      std::vector<float> &scratch, const float *alibi) {
  int64_t u0 = std::numeric_limits<int64_t>::max(), u1 = 0;
  for (int64_t r = 0; r < R; ++r)
    if (lo[r] < hi[r])
      u0 = std::min(u0, lo[r]), u1 = std::max(u1, hi[r]);
  for (int64_t r = 0; r < R; ++r)
    std::fill(O + r * ldo, O + r * ldo + D, 0.0f);
  if (u1 <= u0)
    return; // nothing to attend: zeros, as attendRows
  const int64_t n = u1 - u0;
  scratch.resize((size_t)(R * n));
  float *S = scratch.data();
  for (int64_t r0 = 0; r0 < R; r0 += 3) {
    const int g = (int)std::min<int64_t>(3, R - r0);
    const float *q[3] = {Q + r0 * ldq, Q + std::min(r0 + 1, R - 1) * ldq,
                         Q + std::min(r0 + 2, R - 1) * ldq};
    forRunsIn(keys, u0, u1, [&](const KvRun<T> &run, int64_t off, int64_t cnt) {
      for (int64_t j = 0; j < cnt; j += 16) {
        int64_t at = run.first + off + j - u0;
        float *s[3] = {S + r0 * n + at, S + (r0 + std::min(1, g - 1)) * n + at,
                       S + (r0 + std::min(2, g - 1)) * n + at};
        scoresGemmOrder<T>(g, q, run.data + (off + j) * D, kScales,
                           std::min<int64_t>(16, cnt - j), D, scale, s);
      }
    });
  }
  for (int64_t r = 0; r < R; ++r) {
    if (lo[r] >= hi[r])
      continue;
    float *row = S + r * n + (lo[r] - u0);
    int64_t len = hi[r] - lo[r];
    if (softcap > 0.0f)
      for (int64_t j = 0; j < len; ++j)
        row[j] = qcc::numerics::softcap(row[j], softcap);
    if (alibi)
      for (int64_t j = 0; j < len; ++j)
        row[j] += qcc::numerics::alibi(alibi[r], lo[r] + j, hi[r] - 1);
    softmaxRow(row, len);
    float *o = O + r * ldo;
    forRunsIn(values, lo[r], hi[r],
              [&](const KvRun<T> &run, int64_t off, int64_t cnt) {
                const float *vs = nullptr;
                if constexpr (std::is_same_v<T, int8_t>)
                  vs = run.scales + off * run.scaleStride;
                weightedSumAvx512(row + (run.first + off - lo[r]),
                                  run.data + off * D, vs, run.scaleStride, cnt,
                                  D, o);
              });
  }
}

#endif

template <typename T>
void attendRunsImpl(int64_t R, int64_t D, const float *Q, int64_t ldq,
                    const std::vector<KvRun<T>> &keys,
                    const std::vector<KvRun<T>> &values, const float *kScales,
                    float scale, float softcap, const int64_t *lo,
                    const int64_t *hi, float *O, int64_t ldo,
                    std::vector<float> &scratch, const float *alibi) {
  constexpr bool isI8 = std::is_same_v<T, int8_t>;
#ifdef QCC_HAVE_AVX512_ATTENTION
  if (haveAvx512Attention(D))
    return attendRunsAvx512(R, D, Q, ldq, keys, values, kScales, scale,
                            softcap, lo, hi, O, ldo, scratch, alibi);
#endif
  // Elsewhere (portable kernels, no AVX-512): the loops above, row by row.
  for (int64_t r = 0; r < R; ++r) {
    int64_t a = lo[r], e = std::max(lo[r], hi[r]);
    float *o = O + r * ldo;
    std::fill(o, o + D, 0.0f);
    if (e == a)
      continue; // nothing to attend: zeros, as attendRows
    scratch.resize((size_t)(e - a));
    float *row = scratch.data();
    const float *q = Q + r * ldq;
    forRunsIn(keys, a, e, [&](const KvRun<T> &run, int64_t off, int64_t n) {
      float *s = row + (run.first + off - a);
      if constexpr (isI8)
        runScores(q, run.data + off * D, kScales, n, D, scale, s);
      else
        (void)kScales, runScores(q, run.data + off * D, n, D, scale, s);
    });
    if (softcap > 0.0f)
      for (int64_t j = 0; j < e - a; ++j)
        row[j] = qcc::numerics::softcap(row[j], softcap);
    if (alibi)
      for (int64_t j = 0; j < e - a; ++j)
        row[j] += qcc::numerics::alibi(alibi[r], a + j, e - 1);
    softmaxRow(row, e - a);
    forRunsIn(values, a, e, [&](const KvRun<T> &run, int64_t off, int64_t n) {
      const float *p = row + (run.first + off - a);
      if constexpr (isI8)
        runWeightedSum(p, run.data + off * D, run.scales + off * run.scaleStride,
                       run.scaleStride, n, D, o);
      else
        runWeightedSum(p, run.data + off * D, n, D, o);
    });
  }
}

} // namespace

void qcc::rt::attendRuns(int64_t R, int64_t D, const float *Q, int64_t ldq,
                         const std::vector<KvRun<float>> &keys,
                         const std::vector<KvRun<float>> &values, float scale,
                         float softcap, const int64_t *lo, const int64_t *hi,
                         float *O, int64_t ldo, std::vector<float> &scratch,
                         const float *alibi) {
  attendRunsImpl(R, D, Q, ldq, keys, values, nullptr, scale, softcap, lo, hi,
                 O, ldo, scratch, alibi);
}

void qcc::rt::attendRuns(int64_t R, int64_t D, const float *Q, int64_t ldq,
                         const std::vector<KvRun<int8_t>> &keys,
                         const std::vector<KvRun<int8_t>> &values,
                         const float *kScales, float scale, float softcap,
                         const int64_t *lo, const int64_t *hi, float *O,
                         int64_t ldo, std::vector<float> &scratch,
                         const float *alibi) {
  attendRunsImpl(R, D, Q, ldq, keys, values, kScales, scale, softcap, lo, hi,
                 O, ldo, scratch, alibi);
}

std::vector<Tensor> qcc::rt::runCpuKernel(OpKind op, const Attrs &attrs,
                                          const Operands &ops) {
  cpuThreads(); // sets up the pool and OpenBLAS's threads on first use
  // No default: a new OpKind without a case does not compile (-Wswitch).
  switch (op) {
  case OpKind::Add: return binary(op, BinOp::Add, ops);
  case OpKind::Sub: return binary(op, BinOp::Sub, ops);
  case OpKind::Mul: return binary(op, BinOp::Mul, ops);
  case OpKind::Div: return binary(op, BinOp::Div, ops);
  case OpKind::Pow: return binary(op, BinOp::Pow, ops);
  case OpKind::Max: return binary(op, BinOp::Max, ops);
  case OpKind::Min: return binary(op, BinOp::Min, ops);
  case OpKind::Equal: return binary(op, BinOp::Equal, ops);
  case OpKind::Less: return binary(op, BinOp::Less, ops);
  case OpKind::LessEqual: return binary(op, BinOp::LessEqual, ops);
  case OpKind::Greater: return binary(op, BinOp::Greater, ops);
  case OpKind::GreaterEqual: return binary(op, BinOp::GreaterEqual, ops);
  case OpKind::And: return binary(op, BinOp::And, ops);
  case OpKind::Or: return binary(op, BinOp::Or, ops);
  case OpKind::Where: return whereK(attrs, ops);
  case OpKind::Sqrt:
    return unaryF32(op, ops, [](float x) { return std::sqrt(x); });
  case OpKind::Reciprocal:
    return unaryF32(op, ops, [](float x) { return 1.0f / x; });
  case OpKind::Erf:
    return unaryF32(op, ops, [](float x) { return std::erf(x); });
  case OpKind::Tanh:
    return unaryF32(op, ops, [](float x) { return std::tanh(x); });
  case OpKind::Sigmoid:
    return unaryF32(op, ops,
                    [](float x) { return qcc::numerics::sigmoid(x); });
  case OpKind::Exp:
    return unaryF32(op, ops, [](float x) { return std::exp(x); });
  case OpKind::Cos:
    return unaryF32(op, ops, [](float x) { return std::cos(x); });
  case OpKind::Sin:
    return unaryF32(op, ops, [](float x) { return std::sin(x); });
  case OpKind::Relu:
    return unaryF32(op, ops, [](float x) { return qcc::numerics::relu(x); });
  case OpKind::Neg:
    return unaryNumeric(op, ops, [](auto x) { return negate(x); });
  case OpKind::Abs:
    return unaryNumeric(op, ops, [](auto x) {
      return x < decltype(x)(0) ? negate(x) : x;
    });
  case OpKind::Log:
    return unaryF32(op, ops, [](float x) { return std::log(x); });
  case OpKind::Not: return notK(attrs, ops);
  case OpKind::IsNaN: return isNaNK(attrs, ops);
  case OpKind::CumSum: return cumsumK(attrs, ops);
  case OpKind::Cast: return castK(attrs, ops);
  case OpKind::MatMul: return matmulK(attrs, ops);
  case OpKind::Gemm: return gemmK(attrs, ops);
  case OpKind::ReduceMean: return reduce(Reduction::Mean, attrs, ops);
  case OpKind::ReduceSum: return reduce(Reduction::Sum, attrs, ops);
  case OpKind::ReduceMax: return reduce(Reduction::Max, attrs, ops);
  case OpKind::Transpose: return transposeK(attrs, ops);
  case OpKind::Reshape: return reshapeK(attrs, ops);
  case OpKind::Flatten: return flattenK(attrs, ops);
  case OpKind::Squeeze: return squeezeK(attrs, ops);
  case OpKind::Unsqueeze: return unsqueezeK(attrs, ops);
  case OpKind::Concat: return concatK(attrs, ops);
  case OpKind::Split: return splitK(attrs, ops);
  case OpKind::Slice: return sliceK(attrs, ops);
  case OpKind::Gather: return gatherK(attrs, ops);
  case OpKind::GatherElements: return gatherElementsK(attrs, ops);
  case OpKind::GatherNd: return gatherNdK(attrs, ops);
  case OpKind::ScatterNd: return scatterNdK(attrs, ops);
  case OpKind::ScatterElements: return scatterElementsK(attrs, ops);
  case OpKind::Tile: return tileK(attrs, ops);
  case OpKind::TopK: return topKK(attrs, ops);
  case OpKind::OneHot: return oneHotK(attrs, ops);
  case OpKind::NonZero: return nonZeroK(attrs, ops);
  case OpKind::Shape: return shapeK(attrs, ops);
  case OpKind::ConstantOfShape: return constantOfShapeK(attrs, ops);
  case OpKind::Range: return rangeK(attrs, ops);
  case OpKind::Expand: return expandK(attrs, ops);
  case OpKind::Trilu: return triluK(attrs, ops);
  case OpKind::Linear: return linearK(ops, {});
  case OpKind::Moe: return moeK(attrs, ops);
  case OpKind::LayerNorm: return layerNormK(attrs, ops);
  case OpKind::RmsNorm: return rmsNormK(attrs, ops);
  case OpKind::Gelu: return geluK(attrs, ops);
  case OpKind::Silu: return siluK(ops);
  case OpKind::Softmax: return softmaxK(attrs, ops);
  case OpKind::Attention: return attentionK(attrs, ops);
  case OpKind::Rotary: return rotaryK(attrs, ops);
  case OpKind::Embedding: return embeddingK(attrs, ops);
  case OpKind::Quantize: return quantizeKernel(attrs, ops);
  case OpKind::QLinear: return qlinearKernel(attrs, ops);
  case OpKind::Sparse24: return sparse24K(attrs, ops);
  case OpKind::WeightInt4: return weightInt4K(attrs, ops);
  // The session runs kv_attention against its KV cache, and a kernel
  // region op by op.
  case OpKind::KvAttention:
  case OpKind::Kernel:
    break;
  }
  fail(std::string("op '") + opKindName(op) + "' has no CPU kernel");
}

std::vector<Tensor> qcc::rt::computeInF32(
    OpKind op, const Operands &operands,
    const std::vector<DType> &resultTypes,
    const std::function<std::vector<Tensor>(const Operands &)> &kernel) {
  // The common case, an f32 (or integer) node: straight to the kernel.
  bool anyHalf = std::any_of(resultTypes.begin(), resultTypes.end(),
                             isHalfFloat) ||
                 std::any_of(operands.begin(), operands.end(),
                             [](const Tensor *t) {
                               return t && isHalfFloat(t->dtype());
                             });
  if (!anyHalf)
    return kernel(operands);
  // Kernels that copy elements by their byte size (and cast, which converts
  // itself) keep f16/bf16 as they are: no conversion, exact.
  if (format::movesElements(op) || op == OpKind::Cast)
    return kernel(operands);
  std::vector<Tensor> wide;
  wide.reserve(operands.size());
  Operands widened;
  for (const Tensor *t : operands) {
    if (t && isHalfFloat(t->dtype())) {
      wide.push_back(convertFloat(*t, DType::F32));
      widened.push_back(&wide.back());
    } else {
      widened.push_back(t);
    }
  }
  // Results are narrowed whatever the operands: qlinear reads int8 and
  // writes the linear's f16.
  std::vector<Tensor> results = kernel(widened);
  for (size_t r = 0; r < results.size() && r < resultTypes.size(); ++r)
    if (results[r].dtype() == DType::F32 && isHalfFloat(resultTypes[r]))
      results[r] = convertFloat(results[r], resultTypes[r]);
  return results;
}
