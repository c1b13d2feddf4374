//===- Options.h - choices of the passes and of the driver -----*- C++ -*-===//
//
// The fixed sets of choices that pass options (Passes.td) and the compiler
// driver (compiler/Pipeline.h, qcc's flags) take. Each spelling is written
// once, in a table below: option parsers are built from the tables
// (`optionValues`), so an invalid value is refused once, where it is parsed,
// and attributes that record a choice are spelled from them (`spelling`).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_PASSES_OPTIONS_H
#define QCC_PASSES_OPTIONS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <string>
#include <utility>

namespace qcc {

/// KV cache layout of a decoder's entry points (docs/KV_CACHE.md). `None`
/// is the driver's "no cache" (kv-cache-layout does not run).
enum class KvLayout { None, Paged, Contiguous };
/// KV cache element type.
enum class KvDtype { F32, F16, I8, Fp8 };
/// Whether a cache of `d` has calibrated scales (i8 and fp8).
inline bool kvDtypeHasScales(KvDtype d) {
  return d == KvDtype::I8 || d == KvDtype::Fp8;
}
/// The scales of an int8 KV cache (docs/QUANTIZATION.md section 4; an FP8
/// cache has per-head scales).
enum class KvScales { PerHead, Kivi };
/// Activation quantization levels (SmoothQuant's O1, O2, O3).
enum class ActivationQuant { PerToken, PerTensor, Static };
/// Whole-model quantization scheme (docs/QUANTIZATION.md).
enum class QuantMode { None, W8A8, Fp8, W4A16, W4A8 };
/// How quantize-w4 rounds int4 weights (docs/QUANTIZATION.md, section 7).
enum class W4Method { Gptq, Rtn };

/// LLM.int8()-style float outlier columns for W8A8 (docs/QUANTIZATION.md).
enum class Int8Fallback { Off, Auto };

/// Structured sparsity of the block linears (docs/SPARSITY.md).
enum class Sparsity { None, TwoFour };
/// How sparsify-2-4 chooses the two kept weights of each group of four.
enum class PruneMethod { Magnitude, Wanda, SparseGpt };

/// The spellings, as option values and as recorded in attributes.
inline constexpr llvm::cl::OptionEnumValue kKvLayoutNames[] = {
    {"paged", int(KvLayout::Paged), "blocks of block-tokens tokens"},
    {"contiguous", int(KvLayout::Contiguous), "one slab per sequence"},
};
inline constexpr llvm::cl::OptionEnumValue kKvDtypeNames[] = {
    {"f32", int(KvDtype::F32), "float32"},
    {"f16", int(KvDtype::F16), "float16 (IEEE binary16, no scales)"},
    {"i8", int(KvDtype::I8),
     "int8, per-layer, per-head K and V scales from calibration"},
    {"fp8", int(KvDtype::Fp8),
     "FP8 E4M3, per-layer, per-head K and V scales from calibration"},
};
inline constexpr llvm::cl::OptionEnumValue kKvScalesNames[] = {
    {"per-head", int(KvScales::PerHead),
     "static K and V scales per layer and kv head (calibration)"},
    {"kivi", int(KvScales::Kivi),
     "static K scales per channel (calibration), V scales per token "
     "(computed on append)"},
};
inline constexpr llvm::cl::OptionEnumValue kActivationQuantNames[] = {
    {"per-token", int(ActivationQuant::PerToken),
     "O1: dynamic, one scale per token"},
    {"per-tensor", int(ActivationQuant::PerTensor),
     "O2: dynamic, one scale per tensor"},
    {"static", int(ActivationQuant::Static),
     "O3: one scale per tensor from calibration"},
};
inline constexpr llvm::cl::OptionEnumValue kQuantModeNames[] = {
    {"none", int(QuantMode::None), "float weights and activations"},
    {"w8a8", int(QuantMode::W8A8), "int8 weights and activations"},
    {"fp8", int(QuantMode::Fp8),
     "FP8 E4M3 weights and activations (W8A8 over E4M3)"},
    {"w4a16", int(QuantMode::W4A16),
     "int4 weights per group, float activations"},
    {"w4a8", int(QuantMode::W4A8),
     "int4 weights per group, int8 activations per token"},
};
inline constexpr llvm::cl::OptionEnumValue kW4MethodNames[] = {
    {"gptq", int(W4Method::Gptq),
     "GPTQ: OBS with the calibration Hessian, compensating updates"},
    {"rtn", int(W4Method::Rtn), "round to nearest per group"},
};

inline constexpr llvm::cl::OptionEnumValue kInt8FallbackNames[] = {
    {"off", int(Int8Fallback::Off), "every input column in int8"},
    {"auto", int(Int8Fallback::Auto),
     "outlier columns in float where calibration says it pays"},
};

inline constexpr llvm::cl::OptionEnumValue kSparsityNames[] = {
    {"none", int(Sparsity::None), "dense weights"},
    {"2:4", int(Sparsity::TwoFour),
     "2 of every 4 consecutive weights along K kept"},
};
inline constexpr llvm::cl::OptionEnumValue kPruneMethodNames[] = {
    {"magnitude", int(PruneMethod::Magnitude), "the two largest |w|"},
    {"wanda", int(PruneMethod::Wanda),
     "the two largest |w| * ||X_j|| (calibration)"},
    {"sparsegpt", int(PruneMethod::SparseGpt),
     "SparseGPT: OBS with the calibration Hessian, compensating updates"},
};

/// An option parser's values (a `cl::values` modifier) from a table above.
template <size_t N>
llvm::cl::ValuesClass
optionValues(const llvm::cl::OptionEnumValue (&names)[N]) {
  return [&]<size_t... I>(std::index_sequence<I...>) {
    return llvm::cl::ValuesClass({names[I]...});
  }(std::make_index_sequence<N>());
}

/// The spelling of `value` in `names` ("" when it has none).
template <size_t N, typename Enum>
llvm::StringRef spelling(const llvm::cl::OptionEnumValue (&names)[N],
                         Enum value) {
  for (const llvm::cl::OptionEnumValue &n : names)
    if (n.Value == int(value))
      return n.Name;
  return "";
}

/// The value spelled `text` in `names`, into `out`; false (out untouched)
/// when no entry has that spelling.
template <size_t N, typename Enum>
bool parseSpelling(const llvm::cl::OptionEnumValue (&names)[N],
                   llvm::StringRef text, Enum &out) {
  for (const llvm::cl::OptionEnumValue &n : names)
    if (n.Name == text) {
      out = Enum(n.Value);
      return true;
    }
  return false;
}

/// The spellings of `names` for a message: "a, b or c".
template <size_t N>
std::string spellingList(const llvm::cl::OptionEnumValue (&names)[N]) {
  std::string list;
  for (size_t i = 0; i < N; ++i)
    list += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + names[i].Name.str();
  return list;
}

} // namespace qcc

#endif // QCC_PASSES_OPTIONS_H
