//===- common.cuh - helpers shared by every qcc device template -----------===//
//
// Included (as "qcc/common.cuh") by every template in codegen/kernels: the one
// device helper header. Compiled with NVRTC, which has no standard library:
// everything needed is defined here, in namespace qcc. The numeric formulas
// (activations, rounding, quantization) are not here but in numerics.h,
// shared with the CPU kernels, as qcc::numerics::*.
//
//   integer types      qcc::int8_t ... qcc::uint64_t
//   sizes              CeilDiv<A, B>, ceil_div, imin, imax, IsSame
//   cp.async           cp_async_16(smem, gmem, pred)  16 B, .cg, zero-fill when
//                      !pred; cp_async_16_partial(smem, gmem, bytes);
//                      cp_async_commit(); cp_async_wait<N>()
//   ldmatrix           ldmatrix_x4 / ldmatrix_x2 (and _trans)
//   mma.sync           mma_s8_16832 (m16n8k32 s8.s8.s32), mma_f16_16816
//                      (m16n8k16 f16.f16.f32), mma_bf16_16816
//   conversions        toFloat (float, __half, __nv_bfloat16, signed char),
//                      fromFloat<T> (float, __half), negInf
//   reductions         warpSum / warpMax / warpMin, warpReduce<Op>,
//                      blockReduce<Threads, Op>
//   outlier columns    OutlierColumns<c...> (the LLM.int8()-style fallback)
//   launch order       wait_for_prior_grids() (programmatic dependent launch),
//                      prefetch_l2_bulk(p, bytes) (weights, before the wait)
//
// cp.async, ldmatrix and mma need sm_80+; on older targets the cp.async
// helpers fall back to synchronous copies and the others are not defined, so
// the tensor-core templates are sm_80+ only.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_COMMON_CUH
#define QCC_KERNELS_COMMON_CUH

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "qcc/numerics.h"

namespace qcc {

typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;

static_assert(sizeof(int8_t) == 1 && sizeof(int16_t) == 2 &&
                  sizeof(int32_t) == 4 && sizeof(int64_t) == 8,
              "qcc integer types");

#define QCC_DEVICE __device__ __forceinline__

// Expand a parameter struct's field list (the *_PARAMS X-macros of the
// *_config.h headers, which the emitter expands too) into its members.
#define QCC_PARAMS_MEMBER(type, name, init) type name init;
#define QCC_PARAMS_LINE()

template <int A, int B> struct CeilDiv {
  static constexpr int value = (A + B - 1) / B;
};
__host__ __device__ constexpr int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}
__host__ __device__ constexpr int imin(int a, int b) { return a < b ? a : b; }
__host__ __device__ constexpr int imax(int a, int b) { return a > b ? a : b; }

template <class A, class B> struct IsSame {
  static constexpr bool value = false;
};
template <class A> struct IsSame<A, A> {
  static constexpr bool value = true;
};

/// The input columns c_0 < c_1 < ... of a linear that stay in float (the
/// LLM.int8()-style fallback, docs/QUANTIZATION.md section 3), known when
/// the kernel is generated: quantize.cuh reads them as 0, the GEMM
/// epilogue's AddOutliers adds their float product.
template <int... Cols> struct OutlierColumns {
  static constexpr int kCount = sizeof...(Cols);
  QCC_DEVICE static bool contains(int k) {
    bool r = false;
    ((r = r || k == Cols), ...);
    return r;
  }
  /// sum_j x[c_j] * w[j], in f32 from 0 in ascending j (numerics.h steps:
  /// the CPU's order, bit for bit).
  QCC_DEVICE static float dot(const float *x, const float *w) {
    float f = 0.0f;
    int j = 0;
    ((f = numerics::fadd(f, numerics::fmul(x[Cols], w[j++]))), ...);
    return f;
  }
};

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

//===--- shared memory addresses, cp.async --------------------------------===//

// Programmatic dependent launch (sm_90+). The runtime launches every kernel
// with programmatic stream serialization on such GPUs, so a kernel may start
// while the one before it in the stream is still running. Every emitted entry
// calls this first: it waits until the prior grids have completed and their
// writes are visible (so completion stays transitive along the stream: a
// kernel that finishes has waited for all before it), then lets the next
// kernel launch, whose launch and block scheduling then overlap this one.
// Without the launch attribute (eager profiling, sm_80) both are no-ops.
QCC_DEVICE void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Asks L2 to fetch [p, p + bytes) without waiting for it (sm_90's bulk
// prefetch; p 16-byte aligned, bytes a multiple of 16; a no-op below sm_90).
// Only for bytes no kernel of the step writes (weights): it may run before
// wait_for_prior_grids.
QCC_DEVICE void prefetch_l2_bulk(const void *p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes)
               : "memory");
#endif
}

QCC_DEVICE uint32_t smem_u32(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// Copies 16 bytes global -> shared asynchronously (L2 only, .cg). When `pred`
/// is false nothing is read (src-size 0) and the 16 shared bytes are zeroed;
/// `gmem` must still be a valid address (pass the tensor's base pointer).
/// Both addresses must be 16-byte aligned.
QCC_DEVICE void cp_async_16(void *smem, const void *gmem, bool pred) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  int src_size = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   smem_u32(smem)),
               "l"(gmem), "r"(src_size)
               : "memory");
#else
  int4 v = make_int4(0, 0, 0, 0);
  if (pred)
    v = *reinterpret_cast<const int4 *>(gmem);
  *reinterpret_cast<int4 *>(smem) = v;
#endif
}

