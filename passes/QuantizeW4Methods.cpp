//===- QuantizeW4Methods.cpp - int4 weights per group: RTN, GPTQ ----------===//
#include "passes/QuantizeW4Methods.h"

#include "format/Int4.h"
#include "format/HalfFloat.h"

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

/// f16(step), clamped to the largest finite f16; 1 when zero.
uint16_t halfScale(double step) {
  uint16_t h = format::floatToHalf((float)step);
  if ((h & 0x7fff) >= 0x7c00) // infinity (or NaN from a NaN weight)
    return kLargestHalf;
  if ((h & 0x7fff) == 0)
    return kHalfOne;
  return h;
}

/// One group's grid: symmetric (scale only) or asymmetric (scale + min),
/// from the group's weights as they are now.
struct Grid {
  bool asymmetric;
  uint16_t scaleBits = kHalfOne, offsetBits = 0;
  double s = 1, m = 0;

  void fit(const double *x, int64_t count) {
    if (!asymmetric) {
      scaleBits = groupScale(groupAbsMax(x, count));
    } else {
      double lo = x[0], hi = x[0];
      for (int64_t j = 1; j < count; ++j) {
        lo = std::min(lo, x[j]);
        hi = std::max(hi, x[j]);
      }
      AsymGrid g = asymGroupGrid(lo, hi);
      scaleBits = g.scale;
      offsetBits = g.offset;
      m = scaleValue(offsetBits);
    }
    s = scaleValue(scaleBits);
  }
  int8_t code(double w) const {
    return asymmetric ? quantizeAsymValue(w, s, m) : quantizeValue(w, s);
  }
  double value(int8_t q) const {
    return asymmetric ? asymValue(q, s, m) : q * s;
  }
};

Int4Weight emptyWeight(int64_t n, int64_t k, int64_t groups, bool asymmetric,
                       std::vector<int32_t> perm) {
  return {std::vector<int8_t>((size_t)(n * k)),
          std::vector<uint16_t>((size_t)(n * groups)), std::move(perm),
          asymmetric ? std::vector<uint16_t>((size_t)(n * groups))
                     : std::vector<uint16_t>()};
}

} // namespace

uint16_t qcc::w4::groupScale(double absmax) {
  return halfScale(absmax / format::int4::kQMax);
}

AsymGrid qcc::w4::asymGroupGrid(double lo, double hi) {
  uint16_t m = format::floatToHalf((float)lo);
  if ((m & 0x7fff) > 0x7c00) // NaN from a NaN weight
    m = 0;
  else if ((m & 0x7fff) == 0x7c00) // beyond f16: the largest finite, signed
    m = (uint16_t)((m & 0x8000) | kLargestHalf);
  // f16(lo) may round above hi (a constant group): the step is then 0, the
  // scale 1, never negative.
  return {m, halfScale(std::max(0.0, hi - scaleValue(m)) /
                       format::int4::kUMax)};
}

int8_t qcc::w4::quantizeAsymValue(double w, double s, double m) {
  // nearbyint rounds half to even in the default rounding mode; a NaN
  // weight gives code 0 (std::clamp would keep the NaN).
  double u = std::nearbyint((w - m) / s);
  return std::isnan(u)
             ? 0
             : (int8_t)std::clamp(u, 0.0, (double)format::int4::kUMax);
}

double qcc::w4::asymValue(int8_t u, double s, double m) {
  // The backends' value (format::int4::weightValue), f32.
  float offset = (float)m;
  return format::int4::weightValue(u, (float)s, &offset);
}

double qcc::w4::scaleValue(uint16_t h) { return format::halfToFloat(h); }

int8_t qcc::w4::quantizeValue(double w, double s) {
  const double qmax = format::int4::kQMax;
  // nearbyint rounds half to even in the default rounding mode.
  return (int8_t)std::clamp(std::nearbyint(w / s), -qmax, qmax);
}

Int4Weight qcc::w4::quantizeRtn(const std::vector<double> &w, int64_t n,
                                int64_t k, int64_t groupSize, bool asymmetric) {
  assert(k % groupSize == 0 && w.size() == (size_t)(n * k));
  const int64_t groups = k / groupSize;
  Int4Weight r = emptyWeight(n, k, groups, asymmetric, {});
  Grid grid{asymmetric};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t g = 0; g < groups; ++g) {
      const double *x = &w[i * k + g * groupSize];
      grid.fit(x, groupSize);
      r.scales[i * groups + g] = grid.scaleBits;
      if (asymmetric)
        r.offsets[i * groups + g] = grid.offsetBits;
      for (int64_t j = 0; j < groupSize; ++j)
        r.q[i * k + g * groupSize + j] = grid.code(x[j]);
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
                                 int64_t blockSize, bool asymmetric) {
  assert(hinv.k == k && k % groupSize == 0 && blockSize > 0 &&
         w.size() == (size_t)(n * k) &&
         (perm.empty() || perm.size() == (size_t)k));
  const int64_t groups = k / groupSize;
  Int4Weight r = emptyWeight(n, k, groups, asymmetric, perm);
  std::vector<double> x((size_t)k), err((size_t)blockSize);
  Grid grid{asymmetric};
  // Each row's scales and updates depend on that row and U only.
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      int64_t c = perm.empty() ? j : perm[j];
      x[j] = hinv.dead[j] ? 0.0 : w[i * k + c];
    }
    for (int64_t i1 = 0; i1 < k; i1 += blockSize) {
      int64_t i2 = std::min(k, i1 + blockSize);
      for (int64_t j = i1; j < i2; ++j) {
        if (j % groupSize == 0) {
          grid.fit(&x[j], groupSize);
          r.scales[i * groups + j / groupSize] = grid.scaleBits;
          if (asymmetric)
            r.offsets[i * groups + j / groupSize] = grid.offsetBits;
        }
        int8_t q = grid.code(x[j]);
        r.q[i * k + j] = q;
        err[j - i1] = obs::compensate(x.data(), j, grid.value(q), i2, hinv);
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
  std::vector<float> scales(w.scales.size()), offsets(w.offsets.size()),
      dense((size_t)(n * k));
  for (size_t i = 0; i < scales.size(); ++i)
    scales[i] = format::halfToFloat(w.scales[i]);
  for (size_t i = 0; i < offsets.size(); ++i)
    offsets[i] = format::halfToFloat(w.offsets[i]);
  format::int4::dequantize(packed.data(), scales.data(),
                           w.offsets.empty() ? nullptr : offsets.data(),
                           w.perm.empty() ? nullptr : w.perm.data(), n, k,
                           groupSize, dense.data());
  return std::vector<double>(dense.begin(), dense.end());
}
