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
// Tile heuristics (documented here, asserted in EmitterTest). Each tile is
// a configuration type of codegen/kernels/*_config.h (plain C++ shared with
// the device templates): the launch's block size and dynamic shared memory
// are that type's kThreads / kSmemBytes, read by the emitter, not copied.
//   gemm_i8 prefill: N >= 1024: GemmI8Config<128, 128, 64, 64, 64, 4>
//                    (128 threads, 81,920 B smem); else <64, 64, 64, 32, 32,
//                    4> (128 threads, 40,960 B);
//   gemm_i8 in a function with qcc.tokens_per_row = 1 (kv-cache-layout's
//                    decode entry point): two entries, one launched per call
//                    by the launch record's `when`: up to 8 rows
//                    GemvI8Config<8, 4, 1, 4> (one column per warp, 4 K
//                    chunks in flight per lane), more rows <8, 4, 2> (entry
//                    suffix _rows), both with grid.y = ceil(M / 8) row chunks
//                    (the wrapper offsets pointers by 8 rows per y); measured
//                    on an H200, docs/GPU_NOTES.md;
//   gemm_f16: same tiles as gemm_i8 (2-byte elements); over f32 tensors a
//                    first step converts x into workspace.x16
//                    (CastF32ToF16Config, 256 threads) and the weight is
//                    converted to f16 at upload;
//   gemm_i8_mixed (a qlinear with float outlier columns): gemm_i8's tiles
//                    and parameters plus xf (the f32 input) and wo (the f32
//                    weight columns) after wsum; the epilogue's
//                    AddOutliers<OutlierColumns<c...>> (the columns are in
//                    the type) adds their product after the dequantization;
//   gemm_i8_sp / gemm_f16_sp (2:4 sparse weight, gemm_sp.cuh): the same
//                    families with GemmSpI8Config / GemmSpF16Config, BlockK
//                    128: N >= 1024: <128, 128, 128, 64, 64, 3> (int8 92,160
//                    B, f16 165,888 B); else <64, 64, 128, 32, 32, 4 (int8) /
//                    3 (f16)>; decode: GemvSpI8Config / GemvSpF16Config<8,
//                    4, 2>. Parameters: x, wv (values), wmeta, then as the
//                    dense GEMM's;
//   norm / norm_quantize: normBlockThreads(D): D <= 1024: 128 threads,
//                    <= 4096: 256, else 512;
//   quantize: 256 threads, one CTA per row (per tensor: one row);
//   embedding: 128 threads, one CTA per id;
//   elementwise: 256 threads x 4 elements;
//   attention prefill: AttnPrefillLaunch, HeadDim 64: <64, 64, 64, 4>;
//                    other multiples of 32: <D, 32, 64, 4>;
//   attention decode (qcc.tokens_per_row = 1): AttnDecodeLaunch<D, 4, 256>
//                    split + combine.
//   moe: MoeDefault = MoeLaunch<64, 16, 32, 256> (64 features x 16 routes
//                    per CTA, K in slices of 32), the routes sorted by one
//                    CTA of 256, the combine 256 threads x 1 element.
//
// Identical translation units are emitted once: a unit's text is built with
// a placeholder entry name, the first region producing it names it
// (qcc_<function>_<region>), later regions reuse that unit and entry.
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
