//===- replay_onnx_import.cpp - the importer's fuzz inputs, replayed ------===//
//
// Without libFuzzer: feeds every file named on the command line, or found
// under a directory named there, to fuzzOnnxImport once (ctest
// fuzz-replay-onnx-import over test/fuzz-regressions/onnx_import). A crash or
// a sanitizer report fails the test.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

int fuzzOnnxImport(const uint8_t *data, size_t size);

namespace fs = std::filesystem;

int main(int argc, char **argv) {
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    fs::path p = argv[i];
    if (fs::is_directory(p)) {
      for (const auto &e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file())
          files.push_back(e.path());
    } else if (fs::exists(p)) {
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end()); // the same order every run
  for (const fs::path &f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s\n", f.c_str());
    fuzzOnnxImport(reinterpret_cast<const uint8_t *>(bytes.data()),
                   bytes.size());
  }
  std::fprintf(stderr, "replayed %zu inputs\n", files.size());
  return 0;
}
