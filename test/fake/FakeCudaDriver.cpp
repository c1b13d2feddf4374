//===- FakeCudaDriver.cpp - a libcuda stand-in that checks, not computes --===//
//
// Loaded by the runtime through QCC_CUDA_DRIVER (tests only). It implements
// the driver calls the CUDA backend makes on host memory and runs no kernel,
// so results are meaningless; what it checks is how the backend drives a
// GPU, which no test could otherwise see on a machine without one:
//   - every copy and memset lies inside one live allocation;
//   - every freed pointer was allocated, none of 0 bytes, and nothing is
//     leaked at exit;
//   - modules are cubins (ELF) or PTX, and every kernel the backend looks up
//     is defined in its module (symbol names appear in the image);
//   - launches have 1..1024 threads, grid y/z <= 65535, and dynamic shared
//     memory within 48 KB unless the kernel was opted in (<= 227 KB);
//   - for cubins, every 8-byte kernel parameter (its sizes come from the
//     kernel's .nv.info section) is null, a small integer, or a pointer into
//     a live allocation (no use after free, no stray pointers);
//   - nothing allocates or copies to or from the host while a graph is
//     being captured;
//   - streams are ordered as on a GPU, where they run concurrently: every
//     operation on a stream (copy, memset, launch) that touches an
//     allocation another stream touched must be ordered after it by an
//     event (cuEventRecord there, cuStreamWaitEvent here) or issued after
//     the host synchronized with it, and nothing is
//     freed (device or pinned host memory) while an operation that touches
//     it may still run, unless the host synchronized with it (the stream,
//     or an event recorded after it). Each stream keeps a vector clock of
//     the operations it is ordered after; the host keeps one too.
// A violation prints "fake-cuda: VIOLATION: ..." and fails the call
// (CUDA_ERROR_INVALID_VALUE, 1); at exit it prints one line of statistics.
// FAKE_CUDA_ARCH=80|90|100 sets the compute capability (default 90).
// FAKE_CUDA_MEMORY=BYTES sets the device's memory (default 8 GiB): an
// allocation past it fails with CUDA_ERROR_OUT_OF_MEMORY, as a real one.
// FAKE_CUDA_TRACE=FILE appends one line per launch (kernel, grid, block,
// shared memory, and for cubins every parameter: "p" for a pointer into an
// allocation, else its value), so two builds' launches can be diffed.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaDriver.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

// The runtime's declarations of the driver's types (runtime/cuda/CudaDriver.h):
// the runtime calls these functions through pointers of exactly those types
// (UBSan's -fsanitize=function checks it in the sanitizer build).
using Api = qcc::rt::CudaApi;
using CUdeviceptr = Api::CUdeviceptr;
using CUcontext = Api::CUcontext;
using CUmodule = Api::CUmodule;
using CUfunction = Api::CUfunction;
using CUstream = Api::CUstream;
using CUevent = Api::CUevent;
using CUgraph = Api::CUgraph;
using CUgraphExec = Api::CUgraphExec;

struct Module {
  std::string image;
  bool elf = false;
};
struct Function {
  std::string name;
  int maxDynamicShared = 48 * 1024;
  std::vector<int> paramSizes; // by ordinal; empty: unknown (PTX)
};