/// cp_async_16 reading only the first `bytes` (0..16, a multiple of 4) of
/// the source; the rest of the 16 shared bytes are zeroed.
QCC_DEVICE void cp_async_16_partial(void *smem, const void *gmem, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   smem_u32(smem)),
               "l"(gmem), "r"(bytes)
               : "memory");
#else
  const int *src = reinterpret_cast<const int *>(gmem);
  int *dst = reinterpret_cast<int *>(smem);
  for (int i = 0; i < 4; ++i)
    dst[i] = 4 * i < bytes ? src[i] : 0;
#endif
}

/// Closes the group of cp.async issued since the last commit.
QCC_DEVICE void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/// Waits until at most N committed groups are still in flight.
template <int N> QCC_DEVICE void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

//===--- ldmatrix, mma.sync (sm_80+) --------------------------------------===//

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800

/// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i,
/// r[i] receives matrix i (thread t: row t/4, b16 columns 2(t%4), 2(t%4)+1).
QCC_DEVICE void ldmatrix_x4(uint32_t (&r)[4], const void *smem_row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smem_u32(smem_row)));
}
QCC_DEVICE void ldmatrix_x2(uint32_t (&r)[2], const void *smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_u32(smem_row)));
}
QCC_DEVICE void ldmatrix_x4_trans(uint32_t (&r)[4], const void *smem_row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smem_u32(smem_row)));
}
QCC_DEVICE void ldmatrix_x2_trans(uint32_t (&r)[2], const void *smem_row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
      : "=r"(r[0]), "=r"(r[1])
      : "r"(smem_u32(smem_row)));
}

/// d = a * b + c, m16n8k32, a row-major s8 (4 regs), b "col" s8 (2 regs),
/// c/d s32 (4 regs). Fragment layout (g = lane/4, t = lane%4):
///   a[0]: row g,   k 4t..4t+3      a[1]: row g+8, k 4t..4t+3
///   a[2]: row g,   k 16+4t..       a[3]: row g+8, k 16+4t..
///   b[0]: n g, k 4t..4t+3          b[1]: n g, k 16+4t..
///   c[0], c[1]: row g, n 2t, 2t+1  c[2], c[3]: row g+8, n 2t, 2t+1
QCC_DEVICE void mma_s8_16832(int32_t (&d)[4], const uint32_t (&a)[4],
                             const uint32_t (&b)[2], const int32_t (&c)[4]) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%10, %11, %12, %13};\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

/// d = a * b + c, m16n8k16, f16 inputs, f32 accumulation. Same layout as
/// mma_s8_16832 with k counted in halves: a[0]: row g, k 2t, 2t+1; a[1]: row
/// g+8; a[2]: row g, k 8+2t; a[3]: row g+8, k 8+2t; b[0]: n g, k 2t; b[1]:
/// n g, k 8+2t; c as above.
QCC_DEVICE void mma_f16_16816(float (&d)[4], const uint32_t (&a)[4],
                              const uint32_t (&b)[2], const float (&c)[4]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%10, %11, %12, %13};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

/// As mma_f16_16816 with bf16 inputs.
QCC_DEVICE void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4],
                               const uint32_t (&b)[2], const float (&c)[4]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%10, %11, %12, %13};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

#endif // sm_80+

//===--- conversions ------------------------------------------------------===//

QCC_DEVICE float toFloat(float v) { return v; }
QCC_DEVICE float toFloat(__half v) { return __half2float(v); }
QCC_DEVICE float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
QCC_DEVICE float toFloat(signed char v) { return (float)v; }

template <typename T> struct FromFloat;
template <> struct FromFloat<float> {
  static QCC_DEVICE float cvt(float v) { return v; }
};
template <> struct FromFloat<__half> {
  static QCC_DEVICE __half cvt(float v) { return __float2half_rn(v); }
};
template <typename T> QCC_DEVICE T fromFloat(float v) {
  return FromFloat<T>::cvt(v);
}

QCC_DEVICE float negInf() { return __int_as_float(0xff800000); }

//===--- reductions -------------------------------------------------------===//

QCC_DEVICE int32_t warpSum(int32_t v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
QCC_DEVICE float warpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = numerics::fadd(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
/// Max ignoring NaN (fmaxf), so order independent.
QCC_DEVICE float warpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
QCC_DEVICE float warpMin(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fminf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

enum class ReduceOp { Sum, Max, Min };

template <ReduceOp Op> QCC_DEVICE float warpReduce(float v) {
  if (Op == ReduceOp::Sum) return warpSum(v);
  if (Op == ReduceOp::Max) return warpMax(v);
  return warpMin(v);
}

/// Block-wide reduction; every thread gets the result. `scratch` holds at
/// least BlockThreads / 32 floats of shared memory. Contains two
/// __syncthreads, so it can be called repeatedly with the same scratch.
template <int BlockThreads, ReduceOp Op>
QCC_DEVICE float blockReduce(float v, float *scratch) {
  static_assert(BlockThreads % kWarpSize == 0 && BlockThreads <= 1024,
                "BlockThreads must be a multiple of 32, at most 1024");
  constexpr int kWarps = BlockThreads / kWarpSize;
  v = warpReduce<Op>(v);
  if (kWarps == 1) return v;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  __syncthreads(); // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float identity = Op == ReduceOp::Sum ? 0.0f
                   : (Op == ReduceOp::Max ? __int_as_float(0xff800000)
                                          : __int_as_float(0x7f800000));
  float r = lane < kWarps ? scratch[lane] : identity;
  return warpReduce<Op>(r);
}

} // namespace qcc

#endif // QCC_KERNELS_COMMON_CUH
