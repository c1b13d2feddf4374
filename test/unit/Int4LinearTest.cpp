//===- Int4LinearTest.cpp - the packed int4 layout and W4A16 linears -----===//
//
// format/Int4.h (packing, the dequantized weight, validation) and the CPU's
// W4A16 linear (runtime/cpu/CpuInt4Kernels.h): bit for bit equal to a naive loop
// in the documented summation order, and within the stated bound of the
// reference path (weight_int4's dequantize, then the BLAS linear); each for
// the symmetric and the asymmetric (offsets) form. The same for W4A8's
// int8 x int4 linear (runtime/cpu/CpuW4A8Kernels.h).
//
//===----------------------------------------------------------------------===//
#include "codegen/kernels/int4.h"
#include "format/Int4.h"
#include "runtime/cpu/CpuInt4Kernels.h"
#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/CpuW4A8Kernels.h"
#include "runtime/cpu/CpuInt8Gemm.h"
#include "runtime/core/HalfFloat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

using namespace qcc::rt;
namespace i4 = qcc::format::int4;

namespace {

TEST(Int4Format, LowNibbleIsEvenK) {
  // q = [1, -2, 7, -8]: bytes 0xE1 (k0 = 1 low, k1 = -2 = 0xE high) and
  // 0x87 (k2 = 7 low, k3 = -8 = 0x8 high).
  int8_t q[4] = {1, -2, 7, -8}, packed[2];
  i4::pack(q, 1, 4, packed);
  EXPECT_EQ((uint8_t)packed[0], 0xE1);
  EXPECT_EQ((uint8_t)packed[1], 0x87);
  for (int j = 0; j < 4; ++j)
    EXPECT_EQ(i4::unpack(packed, j), q[j]) << j;
}

TEST(Int4Format, EveryValueRoundTrips) {
  std::vector<int8_t> q;
  for (int a = -8; a < 8; ++a)
    for (int b = -8; b < 8; ++b) {
      q.push_back((int8_t)a);
      q.push_back((int8_t)b);
    }
  std::vector<int8_t> packed(q.size() / 2);
  i4::pack(q.data(), 1, (int64_t)q.size(), packed.data());
  for (size_t j = 0; j < q.size(); ++j)
    ASSERT_EQ(i4::unpack(packed.data(), (int64_t)j), q[j]) << j;
}

TEST(Int4Format, DequantizeScattersThroughThePermutation) {
  // Two rows, K = 4, groups of 2; perm puts stored column j at perm[j].
  int8_t q[8] = {1, -1, 3, 7, -7, 2, 0, 5}, packed[4];
  i4::pack(q, 2, 4, packed);
  float scales[4] = {0.5f, 0.25f, 2.0f, 1.0f};
  int32_t perm[4] = {2, 0, 3, 1};
  float dense[8];
  i4::dequantize(packed, scales, nullptr, perm, 2, 4, 2, dense);
  float want[8] = {-0.5f, 1.75f, 0.5f, 0.75f, 4.0f, 5.0f, -14.0f, 0.0f};
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(dense[i], want[i]) << i;
  i4::dequantize(packed, scales, nullptr, nullptr, 2, 4, 2, dense);
  float plain[8] = {0.5f, -0.5f, 0.75f, 1.75f, -14.0f, 4.0f, 0.0f, 5.0f};
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(dense[i], plain[i]) << i;
}

TEST(Int4Format, OffsetsMakeTheNibblesUnsigned) {
  // The same bytes with offsets: nibbles 0x1, 0xF, 0x3, 0x7 / 0x9, 0x2, 0x0,
  // 0x5 read as u = 1, 15, 3, 7 / 9, 2, 0, 5; W = u * s + m.
  int8_t q[8] = {1, -1, 3, 7, -7, 2, 0, 5}, packed[4];
  i4::pack(q, 2, 4, packed);
  float scales[4] = {0.5f, 0.25f, 2.0f, 1.0f};
  float offsets[4] = {-1.0f, 0.125f, -9.0f, 3.0f};
  float dense[8];
  i4::dequantize(packed, scales, offsets, nullptr, 2, 4, 2, dense);
  float want[8] = {-0.5f, 6.5f, 0.875f, 1.875f, 9.0f, -5.0f, 3.0f, 8.0f};
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(dense[i], want[i]) << i;
  int32_t perm[4] = {2, 0, 3, 1};
  i4::dequantize(packed, scales, offsets, perm, 2, 4, 2, dense);
  float permuted[8] = {6.5f, 1.875f, -0.5f, 0.875f, -5.0f, 8.0f, 9.0f, 3.0f};
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(dense[i], permuted[i]) << i;
}

TEST(Int4Format, OperandSlotsFollowTheAsymmetricFlag) {
  i4::OperandSlots s = i4::operandSlots(2, false);
  EXPECT_EQ(s.error, "");
  EXPECT_EQ(s.perm, -1);
  EXPECT_EQ(s.offsets, -1);
  s = i4::operandSlots(3, false);
  EXPECT_EQ(s.perm, 2);
  EXPECT_EQ(s.offsets, -1);
  s = i4::operandSlots(3, true);
  EXPECT_EQ(s.perm, -1);
  EXPECT_EQ(s.offsets, 2);
  s = i4::operandSlots(4, true);
  EXPECT_EQ(s.perm, 2);
  EXPECT_EQ(s.offsets, 3);
  EXPECT_NE(i4::operandSlots(4, false).error, "");
  EXPECT_NE(i4::operandSlots(2, true).error, "");
  EXPECT_NE(i4::operandSlots(1, false).error, "");
}

TEST(Int4Format, RefusesBadGroupsAndPermutations) {
  EXPECT_NE(i4::groupSizeError(64, 0), "");
  EXPECT_NE(i4::groupSizeError(64, 3), "");
  EXPECT_NE(i4::groupSizeError(64, 48), "");
  EXPECT_NE(i4::groupSizeError(0, 2), "");
  EXPECT_EQ(i4::groupSizeError(64, 32), "");
  int32_t dup[3] = {0, 2, 2}, out[3] = {0, 3, 1}, neg[3] = {-1, 0, 1},
          ok[3] = {2, 0, 1};
  EXPECT_NE(i4::permutationError(dup, 3).find("twice"), std::string::npos);
  EXPECT_NE(i4::permutationError(out, 3).find("outside"), std::string::npos);
  EXPECT_NE(i4::permutationError(neg, 3).find("outside"), std::string::npos);
  EXPECT_EQ(i4::permutationError(ok, 3), "");
}

// The device side (codegen/kernels/int4.h, what gemv_w4.cuh dequantizes in
// registers) compiled for the host: every word of random rows gives the
// values of format::int4::dequantize, bit for bit, with and without offsets.
TEST(Int4Format, DeviceDequantizationIsTheFormats) {
  std::mt19937 rng(12);
  const int64_t n = 3, k = 256, g = 32;
  std::vector<int8_t> packed((size_t)(n * k / 2));
  for (int8_t &b : packed)
    b = (int8_t)(rng() & 0xFF);
  std::vector<float> scales((size_t)(n * (k / g))), offsets(scales.size()),
      want((size_t)(n * k));
  std::normal_distribution<float> lg(0.f, 2.f), o(0.f, 4.f);
  for (float &s : scales)
    s = halfToFloat(floatToHalf(std::exp(lg(rng))));
  for (float &m : offsets)
    m = halfToFloat(floatToHalf(o(rng)));
  for (bool asymmetric : {false, true}) {
    i4::dequantize(packed.data(), scales.data(),
                   asymmetric ? offsets.data() : nullptr, nullptr, n, k, g,
                   want.data());
    for (int64_t r = 0; r < n; ++r)
      for (int64_t w = 0; w < k / qcc::nibbles::kPerWord; ++w) {
        uint32_t word;
        std::memcpy(&word, &packed[r * k / 2 + w * 4], 4); // little-endian
        float got[8];
        int64_t k0 = w * qcc::nibbles::kPerWord, gi = r * (k / g) + k0 / g;
        if (asymmetric)
          qcc::nibbles::dequant8Offset(word, scales[gi], offsets[gi], got);
        else
          qcc::nibbles::dequant8(word, scales[gi], got);
        for (int i = 0; i < 8; ++i)
          ASSERT_EQ(got[i], want[r * k + k0 + i])
              << "asymmetric " << asymmetric << " row " << r << " k " << k0 + i;
      }
  }
}

// The CPU's row dequantization (AVX2 where the CPU has it and G % 32 == 0,
// else the table of format/Int4.cpp) against a per-element evaluation of the
// layout's formula, bit for bit: every nibble, f16 scales and offsets of
// both signs over several orders of magnitude.
TEST(Int4Format, RowDequantizationIsTheFormula) {
  std::mt19937 rng(21);
  for (int64_t g : {32, 64, 26})
    for (bool asymmetric : {false, true}) {
      const int64_t k = g * 6;
      std::vector<int8_t> packed((size_t)(k / 2));
      for (int8_t &b : packed)
        b = (int8_t)(rng() & 0xFF);
      std::vector<float> scales((size_t)(k / g)), offsets(scales.size());
      std::normal_distribution<float> lg(0.f, 3.f), o(0.f, 2.f);
      for (size_t i = 0; i < scales.size(); ++i) {
        scales[i] = halfToFloat(floatToHalf(std::exp(lg(rng))));
        offsets[i] = halfToFloat(floatToHalf(o(rng) * scales[i] * 8));
      }
      const float *m = asymmetric ? offsets.data() : nullptr;
      std::vector<float> got((size_t)k);
      dequantizeInt4Row(packed.data(), scales.data(), m, k, g, got.data());
      for (int64_t j = 0; j < k; ++j) {
        int32_t v =
            i4::nibbleValue(i4::nibbleAt(packed.data(), j), m != nullptr);
        float want = (float)v * scales[j / g];
        if (m)
          want += m[j / g];
        ASSERT_EQ(got[j], want)
            << "G " << g << " asymmetric " << asymmetric << " j " << j;
      }
    }
}

/// A random W4A16 weight [n, k]: all 16 codes, f16 scales spread over two
/// orders of magnitude, with `permuted` a random permutation and with
/// `asymmetric` f16 offsets of either sign.
struct RandomWeight {
  Tensor packed, scales, perm, offsets;
  bool permuted, asymmetric;
  int64_t n, k, g;
  RandomWeight(int64_t n, int64_t k, int64_t g, bool permuted,
               std::mt19937 &rng, bool asymmetric = false)
      : packed(DType::I8, {n, k / 2}), scales(DType::F16, {n, k / g}),
        perm(DType::I32, {k}), offsets(DType::F16, {n, k / g}),
        permuted(permuted), asymmetric(asymmetric), n(n), k(k), g(g) {
    std::uniform_int_distribution<int> code(-8, 7);
    std::vector<int8_t> q((size_t)(n * k));
    for (int8_t &v : q)
      v = (int8_t)code(rng);
    i4::pack(q.data(), n, k, packed.data<int8_t>());
    std::normal_distribution<float> lg(0.f, 1.f);
    for (int64_t i = 0; i < n * (k / g); ++i)
      scales.data<uint16_t>()[i] = floatToHalf(0.01f * std::exp(lg(rng)));
    for (int64_t i = 0; i < n * (k / g); ++i)
      offsets.data<uint16_t>()[i] = floatToHalf(-0.08f * lg(rng));
    int32_t *p = perm.data<int32_t>();
    std::iota(p, p + k, 0);
    if (permuted)
      std::shuffle(p, p + k, rng);
  }
  Int4Weight weight() const {
    return int4Weight(packed, scales, permuted ? &perm : nullptr,
                      asymmetric ? &offsets : nullptr, g);
  }
  /// The dense weight [n, k] f32 (format/Int4.h's definition).
  std::vector<float> dense() const {
    std::vector<float> s((size_t)(n * (k / g))), o(s.size()),
        w((size_t)(n * k));
    for (size_t i = 0; i < s.size(); ++i) {
      s[i] = halfToFloat(scales.data<uint16_t>()[i]);
      o[i] = halfToFloat(offsets.data<uint16_t>()[i]);
    }
    i4::dequantize(
        packed.data<int8_t>(), s.data(), asymmetric ? o.data() : nullptr,
        permuted ? perm.data<int32_t>() : nullptr, n, k, g, w.data());
    return w;
  }
};

Tensor randomTensor(Shape shape, std::mt19937 &rng) {
  Tensor t(DType::F32, shape);
  std::normal_distribution<float> g(0.f, 1.f);
  for (int64_t i = 0; i < numElements(shape); ++i)
    t.data<float>()[i] = g(rng);
  return t;
}

TEST(Int4Linear, BitExactWithANaiveLoopInTheDocumentedOrder) {
  std::mt19937 rng(4);
  // K = 52 (groups of 26): a tail of 4 columns after the blocks of 8, the
  // portable dequantization; K = 256 (groups of 64): the AVX2 one where the
  // CPU has it, and for the input rows after the blocks of 4 the dots that
  // dequantize in registers (AVX2, and AVX-512's lookups). Weight rows in
  // blocks of 4 (N = 5: one block and one row left); M up to 19 covers the
  // 4 x 4 blocks and the rows after them. Each instruction set the CPU has,
  // and none.
  struct CapScope {
    ~CapScope() { setInt4SimdCap(Int4Simd::Avx512); }
  } restore;
  for (Int4Simd cap : {Int4Simd::Avx512, Int4Simd::Avx2, Int4Simd::Plain})
  for (auto [K, G] : {std::pair<int64_t, int64_t>{52, 26}, {256, 64}})
    for (bool permuted : {false, true})
      for (bool asymmetric : {false, true})
        for (int64_t M : {1, 3, 8, 19}) {
          setInt4SimdCap(cap);
          const int64_t N = 5;
          RandomWeight rw(N, K, G, permuted, rng, asymmetric);
          Tensor x = randomTensor({M, K}, rng), bias = randomTensor({N}, rng);
          std::vector<Tensor> y =
              int4LinearKernel({&x, nullptr, &bias}, rw.weight());
          ASSERT_EQ(y[0].shape(), (Shape{M, N}));
          std::vector<float> w = rw.dense();
          const int32_t *perm = rw.perm.data<int32_t>();
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              // Lane l sums stored columns j = l (mod 8): the weight's column
              // perm[j] times the input's column perm[j].
              float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
              for (int64_t j = 0; j < K; ++j) {
                int64_t c = permuted ? perm[j] : j;
                l[j % 8] += w[n * K + c] * x.data<float>()[m * K + c];
              }
              float want = ((l[0] + l[1]) + (l[2] + l[3])) +
                           ((l[4] + l[5]) + (l[6] + l[7]));
              want += bias.data<float>()[n];
              ASSERT_EQ(y[0].data<float>()[m * N + n], want)
                  << "simd " << (int)int4Simd() << " K " << K << " permuted "
                  << permuted << " asymmetric "
                  << asymmetric << " M " << M << " m " << m << " n " << n;
            }
        }
}

