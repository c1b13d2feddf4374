//===- common.cuh - helpers shared by every qcc device template -----------===//
//
// Included (as "qcc/common.cuh") by every template in codegen/kernels. Compiled
// with NVRTC, which has no standard library: everything needed is defined
// here, in namespace qcc. The API below is stable; add, never change.
//
//   integer types      qcc::int8_t ... qcc::uint64_t
//   cp.async           cp_async_16(smem, gmem, pred)  16 B, .cg, zero-fill when
//                      !pred; cp_async_commit(); cp_async_wait<N>()
//   ldmatrix           ldmatrix_x4 / ldmatrix_x2 (and _trans)
//   mma.sync           mma_s8_16832 (m16n8k32 s8.s8.s32), mma_f16_16816
//                      (m16n8k16 f16.f16.f32), mma_bf16_16816
//   exact float math   every step rounded to f32 as the CPU reference does
//                      (it is compiled with -ffp-contract=off): fmul/fadd/...,
//                      dequant_i32, quantize_symmetric
//   warp reductions    warp_sum / warp_max
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

template <int A, int B> struct CeilDiv {
  static constexpr int value = (A + B - 1) / B;
};
__host__ __device__ constexpr int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

//===--- shared memory addresses, cp.async ---------------------------------===//

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

//===--- ldmatrix, mma.sync (sm_80+) ---------------------------------------===//

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

//===--- exact float math ---------------------------------------------------===//
//
// Each helper rounds once to f32 (no FMA contraction), matching the CPU
// reference compiled with -ffp-contract=off.

QCC_DEVICE float fmul(float a, float b) { return __fmul_rn(a, b); }
QCC_DEVICE float fadd(float a, float b) { return __fadd_rn(a, b); }
QCC_DEVICE float fsub(float a, float b) { return __fsub_rn(a, b); }
QCC_DEVICE float fdiv(float a, float b) { return __fdiv_rn(a, b); }
QCC_DEVICE float i2f(int32_t v) { return __int2float_rn(v); }

/// The qlinear dequantization of docs/QUANTIZATION.md, in its order:
/// float(acc - zp * wsum) * (xs * ws). Integer steps wrap like the CPU's.
QCC_DEVICE float dequant_i32(int32_t acc, int32_t zp, int32_t wsum, float xs,
                             float ws) {
  int32_t c = static_cast<int32_t>(static_cast<uint32_t>(acc) -
                                   static_cast<uint32_t>(zp) *
                                       static_cast<uint32_t>(wsum));
  return fmul(i2f(c), fmul(xs, ws));
}

/// clamp(round_half_even(v), lo, hi) as an integer; NaN gives 0 (the CPU's
/// roundClamp).
QCC_DEVICE int32_t round_clamp(float v, float lo, float hi) {
  if (v != v)
    return 0;
  float r = rintf(v); // round half to even
  r = r < lo ? lo : (r > hi ? hi : r);
  return static_cast<int32_t>(r);
}

/// Symmetric int8: clamp(round_half_even(x / scale), -127, 127).
QCC_DEVICE int8_t quantize_symmetric(float x, float scale) {
  return static_cast<int8_t>(round_clamp(fdiv(x, scale), -127.0f, 127.0f));
}

/// Asymmetric int8: clamp(round_half_even(x / scale) + zp, -128, 127), NaN
/// quantized as zp.
QCC_DEVICE int8_t quantize_asymmetric(float x, float scale, int32_t zp) {
  float v = fdiv(x, scale);
  float r = (v != v) ? 0.0f : rintf(v);
  r = fadd(r, i2f(zp));
  r = r < -128.0f ? -128.0f : (r > 127.0f ? 127.0f : r);
  return static_cast<int8_t>(static_cast<int32_t>(r));
}

//===--- loads as float -----------------------------------------------------===//

QCC_DEVICE float to_float(float v) { return v; }
QCC_DEVICE float to_float(__half v) { return __half2float(v); }
QCC_DEVICE float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

//===--- warp reductions ----------------------------------------------------===//

QCC_DEVICE int32_t warp_sum(int32_t v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
QCC_DEVICE float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fadd(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
/// Max ignoring NaN (fmaxf), so order independent.
QCC_DEVICE float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
QCC_DEVICE float warp_min(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

} // namespace qcc

#endif // QCC_KERNELS_COMMON_CUH
