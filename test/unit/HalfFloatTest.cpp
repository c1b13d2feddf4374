//===- HalfFloatTest.cpp - f16/bf16 conversions and f32 compute -----------===//
//
// The runtime's conversions (runtime/core/HalfFloat.h) against LLVM's APFloat, an
// independent implementation of IEEE conversions with round-to-nearest-even,
// over every f16/bf16 bit pattern and many f32 ones, plus hand-written ties.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuKernels.h"
#include "runtime/core/HalfFloat.h"

#include "llvm/ADT/APFloat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace qcc::rt;
using nlohmann::json;

namespace {

uint16_t apNarrow(float f, const llvm::fltSemantics &sem) {
  llvm::APFloat v(f);
  bool loses;
  v.convert(sem, llvm::APFloat::rmNearestTiesToEven, &loses);
  return (uint16_t)v.bitcastToAPInt().getZExtValue();
}

float apWiden(uint16_t bits, const llvm::fltSemantics &sem) {
  llvm::APFloat v(sem, llvm::APInt(16, bits));
  bool loses;
  v.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven,
            &loses);
  return v.convertToFloat();
}

bool isNaNHalf(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
bool isNaNBF16(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f); }
uint32_t bitsOf(float f) { return std::bit_cast<uint32_t>(f); }

/// Every bit pattern of a 16-bit type widens as APFloat does, and every
/// value but NaN narrows back to itself (NaN stays NaN).
void checkEveryPattern(float (*widen)(uint16_t), uint16_t (*narrow)(float),
                       bool (*isNaN)(uint16_t), const llvm::fltSemantics &sem) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = widen((uint16_t)h);
    if (isNaN((uint16_t)h)) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(isNaN(narrow(f))) << h;
      continue;
    }
    ASSERT_EQ(bitsOf(f), bitsOf(apWiden((uint16_t)h, sem))) << h;
    ASSERT_EQ(narrow(f), h); // representable values convert exactly
  }
}

TEST(HalfFloat, EveryF16ValueWidensExactlyAndRoundTrips) {
  checkEveryPattern(halfToFloat, floatToHalf, isNaNHalf,
                    llvm::APFloat::IEEEhalf());
}

TEST(HalfFloat, EveryBF16ValueWidensExactlyAndRoundTrips) {
  checkEveryPattern(bf16ToFloat, floatToBF16, isNaNBF16,
                    llvm::APFloat::BFloat());
}

TEST(HalfFloat, NarrowingMatchesAPFloatRoundToNearestEven) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    // Random patterns, and as many near f16's range (exponents 100..143).
    uint32_t x = bits(rng);
    if (i & 1)
      x = (x & 0x807fffff) | ((100 + (x >> 23) % 44) << 23);
    float f = std::bit_cast<float>(x);
    if (std::isnan(f)) {
      EXPECT_TRUE(isNaNHalf(floatToHalf(f)));
      EXPECT_TRUE(isNaNBF16(floatToBF16(f)));
      continue;
    }
    ASSERT_EQ(floatToHalf(f), apNarrow(f, llvm::APFloat::IEEEhalf())) << x;
    ASSERT_EQ(floatToBF16(f), apNarrow(f, llvm::APFloat::BFloat())) << x;
  }
}

TEST(HalfFloat, TiesGoToEven) {
  // f16: 1 + 2^-11 lies halfway between 1 (even) and 1 + 2^-10 (odd).
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02); // up, to even
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01); // past the tie
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);                    // largest
  EXPECT_EQ(floatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00); // tie with 2^16: to inf (even)
  EXPECT_EQ(floatToHalf(-1e9f), 0xfc00);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);     // smallest subnormal
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);     // tie with 0: to 0
  EXPECT_EQ(floatToHalf(3 * 0x1p-25f), 0x0002); // tie 1 / 2: to 2
  EXPECT_EQ(floatToHalf(0x1p-14f - 0x1p-26f), 0x0400); // rounds up to normal
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  // bf16: 1 + 2^-8 halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(floatToBF16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(floatToBF16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToBF16(-0.0f), 0x8000);
}

