//===- ArtifactWriter.h - writing .qpkg artifacts --------------*- C++ -*-===//
#ifndef QCC_COMPILER_ARTIFACTWRITER_H
#define QCC_COMPILER_ARTIFACTWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace qcc {

struct ArtifactOptions {
  std::string sourceName;    ///< the model file it was compiled from
  std::string tokenizerPath; ///< a SentencePiece model to embed, or empty
  /// Compiled GPU kernels (codegen): each record is written to the
  /// manifest's "kernels" array with "binaries": {target: {offset, size}}
  /// for its blobs (identical blobs stored once).
  struct Kernel {
    nlohmann::json record; ///< function, region, kind, entry, launch, ...
    std::map<std::string, std::string> binaries; ///< "sm_80"/"sm_90"/"ptx"
  };
  std::vector<Kernel> kernels;
  /// The module after form-kernels (null: none). Its functions are written
  /// as "gpu_functions": the CUDA backend's plan, where each qcc.kernel
  /// region is a node {op: "kernel", attrs: {kind, kernel: index into
  /// "kernels" or -1}, body: {args, nodes, yield}}.
  mlir::ModuleOp gpuPlan;
  /// Benchmark artifacts (--synthetic-weights, runtime/core/SyntheticWeights.h):
  /// weights of at least 64 KiB are written as seeded records that the
  /// loader expands, not as data.
  bool syntheticWeights = false;
};

/// Serializes every func.func of `module` (made of qcc ops) into the .qpkg
/// format that runtime/core/Artifact.h reads: one node per op, constants as aligned
/// blobs in the data section.
llvm::Error writeArtifact(mlir::ModuleOp module, llvm::StringRef path,
                          const ArtifactOptions &options);

/// The bytes writeArtifact writes (`path` names the artifact in errors).
llvm::Expected<std::vector<char>>
serializeArtifact(mlir::ModuleOp module, llvm::StringRef path,
                  const ArtifactOptions &options);

} // namespace qcc

#endif // QCC_COMPILER_ARTIFACTWRITER_H
