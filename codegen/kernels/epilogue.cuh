//===- epilogue.cuh - GEMM epilogue functor chain ------------------------===//
//
// CUTLASS-lite epilogues: a GEMM hands every output element (its exact
// accumulator, row m, column n) to `epi.visit(acc, m, n)` of a
//
//   qcc::Chain<Stage0, Stage1, ..., Store>
//
// which runs each stage's `float apply(float v, int m, int n) const` in order
// and ends in a store stage's `void store(float v, int m, int n) const`.
// Stages are aggregates of pointers and sizes, built by the emitter's
// extern "C" __global__ wrapper:
//
//   qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::AddBias<>, qcc::StoreF32>
//       epi(qcc::DequantPerTokenPerChannel{xs, 1, xz, 1, ws, wsum},
//           qcc::AddBias<>{bias}, qcc::StoreF32{y, N});
//
// A qlinear with float outlier columns (kind gemm_i8_mixed) adds
// qcc::AddOutliers<qcc::OutlierColumns<c...>>{x, K, w} after the
// dequantization: the int8 GEMM and the small float GEMM on the gathered
// columns, summed in the epilogue.
//
// Integer GEMMs deliver the int32 accumulator: the first stage must take it
// (kIntInput: DequantPerTokenPerChannel, or StoreI32 alone); float GEMMs
// deliver f32 and the chain must not start with an int stage. Both are
// checked at compile time. Every formula is the CPU's own, from numerics.h
// (qcc::numerics, one rounding per operation, no FMA contraction): the
// dequantization, bias, residual and requantization agree with the CPU bit
// for bit, the activations up to the erf/tanh/exp library calls (numerics.h
// says which ulps differ).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_EPILOGUE_CUH
#define QCC_KERNELS_EPILOGUE_CUH

#include "qcc/common.cuh"

namespace qcc {

//===--- int32 -> float ----------------------------------------------------===//

/// qlinear dequantization (docs/QUANTIZATION.md section 3):
///   float(acc - xz[m] * wsum[n]) * (xs[m] * ws[n])
/// xs_stride / xz_stride: 1 for per-token (one per row m), 0 for per-tensor.
/// xz == nullptr means symmetric (zero point 0).
struct DequantPerTokenPerChannel {
  static constexpr bool kIntInput = true;
  const float *xs;
  int xs_stride;
  const int32_t *xz;
  int xz_stride;
  const float *ws;
  const int32_t *wsum;

