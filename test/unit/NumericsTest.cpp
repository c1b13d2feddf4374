//===- NumericsTest.cpp - format/device/numerics.h on the host ----------===//
//
// numerics.h is the one definition of the activation and quantization
// formulas that the CUDA templates and the CPU kernels share. Here it is
// compiled by the host compiler (its NVRTC compile is KernelCompileTest's
// NumericsHeaderAlone) and checked on a sweep of inputs (a grid, every
// exponent, subnormals, +-0, +-inf, NaN):
//  - the CPU kernels (gelu, silu, sigmoid, relu) give its results bit for bit;
//  - it gives the bits of the CPU formulas as they were written before the
//    formulas moved into it (the CPU backend's outputs did not change).
// This file is compiled with -ffp-contract=off, as the runtime is.
//
//===----------------------------------------------------------------------===//
#include "format/device/numerics.h"
#include "runtime/core/TensorIO.h"
#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/CpuQuantKernels.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <optional>
#include <random>
#include <vector>

using namespace qcc::rt;
namespace num = qcc::numerics;

namespace {

std::vector<float> sweep() {
  std::vector<float> v;
  for (int i = -4000; i <= 4000; ++i) // [-20, 20] in steps of 1/200
    v.push_back((float)i / 200.0f);
  const float specials[] = {
      0.0f, -0.0f, std::numeric_limits<float>::denorm_min(),
      std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
      std::numeric_limits<float>::infinity(),
      std::numeric_limits<float>::quiet_NaN(), 1e-30f, 1e-10f, 0.5f, 1.5f,
      2.5f, 8388607.5f, 8388608.0f, 1e10f, 1e20f, 88.72f, 88.73f, 103.0f,
      104.0f, 1e5f};
  for (float s : specials) {
    v.push_back(s);
    v.push_back(-s);
  }
  // Every exponent, including subnormals: random mantissas.
  std::mt19937 rng(14);
  for (uint32_t e = 0; e < 255; ++e)
    for (int k = 0; k < 8; ++k) {
      uint32_t sign = k % 2 ? 0x80000000u : 0;
      uint32_t bits = sign | (e << 23) | (rng() & 0x7fffffu);
      v.push_back(std::bit_cast<float>(bits));
    }
  return v;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

/// The CPU kernel `op` on the sweep, as one f32 tensor.
std::vector<float> cpuKernel(const char *op, const nlohmann::json &attrs,
                             const std::vector<float> &x) {
  Tensor t(DType::F32, {(int64_t)x.size()});
  std::copy(x.begin(), x.end(), t.data<float>());
  std::optional<OpKind> kind = qcc::format::parseOpKind(op);
  EXPECT_TRUE(kind.has_value()) << op;
  std::vector<Tensor> r = runCpuKernel(*kind, Attrs(attrs), {&t});
  EXPECT_EQ(r.size(), 1u);
  return std::vector<float>(r[0].data<float>(),
                            r[0].data<float>() + r[0].numel());
}

template <class F>
void expectBitExact(const char *what, const std::vector<float> &x,
                    const std::vector<float> &got, F want) {
  ASSERT_EQ(got.size(), x.size());
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    float w = want(x[i]);
    if (bits(got[i]) != bits(w) && ++bad <= 5)
      ADD_FAILURE() << what << "(" << x[i] << " = 0x" << std::hex << bits(x[i])
                    << "): got 0x" << bits(got[i]) << ", want 0x" << bits(w)
                    << std::dec;
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST(Numerics, CpuKernelsUseTheSharedFormulas) {
  const std::vector<float> x = sweep();
  // The reference path's gelu is the libm formula; the fast path's the same
  // formula with the rational erf (vectorized, still bit for bit).
  setCpuKernelPath(CpuKernelPath::Reference);
  std::vector<float> reference = cpuKernel("gelu", nlohmann::json::object(), x);
  setCpuKernelPath(CpuKernelPath::Fast);
  expectBitExact("gelu", x, reference, num::geluErf);
  expectBitExact("gelu (fast path)", x,
                 cpuKernel("gelu", nlohmann::json::object(), x), [](float v) {
                   return num::geluErfWith(v, num::RationalErf());
                 });
  expectBitExact("gelu tanh", x,
                 cpuKernel("gelu", {{"approximate", "tanh"}}, x),
                 num::geluTanh);
  // The fast path's silu takes exp from libmvec, 16 lanes (within 2.6 ulp;
  // CpuKernels.SiluFastVsReference): the shared formula on the reference.
  setCpuKernelPath(CpuKernelPath::Reference);
  expectBitExact("silu", x, cpuKernel("silu", nlohmann::json::object(), x),
                 num::silu);
  setCpuKernelPath(CpuKernelPath::Fast);
  expectBitExact("sigmoid", x,
                 cpuKernel("sigmoid", nlohmann::json::object(), x),
                 num::sigmoid);
  expectBitExact("relu", x, cpuKernel("relu", nlohmann::json::object(), x),
                 num::relu);
}

/// rationalErf against erf in double on every 61st float of [-10, 10] (35
/// million inputs, the whole range's shape): within 5e-7 absolute (its
/// documented 4.7e-7; the libm's erff is within 6e-8), exactly +-1 from
/// |x| = 4 on as erff is, odd, and NaN stays NaN.
TEST(Numerics, RationalErfAccuracy) {
  double worst = 0;
  float at = 0;
  for (int64_t b = std::bit_cast<uint32_t>(10.0f); b > 0; b -= 61)
    for (float x : {std::bit_cast<float>((uint32_t)b),
                    -std::bit_cast<float>((uint32_t)b)}) {
      double err = std::fabs((double)num::rationalErf(x) - std::erf((double)x));
      if (err > worst)
        worst = err, at = x;
    }
  EXPECT_LE(worst, 5e-7) << "at " << at;
  for (float x : {4.0f, 4.5f, 10.0f, 1e30f, std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(num::rationalErf(x), 1.0f) << x;
    EXPECT_EQ(num::rationalErf(-x), -1.0f) << x;
  }
  EXPECT_EQ(num::rationalErf(0.0f), 0.0f);
  EXPECT_EQ(num::rationalErf(-0.3f), -num::rationalErf(0.3f));
  EXPECT_TRUE(std::isnan(num::rationalErf(std::nanf(""))));
}

/// The CPU formulas as runtime/cpu/CpuKernels.cpp wrote them before numerics.h:
/// the shared definitions reproduce them bit for bit.
TEST(Numerics, SameBitsAsTheFormerCpuFormulas) {
  const std::vector<float> x = sweep();
  std::vector<float> got;
  auto apply = [&](float (*f)(float)) {
    got.clear();
    for (float v : x)
      got.push_back(f(v));
  };
  apply(num::geluErf);
  expectBitExact("gelu", x, got, [](float v) {
    return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
  });
  apply(num::geluTanh);
  expectBitExact("gelu tanh", x, got, [](float v) {
    double xd = v, c = std::sqrt(2.0 / std::numbers::pi);
    return (float)(0.5 * xd *
                   (1.0 + std::tanh(c * (xd + 0.044715 * xd * xd * xd))));
  });
  apply(num::silu);
  expectBitExact("silu", x, got,
                 [](float v) { return v / (1.0f + std::exp(-v)); });
  apply(num::sigmoid);
  expectBitExact("sigmoid", x, got,
                 [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
  got.clear();
  for (float v : x)
    got.push_back(num::softcap(v, 50.0f));
  expectBitExact("softcap", x, got,
                 [](float v) { return 50.0f * std::tanh(v / 50.0f); });
}

TEST(Numerics, Sqrt2OverPiIsTheRoundedDouble) {
  EXPECT_EQ(num::kSqrt2OverPi, std::sqrt(2.0 / std::numbers::pi));
}

TEST(Numerics, RoundHalfEvenIsRint) {
  for (float v : sweep()) {
    float want = std::nearbyint(v); // FE_TONEAREST, the default
    if (std::isnan(v))
      EXPECT_TRUE(std::isnan(num::roundHalfEven(v)));
    else
      EXPECT_EQ(bits(num::roundHalfEven(v)), bits(want)) << v;
  }
}

TEST(Numerics, Quantization) {
  EXPECT_EQ(num::symmetricScale(0.0f), 1.0f);
  EXPECT_EQ(num::symmetricScale(254.0f), 2.0f);
  EXPECT_EQ(num::quantizeSymmetric(2.5f, 1.0f), 2);   // half to even
  EXPECT_EQ(num::quantizeSymmetric(-3.5f, 1.0f), -4);
  EXPECT_EQ(num::quantizeSymmetric(1e30f, 1.0f), 127);
  EXPECT_EQ(num::quantizeSymmetric(-std::numeric_limits<float>::infinity(),
                                   1.0f),
            -127);
  EXPECT_EQ(num::quantizeSymmetric(std::numeric_limits<float>::quiet_NaN(),
                                   1.0f),
            0);
  // mn = -1, mx = 3: scale 4/255, zp = rhe(63.75) - 128 = -64.
  float s = num::asymmetricScale(-1.0f, 3.0f);
  EXPECT_EQ(s, 4.0f / 255.0f);
  int zp = num::asymmetricZeroPoint(-1.0f, s);
  EXPECT_EQ(zp, -64);
  EXPECT_EQ(num::quantizeAsymmetric(-1.0f, s, zp), -128);
  EXPECT_EQ(num::quantizeAsymmetric(3.0f, s, zp), 127);
  EXPECT_EQ(num::quantizeAsymmetric(std::numeric_limits<float>::quiet_NaN(),
                                    s, zp),
            zp);
  EXPECT_EQ(num::asymmetricScale(0.0f, 0.0f), 1.0f);
  // float(acc - zp * wsum) * (xs * ws), the integer part wrapping.
  EXPECT_EQ(num::dequantize(100, 2, 30, 0.5f, 0.25f), 40.0f * 0.125f);
  EXPECT_EQ(num::dequantize(INT32_MIN, 1, 1, 1.0f, 1.0f), 2147483648.0f);
  EXPECT_EQ(num::dequantizeSymmetric(-127, 0.5f), -63.5f);
  // The runtime's names are these definitions.
  EXPECT_EQ(&quantizeSymmetric, &num::quantizeSymmetric);
  EXPECT_EQ(&roundHalfEven, &num::roundHalfEven);
}

} // namespace

// FP8 E4M3 against ml_dtypes' float8_e4m3fn (test/models/fp8/gen_e4m3.py):
// every code's value, and the code of every input (each finite value, the
// ties between neighbours and a float either side, zeros, subnormals, random
// values at every scale), bit for bit; then saturation and NaN.
TEST(Numerics, E4M3MatchesMlDtypes) {
  using namespace qcc::numerics;
  std::string dir = std::string(QCC_SOURCE_DIR) + "/test/models/fp8/";
  qcc::rt::Tensor decode = qcc::rt::readTensorFile(dir + "e4m3_decode.npy");
  qcc::rt::Tensor in = qcc::rt::readTensorFile(dir + "e4m3_inputs.npy");
  qcc::rt::Tensor codes = qcc::rt::readTensorFile(dir + "e4m3_codes.npy");
  ASSERT_EQ(decode.numel(), 256);
  for (int c = 0; c < 256; ++c) {
    float want = decode.data<float>()[c], got = e4m3ToFloat((unsigned char)c);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got)) << c;
    else
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << c;
  }
  ASSERT_EQ(in.numel(), codes.numel());
  int64_t mismatches = 0;
  for (int64_t i = 0; i < in.numel(); ++i) {
    float x = in.data<float>()[i];
    int want = codes.data<int32_t>()[i], got = floatToE4M3(x);
    if (got != want && ++mismatches <= 5)
      ADD_FAILURE() << "x = " << x << ": code " << got << ", ml_dtypes " << want;
  }
  EXPECT_EQ(mismatches, 0) << "of " << in.numel();
  // Saturation (the device's satfinite), NaN, and every code round-trips.
  EXPECT_EQ(floatToE4M3(1e30f), 0x7e);
  EXPECT_EQ(floatToE4M3(-500.0f), 0xfe);
  EXPECT_EQ(floatToE4M3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(floatToE4M3(std::nanf("")), 0x7f);
  EXPECT_EQ(floatToE4M3(-0.0f), 0x80);
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7f) != 0x7f)
      EXPECT_EQ(floatToE4M3(e4m3ToFloat((unsigned char)c)), c) << c;
}
