//===- NvrtcCompilerTest.cpp - the NVRTC driver of codegen ----------------===//
//
// Offline compilation only: these tests need the CUDA toolkit, not a GPU.
//
//===----------------------------------------------------------------------===//
#include "codegen/NvrtcCompiler.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

using namespace qcc::codegen;

namespace {

const char *kAddOne = R"(
extern "C" __global__ void add_one(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
)";

// Uses the toolkit's cuda_fp16.h (found through the recorded include dir).
const char *kHalfAxpy = R"(
#include <cuda_fp16.h>
extern "C" __global__ void half_axpy(__half *y, const __half *x, float a,
                                     int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = __float2half(a * __half2float(x[i]) + __half2float(y[i]));
}
)";

const char *kSyntaxError = R"(
extern "C" __global__ void broken(float *x) {
  x[0] = 1.0f +;
}
)";

/// A fresh cache directory, removed at the end of the test.
class TempDir {
public:
  TempDir() {
    std::error_code ec =
        llvm::sys::fs::createUniqueDirectory("qcc-nvrtc-test", path_);
    EXPECT_FALSE(ec) << ec.message();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path_); }
  std::string path() const { return std::string(path_); }

private:
  llvm::SmallString<128> path_;
};

bool isElf(const std::string &bytes) {
  return bytes.size() > 4 && bytes.compare(0, 4, "\x7f"
                                                 "ELF") == 0;
}

std::string errorText(llvm::Error err) {
  std::string s;
  llvm::handleAllErrors(std::move(err), [&](const llvm::ErrorInfoBase &e) {
    s += e.message();
  });
  return s;
}

/// Records the progress reports of one compileKernels call.
struct Progress {
  std::mutex mu;
  std::vector<CompileProgress> reports;
  std::function<void(const CompileProgress &)> callback() {
    return [this](const CompileProgress &p) {
      std::lock_guard<std::mutex> lock(mu);
      reports.push_back(p);
    };
  }
};

std::vector<KernelSource> twoKernels() {
  return {{"add_one", kAddOne}, {"half_axpy", kHalfAxpy}};
}

size_t countOf(const std::string &haystack, const std::string &needle) {
  size_t n = 0;
  for (size_t p = haystack.find(needle); p != std::string::npos;
       p = haystack.find(needle, p + 1))
    ++n;
  return n;
}

} // namespace

TEST(NvrtcCompiler, CompilesCubinsForBothArchsAndPtx) {
  CompileOptions opts;
  opts.useCache = false;
  auto out = compileKernels(twoKernels(), opts);
  ASSERT_TRUE(bool(out)) << errorText(out.takeError());
  ASSERT_EQ(out->size(), 2u);
  const char *names[] = {"add_one", "half_axpy"};
  for (size_t i = 0; i < 2; ++i) {
    const CompiledKernel &k = (*out)[i];
    EXPECT_EQ(k.name, names[i]);
    ASSERT_EQ(k.cubins.size(), 2u);
    EXPECT_TRUE(isElf(k.cubins.at("sm_80"))) << k.name;
    EXPECT_TRUE(isElf(k.cubins.at("sm_90"))) << k.name;
    EXPECT_NE(k.cubins.at("sm_80"), k.cubins.at("sm_90"));
    EXPECT_NE(k.ptx.find(std::string(".entry ") + names[i]), std::string::npos)
        << k.ptx;
    EXPECT_NE(k.ptx.find(".target sm_90"), std::string::npos);
    EXPECT_EQ(k.ptx.find('\0'), std::string::npos);
  }
}

