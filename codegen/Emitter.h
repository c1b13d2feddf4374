//===- Emitter.h - qcc.kernel regions -> CUDA C++ ---------------*- C++ -*-===//
//
// The CUDA emitter: for every qcc.kernel region (form-kernels) of every
// func.func, a small CUDA C++ translation unit that #includes the device
// templates it needs ("qcc/*.cuh") and defines extern "C" __global__
// __launch_bounds__ wrappers instantiating them, plus a JSON launch record.
//
// Launch record (EmittedKernel::launch): a format::LaunchRecord, the typed
// ABI the runtime reads (format/LaunchRecord.h documents it and its JSON).
// The emitter writes every run-time quantity as an expression over the
// region's operand / result shapes from the rank and static dims it knows:
// e.g. an elementwise operand's broadcast modulus is
// select(eq(numel(operand j), n), 0, numel(operand j)), the rotary tables'
// batch stride select(gt(dim0, 1), dim1 * dim2, 0) for [B, S, W] tables
// (0 for rank 2). Scratch buffers are record workspaces ("ml"/"acc" for
// split decode attention, "x16" for the f16 copy of an f32 GEMM input);
// step entries are the unit's entry plus a suffix ("_cast", "_combine").
//
// Tile heuristics: each family's file says how it picks its tiles
// (EmitGemm.cpp, EmitNorm.cpp, EmitElementwise.cpp, EmitAttention.cpp,
// EmitMoe.cpp); EmitterTest asserts them. Each tile is a configuration type
// of codegen/kernels/*_config.h (plain C++ shared with the device
// templates): the launch's block size and dynamic shared memory are that
// type's kThreads / kSmemBytes, read by the emitter, not copied.
//
// Identical translation units are emitted once: a unit's source is a
// function of its entry name, units are compared by their text for one fixed
// name, and the first region producing a unit names it
// (qcc_<function>_<region>); later regions reuse that unit and entry.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_CODEGEN_EMITTER_H
#define QCC_CODEGEN_EMITTER_H

#include "format/KernelKinds.h"
#include "format/LaunchRecord.h"
#include "mlir/IR/BuiltinOps.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace qcc::codegen {

/// sm_80's opt-in dynamic shared memory limit per block (163 KB).
inline constexpr int kMaxDynamicSmemSm80 = 167936;

/// One kernel region and the unit that implements it.
struct EmittedKernel {
  std::string function; ///< enclosing func.func
  std::string name;     ///< the region's sym_name ("k3")
  format::KernelKind kind = format::KernelKind::Elementwise; ///< the region's
  std::string entry;    ///< the first launch's extern "C" name ("" if none)
  std::string source;   ///< the CUDA C++ unit ("" if unsupported)
  size_t unit = 0;      ///< index into EmitResult::units (if supported)
  format::LaunchRecord launch; ///< how the runtime launches it
  /// Why no kernel was emitted ("no CUDA kernel for f32 linear yet"); empty
  /// when one was.
  std::string unsupported;

  /// The manifest record (without binaries): function, region, kind, entry,
  /// launch (format::toJson) or unsupported.
  nlohmann::json manifest() const;
};

/// A distinct translation unit.
struct KernelUnit {
  std::string name;   ///< its first region's entry
  std::string source;
  std::vector<size_t> kernels; ///< indices into EmitResult::kernels
};

struct EmitResult {
  std::vector<EmittedKernel> kernels; ///< in function and program order
  std::vector<KernelUnit> units;
};

/// Emits every qcc.kernel region of `module` (after form-kernels). Never
/// fails: regions it cannot handle get EmittedKernel::unsupported.
EmitResult emitKernels(mlir::ModuleOp module);

} // namespace qcc::codegen

#endif // QCC_CODEGEN_EMITTER_H
