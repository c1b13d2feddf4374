//===- Calibration.h - activation statistics for quantization --*- C++ -*-===//
#ifndef QCC_COMPILER_CALIBRATION_H
#define QCC_COMPILER_CALIBRATION_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>

namespace qcc {

struct CalibrationOptions {
  std::string source;        ///< text file or folder of .npy inputs
  int64_t samples = 64;      ///< windows (text) or samples (.npy) to observe
  int64_t seqLen = 128;      ///< tokens per window (text)
  std::string statsPath;     ///< reuse if it exists, else save here
  std::string toolPath;      ///< the qcc-calib executable
  std::string tokenizerPath; ///< SentencePiece model for text sources
  bool quiet = false;        ///< qcc-calib prints errors only
  /// The option that needs the statistics, as the error for a missing
  /// source names it.
  std::string neededBy = "--quant=w8a8";
  /// Also the pruning statistics (2:4 wanda / sparsegpt): each linear's
  /// input Gram matrix and L2 norms, saved beside the JSON (STATS.gram).
  bool pruningStats = false;
  /// Also this many sampled rows of each linear input (SmoothQuant's alpha
  /// search), saved beside the JSON (STATS.rows); 0: none.
  int64_t activationRows = 0;
};

/// Runs the float model (raised, no KV cache) over the calibration source with
/// qcc-calib and attaches the statistics of docs/QUANTIZATION.md to the ops of
/// `@main`: `qcc.input_absmax` on linears, `qcc.k_absmax` / `qcc.v_absmax` (per
/// kv head) and `qcc.k_channel_absmax` (per key channel) on attention; with `pruningStats`, also `qcc.input_gram` (f64 [K, K], a
/// dense_resource shared by the linears that read one value) and
/// `qcc.input_l2norm` (f32 [K]) on linears; with `activationRows`,
/// `qcc.input_samples` (f32 [rows, K], shared like the Gram matrix).
llvm::Error calibrate(mlir::ModuleOp module, const CalibrationOptions &options);

} // namespace qcc

#endif // QCC_COMPILER_CALIBRATION_H
