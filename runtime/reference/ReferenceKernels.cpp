//===- ReferenceKernels.cpp - attributes, elementwise kernels, the dispatch ===//
//
// The reference semantics of every qcc op (see dialects/QccOps.td), in
// families (ReferenceInternal.h lists them); this file holds the attribute
// reader, the elementwise kernels and reference::runKernel's switch over
// OpKind. Result shapes always come from the operands' actual shapes.
//
// Element types: f32, i64, i32, i8 and bool (stored as one byte, 0 or 1).
// f16/bf16 are storage types: computeInF32 (at the end of this file) widens
// them to f32 around every kernel but those that only move elements and cast,
// which take them as they are; kernels called directly reject them with
// "unsupported dtype".
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/ReferenceInternal.h"

#include "runtime/core/HalfFloat.h"
#include "runtime/reference/QuantKernels.h"

#include <algorithm>
#include <array>
#include <cmath>
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

using namespace qcc::rt::cpukernels;

namespace qcc::rt::cpukernels {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

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

} // namespace qcc::rt::cpukernels

std::vector<Tensor> qcc::rt::reference::runKernel(OpKind op, const Attrs &attrs,
                                                 const Operands &ops) {
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
  case OpKind::Reciprocal:
  case OpKind::Erf:
  case OpKind::Tanh:
  case OpKind::Sigmoid:
  case OpKind::Exp:
  case OpKind::Cos:
  case OpKind::Sin:
  case OpKind::Relu:
  case OpKind::Log: {
    std::vector<Tensor> r;
    withUnaryFormula(op, [&](auto fn) { r = unaryF32(op, ops, fn); });
    return r;
  }
  case OpKind::Neg:
    return unaryNumeric(op, ops, [](auto x) { return negate(x); });
  case OpKind::Abs:
    return unaryNumeric(op, ops, [](auto x) {
      return x < decltype(x)(0) ? negate(x) : x;
    });
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
  case OpKind::Linear: return reference::linear(ops, {});
  case OpKind::Moe:
    return moeK(attrs, ops, [](const Tensor &rows, const Tensor &w) {
      return std::move(reference::linear({&rows, &w}, {})[0]);
    });
  case OpKind::LayerNorm: return layerNormK(attrs, ops);
  case OpKind::RmsNorm: return rmsNormK(attrs, ops);
  case OpKind::Hadamard: return hadamardK(attrs, ops);
  case OpKind::Gelu: return geluK(attrs, ops);
  case OpKind::Silu: return siluK(ops);
  case OpKind::Softmax: return softmaxK(attrs, ops);
  case OpKind::Attention: return attentionK(attrs, ops);
  case OpKind::Rotary: return rotaryK(attrs, ops);
  case OpKind::Embedding: return embeddingK(attrs, ops);
  case OpKind::Quantize: return reference::quantizeKernel(attrs, ops);
  case OpKind::QLinear: return reference::qlinearKernel(attrs, ops);
  case OpKind::Sparse24: return sparse24K(attrs, ops);
  case OpKind::WeightInt4: return weightInt4K(attrs, ops);
  // The session runs kv_attention against its KV cache, and a kernel
  // region op by op.
  case OpKind::KvAttention:
  case OpKind::Lora:
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