TEST(HalfFloat, InfinityAndNaNArePreserved) {
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToHalf(inf), 0x7c00);
  EXPECT_EQ(floatToHalf(-inf), 0xfc00);
  EXPECT_EQ(floatToBF16(-inf), 0xff80);
  EXPECT_EQ(halfToFloat(0xfc00), -inf);
  float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(floatToHalf(nan) & 0x7e00, 0x7e00); // quiet NaN
  EXPECT_EQ(floatToHalf(-nan) & 0x8000, 0x8000);
  // A NaN whose payload lies only in the low bits stays a NaN.
  EXPECT_TRUE(isNaNHalf(floatToHalf(std::bit_cast<float>(0x7f800001u))));
  EXPECT_TRUE(isNaNBF16(floatToBF16(std::bit_cast<float>(0x7f800001u))));
}

Tensor halfTensor(DType t, Shape shape, std::vector<float> values) {
  Tensor f(DType::F32, shape);
  std::copy(values.begin(), values.end(), f.data<float>());
  return convertFloat(f, t);
}

TEST(HalfFloat, KernelsComputeInF32AndStoreTheDeclaredType) {
  for (DType t : {DType::F16, DType::BF16}) {
    // 1 + 2^-12: f32 keeps it, both half types round it to 1.
    Tensor a = halfTensor(t, {3}, {1.0f, 2.0f, -3.5f});
    Tensor b = halfTensor(t, {3}, {0x1p-12f, 0.5f, 65504.0f});
    json none = json::object();
    auto r = computeInF32(OpKind::Add, {&a, &b}, {t}, [&](const Operands &ops) {
      return runCpuKernel(OpKind::Add, Attrs(none), ops);
    });
    ASSERT_EQ(r.at(0).dtype(), t);
    Tensor back = convertFloat(r[0], DType::F32);
    EXPECT_EQ(back.data<float>()[0], 1.0f);
    EXPECT_EQ(back.data<float>()[1], 2.5f);
    // A kernel called directly still refuses f16/bf16.
    EXPECT_THROW(runCpuKernel(OpKind::Add, Attrs(none), {&a, &b}),
                 std::runtime_error);
  }
  // Element moves keep the storage type without converting.
  Tensor x = halfTensor(DType::F16, {2, 2}, {1, 2, 3, 4});
  json perm = {{"perm", {1, 0}}};
  auto r = computeInF32(OpKind::Transpose, {&x}, {DType::F16},
                        [&](const Operands &ops) {
                          return runCpuKernel(OpKind::Transpose, Attrs(perm),
                                              ops);
                        });
  ASSERT_EQ(r.at(0).dtype(), DType::F16);
  EXPECT_EQ(halfToFloat(r[0].data<uint16_t>()[1]), 3.0f);
}

TEST(HalfFloat, CastToAndFromHalfTypes) {
  Tensor x(DType::F32, {4});
  float in[] = {1.0f + 0x1p-11f, -65520.0f, 0.1f, 3.0f};
  std::memcpy(x.data<float>(), in, sizeof in);
  json toF16 = {{"to", "f16"}}, toI64 = {{"to", "i64"}}, toBF16 = {{"to", "bf16"}};
  Tensor h = runCpuKernel(OpKind::Cast, Attrs(toF16), {&x}).at(0);
  ASSERT_EQ(h.dtype(), DType::F16);
  EXPECT_EQ(h.data<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(h.data<uint16_t>()[1], 0xfc00);
  EXPECT_EQ(h.data<uint16_t>()[2], floatToHalf(0.1f));
  Tensor i = runCpuKernel(OpKind::Cast, Attrs(toI64), {&h}).at(0);
  EXPECT_EQ(i.data<int64_t>()[3], 3);
  Tensor b = runCpuKernel(OpKind::Cast, Attrs(toBF16), {&h}).at(0); // via f32
  ASSERT_EQ(b.dtype(), DType::BF16);
  EXPECT_EQ(bf16ToFloat(b.data<uint16_t>()[3]), 3.0f);
}

} // namespace
