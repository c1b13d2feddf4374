//===- ShapeKernels.cpp - shape and data movement -------------------------===//
//
// Reshapes, slices, gathers, scatters, concatenation, shape arithmetic:
// kernels that move elements by their byte size (f16/bf16 as they are).
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/ReferenceInternal.h"

#include "format/Checked.h"
#include "runtime/core/HalfFloat.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>

using namespace qcc::rt;
using nlohmann::json;
using namespace qcc::rt::cpukernels;

namespace qcc::rt::cpukernels {

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

} // namespace qcc::rt::cpukernels