TEST(Int4Linear, AgreesWithTheReferencePathWithinTheStatedBound) {
  std::mt19937 rng(9);
  for (bool permuted : {false, true})
    for (bool asymmetric : {false, true}) {
      const int64_t M = 6, N = 12, K = 256, G = 128;
      RandomWeight rw(N, K, G, permuted, rng, asymmetric);
      Tensor x = randomTensor({2, 3, K}, rng), bias = randomTensor({N}, rng);
      std::vector<Tensor> fast =
          int4LinearKernel({&x, nullptr, &bias}, rw.weight());
      // The op-by-op reference: weight_int4 (f16 scales widened), then linear.
      nlohmann::json attrs = {{"group_size", G}};
      Tensor scales32 = convertFloat(rw.scales, DType::F32),
             offsets32 = convertFloat(rw.offsets, DType::F32);
      Operands wops = {&rw.packed, &scales32};
      if (permuted)
        wops.push_back(&rw.perm);
      if (asymmetric) {
        attrs["asymmetric"] = true;
        wops.push_back(&offsets32);
      }
      std::vector<Tensor> w =
          runCpuKernel(qcc::format::OpKind::WeightInt4, Attrs(attrs), wops);
      std::vector<Tensor> ref =
          runCpuKernel(qcc::format::OpKind::Linear,
                       Attrs(nlohmann::json::object()), {&x, &w[0], &bias});
      ASSERT_EQ(fast[0].shape(), ref[0].shape());
      const double u = std::ldexp(1.0, -24), n1 = K + 1;
      const double gamma = n1 * u / (1 - n1 * u);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double absSum = std::abs(bias.data<float>()[n]);
          for (int64_t c = 0; c < K; ++c)
            absSum += std::abs((double)w[0].data<float>()[n * K + c] *
                               x.data<float>()[m * K + c]);
          // Both sums are within gamma(K + 1) * sum |terms| of the exact one.
          EXPECT_LE(std::abs((double)fast[0].data<float>()[m * N + n] -
                             ref[0].data<float>()[m * N + n]),
                    2 * gamma * absSum)
              << "permuted " << permuted << " asymmetric " << asymmetric
              << " m " << m << " n " << n;
        }
    }
}

