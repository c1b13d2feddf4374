//===- RooflineReport.h - qcc --report ---------------------------*- C++ -*-===//
//
// For every kernel region of every entry point (the GPU plan form-kernels
// makes, the regions the CUDA backend launches): FLOPs, bytes moved,
// arithmetic intensity and the roofline time on H100, H200 and this CPU,
// at assumed shapes (batch, context). The counts come from
// runtime/core/Roofline.h, the one definition qrun --profile uses too; the shapes
// from a shape-only run of the plan (glue runs, kernel regions do not).
// A section compares each 2:4 sparse linear with its dense form (bytes,
// FLOPs, predicted decode and prefill speedups on the GPUs). docs/ROOFLINE.md
// describes the report.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_REPORT_ROOFLINEREPORT_H
#define QCC_REPORT_ROOFLINEREPORT_H

#include "runtime/core/Roofline.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

namespace qcc {

struct RooflineOptions {
  /// Sequences per call; main and prefill run `context` tokens per
  /// sequence, decode one new token per sequence over `context` cached ones.
  int64_t batch = 1;
  int64_t context = 512;
  /// Measure this CPU (runtime/core/Roofline.h cpuPeaks) and predict for it.
  bool cpu = true;
};

/// One kernel region (or a host node that computes: an op form-kernels
/// left outside any region, kind "host").
struct RooflineKernel {
  std::string region, kind;
  std::vector<std::string> ops; ///< the ops inside, in order
  rt::Cost cost;
  std::vector<double> seconds; ///< per target (RooflineReport::targets)
};

struct RooflineFunction {
  std::string name;
  int64_t batch = 0, tokens = 0, cached = 0; ///< per call: new, in the cache
  std::vector<RooflineKernel> kernels;
  int64_t glueNodes = 0; ///< host nodes without FLOPs (shape glue)
  rt::Cost total;
  std::vector<double> seconds; ///< per target: the sum over kernels
};

/// A 2:4 sparse linear (its weight a qcc.sparse_2_4 of constants), dense vs
/// compressed, at the rows of a decode step (batch) and of a prefill (batch
/// x context): the costs and the predicted speedup (dense roofline time /
/// sparse) on each GPU target (rt::gpuPeaks()).
struct SparseLinearRow {
  std::string node, op; ///< the linear's node name; "linear" / "qlinear"
  int64_t n = 0, k = 0;
  rt::SparseLinearCost decode, prefill;
  std::vector<double> decodeSpeedup, prefillSpeedup;
};

struct SparseLinears {
  int64_t decodeRows = 0, prefillRows = 0;
  std::vector<SparseLinearRow> rows;
  SparseLinearRow total; ///< costs summed, speedups of the sums of times
};

struct RooflineReport {
  std::string model;
  RooflineOptions options;
  std::string note; ///< e.g. the context was capped at the model's limit
  double kvElementBytes = 0; ///< 0: no KV cache
  std::vector<rt::Peaks> targets;
  std::vector<RooflineFunction> functions;
  SparseLinears sparse; ///< empty rows: no 2:4 sparse linear
};

/// The 2:4 sparse linears of `a` (those of its prefill entry point, else
/// main, else decode: each computes every linear once) at `options`' rows,
/// predicted on `targets`.
SparseLinears sparseLinearReport(const rt::Artifact &a,
                                 const RooflineOptions &options,
                                 const std::vector<rt::Peaks> &targets);

/// The report for `module` (compiled: raised, quantized, KV cache laid out;
/// not yet formed into kernels). `model` names it in the output.
llvm::Expected<RooflineReport>
buildRooflineReport(mlir::ModuleOp module, llvm::StringRef model,
                    const RooflineOptions &options);

/// Plain text: one table per entry point, then its totals.
void printRooflineReport(const RooflineReport &r, llvm::raw_ostream &os);

/// The same as JSON (schema "qcc-roofline/1", docs/ROOFLINE.md).
nlohmann::json rooflineReportJson(const RooflineReport &r);

} // namespace qcc

#endif // QCC_REPORT_ROOFLINEREPORT_H
