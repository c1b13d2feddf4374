//===- elementwise.cuh - generic fused elementwise chains -------------------===//
//
// NVRTC include name "qcc/elementwise.cuh". A chain is an expression type
// built from stateless functors over the N inputs of one element (in float):
//   Arg<I>                 x_I
//   Add<A, B>, Sub, Mul, Div   one rounding each (never an FMA)
//   Gelu<A>                0.5 a (1 + erf(a / sqrt(2)))           (approximate = "none")
//   GeluTanh<A>            0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))
//   Silu<A>                a / (1 + exp(-a))
//   Sigmoid<A>, Relu<A>, Neg<A>, Tanh<A>, Exp<A>, Cos<A>, Sin<A>, Sqrt<A>,
//   Reciprocal<A>
// Every formula is the CPU kernel's own, from numerics.h (qcc::numerics): the
// same operations in the same order, so results differ from the CPU's only
// by the ulps of the erf / tanh / exp library calls (numerics.h).
// e.g. SwiGLU = Mul<Silu<Arg<0>>, Arg<1>>, bias + gelu + residual =
// Add<Gelu<Add<Arg<0>, Arg<1>>>, Arg<2>>. Each type has
//   static __device__ float eval(const float *x).
//
// The emitter writes each chain's kernel (EmitElementwise.cpp): one element
// per thread, each input read at broadcast.h's index (ONNX broadcasting
// along any dimensions).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_ELEMENTWISE_CUH
#define QCC_KERNELS_ELEMENTWISE_CUH

#include "qcc/broadcast.h"
#include "qcc/common.cuh"

namespace qcc {
namespace ew {

template <int I> struct Arg {
  static __device__ __forceinline__ float eval(const float *x) { return x[I]; }
};
template <typename A, typename B> struct Add {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::fadd(A::eval(x), B::eval(x));
  }
};
template <typename A, typename B> struct Sub {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::fsub(A::eval(x), B::eval(x));
  }
};
template <typename A, typename B> struct Mul {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::fmul(A::eval(x), B::eval(x));
  }
};
template <typename A, typename B> struct Div {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::fdiv(A::eval(x), B::eval(x));
  }
};
template <typename A> struct Gelu {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::geluErf(A::eval(x));
  }
};
template <typename A> struct GeluTanh {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::geluTanh(A::eval(x));
  }
};
template <typename A> struct Sigmoid {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::sigmoid(A::eval(x));
  }
};
template <typename A> struct Silu {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::silu(A::eval(x));
  }
};
template <typename A> struct Relu {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::relu(A::eval(x));
  }
};
template <typename A> struct Neg {
  static __device__ __forceinline__ float eval(const float *x) { return -A::eval(x); }
};
template <typename A> struct Tanh {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::libmTanh(A::eval(x));
  }
};
template <typename A> struct Exp {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::libmExp(A::eval(x));
  }
};
template <typename A> struct Cos {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::libmCos(A::eval(x));
  }
};
template <typename A> struct Sin {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::libmSin(A::eval(x));
  }
};
template <typename A> struct Sqrt {
  static __device__ __forceinline__ float eval(const float *x) { return sqrtf(A::eval(x)); }
};
template <typename A> struct Reciprocal {
  static __device__ __forceinline__ float eval(const float *x) {
    return numerics::fdiv(1.0f, A::eval(x));
  }
};

} // namespace ew

} // namespace qcc

#endif // QCC_KERNELS_ELEMENTWISE_CUH