/// W4A8's input: x quantized per token and read back (the quantize with an
/// f32 result), its scales, and the int8 codes of the same quantize (to i8).
struct CodedInput {
  Tensor values, scales, codes;
  CodedInput(const Tensor &x) {
    nlohmann::json attrs = {{"granularity", "per_token"}, {"to", "f32"}};
    std::vector<Tensor> r = runCpuKernel(qcc::format::OpKind::Quantize,
                                         Attrs(attrs), {&x});
    values = r[0];
    scales = r[1];
    attrs.erase("to");
    codes = runCpuKernel(qcc::format::OpKind::Quantize, Attrs(attrs), {&x})[0];
  }
};

// The definition of CpuW4A8Kernels.h, evaluated here from the quantize's own
// int8 codes (so the kernel's recovery of the codes from the f32 values is
// checked too): the portable loop and, on CPUs with VNNI, the AVX-512 one,
// bit for bit. K = 64 in groups of 8 and K = 256 in groups of 32; N = 21 (a
// block of 16 rows and 5 more); M up to 11 (blocks of 8 input rows and the
// rest); act-order and offsets.
TEST(W4A8Linear, BitExactWithTheDefinition) {
  std::mt19937 rng(31);
  struct CapScope {
    ~CapScope() { setInt4SimdCap(Int4Simd::Avx512); }
  } restore;
  for (Int4Simd cap : {Int4Simd::Avx512, Int4Simd::Plain})
    for (auto [K, G] : {std::pair<int64_t, int64_t>{64, 8}, {256, 32}})
      for (bool permuted : {false, true})
        for (bool asymmetric : {false, true})
          for (int64_t M : {1, 3, 11}) {
            setInt4SimdCap(cap);
            const int64_t N = 21, groups = K / G;
            RandomWeight rw(N, K, G, permuted, rng, asymmetric);
            Tensor x = randomTensor({M, K}, rng),
                   bias = randomTensor({N}, rng);
            CodedInput in(x);
            PackedW4A8Weight packed = packW4A8Weight(rw.weight());
            std::vector<Tensor> y = w4a8LinearKernel(
                {&in.values, nullptr, &bias}, packed, in.scales);
            ASSERT_EQ(y[0].shape(), (Shape{M, N}));
            const int32_t *perm = rw.perm.data<int32_t>();
            const int8_t *P = rw.packed.data<int8_t>();
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < N; ++n) {
                float acc = 0.0f;
                for (int64_t g = 0; g < groups; ++g) {
                  int32_t d = 0, t = 0;
                  for (int64_t j = g * G; j < (g + 1) * G; ++j) {
                    int32_t a = in.codes.data<int8_t>()[m * K +
                                                        (permuted ? perm[j] : j)];
                    d += i4::nibbleValue(i4::nibbleAt(P + n * K / 2, j),
                                         asymmetric) *
                         a;
                    t += a;
                  }
                  acc = std::fma(
                      (float)d,
                      halfToFloat(rw.scales.data<uint16_t>()[n * groups + g]),
                      acc);
                  if (asymmetric)
                    acc = std::fma((float)t,
                                   halfToFloat(rw.offsets.data<uint16_t>()
                                                   [n * groups + g]),
                                   acc);
                }
                float want = acc * in.scales.data<float>()[m];
                want += bias.data<float>()[n];
                ASSERT_EQ(y[0].data<float>()[m * N + n], want)
                    << "vnni " << w4a8RunsVnni() << " K " << K
                    << " permuted " << permuted << " asymmetric "
                    << asymmetric << " M " << M << " m " << m << " n " << n;
              }
          }
}

