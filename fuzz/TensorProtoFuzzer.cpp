//===- TensorProtoFuzzer.cpp - fuzz target: TensorProto bytes -> Tensor ---===//
//
// qrun --input NAME=FILE.pb: a tensor, or a std::runtime_error naming the
// file; nothing else.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/TensorIO.h"

#include <stdexcept>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  try {
    qcc::rt::Tensor t = qcc::rt::parseTensorProto(bytes, "fuzz.pb");
    // Every element was in the input: raw bytes, or at least one byte of
    // a varint / 4 of a float each.
    if ((uint64_t)t.numel() > size)
      __builtin_trap();
  } catch (const std::runtime_error &) {
  }
  return 0;
}
