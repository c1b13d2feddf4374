//===- ManifestFuzzer.cpp - fuzz target: manifest + data -> Artifact ------===//
//
// The input is a manifest's JSON text, a NUL byte and the data section; the
// target packs them into a valid container (header, alignment, CRC) as qcc
// does, so every input reaches the manifest's validation. Seeds: the
// manifests of small compiled fixtures (fuzz/corpus/artifact-manifest), with
// the manifest's keys in fuzz/artifact-manifest.dict.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzArtifact.h"

#include <algorithm>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view in(reinterpret_cast<const char *>(data), size);
  size_t nul = std::min(in.find('\0'), in.size());
  std::string_view manifest = in.substr(0, nul),
                   payload = in.substr(std::min(nul + 1, in.size()));
  auto bytes = std::make_shared<std::vector<char>>(
      qcc::format::packageFile(manifest, payload));
  qcc::fuzz::loadAndCheck(std::move(bytes));
  return 0;
}
