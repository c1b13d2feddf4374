//===- LaunchRecordTest.cpp - the typed launch record (format/) -----------===//
//
// format/LaunchRecord: expressions evaluate as documented, records survive
// toJson -> fromJson unchanged, malformed records are refused with one line
// naming the problem, and artifacts of another format version are refused.
//
//===----------------------------------------------------------------------===//
#include "format/LaunchRecord.h"
#include "runtime/core/Artifact.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace qcc::format;
using nlohmann::json;

namespace {

/// Operand 0 is [3, 37, 64], result 0 is [3, 37, 128].
int64_t eval(const LaunchRecord &r, const Expr &e, int64_t maxContext = 0) {
  static const std::vector<int64_t> op0{3, 37, 64}, res0{3, 37, 128};
  ExprEvaluator ev(r, {[](TensorRef t) -> const std::vector<int64_t> & {
                         return t.side == TensorRef::Side::Operand ? op0 : res0;
                       },
                       [&](RuntimeSize) { return maxContext; }});
  return ev(e);
}

TEST(LaunchRecord, Expressions) {
  LaunchRecord r;
  TensorRef x = TensorRef::operand(0), y = TensorRef::result(0);
  Expr M = Expr::symbol(r.addSymbol("M", Expr::rows(x)));
  Expr batch = Expr::symbol(r.addSymbol("batch", Expr::dim(x, 0)));
  EXPECT_EQ(eval(r, 128), 128);
  EXPECT_EQ(eval(r, M), 111);
  EXPECT_EQ(eval(r, Expr::numel(y)), 3 * 37 * 128);
  EXPECT_EQ(eval(r, Expr::dim(y, -1)), 128);
  EXPECT_EQ(eval(r, Expr::ceilDiv(M, 8)), 14);
  EXPECT_EQ(eval(r, Expr::mul({batch, 4, Expr::ceilDiv(Expr::dim(x, 1), 32)})),
            24);
  EXPECT_EQ(eval(r, Expr::gt(batch, 1)), 1);
  EXPECT_EQ(eval(r, Expr::gt(batch, 3)), 0);
  EXPECT_EQ(eval(r, Expr::eq(Expr::numel(x), Expr::numel(y))), 0);
  EXPECT_EQ(eval(r, Expr::select(Expr::eq(batch, 3), 7, 9)), 7);
  Expr splits =
      Expr::ceilDiv(Expr::runtimeSize(RuntimeSize::MaxContextLen), 256);
  EXPECT_EQ(eval(r, splits, 257), 2);
  EXPECT_TRUE(readsRuntime(splits, r));
  EXPECT_FALSE(readsRuntime(M, r));
  EXPECT_THROW(eval(r, Expr::ceilDiv(1, 0)), std::runtime_error);
  EXPECT_THROW(eval(r, Expr::dim(x, 3)), std::runtime_error);
}

LaunchRecord sample() {
  LaunchRecord r;
  TensorRef x = TensorRef::operand(0);
  Expr n = Expr::symbol(r.addSymbol("n", Expr::numel(x)));
  Expr splits = Expr::symbol(r.addSymbol(
      "splits", Expr::ceilDiv(Expr::runtimeSize(RuntimeSize::MaxContextLen),
                              Expr::mul({n, 2}))));
  uint32_t ws = r.addWorkspace("acc", Expr::mul({n, 4}));
  LaunchStep s;
  s.entry = "qcc_main_k0";
  s.name = "split";
  s.block[0] = 128;
  s.grid[0] = Expr::ceilDiv(n, 256);
  s.grid[2] = Expr::dim(x, -1);
  s.dynamicSmem = 81920;
  s.when = Expr::gt(splits, 1);
  s.waitsForPriorGrids = true;
  auto p = [](const char *name, ParamKind kind) {
    Param q;
    q.name = name;
    q.kind = kind;
    return q;
  };
  s.params.push_back(p("x", ParamKind::Operand));
  s.params.push_back(p("w", ParamKind::OperandF16));
  s.params.back().tensor = TensorRef::operand(1);
  s.params.push_back(p("y", ParamKind::Result));
  s.params.back().tensor = TensorRef::result(0);
  s.params.push_back(p("m", ParamKind::Int32));
  s.params.back().expr = Expr::select(Expr::eq(n, 4), 0, n);
  s.params.push_back(p("k", ParamKind::Int64));
  s.params.back().expr = 1ll << 40;
  s.params.push_back(p("eps", ParamKind::Float32));
  s.params.back().number = 1e-5f;
  s.params.push_back(p("none", ParamKind::Null));
  s.params.push_back(p("cache", ParamKind::Runtime));
  s.params.back().runtime = RuntimeValue::KvPool;
  s.params.push_back(p("acc", ParamKind::Workspace));
  s.params.back().workspace = ws;
  r.steps.push_back(s);
  return r;
}

TEST(LaunchRecord, RoundTrip) {
  LaunchRecord r = sample();
  json j = toJson(r);
  EXPECT_EQ(j["version"], kLaunchRecordVersion);
  LaunchRecord back = fromJson(json::parse(j.dump()));
  EXPECT_EQ(back, r);
  EXPECT_EQ(toJson(back), j);
  EXPECT_EQ(j["steps"][0]["waits_for_prior_grids"], true);
  // A step that does not wait says nothing (older records read the same).
  LaunchRecord plain = r;
  plain.steps[0].waitsForPriorGrids = false;
  EXPECT_FALSE(toJson(plain)["steps"][0].contains("waits_for_prior_grids"));
  EXPECT_EQ(fromJson(toJson(plain)), plain);
  EXPECT_EQ(r.maxIndex(TensorRef::Side::Operand), 1);
  EXPECT_EQ(r.maxIndex(TensorRef::Side::Result), 0);
  for (int i = 0; i <= (int)RuntimeValue::KvVTokenScales; ++i)
    EXPECT_EQ(parseRuntimeValue(spelling((RuntimeValue)i)), (RuntimeValue)i);
}

/// The one-line error fromJson gives for `j`.
std::string refusal(const json &j) {
  try {
    fromJson(j);
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(LaunchRecord, MalformedIsRefused) {
  json good = toJson(sample());
  auto with = [&](const json::json_pointer &at, json v) {
    json j = good;
    j[at] = std::move(v);
    return refusal(j);
  };
  EXPECT_EQ(refusal(json::array()), "launch record: record: not an object");
  EXPECT_NE(with(json::json_pointer("/version"), 0).find("version 0"),
            std::string::npos);
  EXPECT_NE(with(json::json_pointer("/symbols/n"), json{{"pow", {2, 3}}})
                .find("unknown operation 'pow'"),
            std::string::npos);
  EXPECT_NE(with(json::json_pointer("/symbols/n"), "splits")
                .find("defined in terms of itself"),
            std::string::npos);
  EXPECT_NE(with(json::json_pointer("/steps/0/grid/x"), "nope")
                .find("unknown symbol 'nope'"),
            std::string::npos);
  EXPECT_NE(with(json::json_pointer("/steps/0/block/x"), 2048)
                .find("not in [1, 1024]"),
            std::string::npos);
  EXPECT_NE(with(json::json_pointer("/steps/0/params/0"),
                 json{{"name", "x"}, {"rope_batch_stride", 1}})
                .find("step 0: param 0: unknown parameter kind "
                      "'rope_batch_stride'"),
            std::string::npos);
  EXPECT_NE(with(json::json_pointer("/steps/0/params/7/runtime"), "kv.bogus")
                .find("unknown runtime value"),
            std::string::npos);
  EXPECT_NE(with(json::json_pointer("/steps/0/params/8/workspace"), "ml")
                .find("unknown workspace"),
            std::string::npos);
  EXPECT_NE(with(json::json_pointer("/steps/0/params/0/operand"), -1)
                .find("not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(with(json::json_pointer("/steps/0/grid/y"), json{{"ceil_div", {1}}})
                .find("ceil_div needs 2 arguments"),
            std::string::npos);
  EXPECT_NE(with(json::json_pointer("/steps/0/waits_for_prior_grids"), 1)
                .find("step 0: waits_for_prior_grids 1 is not a boolean"),
            std::string::npos);
  json noEntry = good;
  noEntry["steps"][0].erase("entry");
  EXPECT_NE(refusal(noEntry).find("step 0: no entry name"), std::string::npos);
}

TEST(ArtifactFormat, OtherVersionsAreRefused) {
  // A version-1 header (launch records before format/LaunchRecord.h).
  auto bytes = std::make_shared<std::vector<char>>(qcc::format::kHeaderSize);
  qcc::format::Header h{};
  std::memcpy(h.magic, qcc::format::kMagic, sizeof h.magic);
  h.version = 1;
  h.fileSize = bytes->size();
  std::memcpy(bytes->data(), &h, sizeof h);
  try {
    qcc::rt::Artifact::fromBytes(bytes, "old.qpkg");
    FAIL() << "a version-1 artifact was accepted";
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()),
              "old.qpkg: artifact format version 1 is not supported by this "
              "runtime (it reads version " +
                  std::to_string(qcc::format::kFormatVersion) +
                  "); recompile the model");
  }
  EXPECT_EQ(qcc::format::kFormatVersion, 3u);
}

} // namespace
