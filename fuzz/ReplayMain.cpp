//===- ReplayMain.cpp - a fuzz target's inputs, replayed without libFuzzer ===//
//
// Linked into every qcc-fuzz-NAME-replay (cmake/QccFuzzer.cmake) in place of
// libFuzzer's main: feeds each file named on the command line, or found under
// a directory named there, to the target's LLVMFuzzerTestOneInput once. A
// crash or sanitizer report fails the ctest test; a directory that does not
// exist yet (a target without regressions) is skipped.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace fs = std::filesystem;

static void replay(const fs::path &file, int &count) {
  std::ifstream in(file, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  if (!in.eof() && !in) {
    std::fprintf(stderr, "replay: %s: cannot read the file\n", file.c_str());
    std::exit(1);
  }
  std::fprintf(stderr, "replay: %s\n", file.c_str());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()),
                         bytes.size());
  ++count;
}

int main(int argc, char **argv) {
  int count = 0;
  for (int i = 1; i < argc; ++i) {
    fs::path p = argv[i];
    if (fs::is_directory(p)) {
      std::vector<fs::path> files;
      for (const auto &e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file())
          files.push_back(e.path());
      std::sort(files.begin(), files.end()); // the same order every run
      for (const fs::path &f : files)
        replay(f, count);
    } else if (fs::exists(p)) {
      replay(p, count);
    }
  }
  std::printf("replayed %d inputs\n", count);
  return 0;
}
