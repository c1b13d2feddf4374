//===- QuantizeW4Methods.cpp - int4 weights per group: RTN, GPTQ ----------===//
#include "passes/QuantizeW4Methods.h"

#include "format/Int4.h"
#include "runtime/HalfFloat.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

using namespace qcc;
using namespace qcc::w4;

namespace {

constexpr uint16_t kLargestHalf = 0x7bff; // 65504
constexpr uint16_t kHalfOne = 0x3c00;

double groupAbsMax(const double *x, int64_t count) {
  double m = 0;
  for (int64_t j = 0; j < count; ++j)
    m = std::max(m, std::abs(x[j]));
  return m;
}

} // namespace

uint16_t qcc::w4::groupScale(double absmax) {
  uint16_t h = rt::floatToHalf((float)(absmax / format::int4::kQMax));
  if ((h & 0x7fff) >= 0x7c00) // infinity (or NaN from a NaN weight)
    return kLargestHalf;
  if ((h & 0x7fff) == 0)
    return kHalfOne;
  return h;
}

double qcc::w4::scaleValue(uint16_t h) { return rt::halfToFloat(h); }

int8_t qcc::w4::quantizeValue(double w, double s) {
  const double qmax = format::int4::kQMax;
  // nearbyint rounds half to even in the default rounding mode.
  return (int8_t)std::clamp(std::nearbyint(w / s), -qmax, qmax);
}

Int4Weight qcc::w4::quantizeRtn(const std::vector<double> &w, int64_t n,
                                int64_t k, int64_t groupSize) {
  assert(k % groupSize == 0 && w.size() == (size_t)(n * k));
  const int64_t groups = k / groupSize;
  Int4Weight r{std::vector<int8_t>(w.size()),
               std::vector<uint16_t>((size_t)(n * groups)),
               {}};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t g = 0; g < groups; ++g) {
      const double *x = &w[i * k + g * groupSize];
      uint16_t h = groupScale(groupAbsMax(x, groupSize));
      r.scales[i * groups + g] = h;
      double s = scaleValue(h);
      for (int64_t j = 0; j < groupSize; ++j)
        r.q[i * k + g * groupSize + j] = quantizeValue(x[j], s);
    }
  return r;
}

std::vector<int32_t> qcc::w4::actOrder(const std::vector<double> &H,
                                       int64_t k) {
  std::vector<int32_t> perm((size_t)k);
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int32_t a, int32_t b) {
    return H[(size_t)a * k + a] > H[(size_t)b * k + b];
  });
  return perm;
}

Int4Weight qcc::w4::quantizeGptq(const std::vector<double> &w, int64_t n,
                                 int64_t k, int64_t groupSize,
                                 const obs::InverseHessian &hinv,
                                 const std::vector<int32_t> &perm,
                                 int64_t blockSize) {
  assert(hinv.k == k && k % groupSize == 0 && blockSize > 0 &&
         w.size() == (size_t)(n * k) &&
         (perm.empty() || perm.size() == (size_t)k));
  const int64_t groups = k / groupSize;
  Int4Weight r{std::vector<int8_t>(w.size()),
               std::vector<uint16_t>((size_t)(n * groups)), perm};
  std::vector<double> x((size_t)k), err((size_t)blockSize);
  // Each row's scales and updates depend on that row and U only.
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      int64_t c = perm.empty() ? j : perm[j];
      x[j] = hinv.dead[j] ? 0.0 : w[i * k + c];
    }
    double s = 1;
    for (int64_t i1 = 0; i1 < k; i1 += blockSize) {
      int64_t i2 = std::min(k, i1 + blockSize);
      for (int64_t j = i1; j < i2; ++j) {
        if (j % groupSize == 0) {
          uint16_t h = groupScale(groupAbsMax(&x[j], groupSize));
          r.scales[i * groups + j / groupSize] = h;
          s = scaleValue(h);
        }
        int8_t q = quantizeValue(x[j], s);
        r.q[i * k + j] = q;
        err[j - i1] = obs::compensate(x.data(), j, q * s, i2, hinv);
      }
      obs::compensateBatch(x.data(), i1, i2, err.data(), hinv);
    }
  }
  return r;
}

std::vector<double> qcc::w4::dequantize(const Int4Weight &w, int64_t n,
                                        int64_t k, int64_t groupSize) {
  std::vector<int8_t> packed((size_t)(n * format::int4::packedCols(k)));
  format::int4::pack(w.q.data(), n, k, packed.data());
  std::vector<float> scales(w.scales.size()), dense((size_t)(n * k));
  for (size_t i = 0; i < scales.size(); ++i)
    scales[i] = rt::halfToFloat(w.scales[i]);
  format::int4::dequantize(packed.data(), scales.data(),
                           w.perm.empty() ? nullptr : w.perm.data(), n, k,
                           groupSize, dense.data());
  return std::vector<double>(dense.begin(), dense.end());
}
