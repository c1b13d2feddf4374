//===- Safetensors.cpp - reading .safetensors files -----------------------===//
#include "compiler/Safetensors.h"
#include "format/HalfFloat.h"

#include "llvm/Support/FileSystem.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>

using qcc::SafetensorsFile;
using qcc::SafetensorsTensor;

namespace {

llvm::Error fail(llvm::StringRef file, const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 file + ": " + message);
}

/// Bytes per element of the dtypes qcc reads or can size; 0 for unknown.
size_t dtypeBytes(const std::string &dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64")
    return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32")
    return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16")
    return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" ||
      dtype == "F8_E5M2")
    return 1;
  return 0;
}

/// Far beyond any adapter or model tensor, and small enough that a count
/// times 8 bytes cannot overflow.
constexpr int64_t kMaxTensorElements = int64_t(1) << 40;

} // namespace

int64_t SafetensorsTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d; // bounded by the checks in parse
  return n;
}

llvm::Expected<SafetensorsFile> SafetensorsFile::read(llvm::StringRef path) {
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return fail(path, "cannot read the file: " + ec.message());
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return fail(path, "cannot read the file: not a regular file");
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail(path, "cannot read the file: " + buffer.getError().message());
  return parse(std::move(*buffer), path);
}

llvm::Expected<SafetensorsFile>
SafetensorsFile::parse(std::unique_ptr<llvm::MemoryBuffer> buffer,
                       llvm::StringRef name) {
  SafetensorsFile file;
  file.path_ = name.str();
  llvm::StringRef bytes = buffer->getBuffer();
  if (bytes.size() < 8)
    return fail(name, "not a safetensors file (shorter than its 8-byte "
                      "header length)");
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | (uint8_t)bytes[i];
  if (headerBytes > kMaxSafetensorsHeader || headerBytes > bytes.size() - 8)
    return fail(name, fmt::format("not a safetensors file (a header of {} "
                                  "bytes in a file of {})",
                                  headerBytes, bytes.size()));
  llvm::StringRef headerText = bytes.substr(8, headerBytes);
  llvm::StringRef data = bytes.substr(8 + headerBytes);
  nlohmann::json header = nlohmann::json::parse(
      headerText.begin(), headerText.end(), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return fail(name, "not a safetensors file (the header is not a JSON "
                      "object)");
  for (const auto &item : header.items()) {
    // Named, not bound: clang 14's lambdas cannot capture a binding.
    const std::string &key = item.key();
    const nlohmann::json &entry = item.value();
    if (key == "__metadata__")
      continue;
    auto bad = [&](const std::string &why) {
      return fail(name, "tensor '" + key + "': " + why);
    };
    if (!entry.is_object() || !entry.contains("dtype") ||
        !entry.contains("shape") || !entry.contains("data_offsets") ||
        !entry["dtype"].is_string() || !entry["shape"].is_array() ||
        !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2)
      return bad("needs a dtype string, a shape array and two data_offsets");
    SafetensorsTensor t;
    t.dtype = entry["dtype"].get<std::string>();
    size_t elementBytes = dtypeBytes(t.dtype);
    if (elementBytes == 0)
      return bad("unknown dtype '" + t.dtype + "'");
    int64_t elements = 1;
    for (const auto &d : entry["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return bad("a shape dimension is not a non-negative integer");
      int64_t dim = d.get<int64_t>();
      if (dim > kMaxTensorElements ||
          (dim != 0 && elements > kMaxTensorElements / dim))
        return bad("more elements than any tensor qcc reads");
      elements *= dim;
      t.shape.push_back(dim);
    }
    const auto &offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      return bad("data_offsets are not non-negative integers");
    uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > data.size())
      return bad(fmt::format("data_offsets [{}, {}] are outside the {} bytes "
                             "of data",
                             begin, end, data.size()));
    if (end - begin != (uint64_t)elements * elementBytes)
      return bad(fmt::format("holds {} bytes, but its shape and dtype need {}",
                             end - begin, (uint64_t)elements * elementBytes));
    t.bytes = data.substr(begin, end - begin);
    file.tensors_.emplace(key, std::move(t));
  }
  file.buffer_ = std::move(buffer);
  return std::move(file);
}

llvm::Expected<std::vector<float>>
SafetensorsFile::floats(const std::string &name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return fail(path_, "no tensor '" + name + "'");
  const SafetensorsTensor &t = it->second;
  if (t.dtype != "F32" && t.dtype != "F64" && t.dtype != "F16" &&
      t.dtype != "BF16")
    return fail(path_, "tensor '" + name + "': dtype " + t.dtype +
                           " is not a float type (F32, F16, BF16, F64)");
  std::vector<float> out((size_t)t.elements());
  const char *p = t.bytes.data();
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype == "F32") {
      std::memcpy(&out[i], p + 4 * i, 4);
    } else if (t.dtype == "F64") {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      out[i] = (float)d;
    } else {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = t.dtype == "F16" ? format::halfToFloat(h) : format::bf16ToFloat(h);
    }
  }
  return out;
}