  QCC_DEVICE float apply(int32_t acc, int m, int n) const {
    int32_t zp = xz ? xz[m * xz_stride] : 0;
    return numerics::dequantize(acc, zp, wsum[n], xs[m * xs_stride], ws[n]);
  }
};

//===--- float -> float ----------------------------------------------------===//

/// The float part of a qlinear with outlier columns (qcc.qlinear, QccOps.td):
/// v + sum_j x[m * K + c_j] * w[n * count + j], the sum from 0 in ascending
/// j; x is the f32 input [M, K], w the f32 weight columns [N, count]. Between
/// the dequantization and the bias, as on the CPU.
template <class Columns> struct AddOutliers {
  static constexpr bool kIntInput = false;
  const float *x;
  int K;
  const float *w;
  QCC_DEVICE float apply(float v, int m, int n) const {
    return numerics::fadd(
        v, Columns::dot(x + static_cast<int64_t>(m) * K,
                        w + static_cast<int64_t>(n) * Columns::kCount));
  }
};

/// v + bias[n]; bias is f32 (default), f16 or bf16.
template <class T = float> struct AddBias {
  static constexpr bool kIntInput = false;
  const T *bias;
  QCC_DEVICE float apply(float v, int, int n) const {
    return numerics::fadd(v, toFloat(bias[n]));
  }
};

/// A tensor of the GEMM result's shape, row-major with leading dimension
/// `ld`, that a stage reads element (m, n) of: f32 (default), f16 or bf16.
template <class T> struct ResultShaped {
  const T *data;
  int ld;
  QCC_DEVICE float at(int m, int n) const {
    return toFloat(data[static_cast<int64_t>(m) * ld + n]);
  }
};

/// v + residual[m, n] (qcc::AddResidual<>{res, N}).
template <class T = float> struct AddResidual : ResultShaped<T> {
  static constexpr bool kIntInput = false;
  QCC_DEVICE float apply(float v, int m, int n) const {
    return numerics::fadd(v, this->at(m, n));
  }
};

/// v * factor[m, n]: qcc.mul by a tensor of the GEMM result's shape
/// (SwiGLU's silu(gate) * up; qcc::MulOperand<>{factor, N}).
template <class T = float> struct MulOperand : ResultShaped<T> {
  static constexpr bool kIntInput = false;
  QCC_DEVICE float apply(float v, int m, int n) const {
    return numerics::fmul(v, this->at(m, n));
  }
};

/// qcc.gelu approximate = "none" (numerics::geluErf).
struct GeluErf {
  static constexpr bool kIntInput = false;
  QCC_DEVICE float apply(float x, int, int) const {
    return numerics::geluErf(x);
  }
};

/// qcc.gelu approximate = "tanh" (numerics::geluTanh, in double).
struct GeluTanh {
  static constexpr bool kIntInput = false;
  QCC_DEVICE float apply(float x, int, int) const {
    return numerics::geluTanh(x);
  }
};

/// qcc.silu (numerics::silu).
struct Silu {
  static constexpr bool kIntInput = false;
  QCC_DEVICE float apply(float x, int, int) const {
    return numerics::silu(x);
  }
};

//===--- stores ------------------------------------------------------------===//
// out[m * ld + n] = v; ld is the output row stride in elements (N for a
// dense [M, N] result, larger to write a column slice of a wider buffer).

struct StoreF32 {
  static constexpr bool kIntInput = false;
  float *out;
  int ld;
  QCC_DEVICE void store(float v, int m, int n) const {
    out[static_cast<int64_t>(m) * ld + n] = v;
  }
};

struct StoreF16 {
  static constexpr bool kIntInput = false;
  __half *out;
  int ld;
  QCC_DEVICE void store(float v, int m, int n) const {
    out[static_cast<int64_t>(m) * ld + n] = __float2half_rn(v);
  }
};

struct StoreBF16 {
  static constexpr bool kIntInput = false;
  __nv_bfloat16 *out;
  int ld;
  QCC_DEVICE void store(float v, int m, int n) const {
    out[static_cast<int64_t>(m) * ld + n] = __float2bfloat16_rn(v);
  }
};

/// The raw int32 accumulator (tests; a chain of this stage alone).
struct StoreI32 {
  static constexpr bool kIntInput = true;
  int32_t *out;
  int ld;
  QCC_DEVICE void store(int32_t v, int m, int n) const {
    out[static_cast<int64_t>(m) * ld + n] = v;
  }
};

/// Static-scale symmetric requantization (qcc.quantize with a `scale`
/// attribute): clamp(round_half_even(v / scale), -127, 127) as int8. Per-row
/// dynamic requantization needs the row's absmax: store f32 and run
/// quantize.cuh's kernel instead.
struct RequantizeStatic {
  static constexpr bool kIntInput = false;
  int8_t *out;
  int ld;
  float scale;
  QCC_DEVICE void store(float v, int m, int n) const {
    out[static_cast<int64_t>(m) * ld + n] = numerics::quantizeSymmetric(v, scale);
  }
};

//===--- the chain ---------------------------------------------------------===//

template <class... Stages> struct Chain;

template <class Store> struct Chain<Store> {
  static constexpr bool kIntInput = Store::kIntInput;
  Store last;
  QCC_DEVICE Chain(const Store &s) : last(s) {}
  template <class V> QCC_DEVICE void visit(V v, int m, int n) const {
    static_assert(IsSame<V, int32_t>::value == kIntInput,
                  "epilogue input type: int32 only into an int stage");
    last.store(v, m, n);
  }
};

template <class Stage, class... Rest> struct Chain<Stage, Rest...> {
  static constexpr bool kIntInput = Stage::kIntInput;
  static_assert(sizeof...(Rest) > 0, "");
  static_assert(!Chain<Rest...>::kIntInput,
                "only the first epilogue stage may take the int32 accumulator");
  Stage stage;
  Chain<Rest...> rest;
  QCC_DEVICE Chain(const Stage &s, const Rest &...r) : stage(s), rest(r...) {}
  template <class V> QCC_DEVICE void visit(V v, int m, int n) const {
    static_assert(IsSame<V, int32_t>::value == kIntInput,
                  "epilogue input type: int32 only into an int stage");
    rest.visit(stage.apply(v, m, n), m, n);
  }
};

} // namespace qcc

#endif // QCC_KERNELS_EPILOGUE_CUH