/// Parameter sizes of `kernel` from a cubin's ".nv.info.<kernel>" section
/// (EIATTR_KPARAM_INFO records: ordinal at +6, size in bits 18..31 of +8).
std::vector<int> paramSizes(const std::string &elf, const std::string &kernel) {
  std::vector<int> sizes;
  auto u16 = [&](size_t o) {
    uint16_t v;
    std::memcpy(&v, elf.data() + o, 2);
    return v;
  };
  auto u32 = [&](size_t o) {
    uint32_t v;
    std::memcpy(&v, elf.data() + o, 4);
    return v;
  };
  auto u64 = [&](size_t o) {
    uint64_t v;
    std::memcpy(&v, elf.data() + o, 8);
    return v;
  };
  uint64_t shoff = u64(0x28);
  uint16_t shentsize = u16(0x3a), shnum = u16(0x3c), shstrndx = u16(0x3e);
  uint64_t strOff = u64(shoff + shstrndx * shentsize + 0x18);
  std::string want = ".nv.info." + kernel;
  for (uint16_t i = 0; i < shnum; ++i) {
    uint64_t sh = shoff + (uint64_t)i * shentsize;
    const char *name = elf.data() + strOff + u32(sh);
    if (want != name)
      continue;
    uint64_t off = u64(sh + 0x18), size = u64(sh + 0x20);
    for (uint64_t at = off; at + 4 <= off + size;) {
      uint8_t format = elf[at], attr = elf[at + 1];
      uint64_t len = format == 4 ? 4 + u16(at + 2) : 4;
      if (format == 4 && attr == 0x17 && len >= 16) { // EIATTR_KPARAM_INFO
        int ordinal = u16(at + 4 + 4);
        int bytes = (int)((u32(at + 4 + 8) >> 18) & 0x3fff);
        if ((int)sizes.size() <= ordinal)
          sizes.resize(ordinal + 1, 0);
        sizes[ordinal] = bytes;
      }
      at += len;
    }
  }
  return sizes;
}

/// A vector clock: for each stream, the last of its operations known to be
/// done (by the owner of the clock: a stream, an event, the host).
struct Clock {
  std::map<const void *, long> at;
  long of(const void *stream) const {
    auto it = at.find(stream);
    return it == at.end() ? 0 : it->second;
  }
  void join(const Clock &o) {
    for (auto [s, n] : o.at)
      at[s] = std::max(at[s], n);
  }
};
struct Stream {
  long ops = 0;  // operations issued on it
  Clock after;   // what its next operation is ordered after (besides its own)
  Clock now() const {
    Clock c = after;
    c.at[this] = ops;
    return c;
  }
};
struct Event {
  Clock clock; // the stream's position where it was last recorded
};

struct State {
  std::map<CUdeviceptr, size_t> live; // base -> bytes
  size_t bytes = 0, peak = 0, allocations = 0;
  long launches = 0, captured = 0, replays = 0, graphs = 0, violations = 0;
  long pointers = 0; // 8-byte kernel parameters checked
  long modules = 0;  // loaded and not unloaded
  bool capturing = false;
  long capturedLaunches = 0;
  long programmatic = 0; // launches with programmatic stream serialization
  // Ordering between streams (see the header): operations per stream, who
  // last touched each allocation when, what the host has waited for.
  Clock host;
  std::map<uintptr_t, Clock> touched; // allocation base -> stream -> op
  std::map<uintptr_t, size_t> pinned; // pinned host allocations
  long streams = 0, crossStreamWaits = 0, pinnedCopies = 0;
  long expected = 0; // violations a test made on purpose
  ~State() {
    std::fprintf(stderr,
                 "fake-cuda: %zu allocations (peak %zu bytes), %ld launches, "
                 "%ld graphs captured (%ld launches), %ld replays, %ld "
                 "pointer parameters checked, %zu leaked, %ld modules "
                 "leaked, %ld violations%s, %ld programmatic launches, %ld "
                 "streams, %ld cross-stream waits, %ld copies from pinned "
                 "memory, %zu pinned leaked\n",
                 allocations, peak, launches, graphs, captured, replays,
                 pointers, live.size(), modules, violations,
                 expected ? (" (" + std::to_string(expected) +
                             " of them made on purpose by a test)")
                                .c_str()
                          : "",
                 programmatic,
                 streams, crossStreamWaits, pinnedCopies, pinned.size());
  }
};
State &state() {
  static State s;
  return s;
}

int violation(const std::string &what) {
  std::fprintf(stderr, "fake-cuda: VIOLATION: %s\n", what.c_str());
  ++state().violations;
  return 1; // CUDA_ERROR_INVALID_VALUE
}

