//===- numerics.h - numeric formulas shared by the CPU and CUDA kernels ---===//
//
// One definition of every activation and quantization formula, included by
// the CUDA templates (NVRTC include name "qcc/numerics.h", via common.cuh)
// and by the CPU kernels (runtime/cpu/Cpu*Kernels.cpp, CpuQuantKernels.cpp as
// "format/device/numerics.h"). Plain C++17: under NVRTC there is no
// standard library, so only builtins are used there; QCC_HOST_DEVICE makes
// each function __host__ __device__ under NVRTC / nvcc and a plain inline
// function elsewhere.
//
// What is bit-exact between the CPU and the GPU, and what is not:
//   - the formula and its operation order: every +, -, *, / is one rounded
//     float (or double) operation, written as fadd / fmul / ... below. On the
//     device these are __fadd_rn etc., which are never contracted into an
//     FMA; on the host they are plain operators, so a translation unit that
//     calls a formula with a product feeding a sum (geluTanh) must be
//     compiled with -ffp-contract=off (runtime/cpu/CMakeLists.txt does so for
//     the CPU kernel families; GCC's default, fast, fuses
//     a * b + c into an FMA on a host that has one).
//   - quantization (roundHalfEven, quantizeSymmetric, quantizeAsymmetric,
//     the scales, dequantize) uses only exact or correctly rounded steps:
//     bit for bit on both sides (docs/QUANTIZATION.md).
//   - NOT bit-exact: the libm calls erff, expf, tanhf, tanh (double). Neither
//     glibc nor CUDA's libdevice rounds them correctly (both document errors
//     of a few ulp: the CUDA C++ Programming Guide's Mathematical Functions
//     appendix, glibc's "Errors in Math Functions"), so an activation may
//     differ by an ulp or two after the following exact steps. The GELU tanh
//     form runs in double and rounds to float once at the end, which hides
//     tanh's double ulps in all but rare cases. test/e2e/check_gpu.py allows
//     1e-5 relative for the kinds that contain these calls (gemm_i8+gelu,
//     gemm_i8+silu, elementwise) and 0 for the others (gemm_i8, embedding).
// No fast intrinsics (__expf, tanh.approx): agreement first.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_DEVICE_NUMERICS_H
#define QCC_FORMAT_DEVICE_NUMERICS_H

// QCC_HOST_DEVICE (no inline: the functions say it themselves).
#if defined(__CUDACC_RTC__)
#include "qcc/host_device.h"
#else
#include "format/device/host_device.h"
#endif

#if !defined(__CUDACC_RTC__)
#include <cmath>
#endif

