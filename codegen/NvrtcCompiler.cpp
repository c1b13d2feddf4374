//===- NvrtcCompiler.cpp - CUDA C++ -> cubin/PTX with NVRTC ---------------===//
//
// Each (source, target) pair is one task: a target is a real architecture
// (cubin) or the virtual one (PTX). Tasks run on a small thread pool; each
// first looks for its content-hash key in the cache directory.
//
// Cache entry (<cacheDir>/nvrtc/<sha256 hex>.{cubin,ptx}):
//   "QCCNVRT1" | payload size (u64, little-endian) | SHA-256 of payload | payload
// Anything that does not check out is a miss and is overwritten. Entries are
// written to a unique temporary file and renamed into place, so concurrent
// qcc processes never see a half-written entry.
//
//===----------------------------------------------------------------------===//
#include "codegen/NvrtcCompiler.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#ifndef QCC_CUDA_INCLUDE_DIR
#define QCC_CUDA_INCLUDE_DIR ""
#endif

namespace qcc::codegen {
namespace {

constexpr char kCacheMagic[8] = {'Q', 'C', 'C', 'N', 'V', 'R', 'T', '1'};
constexpr size_t kCacheHeader = sizeof(kCacheMagic) + 8 + 32;

std::array<uint8_t, 32> sha256(llvm::StringRef data) {
  llvm::SHA256 h;
  h.update(data);
  return h.final();
}

/// One compilation: a source for one target.
struct Task {
  size_t kernel;
  std::string arch;   // -arch= value: "sm_80" or "compute_90"
  std::string target; // as reported: "sm_80" or "ptx"
  bool ptx;
};

struct TaskResult {
  std::string binary;
  std::string error; // non-empty on failure
  bool cached = false;
  double seconds = 0;
};

class Compiler {
public:
  Compiler(const std::vector<KernelSource> &sources,
           const CompileOptions &options)
      : sources(sources), options(options) {
    for (const EmbeddedHeader &h : embeddedHeaders()) {
      headerNames.emplace_back(h.includeName);
      headerContents.emplace_back(h.contents);
    }
    for (const std::string &s : headerNames)
      headerNamePtrs.push_back(s.c_str());
    for (const std::string &s : headerContents)
      headerContentPtrs.push_back(s.c_str());

    includeDir = options.cudaIncludeDir.empty() ? QCC_CUDA_INCLUDE_DIR
                                                : options.cudaIncludeDir;
    if (options.useCache) {
      std::string base =
          options.cacheDir.empty() ? defaultCacheDir() : options.cacheDir;
      if (!base.empty()) {
        llvm::SmallString<256> dir(base);
        llvm::sys::path::append(dir, "nvrtc");
        cacheDir = std::string(dir);
      }
    }
    version = nvrtcVersionString();

    // The part of every key that does not depend on the source or target.
    llvm::SHA256 h;
    addField(h, "qcc-nvrtc-cache-v1");
    addField(h, version);
    for (size_t i = 0; i < headerNames.size(); ++i) {
      addField(h, headerNames[i]);
      addField(h, headerContents[i]);
    }
    auto digest = h.final();
    commonKey.assign(digest.begin(), digest.end());
  }

  llvm::Expected<std::vector<CompiledKernel>> run();

private:
  static void addField(llvm::SHA256 &h, llvm::StringRef s) {
    uint64_t n = s.size();
    uint8_t len[8];
    for (int i = 0; i < 8; ++i)
      len[i] = uint8_t(n >> (8 * i));
    h.update(llvm::ArrayRef<uint8_t>(len, 8));
    h.update(s);
  }

  std::vector<std::string> nvrtcOptions(const Task &t) const {
    std::vector<std::string> opts = {"--std=c++17", "-arch=" + t.arch};
    if (!includeDir.empty())
      opts.push_back("-I" + includeDir);
    if (!options.allowFma)
      opts.push_back("--fmad=false");
    if (options.lineInfo)
      opts.push_back("-lineinfo");
    opts.insert(opts.end(), options.extraOptions.begin(),
                options.extraOptions.end());
    return opts;
  }

  std::string cacheKey(const Task &t,
                       const std::vector<std::string> &opts) const {
    llvm::SHA256 h;
    addField(h, commonKey);
    addField(h, t.ptx ? "ptx" : "cubin");
    addField(h, t.arch);
    addField(h, sources[t.kernel].name);
    addField(h, sources[t.kernel].source);
    for (const std::string &o : opts)
      addField(h, o);
    return llvm::toHex(h.final(), /*LowerCase=*/true);
  }

  std::string cachePath(const std::string &key, bool ptx) const {
    llvm::SmallString<256> p(cacheDir);
    llvm::sys::path::append(p, key + (ptx ? ".ptx" : ".cubin"));
    return std::string(p);
  }