TEST(NvrtcCompiler, SecondCompileHitsTheCache) {
  TempDir cache;
  CompileOptions opts;
  opts.cacheDir = cache.path();
  Progress first, second;

  opts.onProgress = first.callback();
  auto t0 = std::chrono::steady_clock::now();
  auto a = compileKernels(twoKernels(), opts);
  auto t1 = std::chrono::steady_clock::now();
  ASSERT_TRUE(bool(a)) << errorText(a.takeError());

  opts.onProgress = second.callback();
  auto b = compileKernels(twoKernels(), opts);
  auto t2 = std::chrono::steady_clock::now();
  ASSERT_TRUE(bool(b)) << errorText(b.takeError());

  ASSERT_EQ(first.reports.size(), 2u);
  ASSERT_EQ(second.reports.size(), 2u);
  for (const CompileProgress &p : first.reports) {
    EXPECT_FALSE(p.cached) << p.message();
    EXPECT_EQ(p.message().find("[cached]"), std::string::npos);
  }
  for (const CompileProgress &p : second.reports) {
    EXPECT_TRUE(p.cached) << p.message();
    EXPECT_NE(p.message().find("(sm_80, sm_90, ptx) [cached]"),
              std::string::npos)
        << p.message();
  }
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*a)[i].cubins, (*b)[i].cubins);
    EXPECT_EQ((*a)[i].ptx, (*b)[i].ptx);
  }
  double cold = std::chrono::duration<double>(t1 - t0).count();
  double warm = std::chrono::duration<double>(t2 - t1).count();
  EXPECT_LT(warm * 10, cold) << "cold " << cold << " s, cached " << warm << " s";
  std::printf("[ timing ] 2 kernels x 3 targets: cold %.1f ms, cached %.2f ms\n",
              cold * 1e3, warm * 1e3);

  // Another option is another key.
  opts.extraOptions = {"-DQCC_TEST_VARIANT=1"};
  Progress third;
  opts.onProgress = third.callback();
  auto c = compileKernels(twoKernels(), opts);
  ASSERT_TRUE(bool(c)) << errorText(c.takeError());
  for (const CompileProgress &p : third.reports)
    EXPECT_FALSE(p.cached) << p.message();
}

TEST(NvrtcCompiler, CorruptedCacheEntriesAreIgnoredAndRewritten) {
  TempDir cache;
  CompileOptions opts;
  opts.cacheDir = cache.path();
  opts.cubinArchs = {"sm_80"};
  std::vector<KernelSource> src = {{"add_one", kAddOne}};
  auto a = compileKernels(src, opts);
  ASSERT_TRUE(bool(a)) << errorText(a.takeError());

  // Damage every entry differently: garbage, truncation, one flipped byte.
  llvm::SmallString<128> dir(cache.path());
  llvm::sys::path::append(dir, "nvrtc");
  std::error_code ec;
  int n = 0;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec), ++n) {
    auto buf = llvm::MemoryBuffer::getFile(it->path());
    ASSERT_TRUE(bool(buf));
    std::string bytes = (*buf)->getBuffer().str();
    if (n == 0)
      bytes = "not a cache entry";
    else
      bytes[bytes.size() / 2] ^= 0x5a;
    llvm::raw_fd_ostream os(it->path(), ec);
    ASSERT_FALSE(ec);
    os << bytes;
  }
  EXPECT_EQ(n, 2); // one cubin, one PTX

  Progress second, third;
  opts.onProgress = second.callback();
  auto b = compileKernels(src, opts);
  ASSERT_TRUE(bool(b)) << errorText(b.takeError());
  ASSERT_EQ(second.reports.size(), 1u);
  EXPECT_FALSE(second.reports[0].cached);
  EXPECT_EQ((*a)[0].cubins, (*b)[0].cubins);
  EXPECT_EQ((*a)[0].ptx, (*b)[0].ptx);

  opts.onProgress = third.callback();
  auto c = compileKernels(src, opts);
  ASSERT_TRUE(bool(c)) << errorText(c.takeError());
  ASSERT_EQ(third.reports.size(), 1u);
  EXPECT_TRUE(third.reports[0].cached);
  EXPECT_EQ((*a)[0].cubins, (*c)[0].cubins);
}

