//===- LoraAdapter.h - PEFT LoRA adapters ----------------------*- C++ -*-===//
//
// A LoRA adapter as PEFT saves it (`save_pretrained`): a folder with
// adapter_config.json and adapter_model.safetensors. Each adapted module
// (named by its path in the Hugging Face model, "model.layers.0.self_attn.
// q_proj") has factors A [r, in] and B [out, r]; its weight in torch's
// Linear layout [out, in] becomes W + scaling * B A, with scaling =
// lora_alpha / r (lora_alpha / sqrt(r) with use_rslora), r and lora_alpha
// per module from rank_pattern / alpha_pattern. An embedding's factors are
// A [r, rows] and B [dim, r]: its table [rows, dim] gains scaling (B A)^T.
// docs/LORA.md has the rules and what is refused.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_COMPILER_LORAADAPTER_H
#define QCC_COMPILER_LORAADAPTER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace qcc {

/// One adapted module's low-rank update.
struct LoraFactors {
  enum class Kind { Linear, Embedding };
  Kind kind = Kind::Linear;
  std::string module; ///< its path in the model ("model.layers.0.mlp.up_proj")
  int64_t rank = 0;
  /// Linear: the weight is [rows, cols] = [out, in]; embedding: the table
  /// is [rows, cols] = [rows, dim]. The update is added in that layout.
  int64_t rows = 0, cols = 0;
  double scaling = 0; ///< PEFT's scaling times the user's scale
  std::vector<float> a, b; ///< as saved: A [r, *], B [*, r]

  /// The update, [rows, cols] row-major: scaling * B A (linear) or
  /// scaling * (B A)^T (embedding), each element a sum of `rank` products
  /// accumulated in double, then rounded to f32.
  std::vector<float> delta() const;
};

struct LoraAdapter {
  std::string dir; ///< the folder it was read from (names it in errors)
  std::vector<LoraFactors> modules; ///< sorted by module path
};

/// Reads a PEFT LoRA adapter folder, its updates multiplied by `scale` (the
/// user's weight on top of PEFT's own scaling). Everything PEFT could have
/// saved that qcc does not apply (DoRA, trained biases, modules_to_save,
/// another peft_type) is refused, one line naming the folder, the file, the
/// field or tensor and the reason.
llvm::Expected<LoraAdapter> readPeftAdapter(llvm::StringRef dir,
                                            double scale = 1.0);

} // namespace qcc

#endif // QCC_COMPILER_LORAADAPTER_H