namespace qcc {
namespace numerics {

static_assert(sizeof(int) == 4 && sizeof(unsigned) == 4, "32-bit int");

//===--- one rounding per operation ---------------------------------------===//

#if defined(__CUDA_ARCH__)
QCC_HOST_DEVICE inline float fadd(float a, float b) { return __fadd_rn(a, b); }
QCC_HOST_DEVICE inline float fsub(float a, float b) { return __fsub_rn(a, b); }
QCC_HOST_DEVICE inline float fmul(float a, float b) { return __fmul_rn(a, b); }
QCC_HOST_DEVICE inline float fdiv(float a, float b) { return __fdiv_rn(a, b); }
QCC_HOST_DEVICE inline double dadd(double a, double b) {
  return __dadd_rn(a, b);
}
QCC_HOST_DEVICE inline double dmul(double a, double b) {
  return __dmul_rn(a, b);
}
QCC_HOST_DEVICE inline float i2f(int v) { return __int2float_rn(v); }
QCC_HOST_DEVICE inline float d2f(double v) { return __double2float_rn(v); }
#else
QCC_HOST_DEVICE inline float fadd(float a, float b) { return a + b; }
QCC_HOST_DEVICE inline float fsub(float a, float b) { return a - b; }
QCC_HOST_DEVICE inline float fmul(float a, float b) { return a * b; }
QCC_HOST_DEVICE inline float fdiv(float a, float b) { return a / b; }
QCC_HOST_DEVICE inline double dadd(double a, double b) { return a + b; }
QCC_HOST_DEVICE inline double dmul(double a, double b) { return a * b; }
QCC_HOST_DEVICE inline float i2f(int v) { return (float)v; }
QCC_HOST_DEVICE inline float d2f(double v) { return (float)v; }
#endif

//===--- the math library: not correctly rounded on either side -----------===//

#if defined(__CUDA_ARCH__)
QCC_HOST_DEVICE inline float libmErf(float x) { return ::erff(x); }
QCC_HOST_DEVICE inline float libmExp(float x) { return ::expf(x); }
QCC_HOST_DEVICE inline float libmTanh(float x) { return ::tanhf(x); }
QCC_HOST_DEVICE inline double libmTanh(double x) { return ::tanh(x); }
QCC_HOST_DEVICE inline float libmCos(float x) { return ::cosf(x); }
QCC_HOST_DEVICE inline float libmSin(float x) { return ::sinf(x); }
#else
QCC_HOST_DEVICE inline float libmErf(float x) { return std::erf(x); }
QCC_HOST_DEVICE inline float libmExp(float x) { return std::exp(x); }
QCC_HOST_DEVICE inline float libmTanh(float x) { return std::tanh(x); }
QCC_HOST_DEVICE inline double libmTanh(double x) { return std::tanh(x); }
QCC_HOST_DEVICE inline float libmCos(float x) { return std::cos(x); }
QCC_HOST_DEVICE inline float libmSin(float x) { return std::sin(x); }
#endif

//===--- activations (dialects/QccOps.td) ---------------------------------===//

/// The libm's erf as a function object (for geluErfWith).
struct LibmErf {
  QCC_HOST_DEVICE float operator()(float x) const { return libmErf(x); }
};

/// erf(x) as a rational function, which vectorizes (libm's erff does not):
/// the CPU fast path's erf. Eigen's generic_fast_erf_float: odd degree-13
/// numerator over even degree-8 denominator on x clamped to [-4, 4] (where
/// float erf is +-1; the clamp keeps NaN). Over every float in [-10, 10]:
/// |error| <= 4.7e-7 (8 ulp) against erf in double, where the libm's erff
/// has 6e-8; exactly +-1 from |x| = 4 on, like erff (NumericsTest).
QCC_HOST_DEVICE inline float rationalErf(float a) {
  float x = a < -4.0f ? -4.0f : (a > 4.0f ? 4.0f : a);
  float x2 = fmul(x, x);
  float p = fadd(fmul(x2, -2.72614225801306e-10f), 2.77068142495902e-08f);
  p = fadd(fmul(x2, p), -2.10102402082508e-06f);
  p = fadd(fmul(x2, p), -5.69250639462346e-05f);
  p = fadd(fmul(x2, p), -7.34990630326855e-04f);
  p = fadd(fmul(x2, p), -2.95459980854025e-03f);
  p = fadd(fmul(x2, p), -1.60960333262415e-02f);
  p = fmul(x, p);
  float q = fadd(fmul(x2, -1.45660718464996e-05f), -2.13374055278905e-04f);
  q = fadd(fmul(x2, q), -1.68282697438203e-03f);
  q = fadd(fmul(x2, q), -7.37332916720468e-03f);
  q = fadd(fmul(x2, q), -1.42647390514189e-02f);
  return fdiv(p, q);
}
struct RationalErf {
  QCC_HOST_DEVICE float operator()(float x) const { return rationalErf(x); }
};

/// qcc.gelu approximate = "none": 0.5 x (1 + erf(x / sqrt 2)), in float as
/// (0.5 * x) * (1 + erf(x * 0.70710678f)) with `erf` one of the above.
template <typename Erf>
QCC_HOST_DEVICE inline float geluErfWith(float x, Erf erf) {
  const float kInvSqrt2 = 0.70710678118654752f;
  return fmul(fmul(0.5f, x), fadd(1.0f, erf(fmul(x, kInvSqrt2))));
}

/// GELU with the libm's erff, what float32 reference runtimes (onnxruntime,
/// torch) use: the reference path's and the CUDA kernels' GELU.
QCC_HOST_DEVICE inline float geluErf(float x) {
  return geluErfWith(x, LibmErf());
}

/// sqrt(2 / pi) in double, the correctly rounded sqrt of the double 2 / pi
/// (NumericsTest checks it against std::sqrt(2.0 / std::numbers::pi)).
constexpr double kSqrt2OverPi = 0.7978845608028654;

/// qcc.gelu approximate = "tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
/// x^3))), in double, rounded to float once: (0.5 x) (1 + tanh(c (x +
/// ((0.044715 x) x) x))).
QCC_HOST_DEVICE inline float geluTanh(float x) {
  double xd = x;
  double x3 = dmul(dmul(dmul(0.044715, xd), xd), xd);
  double t = libmTanh(dmul(kSqrt2OverPi, dadd(xd, x3)));
  return d2f(dmul(dmul(0.5, xd), dadd(1.0, t)));
}

/// qcc.sigmoid: 1 / (1 + exp(-x)).
QCC_HOST_DEVICE inline float sigmoid(float x) {
  return fdiv(1.0f, fadd(1.0f, libmExp(-x)));
}

/// qcc.silu: x / (1 + exp(-x)) (one division, not x * sigmoid(x)).
QCC_HOST_DEVICE inline float silu(float x) {
  return fdiv(x, fadd(1.0f, libmExp(-x)));
}

/// qcc.relu: max(x, 0); NaN and -0 give +0.
QCC_HOST_DEVICE inline float relu(float x) { return x > 0.0f ? x : 0.0f; }

/// Gemma-2's attention logit softcapping: cap * tanh(x / cap).
QCC_HOST_DEVICE inline float softcap(float x, float cap) {
  return fmul(cap, libmTanh(fdiv(x, cap)));
}

/// ALiBi's bias of a score (BLOOM, MPT): the head's slope times the key's
/// position minus the query's (<= 0 under a causal mask). Positions fit a
/// float exactly below 2^24.
QCC_HOST_DEVICE inline float alibi(float slope, long long keyPos,
                                   long long queryPos) {
  return fmul(slope, (float)(keyPos - queryPos));
}

//===--- int8 quantization (docs/QUANTIZATION.md sections 3 and 4) --------===//

/// Round half to even, bit for bit rint under round-to-nearest (a zero keeps
/// v's sign). The device has the instruction; the host computes it
/// independently of the floating-point rounding mode, every step exact
/// (v - floor(v) is exact in float, so the tie test is exact).
QCC_HOST_DEVICE inline float roundHalfEven(float v) {
#if defined(__CUDA_ARCH__)
  return ::rintf(v); // cvt.rni.f32.f32
#else
  if (!(std::fabs(v) < 8388608.0f)) // |v| >= 2^23 is integral; NaN / inf
    return v;
  float f = std::floor(v);
  float d = v - f;
  float r = d > 0.5f   ? f + 1.0f
            : d < 0.5f ? f
                       : (std::fmod(f, 2.0f) == 0.0f ? f : f + 1.0f);
  return std::copysign(r, v); // -0.4 rounds to -0, as rint
#endif
}

/// clamp(round_half_even(v), lo, hi) as an integer; NaN gives 0.
QCC_HOST_DEVICE inline int roundClamp(float v, float lo, float hi) {
  if (v != v)
    return 0;
  float r = roundHalfEven(v);
  return (int)(r < lo ? lo : (r > hi ? hi : r));
}

/// The int8 ranges (format/Quant.h derives them from the bit width for the
/// compiler; CpuQuantKernels.h asserts the two agree): symmetric
/// [-kQMax, kQMax], asymmetric [kQMinAsym, kQMax] in kQSteps steps.
constexpr float kQMax = 127.0f, kQMinAsym = -128.0f, kQSteps = 255.0f;

/// The symmetric scale of a group: absmax / 127, 1 when absmax is 0.
QCC_HOST_DEVICE inline float symmetricScale(float absmax) {
  float s = fdiv(absmax, kQMax);
  return s == 0.0f ? 1.0f : s;
}

/// Symmetric int8: clamp(round_half_even(x / scale), -127, 127).
QCC_HOST_DEVICE inline signed char quantizeSymmetric(float x, float scale) {
  return (signed char)roundClamp(fdiv(x, scale), -kQMax, kQMax);
}

/// The asymmetric scale of a group with min mn <= 0 <= max mx:
/// (mx - mn) / 255, 1 when that is 0.
QCC_HOST_DEVICE inline float asymmetricScale(float mn, float mx) {
  float s = fdiv(fsub(mx, mn), kQSteps);
  return s == 0.0f ? 1.0f : s;
}

/// The asymmetric zero point: round_half_even(-mn / scale) - 128.
QCC_HOST_DEVICE inline int asymmetricZeroPoint(float mn, float scale) {
  return (int)roundHalfEven(fdiv(-mn, scale)) + (int)kQMinAsym;
}

/// Asymmetric int8: clamp(round_half_even(x / scale) + zp, -128, 127), NaN
/// quantized as zp.
QCC_HOST_DEVICE inline signed char quantizeAsymmetric(float x, float scale,
                                                      int zp) {
  float v = fdiv(x, scale);
  float r = fadd(v != v ? 0.0f : roundHalfEven(v), i2f(zp));
  return (signed char)(int)(r < kQMinAsym ? kQMinAsym : (r > kQMax ? kQMax : r));
}

/// The qlinear dequantization, in its order: float(acc - zp * wsum) * (xs *
/// ws). The integer steps wrap (two's complement) on both sides.
QCC_HOST_DEVICE inline float dequantize(int acc, int zp, int wsum, float xs,
                                        float ws) {
  int c = (int)((unsigned)acc - (unsigned)zp * (unsigned)wsum);
  return fmul(i2f(c), fmul(xs, ws));
}

/// An int8 KV-cache element read back: q * scale.
QCC_HOST_DEVICE inline float dequantizeSymmetric(signed char q, float scale) {
  return fmul(i2f(q), scale);
}

/// An int8 activation code read back (a quantize with an f32 result, the
/// QDQ form W4A8 uses): (q - zp) * scale, q - zp exact in int.
QCC_HOST_DEVICE inline float dequantizeCode(signed char q, int zp,
                                            float scale) {
  return fmul(i2f((int)q - zp), scale);
}

//===--- FP8 E4M3 (OCP's "E4M3FN": bias 7, no infinities) -----------------===//
//
// 1 sign, 4 exponent and 3 mantissa bits: normals (8 + m) 2^(e - 10) for
// e = 1..15 (e = 15, m = 7 is NaN), subnormals m 2^-9, the largest finite
// 448. Encoding saturates (|x| > 448 -> 448, as the device's
// cvt.rn.satfinite) and rounds to nearest even; every step is exact or one
// correctly rounded operation, so it is bit for bit the same everywhere and
// equals ml_dtypes' float8_e4m3fn conversion of the saturated value
// (test/unit/NumericsTest.cpp checks every code and a sweep of inputs).

constexpr float kE4M3Max = 448.0f;

#if defined(__CUDA_ARCH__)
QCC_HOST_DEVICE inline bool signBit(float x) { return __float_as_uint(x) >> 31; }
QCC_HOST_DEVICE inline float quietNaN() { return __uint_as_float(0x7fc00000u); }
QCC_HOST_DEVICE inline float scaleByPow2(float x, int k) { return ldexpf(x, k); }
QCC_HOST_DEVICE inline int binade(float x) { // floor(log2(x)), x > 0 finite
  int k;
  frexpf(x, &k);
  return k - 1;
}
#else
QCC_HOST_DEVICE inline bool signBit(float x) { return std::signbit(x); }
QCC_HOST_DEVICE inline float quietNaN() { return std::nanf(""); }
QCC_HOST_DEVICE inline float scaleByPow2(float x, int k) { return std::ldexp(x, k); }
QCC_HOST_DEVICE inline int binade(float x) { // floor(log2(x)), x > 0 finite
  int k;
  std::frexp(x, &k);
  return k - 1;
}
#endif

/// The E4M3 code of x: NaN -> 0x7f (with x's sign), |x| > 448 -> 448.
QCC_HOST_DEVICE inline unsigned char floatToE4M3(float x) {
  unsigned char sign = signBit(x) ? 0x80 : 0;
  if (x != x)
    return (unsigned char)(0x7f | sign);
  float a = x < 0.0f ? -x : x;
  if (a > kE4M3Max)
    a = kE4M3Max;
  // Subnormals and the smallest normal: m 2^-9 with m = round(a 2^9) <= 8
  // (8 is exactly the code of 2^-6: the carry into the exponent is the
  // code's own arithmetic).
  if (a < 0.015625f)
    return (unsigned char)(sign | (int)roundHalfEven(scaleByPow2(a, 9)));
  // Normals in binade e (2^e <= a < 2^(e+1), e in [-6, 8]): 8 + m =
  // round(a 2^(3 - e)) in [8, 16]; 16 carries into the next binade the
  // same way. Scaling by a power of two is exact.
  int e = binade(a);
  int m = (int)roundHalfEven(scaleByPow2(a, 3 - e));
  return (unsigned char)(sign | (((e + 7) << 3) + m - 8));
}

/// The value of E4M3 code c (0x7f and 0xff: NaN).
QCC_HOST_DEVICE inline float e4m3ToFloat(unsigned char c) {
  int e = (c >> 3) & 15, m = c & 7;
  float v = e == 15 && m == 7 ? quietNaN()
            : e == 0          ? scaleByPow2(i2f(m), -9)
                              : scaleByPow2(i2f(8 + m), e - 10);
  return (c & 0x80) ? -v : v;
}

/// FP8 W8A8 (docs/QUANTIZATION.md section 11): a group's scale maps its
/// abs-max to E4M3's largest value, absmax / 448 (1 when absmax is 0), and
/// a value quantizes to floatToE4M3(x / scale) (saturating, nearest even).
/// A product of two E4M3 values has at most 8 significant bits, so it is
/// exact in f32; qlinear sums the products in f32.
QCC_HOST_DEVICE inline float fp8Scale(float absmax) {
  float s = fdiv(absmax, kE4M3Max);
  return s == 0.0f ? 1.0f : s;
}
QCC_HOST_DEVICE inline unsigned char quantizeE4M3(float x, float scale) {
  return floatToE4M3(fdiv(x, scale));
}
/// An FP8 KV-cache element read back: its value times scale (the
/// counterpart of dequantizeSymmetric; an FP8 cache stores
/// quantizeE4M3(x, scale) with the calibrated per-head scale).
QCC_HOST_DEVICE inline float dequantizeE4M3(unsigned char c, float scale) {
  return fmul(e4m3ToFloat(c), scale);
}

} // namespace numerics
} // namespace qcc

#endif // QCC_FORMAT_DEVICE_NUMERICS_H
