//===- ArtifactTestUtil.h - IR text to artifacts, for the unit tests -*- C++
//-*-===//
//
// Parses qcc IR, serializes it to artifact bytes (compiler/ArtifactWriter.h)
// and finds nodes, and runs an entry point on both CPU kernel paths: shared
// by the tests that load artifacts of compressed weights (SparseLinearTest,
// Int4ArtifactTest).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_TEST_UNIT_ARTIFACTTESTUTIL_H
#define QCC_TEST_UNIT_ARTIFACTTESTUTIL_H

#include "compiler/ArtifactWriter.h"
#include "dialects/QccDialect.h"
#include "runtime/core/Artifact.h"
#include "runtime/cpu/CpuKernels.h"
#include "runtime/cpu/Session.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
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

/// Restores the process's CPU kernel path when the scope ends.
struct PathGuard {
  qcc::rt::CpuKernelPath saved = qcc::rt::cpuKernelPath();
  ~PathGuard() { qcc::rt::setCpuKernelPath(saved); }
};

/// What one CPU kernel path did with an entry point.
struct PathRun {
  std::map<std::string, qcc::rt::Tensor> out;
  std::vector<std::string> ran; ///< op kinds of the nodes run, in order
};

/// Runs `fn` of `a` on `in` with the fast and the reference kernel path
/// (the path is restored after); `onNode` also sees every node run.
inline std::map<qcc::rt::CpuKernelPath, PathRun> runFastAndReference(
    const qcc::rt::Artifact &a, const std::string &fn,
    const std::map<std::string, qcc::rt::Tensor> &in,
    const std::function<void(qcc::rt::CpuKernelPath,
                             const qcc::rt::Session::NodeRun &)> &onNode = {}) {
  using qcc::rt::CpuKernelPath;
  PathGuard guard;
  std::map<CpuKernelPath, PathRun> runs;
  for (CpuKernelPath p : {CpuKernelPath::Fast, CpuKernelPath::Reference}) {
    qcc::rt::setCpuKernelPath(p);
    qcc::rt::Session s(a);
    s.setTracer([&](const qcc::rt::Session::NodeRun &r) {
      runs[p].ran.push_back(qcc::rt::opKindName(r.node.kind));
      if (onNode)
        onNode(p, r);
    });
    runs[p].out = s.run(fn, in);
  }
  return runs;
}

} // namespace qcc::artifacttest

#endif // QCC_TEST_UNIT_ARTIFACTTESTUTIL_H
