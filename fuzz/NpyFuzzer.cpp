//===- NpyFuzzer.cpp - fuzz target: .npy bytes -> Tensor ------------------===//
//
// qrun --input NAME=FILE.npy: a tensor whose bytes match its header, or a
// std::runtime_error naming the file; nothing else.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/TensorIO.h"

#include <stdexcept>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  try {
    qcc::rt::Tensor t = qcc::rt::parseNpy(bytes, "fuzz.npy");
    if (t.bytes() > size) // the data must have come from the file
      __builtin_trap();
  } catch (const std::runtime_error &) {
  }
  return 0;
}
