//===- NvrtcCompiler.h - CUDA C++ -> cubin/PTX with NVRTC -------*- C++ -*-===//
//
// The back end of codegen: every kernel region becomes a CUDA C++ translation
// unit (extern "C" __global__ kernels that instantiate the device templates of
// codegen/kernels/*.cuh and numerics.h, included as "qcc/<file>"); this
// driver compiles each one with NVRTC into a cubin per real architecture
// (default sm_80, sm_90) and PTX for one virtual architecture (default
// compute_90) so later GPUs can JIT it.
//
// - The device templates are embedded in the library at build time, so qcc
//   works from any directory. CUDA's own headers come from the toolkit include
//   directory recorded at configure time (CompileOptions::cudaIncludeDir).
// - (kernel, target) compilations are independent and run on a thread pool.
// - Results are cached on disk by content hash (see CompileOptions::cacheDir);
//   a hit skips NVRTC. Unreadable or corrupted entries are ignored and
//   rewritten.
// - Errors are returned, never thrown (the library links into LLVM tools built
//   with -fno-exceptions).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_CODEGEN_NVRTCCOMPILER_H
#define QCC_CODEGEN_NVRTCCOMPILER_H

#include "llvm/Support/Error.h"

#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qcc::codegen {

/// One CUDA C++ translation unit to compile.
struct KernelSource {
  std::string name;   // names the unit in errors, progress and NVRTC's log
  std::string source; // extern "C" __global__ kernels; may #include "qcc/*.cuh"
};

/// The binaries of one translation unit.
struct CompiledKernel {
  std::string name;
  std::map<std::string, std::string> cubins; // "sm_80", "sm_90" -> ELF bytes
  std::string ptx; // for CompileOptions::ptxArch ("" when none was asked for)
};

/// Reported once per translation unit, when all its targets are done.
struct CompileProgress {
  size_t done = 0;  // 1-based: how many units have finished, this one included
  size_t total = 0; // units in this compileKernels call
  std::string name;
  std::vector<std::string> targets; // e.g. {"sm_80", "sm_90", "ptx"}
  bool cached = false;              // every target came from the cache
  bool failed = false;              // some target failed (see the error)
  double seconds = 0;               // time summed over this unit's targets
  /// "compiled kernel 3/8: name (sm_80, sm_90, ptx) [cached]" ("[failed]"
  /// when NVRTC rejected it).
  std::string message() const;
};

struct CompileOptions {
  /// Real architectures to build cubins for.
  std::vector<std::string> cubinArchs = {"sm_80", "sm_90"};
  /// Virtual architecture for the PTX; empty for no PTX.
  std::string ptxArch = "compute_90";
  /// Worker threads; 0 means std::thread::hardware_concurrency().
  unsigned jobs = 0;
  /// Cache directory; empty means defaultCacheDir().
  std::string cacheDir;
  bool useCache = true;
  /// Directory holding cuda_fp16.h etc.; empty means the toolkit include
  /// directory found when qcc was configured.
  std::string cudaIncludeDir;
  /// Emit line info (for profilers; does not change the code).
  bool lineInfo = false;
  /// Let NVRTC contract a*b+c into FMA (its default). Off by default: the CPU
  /// reference backend is built with -ffp-contract=off and the float
  /// epilogues must match it bit for bit. --use_fast_math is never passed.
  bool allowFma = false;
  /// Passed to NVRTC after the options above (-D..., -maxrregcount=...).
  std::vector<std::string> extraOptions;
  /// Print CompileProgress::message() to stderr for each unit.
  bool verbose = false;
  /// Called (from a worker thread, serialized) for each finished unit.
  std::function<void(const CompileProgress &)> onProgress;
};

/// Compiles every source for every target. On success the result holds one
/// CompiledKernel per source, in input order. On failure the error holds, for
/// each failing source, "kernel '<name>' (<arch>): NVRTC error:\n<log>" for
/// the first of its targets that failed.
llvm::Expected<std::vector<CompiledKernel>>
compileKernels(const std::vector<KernelSource> &sources,
               const CompileOptions &options = {});

/// A header of codegen/kernels, embedded at build time.
struct EmbeddedHeader {
  std::string_view includeName; // "qcc/<file>.cuh" or "qcc/numerics.h"
  std::string_view contents;
};
/// The embedded headers, sorted by include name (defined in the generated
/// EmbeddedHeaders.cpp).
std::span<const EmbeddedHeader> embeddedHeaders();
/// The contents of an embedded header, or nullptr.
const EmbeddedHeader *findEmbeddedHeader(std::string_view includeName);

/// $QCC_CACHE_DIR, else $XDG_CACHE_HOME/qcc, else $HOME/.cache/qcc (empty if
/// none of them is set).
std::string defaultCacheDir();

/// "13.0": the version of the NVRTC library loaded (part of the cache key).
std::string nvrtcVersionString();

} // namespace qcc::codegen

#endif // QCC_CODEGEN_NVRTCCOMPILER_H