// Against the op-by-op semantics (the quantize's f32 values times
// weight_int4's dense weight in the float linear): both within
// gamma(K + 2) * sum |x'_k w_k| (+ |bias|) of the exact sum.
TEST(W4A8Linear, AgreesWithTheReferencePathWithinTheStatedBound) {
  std::mt19937 rng(10);
  for (bool asymmetric : {false, true}) {
    const int64_t N = 40, K = 256, G = 32;
    RandomWeight rw(N, K, G, /*permuted=*/true, rng, asymmetric);
    Tensor x = randomTensor({2, 5, K}, rng), bias = randomTensor({N}, rng);
    CodedInput in(x);
    PackedW4A8Weight packed = packW4A8Weight(rw.weight());
    std::vector<Tensor> fast =
        w4a8LinearKernel({&in.values, nullptr, &bias}, packed, in.scales);
    std::vector<float> w = rw.dense();
    Tensor wt(DType::F32, {N, K});
    std::copy(w.begin(), w.end(), wt.data<float>());
    std::vector<Tensor> ref =
        runCpuKernel(qcc::format::OpKind::Linear,
                     Attrs(nlohmann::json::object()), {&in.values, &wt, &bias});
    ASSERT_EQ(fast[0].shape(), ref[0].shape());
    const double u = std::ldexp(1.0, -24), n2 = K + 2;
    const double gamma = n2 * u / (1 - n2 * u);
    for (int64_t m = 0; m < 10; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double absSum = std::abs(bias.data<float>()[n]);
        for (int64_t c = 0; c < K; ++c)
          absSum += std::abs((double)w[n * K + c] *
                             in.values.data<float>()[m * K + c]);
        EXPECT_LE(std::abs((double)fast[0].data<float>()[m * N + n] -
                           ref[0].data<float>()[m * N + n]),
                  2 * gamma * absSum)
            << "asymmetric " << asymmetric << " m " << m << " n " << n;
      }
  }
}

