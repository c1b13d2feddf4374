//===- Tensor.cpp - host tensors for the runtime --------------------------===//
#include "runtime/core/Tensor.h"

#include "format/Checked.h"

#include <stdexcept>

using namespace qcc::rt;

size_t qcc::rt::dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  case DType::I8:
  case DType::Bool:
  case DType::F8E4M3:
    return 1;
  }
  return 0;
}

const char *qcc::rt::dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::I64: return "i64";
  case DType::I32: return "i32";
  case DType::I8: return "i8";
  case DType::Bool: return "bool";
  case DType::F8E4M3: return "f8e4m3";
  }
  return "?";
}

bool qcc::rt::parseDType(const std::string &name, DType &out) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32,
                  DType::I8, DType::Bool, DType::F8E4M3})
    if (name == dtypeName(t)) {
      out = t;
      return true;
    }
  return false;
}

int64_t qcc::rt::numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string qcc::rt::shapeString(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor::Tensor(DType dtype, Shape shape)
    : Tensor(dtype, std::move(shape), /*zero=*/true) {}

Tensor Tensor::uninitialized(DType dtype, Shape shape) {
  return Tensor(dtype, std::move(shape), /*zero=*/false);
}

Tensor::Tensor(DType dtype, Shape shape, bool zero)
    : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_)
    if (d < 0)
      throw std::invalid_argument("negative dimension in " +
                                  shapeString(shape_));
  // Shapes may derive from inputs and flags (batch x sequence): refused
  // with the sizes before the allocation, not as std::bad_alloc after.
  std::optional<uint64_t> size = format::checkedBytes(shape_, dtypeSize(dtype));
  auto what = [&] {
    return std::string("a tensor of ") + dtypeName(dtype) + shapeString(shape_);
  };
  if (!size)
    throw std::runtime_error(what() + " has more elements than fit in 64 bits");
  if (*size > format::physicalMemoryBytes())
    format::requireMemory(*size, what());
  storage_ = zero ? std::make_shared<std::byte[]>(*size)
                  : std::make_shared_for_overwrite<std::byte[]>(*size);
  data_ = storage_.get();
  owned_ = true;
}

Tensor Tensor::view(DType dtype, Shape shape, const void *data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = static_cast<const std::byte *>(data);
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (numElements(shape) != numel())
    throw std::invalid_argument("cannot reshape " + shapeString(shape_) +
                                " to " + shapeString(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

void *Tensor::mutableData() {
  if (!owned_)
    throw std::logic_error("writing to a read-only tensor view");
  return const_cast<std::byte *>(data_);
}
