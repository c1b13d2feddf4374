//===- elementwise.cuh - generic fused elementwise chains -------------------===//
//
// NVRTC include name "qcc/elementwise.cuh". A chain is an expression type
// built from stateless functors over the N inputs of one element (in float):
//   Arg<I>                 x_I
//   Add<A, B>, Sub, Mul, Div (Div uses __fdiv_rn)
//   Gelu<A>                0.5 a (1 + erf(a / sqrt(2)))           (approximate = "none")
//   GeluTanh<A>            0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))
//   Silu<A>                a / (1 + exp(-a))
//   Sigmoid<A>, Relu<A>, Neg<A>, Tanh<A>, Exp<A>, Sqrt<A>, Reciprocal<A>
// e.g. SwiGLU = Mul<Silu<Arg<0>>, Arg<1>>, bias + gelu + residual =
// Add<Gelu<Add<Arg<0>, Arg<1>>>, Arg<2>>. Each type has
//   static __device__ float eval(const float *x).
//
// Inputs may broadcast along the innermost dimensions: input j is read at
// index i % mod[j] (mod[j] = 0 means no broadcast, i.e. same shape as out;
// a bias of width C uses mod = C; a scalar uses mod = 1).
//
// Launch (ElementwiseLaunch<BlockThreads, ElemsPerThread>):
//   grid = ceil(n / (BlockThreads * ElemsPerThread)), block = BlockThreads,
//   dynamic smem = 0. InT / OutT: float or __half.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_ELEMENTWISE_CUH
#define QCC_KERNELS_ELEMENTWISE_CUH

#include "qcc/kutil.cuh"

namespace qcc {
namespace ew {

template <int I> struct Arg {
  static __device__ __forceinline__ float eval(const float *x) { return x[I]; }
};
template <typename A, typename B> struct Add {
  static __device__ __forceinline__ float eval(const float *x) { return A::eval(x) + B::eval(x); }
};
template <typename A, typename B> struct Sub {
  static __device__ __forceinline__ float eval(const float *x) { return A::eval(x) - B::eval(x); }
};
template <typename A, typename B> struct Mul {
  static __device__ __forceinline__ float eval(const float *x) { return A::eval(x) * B::eval(x); }
};
template <typename A, typename B> struct Div {
  static __device__ __forceinline__ float eval(const float *x) {
    return __fdiv_rn(A::eval(x), B::eval(x));
  }
};
template <typename A> struct Gelu {
  static __device__ __forceinline__ float eval(const float *x) {
    const float a = A::eval(x);
    return 0.5f * a * (1.0f + erff(a * 0.70710678118654752f));
  }
};
template <typename A> struct GeluTanh {
  static __device__ __forceinline__ float eval(const float *x) {
    const float a = A::eval(x);
    return 0.5f * a * (1.0f + tanhf(0.79788456080286536f * (a + 0.044715f * a * a * a)));
  }
};
template <typename A> struct Sigmoid {
  static __device__ __forceinline__ float eval(const float *x) {
    return 1.0f / (1.0f + expf(-A::eval(x)));
  }
};
template <typename A> struct Silu {
  static __device__ __forceinline__ float eval(const float *x) {
    const float a = A::eval(x);
    return a / (1.0f + expf(-a));
  }
};
template <typename A> struct Relu {
  static __device__ __forceinline__ float eval(const float *x) { return fmaxf(A::eval(x), 0.0f); }
};
template <typename A> struct Neg {
  static __device__ __forceinline__ float eval(const float *x) { return -A::eval(x); }
};
template <typename A> struct Tanh {
  static __device__ __forceinline__ float eval(const float *x) { return tanhf(A::eval(x)); }
};
template <typename A> struct Exp {
  static __device__ __forceinline__ float eval(const float *x) { return expf(A::eval(x)); }
};
template <typename A> struct Sqrt {
  static __device__ __forceinline__ float eval(const float *x) { return sqrtf(A::eval(x)); }
};
template <typename A> struct Reciprocal {
  static __device__ __forceinline__ float eval(const float *x) { return __fdiv_rn(1.0f, A::eval(x)); }
};

} // namespace ew

template <int BlockThreads, int ElemsPerThread> struct ElementwiseLaunch {
  static constexpr int kBlockThreads = BlockThreads;
  static constexpr int kDynamicSmemBytes = 0;
  __host__ __device__ static constexpr long long gridX(long long n) {
    return (n + (long long)BlockThreads * ElemsPerThread - 1) /
           ((long long)BlockThreads * ElemsPerThread);
  }
};

template <typename InT, typename OutT, int NumInputs> struct ElementwiseParams {
  const InT *in[NumInputs];
  long long mod[NumInputs]; // 0: full shape; else index % mod (broadcast)
  OutT *out;
  long long n;
};

template <int BlockThreads, int ElemsPerThread, typename Chain, typename InT,
          typename OutT, int NumInputs>
__global__ void __launch_bounds__(BlockThreads)
elementwiseKernel(ElementwiseParams<InT, OutT, NumInputs> p) {
  const long long base =
      (long long)blockIdx.x * BlockThreads * ElemsPerThread + threadIdx.x;
#pragma unroll
  for (int e = 0; e < ElemsPerThread; ++e) {
    const long long i = base + (long long)e * BlockThreads;
    if (i >= p.n) return;
    float x[NumInputs];
#pragma unroll
    for (int j = 0; j < NumInputs; ++j)
      x[j] = kutil::toFloat(p.in[j][p.mod[j] != 0 ? i % p.mod[j] : i]);
    p.out[i] = kutil::fromFloat<OutT>(Chain::eval(x));
  }
}

} // namespace qcc

#endif // QCC_KERNELS_ELEMENTWISE_CUH
