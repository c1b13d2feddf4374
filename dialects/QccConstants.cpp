//===- QccConstants.cpp - building and reading constant tensors -----------===//
#include "dialects/QccConstants.h"
#include "format/HalfFloat.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/BuiltinDialect.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

/// Bytes per element in the row-major buffers this file exchanges.
static size_t elementBytes(Type t) {
  if (t.isInteger(1))
    return 1;
  return (t.getIntOrFloatBitWidth() + 7) / 8;
}

/// A resource name must be a valid identifier in the printed IR.
static std::string sanitize(StringRef name) {
  std::string out;
  for (char c : name)
    out.push_back(llvm::isAlnum(c) || c == '_' || c == '.' ? c : '_');
  if (out.empty() || llvm::isDigit(out[0]))
    out.insert(out.begin(), '_');
  return out;
}

ElementsAttr qcc::makeElements(RankedTensorType type, ArrayRef<char> bytes,
                               StringRef name) {
  Type et = type.getElementType();
  assert(bytes.size() == type.getNumElements() * elementBytes(et) &&
         "byte count does not match the type");
  if (type.getNumElements() > kResourceThreshold && !et.isInteger(1)) {
    AsmResourceBlob blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        bytes, alignof(uint64_t));
    return DenseResourceElementsAttr::get(type, sanitize(name),
                                          std::move(blob));
  }
  if (et.isInteger(1)) {
    SmallVector<bool> bits;
    for (char c : bytes)
      bits.push_back(c != 0);
    return DenseElementsAttr::get(type, bits);
  }
  return DenseElementsAttr::getFromRawBuffer(type, bytes);
}

std::optional<std::vector<char>> qcc::getBytes(ElementsAttr attr) {
  if (!attr)
    return std::nullopt;
  auto type = cast<ShapedType>(attr.getType());
  Type et = type.getElementType();
  size_t n = type.getNumElements(), eb = elementBytes(et);
  std::vector<char> out(n * eb);
  if (auto res = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    if (!blob || blob->getData().size() != out.size())
      return std::nullopt;
    llvm::copy(blob->getData(), out.begin());
    return out;
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  if (et.isInteger(1)) {
    for (auto [i, b] : llvm::enumerate(dense.getValues<bool>()))
      out[i] = b;
    return out;
  }
  ArrayRef<char> raw = dense.getRawData();
  if (dense.isSplat()) {
    for (size_t i = 0; i < n; ++i)
      std::copy(raw.begin(), raw.begin() + eb, out.begin() + i * eb);
  } else {
    llvm::copy(raw, out.begin());
  }
  return out;
}

std::optional<std::vector<float>> qcc::getF32Values(ElementsAttr attr) {
  if (!attr)
    return std::nullopt;
  Type et = attr.getElementType();
  if (!et.isF32() && !et.isF16() && !et.isBF16())
    return std::nullopt;
  auto bytes = getBytes(attr);
  if (!bytes)
    return std::nullopt;
  if (et.isF32()) {
    std::vector<float> out(bytes->size() / sizeof(float));
    if (!out.empty()) // an empty vector's data() may be null: memcpy's UB
      std::memcpy(out.data(), bytes->data(), bytes->size());
    return out;
  }
  std::vector<float> out(bytes->size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, bytes->data() + 2 * i, 2);
    out[i] = et.isF16() ? format::halfToFloat(h) : format::bf16ToFloat(h);
  }
  return out;
}

ElementsAttr qcc::makeFloatElements(RankedTensorType type,
                                    ArrayRef<float> values, StringRef name) {
  Type et = type.getElementType();
  if (et.isF32())
    return makeElements(type,
                        ArrayRef<char>(reinterpret_cast<const char *>(
                                           values.data()),
                                       values.size() * sizeof(float)),
                        name);
  assert((et.isF16() || et.isBF16()) && "not a float element type");
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    bits[i] = et.isF16() ? format::floatToHalf(values[i])
                         : format::floatToBF16(values[i]);
  return makeElements(
      type,
      ArrayRef<char>(reinterpret_cast<const char *>(bits.data()),
                     bits.size() * 2),
      name);
}

std::string qcc::blobName(ElementsAttr attr, StringRef fallback) {
  if (auto res = dyn_cast_or_null<DenseResourceElementsAttr>(attr))
    return res.getRawHandle().getKey().str();
  return fallback.str();
}
