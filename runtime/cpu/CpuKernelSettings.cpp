//===- CpuKernelSettings.cpp - process-wide CPU settings ------------------===//
//
// The CPU threads (OpenMP, OpenBLAS, the chunk pool), the kernel path
// (QCC_CPU_KERNELS), and what the CPU allows.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuKernelsInternal.h"

#include <cblas.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string_view>

using namespace qcc::rt;

using namespace qcc::rt::cpukernels;

int qcc::rt::affinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  return std::max(1, omp_get_num_procs());
}

static std::atomic<int> gCpuThreads{0};
static std::once_flag gCpuThreadsOnce;

void qcc::rt::setCpuThreads(int threads) {
  if (threads <= 0)
    threads = affinityCpus();
  // Activations up to 64 MiB from the heap, and freed memory kept up to
  // 256 MiB: glibc's defaults return them to the kernel, and each forward
  // pass then paid page faults and kernel zeroing for every fresh tensor
  // (measured: 18-22% of SmolLM2's float prefill at 512 tokens).
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
  openblas_set_num_threads(1);
  omp_set_num_threads(threads);
  gCpuThreads = threads;
}

int qcc::rt::cpuThreads() {
  std::call_once(gCpuThreadsOnce, [] {
    if (gCpuThreads == 0) // OMP_NUM_THREADS, else the affinity mask
      setCpuThreads(std::getenv("OMP_NUM_THREADS") ? omp_get_max_threads()
                                                   : 0);
  });
  return gCpuThreads;
}

std::optional<CpuKernelPath> qcc::rt::parseCpuKernelPath(std::string_view name) {
  for (CpuKernelPath p : {CpuKernelPath::Fast, CpuKernelPath::Portable,
                          CpuKernelPath::Reference})
    if (name == cpuKernelPathName(p))
      return p;
  return std::nullopt;
}

const char *qcc::rt::cpuKernelPathName(CpuKernelPath path) {
  switch (path) {
  case CpuKernelPath::Fast:
    return "fast";
  case CpuKernelPath::Portable:
    return "portable";
  case CpuKernelPath::Reference:
    return "reference";
  }
  return "?";
}

// An unknown QCC_CPU_KERNELS value leaves the default here; qrun refuses it
// with one line before it runs anything.
static CpuKernelPath initialCpuKernelPath() {
  const char *env = std::getenv("QCC_CPU_KERNELS");
  return env ? parseCpuKernelPath(env).value_or(CpuKernelPath::Fast)
             : CpuKernelPath::Fast;
}
static std::atomic<CpuKernelPath> gCpuKernelPath{initialCpuKernelPath()};

static thread_local std::optional<CpuKernelPath> tCpuKernelPath;

void qcc::rt::setCpuKernelPath(CpuKernelPath path) { gCpuKernelPath = path; }

static std::atomic<CpuFloatPrecision> gCpuFloatPrecision{
    CpuFloatPrecision::F32};
void qcc::rt::setCpuFloatPrecision(CpuFloatPrecision p) {
  gCpuFloatPrecision = p;
}
CpuFloatPrecision qcc::rt::cpuFloatPrecision() {
  return gCpuFloatPrecision.load();
}
std::optional<CpuFloatPrecision>
qcc::rt::parseCpuFloatPrecision(std::string_view name) {
  if (name == "f32")
    return CpuFloatPrecision::F32;
  if (name == "bf16")
    return CpuFloatPrecision::Bf16;
  return std::nullopt;
}
CpuKernelPath qcc::rt::cpuKernelPath() {
  return tCpuKernelPath ? *tCpuKernelPath : gCpuKernelPath.load();
}

qcc::rt::ScopedCpuKernelPath::ScopedCpuKernelPath(CpuKernelPath path)
    : previous(tCpuKernelPath) {
  tCpuKernelPath = path;
}
qcc::rt::ScopedCpuKernelPath::~ScopedCpuKernelPath() {
  tCpuKernelPath = previous;
}
