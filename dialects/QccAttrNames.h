//===- QccAttrNames.h - discardable attribute names -------------*- C++ -*-===//
//
// The names of the discardable attributes one phase sets and a later one
// reads, spelled once (a misspelling would silently read nothing).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_DIALECTS_QCCATTRNAMES_H
#define QCC_DIALECTS_QCCATTRNAMES_H

#include "llvm/ADT/StringRef.h"

namespace qcc {

/// On a qcc.linear: the calibrated per-input-channel absmax (calibration ->
/// smooth-quant, quantize).
inline constexpr llvm::StringLiteral kInputAbsmaxAttr = "qcc.input_absmax";
/// On a qcc.linear: the Gram matrix X^T X of its input over the calibration
/// tokens (f64 [K, K], dense_resource) and the per-input-channel L2 norms
/// ||X_j|| (f32 [K]) (calibration -> smooth-quant, sparsify-2-4, which drops
/// them; docs/SPARSITY.md).
inline constexpr llvm::StringLiteral kInputGramAttr = "qcc.input_gram";
inline constexpr llvm::StringLiteral kInputL2NormAttr = "qcc.input_l2norm";
/// On a qcc.linear: sampled rows of its input over the calibration tokens
/// (f32 [rows, K], dense_resource; calibration -> smooth-quant's alpha
/// search, which drops them or, for int8-fallback, rescales them).
inline constexpr llvm::StringLiteral kInputSamplesAttr = "qcc.input_samples";
/// On a qcc.linear: the input columns that stay in float, ascending
/// (DenseI64ArrayAttr; int8-fallback -> quantize).
inline constexpr llvm::StringLiteral kOutlierColumnsAttr =
    "qcc.outlier_columns";
/// On the module: the KV cache layout (kv-cache-layout -> emitter, artifact
/// writer; docs/KV_CACHE.md).
inline constexpr llvm::StringLiteral kKvCacheAttr = "qcc.kv_cache";
/// On the module: the names of the runtime LoRA adapters, in qcc.lora's
/// order (ArrayAttr of strings; the importer -> the artifact's manifest,
/// "lora_adapters"; docs/LORA.md).
inline constexpr llvm::StringLiteral kLoraAdaptersAttr = "qcc.lora_adapters";
/// On the module: the residual rotation rotate-residual folded into the
/// weights ("hadamard N x dct M, seed S"), which calibration statistics
/// record.
inline constexpr llvm::StringLiteral kRotationAttr = "qcc.rotation";
/// On an entry point that takes one token per row (kv-cache-layout's decode
/// -> the emitter's tile choice).
inline constexpr llvm::StringLiteral kTokensPerRowAttr = "qcc.tokens_per_row";
/// On a qcc.top_k in a router kernel region (form-kernels): its k, which
/// fixes its results' size along the axis; the runtime sizes the region's
/// results from it without reading the k operand.
inline constexpr llvm::StringLiteral kStaticTopKAttr = "qcc.k";

} // namespace qcc

#endif // QCC_DIALECTS_QCCATTRNAMES_H