TEST(NvrtcCompiler, SyntaxErrorNamesTheKernelOnce) {
  CompileOptions opts;
  opts.useCache = false;
  Progress progress;
  opts.onProgress = progress.callback();
  auto out = compileKernels(
      {{"add_one", kAddOne}, {"broken_kernel", kSyntaxError}}, opts);
  ASSERT_FALSE(bool(out));
  ASSERT_EQ(progress.reports.size(), 2u);
  for (const CompileProgress &p : progress.reports)
    EXPECT_EQ(p.failed, p.name == "broken_kernel") << p.message();
  std::string msg = errorText(out.takeError());
  EXPECT_EQ(msg.rfind("kernel 'broken_kernel' (sm_80): NVRTC error:\n", 0), 0u)
      << msg;
  EXPECT_EQ(countOf(msg, "kernel '"), 1u) << msg;
  // NVRTC's log: the unit name, the line, the diagnostic.
  EXPECT_NE(msg.find("broken_kernel.cu(3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("error"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("add_one"), std::string::npos) << msg;
}

TEST(NvrtcCompiler, ParallelCompileKeepsInputOrder) {
  std::vector<KernelSource> src;
  for (int i = 0; i < 8; ++i) {
    std::string name = "k" + std::to_string(i);
    std::string body;
    // Uneven sizes, so that units finish out of order.
    for (int j = 0; j < (8 - i) * 4; ++j)
      body += "  v = v * " + std::to_string(j + 2) + ".5f + x[(i + " +
              std::to_string(j) + ") % n];\n";
    src.push_back({name, "extern \"C\" __global__ void " + name +
                             "(float *x, int n) {\n"
                             "  int i = threadIdx.x; float v = " +
                             std::to_string(i) + ";\n" + body +
                             "  x[i] = v;\n}\n"});
  }
  CompileOptions opts;
  opts.useCache = false;
  opts.jobs = 4;
  opts.cubinArchs = {"sm_80"};
  Progress progress;
  opts.onProgress = progress.callback();
  auto out = compileKernels(src, opts);
  ASSERT_TRUE(bool(out)) << errorText(out.takeError());
  ASSERT_EQ(out->size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const CompiledKernel &k = (*out)[i];
    std::string name = "k" + std::to_string(i);
    EXPECT_EQ(k.name, name);
    EXPECT_TRUE(isElf(k.cubins.at("sm_80")));
    EXPECT_NE(k.ptx.find(".entry " + name + "("), std::string::npos) << i;
  }
  ASSERT_EQ(progress.reports.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(progress.reports[i].done, i + 1);
    EXPECT_EQ(progress.reports[i].total, 8u);
    EXPECT_EQ(progress.reports[i].targets,
              (std::vector<std::string>{"sm_80", "ptx"}));
  }
}

TEST(NvrtcCompiler, EmbeddedHeadersAreIncludable) {
  for (const EmbeddedHeader &h : embeddedHeaders()) {
    EXPECT_TRUE(h.includeName.starts_with("qcc/")) << h.includeName;
    EXPECT_TRUE(h.includeName.ends_with(".cuh") ||
                h.includeName.ends_with(".h"))
        << h.includeName;
    EXPECT_FALSE(h.contents.empty()) << h.includeName;
  }
  // The helper header includes numerics.h (plain C++, also embedded).
  ASSERT_TRUE(findEmbeddedHeader("qcc/common.cuh"));
  ASSERT_TRUE(findEmbeddedHeader("qcc/numerics.h"));
  CompileOptions opts;
  opts.useCache = false;
  opts.cubinArchs = {"sm_80", "sm_90"};
  opts.ptxArch = "";
  auto out = compileKernels({{"uses_common", R"(
#include "qcc/common.cuh"
extern "C" __global__ void uses_common(float *x) {
  x[0] = qcc::warpSum(qcc::numerics::geluTanh(x[0]));
}
)"}},
                            opts);
  ASSERT_TRUE(bool(out)) << errorText(out.takeError());
  EXPECT_TRUE(isElf((*out)[0].cubins.at("sm_80")));
  EXPECT_TRUE(isElf((*out)[0].cubins.at("sm_90")));
  EXPECT_TRUE((*out)[0].ptx.empty());
}

TEST(NvrtcCompiler, RejectsBadArchitectureNames) {
  CompileOptions opts;
  opts.useCache = false;
  opts.cubinArchs = {"compute_80"};
  auto out = compileKernels(twoKernels(), opts);
  ASSERT_FALSE(bool(out));
  EXPECT_NE(errorText(out.takeError()).find("compute_80"), std::string::npos);
}

TEST(NvrtcCompiler, DefaultCacheDirFollowsTheEnvironment) {
  auto saved = [](const char *n) {
    const char *v = std::getenv(n);
    return std::make_pair(v != nullptr, std::string(v ? v : ""));
  };
  auto qcc = saved("QCC_CACHE_DIR"), xdg = saved("XDG_CACHE_HOME"),
       home = saved("HOME");
  setenv("QCC_CACHE_DIR", "/tmp/a", 1);
  setenv("XDG_CACHE_HOME", "/tmp/b", 1);
  setenv("HOME", "/tmp/c", 1);
  EXPECT_EQ(defaultCacheDir(), "/tmp/a");
  unsetenv("QCC_CACHE_DIR");
  EXPECT_EQ(defaultCacheDir(), "/tmp/b/qcc");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(defaultCacheDir(), "/tmp/c/.cache/qcc");
  auto restore = [](const char *n, const std::pair<bool, std::string> &v) {
    if (v.first)
      setenv(n, v.second.c_str(), 1);
    else
      unsetenv(n);
  };
  restore("QCC_CACHE_DIR", qcc);
  restore("XDG_CACHE_HOME", xdg);
  restore("HOME", home);
}
