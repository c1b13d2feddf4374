//===- Calibrator.h - activation statistics for W8A8 quantization -*- C++ -*-===//
//
// docs/QUANTIZATION.md section 1 (the qcc-calib tool). Runs the entry point
// "main" of a float artifact on calibration batches and records, through the
// session's observer:
//   - for every `linear` with attrs["qcc.calib_id"] = i, the per-input-channel
//     absmax of its input (last dimension);
//   - for every `attention` with attrs["qcc.calib_id"] = j, the per-kv-head
//     absmax of its key and value inputs ([B, S, Hkv*D]: head g is channels
//     [g*D, (g+1)*D)).
// With pruning statistics on (qcc --prune=wanda|sparsegpt; docs/SPARSITY.md)
// it also accumulates, per distinct linear input (linears reading the same
// value, e.g. q/k/v, share one), the Gram matrix H = X^T X over all observed
// tokens in double: K^2 * 8 bytes per distinct input (K = 1024: 8 MiB), and
// about K^2 multiply-adds per token, which is why it is off by default. The
// per-input-channel L2 norms ||X_j|| are sqrt(H_jj).
// With activation samples on (qcc --smoothquant-alpha=auto), it keeps per
// distinct linear input a uniform sample of `sampleRows` observed rows
// (reservoir sampling, the same tokens for every input): rows * K * 4 bytes
// per input, bounded however long the calibration runs.
// An artifact in which no node carries qcc.calib_id (compiled without
// --quant) gets ids by counting `linear` and `attention` nodes of "main" in
// program order, separately: the numbering qcc's tagging uses. An
// `attention_mask` input's zeros mark positions that are not observed.
//
// The batches come from token ids (textBatches: a text source tokenized by
// the caller, which links the tokenizer) or from a folder with one
// <input>.npy per model input whose first dimension runs over samples
// (npyBatches). Errors throw std::runtime_error.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CALIBRATOR_H
#define QCC_RUNTIME_CALIBRATOR_H

#include "runtime/core/Artifact.h"
#include "runtime/core/Tensor.h"

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace qcc::rt {

/// Samples per calibration batch.
inline constexpr int64_t kCalibrationBatch = 8;

/// One calibration batch: the inputs of "main" by name.
using CalibrationBatch = std::map<std::string, Tensor>;

/// `samples` windows of `seqLen` ids spread evenly over `tokens` (from a text
/// source named `source` in errors), in batches of kCalibrationBatch; with
/// an all-ones attention_mask when `fn` has one. `fn` must take int64 token
/// ids [batch, seq] (and optionally attention_mask) only.
std::vector<CalibrationBatch> textBatches(const Function &fn,
                                          const std::vector<int64_t> &tokens,
                                          int64_t samples, int64_t seqLen,
                                          const std::string &source);
/// Whether `fn` takes only token ids (and optionally attention_mask); throws
/// naming the first other input.
void checkTextInputs(const Function &fn);

/// A folder with <input>.npy per input of `fn`, first dim = samples. Uses
/// min(samples, available) samples (`samples` is updated; a line on stderr
/// unless `quiet` when fewer are there) and sets `seqLen` to the inputs'
/// second dimension.
std::vector<CalibrationBatch> npyBatches(const Function &fn,
                                         const std::string &folder,
                                         int64_t &samples, int64_t &seqLen,
                                         bool quiet);

/// Observes "main" of a float artifact on the CPU backend, batch by batch.
class Calibrator {
public:
  /// Finds the nodes to observe; throws when there are none or their
  /// qcc.calib_id tags are malformed.
  explicit Calibrator(const Artifact &artifact, bool pruningStats = false,
                      int64_t sampleRows = 0);
  ~Calibrator();
  /// Runs "main" on one batch; returns its samples.
  int64_t run(const CalibrationBatch &batch);
  /// The statistics as qcc-calib writes them: {"samples", "seq_len",
  /// "linears": {id: {"input_absmax": [...]}}, "attentions": {id:
  /// {"k_absmax", "v_absmax" (per kv head), "k_channel_absmax" (per key
  /// channel)}}}. Throws if a node never ran. With pruning
  /// statistics, also writes the Gram matrices to `gramPath` (row-major
  /// float64 K x K, one after another) and adds "gram_file" (its file name,
  /// beside the JSON), per linear "gram" (index into "grams") and
  /// "input_l2norm" [K], and "grams": [{"k", "offset" (bytes)}]. With
  /// activation samples, writes the kept rows to `samplePath` (row-major
  /// float32 [rows, K], one set after another) and adds "sample_file", per
  /// linear "samples" (index into "sample_sets") and "sample_sets":
  /// [{"k", "rows", "offset" (bytes)}].
  nlohmann::json statistics(int64_t samples, int64_t seqLen,
                            const std::string &gramPath = {},
                            const std::string &samplePath = {}) const;
  size_t linears() const;
  size_t attentions() const;

private:
  struct State;
  std::unique_ptr<State> state;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_CALIBRATOR_H
