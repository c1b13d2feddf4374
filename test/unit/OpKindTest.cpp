//===- OpKindTest.cpp - one op vocabulary (format/OpKinds.def) ------------===//
//
// The table the runtime dispatches on must name exactly the ops of the qcc
// dialect (so ODS and OpKinds.def cannot drift apart), every op but the two
// the session runs itself must reach a CPU kernel, and an artifact naming an
// op outside the table is refused at load with one line.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccDialect.h"
#include "format/ArtifactFormat.h"
#include "format/OpKind.h"
#include "runtime/core/Artifact.h"
#include "runtime/cpu/CpuKernels.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace qcc;
using format::OpKind;
using nlohmann::json;

namespace {

/// qcc ops that are no artifact node: constants are values of the manifest,
/// a region's terminator is its body's "yield" list.
const std::set<std::string> kNotNodes = {"constant", "yield"};

TEST(OpKind, NamesRoundTrip) {
  std::set<std::string> names;
  for (OpKind k : format::kAllOpKinds) {
    EXPECT_EQ(format::parseOpKind(format::opKindName(k)), k);
    EXPECT_TRUE(names.insert(format::opKindName(k)).second)
        << "duplicate name " << format::opKindName(k);
  }
  EXPECT_FALSE(format::parseOpKind("frobnicate"));
  EXPECT_FALSE(format::parseOpKind("qcc.add")); // names carry no dialect
  EXPECT_FALSE(format::parseOpKind(""));
}

TEST(OpKind, MatchesTheDialect) {
  mlir::MLIRContext context;
  context.loadDialect<QccDialect>();
  int qccOps = 0;
  for (mlir::RegisteredOperationName op : context.getRegisteredOperations()) {
    if (op.getDialectNamespace() != "qcc")
      continue;
    ++qccOps;
    std::string name = op.getStringRef().drop_front(4).str(); // "qcc."
    if (kNotNodes.count(name)) {
      EXPECT_FALSE(format::parseOpKind(name)) << name;
      continue;
    }
    EXPECT_TRUE(format::parseOpKind(name))
        << "qcc." << name << " has no line in format/OpKinds.def";
  }
  EXPECT_GT(qccOps, 0);
  for (OpKind k : format::kAllOpKinds) {
    std::string name = std::string("qcc.") + format::opKindName(k);
    EXPECT_TRUE(mlir::RegisteredOperationName::lookup(name, &context))
        << "format/OpKinds.def names " << name
        << ", which the dialect does not define";
  }
}

// kv_attention (the cache), lora (the call's adapters) and kernel (a region)
// are the session's to run.
TEST(OpKind, EveryOpButTheSessionsOwnHasACpuKernel) {
  // With no operands a kernel refuses its input (or, for none here, runs):
  // either way the dispatch reached it.
  for (OpKind k : format::kAllOpKinds) {
    std::string error;
    try {
      json none = json::object();
      rt::runCpuKernel(k, rt::Attrs(none), {});
    } catch (const std::exception &e) {
      error = e.what();
    }
    bool none = error.find("has no CPU kernel") != std::string::npos;
    EXPECT_EQ(none, k == OpKind::KvAttention || k == OpKind::Lora ||
                        k == OpKind::Kernel)
        << format::opKindName(k) << ": " << error;
  }
}

/// A .qpkg holding `manifest` and no data.
std::vector<char> package(const json &manifest) {
  return format::packageFile(manifest.dump(), "");
}

/// main(x: f32[2]) -> y = `node`(x).
json oneNode(json node) {
  json port = {{"name", "x"}, {"value", 0}, {"dtype", "f32"}, {"shape", {2}}};
  json out = port;
  out["name"] = "y";
  out["value"] = 1;
  node["in"] = {0};
  node["out"] = {1};
  return {{"values",
           {{{"dtype", "f32"}, {"shape", {2}}},
            {{"dtype", "f32"}, {"shape", {2}}}}},
          {"constants", json::array()},
          {"functions",
           {{{"name", "main"},
             {"inputs", {port}},
             {"outputs", {out}},
             {"nodes", {node}}}}}};
}

/// The load error of `manifest`, "" when it loads.
std::string loadError(const json &manifest) {
  try {
    rt::Artifact::fromBytes(
        std::make_shared<std::vector<char>>(package(manifest)), "m.qpkg");
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

TEST(OpKind, LoaderParsesEachOpOnce) {
  auto a = rt::Artifact::fromBytes(
      std::make_shared<std::vector<char>>(
          package(oneNode({{"op", "relu"}, {"name", "act"}}))),
      "m.qpkg");
  const rt::Node &n = a.function("main").nodes.at(0);
  EXPECT_EQ(n.kind, OpKind::Relu);
  EXPECT_EQ(rt::opKindName(n.kind), std::string("relu"));
}

TEST(OpKind, LoaderRefusesAnUnknownOp) {
  EXPECT_EQ(loadError(oneNode({{"op", "frobnicate"}, {"name", "n7"}})),
            "m.qpkg: manifest: function 'main', node 'n7': unknown op "
            "'frobnicate' (compiled by a different qcc? recompile the model)");
  // Inside a kernel region too.
  json body = {{"args", {0}},
               {"yield", {1}},
               {"nodes", {{{"op", "Relu"}, {"name", "inner"}, {"in", {0}},
                           {"out", {1}}}}}};
  EXPECT_EQ(loadError(oneNode({{"op", "kernel"}, {"name", "k0"},
                               {"attrs", {{"kind", "elementwise"}}},
                               {"body", body}})),
            "m.qpkg: manifest: function 'main', node 'inner': unknown op "
            "'Relu' (compiled by a different qcc? recompile the model)");
}

TEST(OpKind, LoaderRefusesABodyOnlyWhereNoKernel) {
  EXPECT_EQ(loadError(oneNode({{"op", "kernel"}, {"name", "k0"}})),
            "m.qpkg: manifest: function 'main', node 'k0' (kernel): a kernel "
            "without a body");
  json body = {{"args", {0}}, {"yield", {0}}, {"nodes", json::array()}};
  EXPECT_EQ(loadError(oneNode({{"op", "relu"}, {"name", "r"}, {"body", body}})),
            "m.qpkg: manifest: function 'main', node 'r' (relu): a body on an "
            "op that is no kernel");
}

} // namespace
