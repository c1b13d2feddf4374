//===- MappedArtifactTest.cpp - artifacts mapped, weights resident once ---===//
//
// format/FileBytes maps a file read-only (or reads it); release() drops the
// pages of a span this process is done with, readAt() copies bytes without
// mapping them, and what a reader sees never changes. The CPU backend packs
// a float32 linear's weight and releases the mapped source span by span, so
// the weight is resident once: its mapped pages are not resident after a
// fast run, and are after a reference run (which reads the weight in
// place). An embedding's rows are read without mapping the table, and small
// constants are copied out at load. Residency is the mapping's Rss in
// /proc/self/smaps (page-cache residency, mincore(), would not show it).
//
//===----------------------------------------------------------------------===//
#include "format/ArtifactFormat.h"
#include "format/FileBytes.h"
#include "runtime/core/Artifact.h"
#include "runtime/cpu/CpuF32Gemm.h"
#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/Session.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

using namespace qcc;
using nlohmann::json;

namespace {

/// Resident bytes of the mapping that starts at `start` (smaps' Rss), or
/// -1 when no mapping starts there.
int64_t residentBytes(const void *start) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  auto want = reinterpret_cast<uintptr_t>(start);
  while (std::getline(smaps, line)) {
    size_t dash = line.find('-');
    if (dash != std::string::npos && dash > 0 &&
        line.find_first_not_of("0123456789abcdef") == dash) {
      inside = std::stoull(line.substr(0, dash), nullptr, 16) == want;
      continue;
    }
    if (inside && line.rfind("Rss:", 0) == 0)
      return std::stoll(line.substr(4)) * 1024;
  }
  return -1;
}