  std::optional<std::string> readCache(const std::string &path) const;
  void writeCache(const std::string &path, llvm::StringRef payload) const;
  TaskResult runTask(const Task &t) const;

  const std::vector<KernelSource> &sources;
  const CompileOptions &options;
  std::vector<std::string> headerNames, headerContents;
  std::vector<const char *> headerNamePtrs, headerContentPtrs;
  std::string includeDir, cacheDir, version, commonKey;
};

std::optional<std::string>
Compiler::readCache(const std::string &path) const {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return std::nullopt;
  llvm::StringRef data = (*buf)->getBuffer();
  if (data.size() < kCacheHeader ||
      std::memcmp(data.data(), kCacheMagic, sizeof(kCacheMagic)) != 0)
    return std::nullopt;
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i)
    size |= uint64_t(uint8_t(data[sizeof(kCacheMagic) + i])) << (8 * i);
  if (size != data.size() - kCacheHeader || size == 0)
    return std::nullopt;
  llvm::StringRef payload = data.drop_front(kCacheHeader);
  auto digest = sha256(payload);
  if (std::memcmp(digest.data(), data.data() + sizeof(kCacheMagic) + 8, 32))
    return std::nullopt;
  return payload.str();
}

void Compiler::writeCache(const std::string &path,
                          llvm::StringRef payload) const {
  if (llvm::sys::fs::create_directories(cacheDir))
    return;
  llvm::SmallString<256> model(cacheDir);
  llvm::sys::path::append(model, "tmp-%%%%%%%%%%%%");
  int fd;
  llvm::SmallString<256> tmp;
  if (llvm::sys::fs::createUniqueFile(model, fd, tmp))
    return;
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os.write(kCacheMagic, sizeof(kCacheMagic));
    uint64_t n = payload.size();
    for (int i = 0; i < 8; ++i)
      os << char(uint8_t(n >> (8 * i)));
    auto digest = sha256(payload);
    os.write(reinterpret_cast<const char *>(digest.data()), digest.size());
    os << payload;
    os.close();
    if (os.has_error()) {
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return;
    }
  }
  if (llvm::sys::fs::rename(tmp, path))
    llvm::sys::fs::remove(tmp);
}

TaskResult Compiler::runTask(const Task &t) const {
  auto start = std::chrono::steady_clock::now();
  TaskResult r;
  const KernelSource &src = sources[t.kernel];
  std::vector<std::string> opts = nvrtcOptions(t);
  std::string path;
  if (!cacheDir.empty()) {
    path = cachePath(cacheKey(t, opts), t.ptx);
    if (auto hit = readCache(path)) {
      r.binary = std::move(*hit);
      r.cached = true;
    }
  }

  if (!r.cached) {
    auto fail = [&](const std::string &log) {
      r.error = "kernel '" + src.name + "' (" + t.arch +
                "): NVRTC error:\n" + log;
    };
    nvrtcProgram prog;
    std::string unitName = src.name + ".cu";
    nvrtcResult res = nvrtcCreateProgram(
        &prog, src.source.c_str(), unitName.c_str(), int(headerNames.size()),
        headerContentPtrs.data(), headerNamePtrs.data());
    if (res != NVRTC_SUCCESS) {
      fail(nvrtcGetErrorString(res));
    } else {
      std::vector<const char *> optPtrs;
      for (const std::string &o : opts)
        optPtrs.push_back(o.c_str());
      res = nvrtcCompileProgram(prog, int(optPtrs.size()), optPtrs.data());
      if (res != NVRTC_SUCCESS) {
        std::string log;
        size_t logSize = 0;
        if (nvrtcGetProgramLogSize(prog, &logSize) == NVRTC_SUCCESS &&
            logSize > 1) {
          log.resize(logSize);
          nvrtcGetProgramLog(prog, log.data());
          while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
            log.pop_back();
        }
        if (log.empty())
          log = nvrtcGetErrorString(res);
        fail(log);
      } else {
        size_t size = 0;
        res = t.ptx ? nvrtcGetPTXSize(prog, &size)
                    : nvrtcGetCUBINSize(prog, &size);
        if (res == NVRTC_SUCCESS) {
          r.binary.resize(size);
          res = t.ptx ? nvrtcGetPTX(prog, r.binary.data())
                      : nvrtcGetCUBIN(prog, r.binary.data());
        }
        if (t.ptx)
          while (!r.binary.empty() && r.binary.back() == '\0')
            r.binary.pop_back();
        if (res != NVRTC_SUCCESS)
          fail(std::string("retrieving the ") + (t.ptx ? "PTX" : "cubin") +
               ": " + nvrtcGetErrorString(res));
        else if (r.binary.empty())
          fail(std::string("NVRTC produced an empty ") +
               (t.ptx ? "PTX" : "cubin"));
      }
      nvrtcDestroyProgram(&prog);
    }
    if (r.error.empty() && !path.empty())
      writeCache(path, r.binary);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            start)
                  .count();
  return r;
}

