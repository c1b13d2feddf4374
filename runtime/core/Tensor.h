//===- Tensor.h - host tensors for the runtime ------------------*- C++ -*-===//
//
// The runtime links nothing of LLVM, MLIR or ONNX: a tensor is an element type,
// a shape and a byte buffer, either owned or a view into the artifact's mapped
// weights.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_TENSOR_H
#define QCC_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace qcc::rt {

/// F8E4M3: OCP FP8 E4M3 ("e4m3fn", format/device/numerics.h), one byte per
/// value, as FP8 W8A8 stores weights and quantized activations.
enum class DType : uint8_t { F32, F16, BF16, I64, I32, I8, Bool, F8E4M3 };

size_t dtypeSize(DType t);
const char *dtypeName(DType t);
/// Parses the names dtypeName prints ("f32", "i64", "bool", ...).
bool parseDType(const std::string &name, DType &out);

using Shape = std::vector<int64_t>;
int64_t numElements(const Shape &shape);
std::string shapeString(const Shape &shape);

class Tensor {
public:
  Tensor() = default;
  /// A zero-initialized tensor that owns its storage.
  Tensor(DType dtype, Shape shape);
  /// The same, its elements left unset: for a kernel that writes every one
  /// (the zeroing was 3-7% of SmolLM2's CPU forward passes, in memset).
  static Tensor uninitialized(DType dtype, Shape shape);
  /// A view of `data` (not owned; must outlive the tensor).
  static Tensor view(DType dtype, Shape shape, const void *data);

  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  int64_t rank() const { return (int64_t)shape_.size(); }
  int64_t dim(int64_t i) const { return shape_[i < 0 ? i + rank() : i]; }
  int64_t numel() const { return numElements(shape_); }
  size_t bytes() const { return (size_t)numel() * dtypeSize(dtype_); }
  bool valid() const { return data_ != nullptr || numel() == 0; }

  template <typename T> T *data() { return reinterpret_cast<T *>(mutableData()); }
  template <typename T> const T *data() const {
    return reinterpret_cast<const T *>(data_);
  }
  const void *raw() const { return data_; }
  /// Whether the tensor is a view of memory it does not own (view()).
  bool isView() const { return !owned_; }

  /// Same data, new shape with the same element count (no copy).
  Tensor reshaped(Shape shape) const;

private:
  void *mutableData();

  DType dtype_ = DType::F32;
  Shape shape_;
  Tensor(DType dtype, Shape shape, bool zero);

  std::shared_ptr<std::byte[]> storage_;
  const std::byte *data_ = nullptr;
  bool owned_ = false;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_TENSOR_H
