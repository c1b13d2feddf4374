//===- CpuE4M3.h - 16 FP8 E4M3 codes to f32 with AVX-512 --------*- C++ -*-===//
//
// The one vector decode of E4M3 codes (format/device/numerics.h's
// e4m3ToFloat, exactly), shared by the FP8 KV cache's attention loops and
// the FP8 qlinear's GEMV.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUE4M3_H
#define QCC_RUNTIME_CPUE4M3_H

#if defined(__x86_64__)
#include "runtime/cpu/X86Intrinsics.h"

#include <cstdint>

namespace qcc::rt {

/// 16 E4M3 codes' values, exactly numerics::e4m3ToFloat: the code's
/// exponent and mantissa bits moved into a float's (bits 3-6 to 23-26, 0-2
/// to 20-22) make 2^(e - 127) (1 + m / 8), or for e = 0 the float
/// subnormal m 2^-129; times 2^120 (exact) both become E4M3's values.
/// 0x7f / 0xff are NaN.
__attribute__((target("avx512f"))) inline __m512
loadE4M3x16(const uint8_t *p) {
  __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
  __m512i magnitude = _mm512_and_si512(c, _mm512_set1_epi32(0x7f));
  __m512i bits = _mm512_or_si512(
      _mm512_slli_epi32(magnitude, 20),
      _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24));
  __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(bits),
                           _mm512_set1_ps(0x1p120f));
  __mmask16 nan = _mm512_cmpeq_epi32_mask(magnitude, _mm512_set1_epi32(0x7f));
  return _mm512_mask_mov_ps(v, nan, _mm512_set1_ps(__builtin_nanf("")));
}

} // namespace qcc::rt

#endif
#endif // QCC_RUNTIME_CPUE4M3_H