TEST(W4A8Linear, RefusesWhatItCannotRun) {
  std::mt19937 rng(2);
  RandomWeight odd(4, 52, 26, false, rng);
  EXPECT_FALSE(w4a8Packs(odd.weight()));
  EXPECT_THROW(packW4A8Weight(odd.weight()), std::runtime_error);
  RandomWeight rw(4, 64, 8, false, rng);
  PackedW4A8Weight packed = packW4A8Weight(rw.weight());
  Tensor x = randomTensor({3, 64}, rng), wrongScales(DType::F32, {2, 1}),
         zeroScales(DType::F32, {3, 1});
  EXPECT_THROW(w4a8LinearKernel({&x, nullptr, nullptr}, packed, wrongScales),
               std::runtime_error);
  EXPECT_THROW(w4a8LinearKernel({&x, nullptr, nullptr}, packed, zeroScales),
               std::runtime_error);
}

TEST(Int4Linear, RefusesInconsistentWeights) {
  Tensor packed(DType::I8, {4, 16}), scales(DType::F16, {4, 1}),
      wrongScales(DType::F16, {4, 2}), f32Scales(DType::F32, {4, 1}),
      perm(DType::I32, {32}), offsets(DType::F16, {4, 1}),
      wrongOffsets(DType::F16, {4, 2}), f32Offsets(DType::F32, {4, 1});
  auto message = [](auto &&f) {
    try {
      f();
    } catch (const std::exception &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message([&] { int4Weight(packed, scales, nullptr, nullptr, 32); }),
            "");
  EXPECT_EQ(message([&] { int4Weight(packed, scales, nullptr, &offsets, 32); }),
            "");
  EXPECT_NE(message([&] {
              int4Weight(packed, scales, nullptr, &wrongOffsets, 32);
            }).find("offsets must be [4, 1] f16"),
            std::string::npos);
  EXPECT_NE(message([&] {
              int4Weight(packed, scales, nullptr, &f32Offsets, 32);
            }).find("offsets must be"),
            std::string::npos);
  EXPECT_NE(message([&] {
              int4Weight(packed, scales, nullptr, nullptr, 0);
            }).find("group size 0"),
            std::string::npos);
  EXPECT_NE(message([&] {
              int4Weight(packed, wrongScales, nullptr, nullptr, 32);
            }).find("do not describe"),
            std::string::npos);
  EXPECT_NE(message([&] {
              int4Weight(packed, f32Scales, nullptr, nullptr, 32);
            }).find("f16 scales"),
            std::string::npos);
  // An all-zero "permutation" names column 0 32 times.
  EXPECT_NE(message([&] {
              int4Weight(packed, scales, &perm, nullptr, 32);
            }).find("twice"),
            std::string::npos);
  Tensor x(DType::F32, {2, 31});
  Int4Weight w = int4Weight(packed, scales, nullptr, nullptr, 32);
  EXPECT_NE(message([&] {
              int4LinearKernel({&x, nullptr, nullptr}, w);
            }).find("do not match"),
            std::string::npos);
}

} // namespace
