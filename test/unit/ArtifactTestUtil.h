//===- ArtifactTestUtil.h - IR text to artifacts, for the unit tests -*- C++
//-*-===//
//
// Parses qcc IR, serializes it to artifact bytes (compiler/ArtifactWriter.h)
// and finds nodes: shared by the tests that load artifacts of compressed
// weights (SparseLinearTest, Int4LinearTest's artifact cases).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_TEST_UNIT_ARTIFACTTESTUTIL_H
#define QCC_TEST_UNIT_ARTIFACTTESTUTIL_H

#include "compiler/ArtifactWriter.h"
#include "dialects/QccDialect.h"
#include "runtime/Artifact.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

namespace qcc::artifacttest {

using qcc::rt::Function;
using qcc::rt::Node;
using qcc::rt::OpKind;

inline std::shared_ptr<std::vector<char>>
serialize(mlir::ModuleOp module, const qcc::ArtifactOptions &o = {}) {
  auto bytes = qcc::serializeArtifact(module, "test", o);
  EXPECT_TRUE(!!bytes) << llvm::toString(bytes.takeError());
  return std::make_shared<std::vector<char>>(std::move(*bytes));
}

inline mlir::OwningOpRef<mlir::ModuleOp> parse(mlir::MLIRContext &ctx,
                                               const char *text) {
  ctx.loadDialect<mlir::func::FuncDialect, qcc::QccDialect>();
  return mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
}

/// The node of kind `op` in `fn`.
inline const Node &nodeOf(const Function &fn, OpKind op) {
  for (const Node &n : fn.nodes)
    if (n.kind == op)
      return n;
  throw std::runtime_error("no such node");
}

} // namespace qcc::artifacttest

#endif // QCC_TEST_UNIT_ARTIFACTTESTUTIL_H