bool inside(CUdeviceptr p, size_t n) {
  auto &live = state().live;
  auto it = live.upper_bound(p);
  if (it == live.begin())
    return false;
  --it;
  return p >= it->first && p + n <= it->first + it->second;
}

int checkRange(CUdeviceptr p, size_t n, const char *what) {
  if (n && !inside(p, n))
    return violation(std::string(what) + ": " + std::to_string(n) +
                     " bytes at 0x" + std::to_string(p) +
                     " are not inside one allocation");
  return 0;
}

Stream &streamOf(CUstream s) { return *reinterpret_cast<Stream *>(s); }

/// The base of the allocation (device, or pinned host) holding `p`, or 0.
template <typename Base>
uintptr_t baseOf(uintptr_t p, const std::map<Base, size_t> &allocations) {
  auto it = allocations.upper_bound((Base)p);
  if (it == allocations.begin())
    return 0;
  --it;
  return p < it->first + it->second ? it->first : 0;
}

/// One operation on `stream` touching the allocations holding `pointers`:
/// each must be ordered after every other stream's operations on it.
int touch(CUstream stream, const std::vector<uintptr_t> &pointers,
          const std::string &what) {
  State &st = state();
  if (!stream)
    return violation(what + " on the null stream");
  Stream &s = streamOf(stream);
  long op = ++s.ops;
  for (uintptr_t p : pointers) {
    uintptr_t base = baseOf(p, st.live);
    if (!base)
      base = baseOf(p, st.pinned);
    if (!base)
      continue; // pageable host memory, or checked elsewhere
    Clock &last = st.touched[base];
    // Ordered by an event, or done before the host issued this operation.
    for (auto [other, n] : last.at)
      if (other != &s && s.after.of(other) < n && st.host.of(other) < n)
        return violation(what + " touches an allocation that another "
                                "stream's operation may still be using: no "
                                "event orders them");
    last.at[&s] = op;
  }
  return 0;
}

/// Freeing `base`: every operation that touched it must be done as far as
/// the host knows.
int checkFree(uintptr_t base, const char *what) {
  State &st = state();
  auto it = st.touched.find(base);
  if (it == st.touched.end())
    return 0;
  for (auto [stream, n] : it->second.at)
    if (st.host.of(stream) < n)
      return violation(std::string(what) +
                       " of memory that a stream's operation may still be "
                       "using: the host has not synchronized with it");
  st.touched.erase(it);
  return 0;
}

int arch() {
  const char *a = std::getenv("FAKE_CUDA_ARCH");
  return a ? std::atoi(a) : 90;
}

} // namespace

