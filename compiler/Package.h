//===- Package.h - the back phases: emit, compile, package -----*- C++ -*-===//
//
// The phases after form-kernels (compiler/Pipeline.h): the CUDA emitter over
// the GPU plan, NVRTC over its units (cached by content hash; only when the
// library is built with the CUDA toolkit, QCC_HAVE_CODEGEN), and the artifact:
// the CPU plan op by op, and with GPU kernels their binaries, launch records
// ("kernels") and the GPU plan ("gpu_functions": kernel regions as nodes, in
// launch order).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_COMPILER_PACKAGE_H
#define QCC_COMPILER_PACKAGE_H

#include "compiler/Pipeline.h"

namespace qcc {

/// emit: the CUDA C++ of every kernel region of `gpuPlan` (after
/// form-kernels). Never fails: regions without a kernel say why.
codegen::EmitResult emitPhase(mlir::ModuleOp gpuPlan);

/// Whether this build can run the compile phase (NVRTC).
bool canCompileCuda();
/// compile: every unit of `emitted` with NVRTC for sm_80, sm_90 and
/// compute_90 PTX. A progress line on a terminal and a summary on stderr
/// unless `quiet`.
llvm::Expected<std::vector<UnitBinaries>>
compilePhase(const codegen::EmitResult &emitted, bool quiet);

/// package: writes `c`'s module (and, when compile ran, its kernels and GPU
/// plan) to options.artifactPath with options.tokenizerPath embedded.
llvm::Error packagePhase(const Compilation &c);

/// The tokenizer to embed: `explicitPath`, else tokenizer.json beside
/// `modelPath`, else tokenizer.model there (tokenizer.json wins, as in
/// Hugging Face's loaders), else "".
std::string findTokenizer(llvm::StringRef explicitPath,
                          llvm::StringRef modelPath);
/// A check of a tokenizer before it is embedded (qcc cannot load it:
/// libsentencepiece's protobuf clashes with ONNX's; qrun loads it fully): a
/// regular file of at most 1 GiB; a tokenizer.json must parse and have a
/// "model" object with a "vocab"; anything else must be a SentencePiece
/// ModelProto in protobuf wire format (pieces with a string piece, a float
/// score, a varint type). The error names the file.
llvm::Error checkTokenizer(llvm::StringRef path);

} // namespace qcc

#endif // QCC_COMPILER_PACKAGE_H
