//===- ArtifactWriter.h - writing .qpkg artifacts --------------*- C++ -*-===//
#ifndef QCC_COMPILER_ARTIFACTWRITER_H
#define QCC_COMPILER_ARTIFACTWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>

namespace qcc {

struct ArtifactOptions {
  std::string sourceName;    ///< the model file it was compiled from
  std::string tokenizerPath; ///< a SentencePiece model to embed, or empty
};

/// Serializes every func.func of `module` (made of qcc ops) into the .qpkg
/// format that runtime/Artifact.h reads: one node per op, constants as aligned
/// blobs in the data section.
llvm::Error writeArtifact(mlir::ModuleOp module, llvm::StringRef path,
                          const ArtifactOptions &options);

} // namespace qcc

#endif // QCC_COMPILER_ARTIFACTWRITER_H
