//===- MaskAnalysis.h - what an exporter's attention mask computes -*- C++ -*-===//
//
// Exporters build the additive attention mask from the attention_mask input,
// position ids and shapes in many spellings (Range/comparisons/And/Where,
// GatherND of the padding mask, vmap-free rewrites, Trilu of -inf, ...).
// Instead of matching each spelling, the analysis evaluates the mask's
// subgraph with the CPU reference kernels on sample inputs and compares it
// with the causal-plus-padding mask: key j is visible to query i of a row
// with P cached tokens iff j <= P + i and attention_mask[b, j] != 0.
//
// The samples cover small shapes with left padding, right padding and holes,
// and, for every integer constant c of the subgraph (a window, a buffer
// size), the lengths c - 1 .. c + 2 around it: a comparison of positions
// against a constant can only change its outcome there. Lengths beyond a
// cap are not evaluated; where a threshold lies beyond it, or a length
// fails, the context the mask was verified for is returned as a limit.
//
// Where the mask is not that, two more models are tried: a sliding window W
// (key j visible iff P + i - W < j <= P + i, HF's convention; W next to a
// constant of the subgraph, proven on the lengths around W as well), and
// right padding only (onnxruntime's GroupQueryAttention computes positions
// from the mask's row sums, which is causal + padding for unpadded rows and
// right-padded prompts only: the samples are those, and rows of padding
// tokens are not compared). Both are sound for the runtime's unpadded rows.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_PASSES_MASKANALYSIS_H
#define QCC_PASSES_MASKANALYSIS_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <vector>

namespace qcc {

/// The inputs of a decoder's full-sequence function, by role.
struct DecoderInputs {
  mlir::Value ids;            // [B, S] token ids
  mlir::Value attentionMask;  // [B, P + S], nonzero = attend; may be null
  mlir::Value positionIds;    // [B, S]; may be null
  llvm::SmallVector<mlir::Value> pasts; // [B, Hkv, P, D] exporter caches
};

struct MaskCheck {
  bool causalWithPadding = false;
  /// The longest context (P + S) the equivalence was verified for, when a
  /// threshold of the mask builder lies beyond the evaluated lengths or a
  /// long sample differs; -1 when every sample agreed.
  int64_t maxContext = -1;
  /// Why the mask is not the causal-plus-padding mask.
  std::string why;
  /// The first difference found lets a query see a later key: an encoder's
  /// (bidirectional) mask rather than a decoder's with, say, a window.
  bool bidirectional = false;
  /// The sliding window W the mask was proven with (0 = none): key j
  /// visible from query i iff P + i - W < j <= P + i (HF's convention).
  int64_t window = 0;
  /// Proven on unpadded and right-padded samples only (GroupQueryAttention's
  /// convention, whose positions with left padding differ), comparing the
  /// rows of real tokens: sound for the runtime's unpadded rows, not for
  /// left-padded batches of `main`.
  bool rightPaddingOnly = false;
  /// ALiBi slopes the mask was proven with, one per head of the mask (a
  /// head dimension of 1: one slope for all): visible keys carry
  /// m_h * (j - (P + i)) besides a constant per query row.
  std::vector<float> alibi;
};

/// Checks that the additive `mask` operand of an attention (0 = attend,
/// <= -1e30 = masked, broadcast to [B, H, S, P + S]) is the causal mask with
/// the key padding of `inputs.attentionMask`. The mask may read the values of
/// the attention mask and the position ids (bound to P + i) and the shapes
/// of anything; reading token ids or cached values fails the check.
MaskCheck checkCausalPaddingMask(mlir::Value mask, const DecoderInputs &inputs);

/// Checks, on unpadded samples, that the integer value `positions` [B, S]
/// holds P + i for token i of a row with P cached tokens (e.g. the genai
/// builder's past_b + i, past_b read from the attention mask). Returns why
/// not, or "" when proven.
std::string checkPositions(mlir::Value positions, const DecoderInputs &inputs);

/// Checks, on unpadded samples, that the GatherElements `indices`
/// [B, Hkv, T, D] along axis 2 select row t for every t (T = P + S) and that
/// `keep` is true everywhere: the gathered present is the past with the new
/// keys/values appended (GroupQueryAttention's present). Returns why not,
/// or "" when proven.
std::string checkAppendGather(mlir::Value indices, mlir::Value keep,
                              const DecoderInputs &inputs);

} // namespace qcc

#endif // QCC_PASSES_MASKANALYSIS_H