std::string tempPath(const std::string &name) {
  return (std::filesystem::path(testing::TempDir()) /
          ("qcc-mapped-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

std::string writeFile(const std::string &name, const std::string &bytes) {
  std::string path = tempPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

const int64_t kPage = ::sysconf(_SC_PAGESIZE);

TEST(FileBytes, MappedAndReadBytesAreTheFile) {
  std::string bytes(3 * kPage + 17, '\0');
  std::mt19937 rng(1);
  for (char &b : bytes)
    b = (char)rng();
  std::string path = writeFile("bytes", bytes);
  for (auto file : {format::FileBytes::map(path), format::FileBytes::read(path),
                    format::FileBytes::mapCopy(bytes)}) {
    ASSERT_EQ(file->size(), bytes.size());
    EXPECT_EQ(std::memcmp(file->data(), bytes.data(), bytes.size()), 0);
  }
  EXPECT_TRUE(format::FileBytes::map(path)->mapped());
  EXPECT_FALSE(format::FileBytes::read(path)->mapped());
  std::filesystem::remove(path);
}

TEST(FileBytes, EmptyFileHasNoBytes) {
  std::string path = writeFile("empty", "");
  EXPECT_EQ(format::FileBytes::map(path)->size(), 0u);
  EXPECT_EQ(format::FileBytes::mapCopy("")->size(), 0u);
  std::filesystem::remove(path);
}

/// The one line each refusal gives, naming the path.
std::string mapRefusal(const std::string &path) {
  try {
    format::FileBytes::map(path);
    return "";
  } catch (const std::runtime_error &e) {
    return e.what();
  }
}

TEST(FileBytes, OnlyRegularFilesAreMapped) {
  // A FIFO without a writer must be refused, not waited on.
  std::string fifo = tempPath("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(mapRefusal(fifo), fifo + ": not a regular file");
  std::filesystem::remove(fifo);
  EXPECT_EQ(mapRefusal(testing::TempDir()),
            testing::TempDir() + ": not a regular file");
  EXPECT_EQ(mapRefusal("/dev/zero"), "/dev/zero: not a regular file");
  std::string missing = tempPath("missing");
  EXPECT_EQ(mapRefusal(missing).rfind(missing + ": cannot open the file", 0),
            0u);
}

TEST(FileBytes, ReleaseDropsResidencyNotContent) {
  const int64_t pages = 64;
  std::string bytes(pages * kPage, '\0');
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = (char)(i * 7 + i / 4096);
  auto file = format::FileBytes::mapCopy(bytes);
  auto checksum = [&] {
    return std::accumulate(file->data(), file->data() + file->size(),
                           uint64_t(0), [](uint64_t s, char c) {
                             return s * 31 + (unsigned char)c;
                           });
  };
  uint64_t want = checksum(); // touches every page
  EXPECT_GE(residentBytes(file->data()), pages * kPage);
  // A span that covers no whole page drops nothing.
  file->release(file->data() + 1, kPage);
  EXPECT_GE(residentBytes(file->data()), pages * kPage);
  // Half of the file: half of the pages go.
  file->release(file->data(), pages / 2 * kPage);
  EXPECT_LE(residentBytes(file->data()), pages / 2 * kPage);
  file->release(file->data(), file->size());
  EXPECT_EQ(residentBytes(file->data()), 0);
  EXPECT_EQ(checksum(), want); // read again from the page cache
  // Spans outside the file are ignored; so is everything for bytes held in
  // memory.
  file->release(file->data() + file->size(), kPage);
  auto held = format::FileBytes::hold(
      std::make_shared<std::vector<char>>(bytes.begin(), bytes.end()));
  held->release(held->data(), held->size());
  EXPECT_EQ(std::memcmp(held->data(), bytes.data(), bytes.size()), 0);
}

TEST(FileBytes, ReadAtCopiesWithoutMapping) {
  const int64_t pages = 16;
  std::string bytes(pages * kPage, '\0');
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = (char)(i * 13 + 5);
  auto file = format::FileBytes::mapCopy(bytes);
  file->release(file->data(), file->size()); // what the loader leaves
  std::string got(3 * kPage + 7, '\0');
  file->readAt(file->data() + kPage + 3, got.size(), got.data());
  EXPECT_EQ(got, bytes.substr(kPage + 3, got.size()));
  EXPECT_EQ(residentBytes(file->data()), 0);
  // Memory that is not the file's is copied as it is.
  std::string other = "not the file", copy(other.size(), '\0');
  file->readAt(other.data(), other.size(), copy.data());
  EXPECT_EQ(copy, other);
}

/// main(x: f32[3, K]) = linear(x, w), w a constant f32[N, K] of `w`.
std::vector<char> linearArtifact(int64_t n, int64_t k,
                                 const std::vector<float> &w) {
  json manifest{
      {"format_version", format::kFormatVersion},
      {"values",
       {{{"dtype", "f32"}, {"shape", {3, k}}},
        {{"dtype", "f32"}, {"shape", {n, k}}},
        {{"dtype", "f32"}, {"shape", {3, n}}}}},
      {"constants",
       {{{"value", 1}, {"offset", 0}, {"size", n * k * 4}}}},
      {"functions",
       {{{"name", "main"},
         {"inputs",
          {{{"name", "x"}, {"value", 0}, {"dtype", "f32"}, {"shape", {3, k}}}}},
         {"outputs",
          {{{"name", "y"}, {"value", 2}, {"dtype", "f32"}, {"shape", {3, n}}}}},
         {"nodes",
          {{{"op", "linear"}, {"name", "fc"}, {"in", {0, 1}}, {"out", {2}}}}}}}},
      {"sections", json::object()}};
  return format::packageFile(
      manifest.dump(),
      std::string_view(reinterpret_cast<const char *>(w.data()),
                       w.size() * sizeof(float)));
}

struct PathGuard {
  rt::CpuKernelPath saved = rt::cpuKernelPath();
  ~PathGuard() { rt::setCpuKernelPath(saved); }
};

TEST(MappedArtifact, PackedWeightsAreResidentOnce) {
  const int64_t n = 512, k = 256; // a 512 KiB weight
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> w(n * k), xv(3 * k);
  for (float &v : w)
    v = normal(rng);
  for (float &v : xv)
    v = normal(rng);
  std::vector<char> bytes = linearArtifact(n, k, w);
  std::string path = writeFile("linear.qpkg", {bytes.data(), bytes.size()});
  rt::Tensor x(rt::DType::F32, {3, k});
  std::copy(xv.begin(), xv.end(), x.data<float>());

  PathGuard guard;
  std::map<std::string, rt::Tensor> want;
  {
    rt::Artifact read = rt::Artifact::load(path, rt::FileAccess::Read);
    EXPECT_FALSE(read.mapped());
    rt::setCpuKernelPath(rt::CpuKernelPath::Fast);
    want = rt::Session(read).run("main", {{"x", x}});
  }
  rt::Artifact mapped = rt::Artifact::load(path);
  ASSERT_TRUE(mapped.mapped());
  EXPECT_EQ(mapped.fileSize(), bytes.size());
  const void *start = mapped.constant(1)->raw();
  // The mapping starts at the file's first byte: find it from the weight.
  const char *base = static_cast<const char *>(start) -
                     (bytes.size() - n * k * sizeof(float));
  // The loader's checksum read every page and dropped them again.
  EXPECT_LE(residentBytes(base), 2 * kPage);

  rt::setCpuKernelPath(rt::CpuKernelPath::Fast);
  auto got = rt::Session(mapped).run("main", {{"x", x}});
  ASSERT_EQ(got.at("y").bytes(), want.at("y").bytes());
  EXPECT_EQ(std::memcmp(got.at("y").raw(), want.at("y").raw(),
                        got.at("y").bytes()),
            0);
  if (!rt::cpuHasAvx512F()) {
    std::filesystem::remove(path);
    GTEST_SKIP() << "no AVX-512F: the fast path keeps BLAS and packs nothing";
  }
  // Packed and released: the weight's pages are not resident.
  EXPECT_LE(residentBytes(base), 2 * kPage);
  // The reference path reads the weight in place: its pages come back.
  rt::setCpuKernelPath(rt::CpuKernelPath::Reference);
  rt::Session(mapped).run("main", {{"x", x}});
  EXPECT_GE(residentBytes(base), n * k * (int64_t)sizeof(float));
  std::filesystem::remove(path);
}

TEST(MappedArtifact, SmallConstantsAreCopiedOut) {
  const int64_t n = 8, k = 16; // a 512-byte weight
  std::vector<float> w(n * k);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = (float)i * 0.25f;
  std::vector<char> bytes = linearArtifact(n, k, w);
  std::string path = writeFile("small.qpkg", {bytes.data(), bytes.size()});
  rt::Artifact mapped = rt::Artifact::load(path),
               read = rt::Artifact::load(path, rt::FileAccess::Read);
  ASSERT_LT(n * k * sizeof(float), rt::Artifact::kCopyBelowBytes);
  EXPECT_FALSE(mapped.constant(1)->isView()); // a copy: no page of the file
  EXPECT_TRUE(read.constant(1)->isView());    // a view of the bytes read
  EXPECT_EQ(std::memcmp(mapped.constant(1)->raw(), w.data(),
                        w.size() * sizeof(float)),
            0);
  std::filesystem::remove(path);
}

TEST(MappedArtifact, ConstantsOverTheSameBytesShareOneCopy) {
  // Entry points name the same weights under value ids of their own: one
  // copy (and one device upload: the CUDA backend keys by the bytes).
  const int64_t n = 8, k = 16;
  std::vector<float> w(n * k, 1.5f);
  json manifest{
      {"format_version", format::kFormatVersion},
      {"values",
       {{{"dtype", "f32"}, {"shape", {n, k}}},
        {{"dtype", "f32"}, {"shape", {n * k}}},
        {{"dtype", "i32"}, {"shape", {n, k}}}}},
      {"constants",
       {{{"value", 0}, {"offset", 0}, {"size", n * k * 4}},
        {{"value", 1}, {"offset", 0}, {"size", n * k * 4}},
        {{"value", 2}, {"offset", 0}, {"size", n * k * 4}}}},
      {"functions", json::array()},
      {"sections", json::object()}};
  std::vector<char> bytes = format::packageFile(
      manifest.dump(), std::string_view(reinterpret_cast<const char *>(w.data()),
                                        w.size() * sizeof(float)));
  rt::Artifact a =
      rt::Artifact::fromFile(format::FileBytes::mapCopy({bytes.data(), bytes.size()}),
                             "shared.qpkg");
  EXPECT_EQ(a.constant(0)->raw(), a.constant(1)->raw()); // f32, reshaped
  EXPECT_EQ(a.constant(1)->shape(), rt::Shape{n * k});
  EXPECT_NE(a.constant(0)->raw(), a.constant(2)->raw()); // i32: its own
  EXPECT_EQ(std::memcmp(a.constant(2)->raw(), w.data(), n * k * 4), 0);
}

TEST(MappedArtifact, CopiesAreBoundedByTheData) {
  // A hostile manifest: 32 overlapping 2 KiB constants over 4 KiB of data.
  // At most the data's bytes are copied; the rest are views; every one
  // holds its bytes.
  const int data = 4096, each = 2048, count = 32;
  std::string bytes(data, '\0');
  for (int i = 0; i < data; ++i)
    bytes[i] = (char)(i * 7);
  json values = json::array(), constants = json::array();
  for (int c = 0; c < count; ++c) {
    values.push_back({{"dtype", "i8"}, {"shape", {each}}});
    constants.push_back({{"value", c}, {"offset", c * 64}, {"size", each}});
  }
  json manifest{{"format_version", format::kFormatVersion},
                {"values", values},
                {"constants", constants},
                {"functions", json::array()},
                {"sections", json::object()}};
  std::vector<char> file = format::packageFile(manifest.dump(), bytes);
  rt::Artifact a = rt::Artifact::fromFile(
      format::FileBytes::mapCopy({file.data(), file.size()}), "overlap.qpkg");
  size_t copied = 0;
  for (int c = 0; c < count; ++c) {
    const rt::Tensor *t = a.constant(c);
    ASSERT_TRUE(t);
    copied += t->isView() ? 0 : t->bytes();
    EXPECT_EQ(std::memcmp(t->raw(), bytes.data() + c * 64, each), 0) << c;
  }
  EXPECT_LE(copied, (size_t)data);
  EXPECT_GT(copied, 0u);
}

TEST(MappedArtifact, EmbeddingRowsDoNotMapTheTable) {
  // main(ids: i64[1, 32]) = embedding(table, ids), table f32 [4096, 64]:
  // 1 MiB, a view of the mapping.
  const int64_t V = 4096, E = 64, S = 32;
  std::vector<float> table(V * E);
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = (float)i;
  json manifest{
      {"format_version", format::kFormatVersion},
      {"values",
       {{{"dtype", "i64"}, {"shape", {1, S}}},
        {{"dtype", "f32"}, {"shape", {V, E}}},
        {{"dtype", "f32"}, {"shape", {1, S, E}}}}},
      {"constants", {{{"value", 1}, {"offset", 0}, {"size", V * E * 4}}}},
      {"functions",
       {{{"name", "main"},
         {"inputs",
          {{{"name", "ids"}, {"value", 0}, {"dtype", "i64"}, {"shape", {1, S}}}}},
         {"outputs",
          {{{"name", "y"}, {"value", 2}, {"dtype", "f32"}, {"shape", {1, S, E}}}}},
         {"nodes",
          {{{"op", "embedding"}, {"name", "embed"}, {"in", {1, 0}}, {"out", {2}}}}}}}},
      {"sections", json::object()}};
  std::vector<char> bytes = format::packageFile(
      manifest.dump(),
      std::string_view(reinterpret_cast<const char *>(table.data()),
                       table.size() * sizeof(float)));
  std::string path = writeFile("embed.qpkg", {bytes.data(), bytes.size()});
  rt::Artifact a = rt::Artifact::load(path);
  const char *base = static_cast<const char *>(a.constant(1)->raw()) -
                     (bytes.size() - V * E * sizeof(float));
  rt::Tensor ids(rt::DType::I64, {1, S});
  for (int64_t i = 0; i < S; ++i)
    ids.data<int64_t>()[i] = (i * 131) % V; // rows all over the table
  auto out = rt::Session(a).run("main", {{"ids", ids}});
  const float *y = out.at("y").data<float>();
  for (int64_t i = 0; i < S; ++i)
    for (int64_t e = 0; e < E; e += 21)
      ASSERT_EQ(y[i * E + e], table[((i * 131) % V) * E + e]) << i << " " << e;
  EXPECT_LE(residentBytes(base), 2 * kPage);
  std::filesystem::remove(path);
}

} // namespace
