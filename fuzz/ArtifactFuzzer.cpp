//===- ArtifactFuzzer.cpp - fuzz target: .qpkg bytes -> Artifact ----------===//
//
// The input is a whole .qpkg file. Its CRC field is recomputed before
// loading (as anyone writing a hostile artifact would), so mutations of the
// header and the manifest reach the validation behind the checksum; the
// checksum itself is tested in test/unit/ArtifactLoaderTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzArtifact.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto bytes = std::make_shared<std::vector<char>>(data, data + size);
  qcc::format::sealCrc(*bytes);
  qcc::fuzz::loadAndCheck(std::move(bytes));
  return 0;
}