llvm::Expected<std::vector<CompiledKernel>> Compiler::run() {
  std::vector<Task> tasks;
  for (size_t k = 0; k < sources.size(); ++k) {
    for (const std::string &arch : options.cubinArchs)
      tasks.push_back({k, arch, arch, false});
    if (!options.ptxArch.empty())
      tasks.push_back({k, options.ptxArch, "ptx", true});
  }
  std::vector<std::string> targetNames;
  for (size_t i = 0; i < tasks.size() && tasks[i].kernel == 0; ++i)
    targetNames.push_back(tasks[i].target);

  std::vector<TaskResult> results(tasks.size());
  std::vector<size_t> remaining(sources.size(), targetNames.size());
  size_t done = 0;
  std::mutex mu;
  std::atomic<size_t> next{0};

  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < tasks.size();) {
      TaskResult r = runTask(tasks[i]);
      std::lock_guard<std::mutex> lock(mu);
      results[i] = std::move(r);
      size_t k = tasks[i].kernel;
      if (--remaining[k] != 0)
        continue;
      ++done;
      if (!options.verbose && !options.onProgress)
        continue;
      CompileProgress p;
      p.done = done;
      p.total = sources.size();
      p.name = sources[k].name;
      p.targets = targetNames;
      p.cached = true;
      size_t first = k * targetNames.size();
      for (size_t j = first; j < first + targetNames.size(); ++j) {
        p.cached &= results[j].cached;
        p.failed |= !results[j].error.empty();
        p.seconds += results[j].seconds;
      }
      if (options.verbose)
        llvm::errs() << p.message() << "\n";
      if (options.onProgress)
        options.onProgress(p);
    }
  };

  unsigned jobs = options.jobs ? options.jobs
                               : std::max(1u, std::thread::hardware_concurrency());
  jobs = unsigned(std::min<size_t>(jobs, tasks.size()));
  if (jobs <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (unsigned j = 0; j < jobs; ++j)
      pool.emplace_back(worker);
    for (std::thread &t : pool)
      t.join();
  }

  // One error per failing source: its first failing target, in target order.
  std::string errors;
  std::vector<CompiledKernel> out(sources.size());
  for (size_t k = 0; k < sources.size(); ++k)
    out[k].name = sources[k].name;
  std::vector<bool> failed(sources.size(), false);
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task &t = tasks[i];
    TaskResult &r = results[i];
    if (!r.error.empty()) {
      if (!failed[t.kernel]) {
        failed[t.kernel] = true;
        if (!errors.empty())
          errors += "\n";
        errors += r.error;
      }
      continue;
    }
    if (t.ptx)
      out[t.kernel].ptx = std::move(r.binary);
    else
      out[t.kernel].cubins[t.arch] = std::move(r.binary);
  }
  if (!errors.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), errors);
  return out;
}

} // namespace

std::string CompileProgress::message() const {
  std::string s = "compiled kernel " + std::to_string(done) + "/" +
                  std::to_string(total) + ": " + name + " (";
  for (size_t i = 0; i < targets.size(); ++i)
    s += (i ? ", " : "") + targets[i];
  s += ")";
  if (failed)
    s += " [failed]";
  else if (cached)
    s += " [cached]";
  return s;
}

llvm::Expected<std::vector<CompiledKernel>>
compileKernels(const std::vector<KernelSource> &sources,
               const CompileOptions &options) {
  if (sources.empty())
    return std::vector<CompiledKernel>{};
  if (options.cubinArchs.empty() && options.ptxArch.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "no target architecture to compile for");
  for (const std::string &arch : options.cubinArchs)
    if (!llvm::StringRef(arch).starts_with("sm_"))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "cubin architecture '" + arch + "' is not of the form sm_XX");
  if (!options.ptxArch.empty() &&
      !llvm::StringRef(options.ptxArch).starts_with("compute_"))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "PTX architecture '" + options.ptxArch +
            "' is not of the form compute_XX");
  return Compiler(sources, options).run();
}

const EmbeddedHeader *findEmbeddedHeader(std::string_view includeName) {
  for (const EmbeddedHeader &h : embeddedHeaders())
    if (h.includeName == includeName)
      return &h;
  return nullptr;
}

std::string defaultCacheDir() {
  auto env = [](const char *name) -> std::string {
    const char *v = std::getenv(name);
    return v ? v : "";
  };
  if (std::string d = env("QCC_CACHE_DIR"); !d.empty())
    return d;
  llvm::SmallString<256> p;
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) {
    p = d;
  } else if (std::string home = env("HOME"); !home.empty()) {
    p = home;
    llvm::sys::path::append(p, ".cache");
  } else {
    return "";
  }
  llvm::sys::path::append(p, "qcc");
  return std::string(p);
}

std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
    return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

} // namespace qcc::codegen