extern "C" {

/// For tests that drive the stand-in directly (CudaContextTest): the
/// violations so far, and a count of those made on purpose (said at exit).
long fake_cuda_violations() { return state().violations; }
void fake_cuda_expected_violations(long n) { state().expected += n; }

int cuInit(unsigned) { return 0; }
int cuDriverGetVersion(int *v) {
  *v = 13000;
  return 0;
}
int cuDeviceGetCount(int *n) {
  *n = 1;
  return 0;
}
int cuDeviceGet(int *d, int i) {
  *d = i;
  return 0;
}
int cuDeviceGetName(char *buf, int len, int) {
  std::snprintf(buf, len, "qcc fake GPU (runs no kernels)");
  return 0;
}
int cuDeviceGetAttribute(int *v, int attr, int) {
  *v = attr == 75 ? arch() / 10 : attr == 76 ? arch() % 10 : 0;
  return 0;
}
int cuDeviceTotalMem_v2(size_t *b, int) {
  *b = size_t(8) << 30;
  return 0;
}
int cuGetErrorString(int e, const char **s) {
  *s = e == 2 ? "out of memory" : e == 900 ? "operation not permitted when "
                                             "stream is capturing"
                                           : "fake error";
  return 0;
}
int cuGetErrorName(int e, const char **s) {
  *s = e == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : e == 500 ? "CUDA_ERROR_NOT_FOUND"
                                                      : "CUDA_ERROR_INVALID_VALUE";
  return 0;
}
int cuDevicePrimaryCtxRetain(CUcontext *c, int) {
  static int ctx;
  *c = reinterpret_cast<CUcontext>(&ctx);
  return 0;
}
int cuDevicePrimaryCtxRelease_v2(int) { return 0; }
int cuCtxSetCurrent(CUcontext) { return 0; }
int cuStreamCreate(CUstream *s, unsigned) {
  *s = reinterpret_cast<CUstream>(new Stream);
  ++state().streams;
  return 0;
}
int cuStreamDestroy_v2(CUstream s) {
  // The driver lets queued work finish: the host may free what it touched.
  state().host.join(streamOf(s).now());
  delete &streamOf(s);
  return 0;
}
int cuStreamSynchronize(CUstream s) {
  if (state().capturing)
    return violation("stream synchronized during graph capture");
  state().host.join(streamOf(s).now());
  return 0;
}
int cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
  if (flags != 0)
    return violation("cuStreamWaitEvent with flags");
  Stream &st = streamOf(s);
  const Clock &c = reinterpret_cast<Event *>(e)->clock;
  for (auto [other, n] : c.at)
    if (other != &st && n > st.after.of(other))
      ++state().crossStreamWaits;
  st.after.join(c);
  return 0;
}

/// The device's memory: FAKE_CUDA_MEMORY, else 8 GiB.
size_t deviceMemory() {
  static const size_t bytes = [] {
    const char *m = std::getenv("FAKE_CUDA_MEMORY");
    size_t set = m ? (size_t)std::strtoull(m, nullptr, 10) : 0;
    return set ? set : size_t(8) << 30;
  }();
  return bytes;
}

int cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
  State &s = state();
  if (s.capturing)
    return violation("cuMemAlloc during graph capture");
  if (n == 0) // the driver's CUDA_ERROR_INVALID_VALUE
    return violation("cuMemAlloc of 0 bytes");
  if (n > deviceMemory() - std::min(deviceMemory(), s.bytes))
    return 2; // CUDA_ERROR_OUT_OF_MEMORY
  void *m = std::calloc(1, n);
  if (!m)
    return 2;
  *p = (CUdeviceptr)(uintptr_t)m;
  s.live[*p] = n;
  s.bytes += n;
  s.peak = std::max(s.peak, s.bytes);
  ++s.allocations;
  return 0;
}
int cuMemFree_v2(CUdeviceptr p) {
  State &s = state();
  auto it = s.live.find(p);
  if (it == s.live.end())
    return violation("cuMemFree of a pointer that is not an allocation");
  if (int r = checkFree(p, "cuMemFree"))
    return r;
  s.bytes -= it->second;
  s.live.erase(it);
  std::free((void *)(uintptr_t)p);
  return 0;
}
int cuMemAllocHost_v2(void **p, size_t n) {
  if (state().capturing)
    return violation("cuMemAllocHost during graph capture");
  if (n == 0)
    return violation("cuMemAllocHost of 0 bytes");
  *p = std::malloc(n);
  if (!*p)
    return 2;
  state().pinned[(uintptr_t)*p] = n;
  return 0;
}
int cuMemFreeHost(void *p) {
  auto &pinned = state().pinned;
  auto it = pinned.find((uintptr_t)p);
  if (it == pinned.end())
    return violation("cuMemFreeHost of a pointer that is not pinned memory");
  if (int r = checkFree(it->first, "cuMemFreeHost"))
    return r;
  pinned.erase(it);
  std::free(p);
  return 0;
}
int cuMemGetInfo_v2(size_t *free, size_t *total) {
  *total = deviceMemory();
  *free = *total - std::min(*total, state().bytes);
  return 0;
}
int cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, CUstream s) {
  if (state().capturing)
    return violation("host-to-device copy during graph capture");
  if (int r = checkRange(d, n, "cuMemcpyHtoD"))
    return r;
  if (uintptr_t base = baseOf((uintptr_t)h, state().pinned)) {
    if ((uintptr_t)h + n > base + state().pinned.at(base))
      return violation("cuMemcpyHtoD: source runs past its pinned allocation");
    ++state().pinnedCopies;
  }
  if (int r = touch(s, {(uintptr_t)d, (uintptr_t)h}, "cuMemcpyHtoD"))
    return r;
  std::memcpy((void *)(uintptr_t)d, h, n);
  return 0;
}
int cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, CUstream s) {
  if (state().capturing)
    return violation("device-to-host copy during graph capture");
  if (int r = checkRange(d, n, "cuMemcpyDtoH"))
    return r;
  if (int r = touch(s, {(uintptr_t)d, (uintptr_t)h}, "cuMemcpyDtoH"))
    return r;
  std::memcpy(h, (void *)(uintptr_t)d, n);
  return 0;
}
int cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n,
                         CUstream stream) {
  if (int r = checkRange(d, n, "cuMemcpyDtoD destination"))
    return r;
  if (int r = checkRange(s, n, "cuMemcpyDtoD source"))
    return r;
  if (int r = touch(stream, {(uintptr_t)d, (uintptr_t)s}, "cuMemcpyDtoD"))
    return r;
  if (!state().capturing)
    std::memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n);
  return 0;
}
int cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  if (int r = checkRange(d, n, "cuMemsetD8"))
    return r;
  if (int r = touch(s, {(uintptr_t)d}, "cuMemsetD8"))
    return r;
  if (!state().capturing)
    std::memset((void *)(uintptr_t)d, v, n);
  return 0;
}
using Memcpy2D = Api::Memcpy2D; // the runtime's copy of the ABI
int cuMemcpy2DAsync_v2(const Memcpy2D *c, CUstream s) {
  if (c->srcMemoryType != 2 || c->dstMemoryType != 2)
    return violation("cuMemcpy2D other than device to device");
  if (int r = touch(s, {(uintptr_t)(c->srcDevice + c->srcXInBytes + c->srcY * c->srcPitch),
                        (uintptr_t)(c->dstDevice + c->dstXInBytes + c->dstY * c->dstPitch)},
                    "cuMemcpy2D"))
    return r;
  if (c->WidthInBytes > c->srcPitch || c->WidthInBytes > c->dstPitch)
    return violation("cuMemcpy2D width larger than a pitch");
  for (size_t row = 0; row < c->Height; ++row) {
    CUdeviceptr s = c->srcDevice + c->srcXInBytes + (c->srcY + row) * c->srcPitch;
    CUdeviceptr d = c->dstDevice + c->dstXInBytes + (c->dstY + row) * c->dstPitch;
    if (int r = checkRange(s, c->WidthInBytes, "cuMemcpy2D source row"))
      return r;
    if (int r = checkRange(d, c->WidthInBytes, "cuMemcpy2D destination row"))
      return r;
    if (!state().capturing)
      std::memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s,
                   c->WidthInBytes);
  }
  return 0;
}

int cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned, int *, void **) {
  const char *p = static_cast<const char *>(image);
  std::string bytes;
  bool elf = false;
  if (std::memcmp(p, "\x7f" "ELF", 4) == 0) {
    // ELF64: the section header table ends the file.
    uint64_t shoff;
    uint16_t shentsize, shnum;
    std::memcpy(&shoff, p + 0x28, 8);
    std::memcpy(&shentsize, p + 0x3a, 2);
    std::memcpy(&shnum, p + 0x3c, 2);
    bytes.assign(p, shoff + (uint64_t)shentsize * shnum);
    elf = true;
  } else if (std::strstr(p, ".target") && std::strstr(p, ".entry")) {
    bytes.assign(p);
  } else {
    return violation("module image is neither a cubin nor PTX");
  }
  *m = reinterpret_cast<CUmodule>(new Module{bytes, elf});
  ++state().modules;
  return 0;
}
int cuModuleUnload(CUmodule m) {
  delete reinterpret_cast<Module *>(m);
  --state().modules;
  return 0;
}
int cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  const std::string &img = reinterpret_cast<Module *>(m)->image;
  std::string sym = std::string(name);
  // A defined kernel's name appears NUL-terminated (cubin string tables) or
  // as ".entry name" (PTX).
  if (img.find(sym + '\0') == std::string::npos &&
      img.find(".entry " + sym) == std::string::npos)
    return 500; // CUDA_ERROR_NOT_FOUND
  Module *mod = reinterpret_cast<Module *>(m);
  *f = reinterpret_cast<CUfunction>(
      new Function{sym, 48 * 1024,
                   mod->elf ? paramSizes(img, sym) : std::vector<int>()});
  return 0;
}
int cuFuncSetAttribute(CUfunction f, int attr, int value) {
  if (attr == 8) {
    if (value > 227 * 1024)
      return violation("kernel " + reinterpret_cast<Function *>(f)->name +
                       " asks for " + std::to_string(value) +
                       " bytes of shared memory");
    reinterpret_cast<Function *>(f)->maxDynamicShared = value;
  }
  return 0;
}
int cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned smem, CUstream stream,
                   void **args, void **extra) {
  Function *fn = reinterpret_cast<Function *>(f);
  if (!fn || !args || extra)
    return violation("launch without a function or arguments");
  if (gx == 0 || gy == 0 || gz == 0 || gy > 65535 || gz > 65535 ||
      gx > 2147483647u)
    return violation("kernel " + fn->name + ": grid " + std::to_string(gx) +
                     "x" + std::to_string(gy) + "x" + std::to_string(gz));
  if (bx * by * bz == 0 || bx * by * bz > 1024)
    return violation("kernel " + fn->name + ": block of " +
                     std::to_string(bx * by * bz) + " threads");
  if ((int)smem > fn->maxDynamicShared)
    return violation("kernel " + fn->name + ": " + std::to_string(smem) +
                     " bytes of dynamic shared memory without opting in");
  std::vector<uintptr_t> pointers;
  for (size_t i = 0; i < fn->paramSizes.size(); ++i) {
    if (fn->paramSizes[i] != 8)
      continue;
    uint64_t v;
    std::memcpy(&v, args[i], 8);
    ++state().pointers;
    if (v >= (uint64_t(1) << 32) && !inside(v, 1))
      return violation("kernel " + fn->name + ": parameter " +
                       std::to_string(i) +
                       " points into no live allocation");
    if (v >= (uint64_t(1) << 32))
      pointers.push_back((uintptr_t)v);
  }
  if (int r = touch(stream, pointers, "kernel " + fn->name))
    return r;
  if (const char *trace = std::getenv("FAKE_CUDA_TRACE")) {
    // Built with snprintf and appends: gcc 12's -Wrestrict misreads a
    // chain of std::string operator+ here (GCC bug 105329).
    char head[160];
    std::snprintf(head, sizeof head,
                  " grid %u,%u,%u block %u,%u,%u smem %u params", gx, gy, gz,
                  bx, by, bz, smem);
    std::string line = fn->name;
    line += head;
    for (size_t i = 0; i < fn->paramSizes.size(); ++i) {
      uint64_t v = 0;
      std::memcpy(&v, args[i], fn->paramSizes[i] == 8 ? 8 : 4);
      line += ' ';
      if (fn->paramSizes[i] == 8 && v >= (uint64_t(1) << 32) && inside(v, 1))
        line += 'p';
      else
        line += std::to_string(v);
    }
    if (FILE *f = std::fopen(trace, "a")) {
      std::fprintf(f, "%s%s\n", state().capturing ? "[captured] " : "",
                   line.c_str());
      std::fclose(f);
    }
  }
  State &s = state();
  if (s.capturing)
    ++s.capturedLaunches;
  else
    ++s.launches;
  return 0;
}
// Only programmatic stream serialization (id 6), and only where the real
// driver has it (sm_90+).
// The runtime's copy of cuda.h's CUlaunchConfig (the function's type must be
// the one the runtime calls it through: UBSan checks).
using LaunchConfig = Api::LaunchConfig;
int cuLaunchKernelEx(const LaunchConfig *c, CUfunction f, void **args,
                     void **extra) {
  if (!c || (c->numAttrs && !c->attrs) || c->numAttrs > 8)
    return violation("cuLaunchKernelEx without a valid configuration");
  bool programmatic = false;
  for (unsigned i = 0; i < c->numAttrs; ++i) {
    const int value = c->attrs[i].value.programmaticStreamSerializationAllowed;
    if (c->attrs[i].id != Api::kLaunchAttrProgrammaticSerialization ||
        (value != 0 && value != 1))
      return violation("cuLaunchKernelEx: launch attribute " +
                       std::to_string(c->attrs[i].id) + " (value " +
                       std::to_string(value) +
                       ") is not programmatic stream serialization");
    programmatic = value == 1;
  }
  if (programmatic && arch() < 90)
    return violation("programmatic dependent launch on sm_" +
                     std::to_string(arch()));
  int r = cuLaunchKernel(f, c->gridDimX, c->gridDimY, c->gridDimZ,
                         c->blockDimX, c->blockDimY, c->blockDimZ,
                         c->sharedMemBytes, c->hStream, args, extra);
  if (r == 0 && programmatic)
    ++state().programmatic;
  return r;
}

