//===- SafetensorsFuzzer.cpp - fuzz target: .safetensors bytes -------------===//
//
// qcc --lora DIR reads DIR/adapter_model.safetensors: a file whose every
// tensor lies within its data, or one error line naming it; nothing else.
// Every float tensor is then widened (SafetensorsFile::floats).
//
//===----------------------------------------------------------------------===//
#include "compiler/Safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto file = qcc::SafetensorsFile::parse(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size)),
      "fuzz.safetensors");
  if (!file) {
    llvm::consumeError(file.takeError());
    return 0;
  }
  for (const auto &[name, t] : file->tensors()) {
    // The data must have come from the file.
    if (t.bytes.size() > size)
      __builtin_trap();
    auto values = file->floats(name);
    if (values) {
      if ((int64_t)values->size() != t.elements())
        __builtin_trap();
    } else {
      llvm::consumeError(values.takeError());
    }
  }
  return 0;
}
