//===- HalfFloat.cpp - converting tensors between f32, f16 and bf16 -------===//
#include "runtime/core/HalfFloat.h"

#include "format/device/numerics.h"

#include <stdexcept>

using namespace qcc::rt;

Tensor qcc::rt::convertFloat(const Tensor &t, DType to) {
  if (t.dtype() == to)
    return t;
  if (t.dtype() == DType::F8E4M3 && to == DType::F32) { // widening only
    Tensor r(to, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i)
      r.data<float>()[i] = numerics::e4m3ToFloat(t.data<uint8_t>()[i]);
    return r;
  }
  auto isFloat = [](DType d) { return d == DType::F32 || isHalfFloat(d); };
  if (!isFloat(t.dtype()) || !isFloat(to))
    throw std::runtime_error(std::string("cannot convert ") +
                             dtypeName(t.dtype()) + " to " + dtypeName(to));
  Tensor r(to, t.shape());
  int64_t n = t.numel();
  auto load = [&](int64_t i) {
    switch (t.dtype()) {
    case DType::F16: return halfToFloat(t.data<uint16_t>()[i]);
    case DType::BF16: return bf16ToFloat(t.data<uint16_t>()[i]);
    default: return t.data<float>()[i];
    }
  };
  if (to == DType::F32) {
    float *out = r.data<float>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = load(i);
  } else {
    uint16_t *out = r.data<uint16_t>();
    auto narrow = to == DType::F16 ? floatToHalf : floatToBF16;
    for (int64_t i = 0; i < n; ++i)
      out[i] = narrow(load(i));
  }
  return r;
}