int cuStreamBeginCapture_v2(CUstream, int) {
  if (state().capturing)
    return violation("nested graph capture");
  state().capturing = true;
  state().capturedLaunches = 0;
  return 0;
}
int cuStreamEndCapture(CUstream, CUgraph *g) {
  if (!state().capturing)
    return violation("end of a capture that did not begin");
  state().capturing = false;
  *g = reinterpret_cast<CUgraph>(new long(state().capturedLaunches));
  state().captured += state().capturedLaunches;
  ++state().graphs;
  return 0;
}
int cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g,
                                unsigned long long) {
  *exec = reinterpret_cast<CUgraphExec>(new long(*reinterpret_cast<long *>(g)));
  return 0;
}
int cuGraphLaunch(CUgraphExec exec, CUstream s) {
  if (!exec)
    return violation("launch of a null graph");
  ++streamOf(s).ops; // the buffers it touches are not tracked
  ++state().replays;
  return 0;
}
int cuGraphExecDestroy(CUgraphExec exec) {
  delete reinterpret_cast<long *>(exec);
  return 0;
}
int cuGraphDestroy(CUgraph g) {
  delete reinterpret_cast<long *>(g);
  return 0;
}
int cuEventCreate(CUevent *e, unsigned) {
  *e = reinterpret_cast<CUevent>(new Event);
  return 0;
}
int cuEventRecord(CUevent e, CUstream s) {
  reinterpret_cast<Event *>(e)->clock = streamOf(s).now();
  return 0;
}
int cuEventSynchronize(CUevent e) {
  state().host.join(reinterpret_cast<Event *>(e)->clock);
  return 0;
}
// Every event pair is 0.25 ms apart, so that timings built on events
// (qrun --profile) are predictable: a row's time is 0.25 ms per call.
int cuEventElapsedTime_v2(float *ms, CUevent, CUevent) {
  *ms = 0.25f;
  return 0;
}
int cuEventDestroy_v2(CUevent e) {
  delete reinterpret_cast<Event *>(e);
  return 0;
}

} // extern "C"
