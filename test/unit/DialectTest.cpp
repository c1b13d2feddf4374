//===- DialectTest.cpp - dialect helpers ----------------------------------===//
#include "dialects/QccConstants.h"
#include "dialects/QccDialect.h"
#include "dialects/QccOps.h"
#include "dialects/QccRuntimeAttrs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;

static constexpr int64_t kDyn = ShapedType::kDynamic;

TEST(BroadcastShapes, NumpyRules) {
  auto r = qcc::broadcastShapes({kDyn, kDyn, 64}, {64});
  ASSERT_TRUE(succeeded(r));
  EXPECT_EQ(*r, (SmallVector<int64_t>{kDyn, kDyn, 64}));

  r = qcc::broadcastShapes({kDyn, 1, 1, kDyn}, {kDyn, 4, kDyn, kDyn});
  ASSERT_TRUE(succeeded(r));
  EXPECT_EQ(*r, (SmallVector<int64_t>{kDyn, 4, kDyn, kDyn}));

  r = qcc::broadcastShapes({3, 1}, {1, 5});
  ASSERT_TRUE(succeeded(r));
  EXPECT_EQ(*r, (SmallVector<int64_t>{3, 5}));

  EXPECT_TRUE(failed(qcc::broadcastShapes({3, 4}, {5})));
}

TEST(Constants, LargeTensorsBecomeResourcesAndRoundTrip) {
  MLIRContext ctx;
  auto type = RankedTensorType::get({16, 8}, Float32Type::get(&ctx));
  std::vector<float> values(128);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = 0.5f * i - 3.0f;
  ArrayRef<char> bytes(reinterpret_cast<const char *>(values.data()),
                       values.size() * sizeof(float));
  ElementsAttr attr = qcc::makeElements(type, bytes, "layer.0/weight");
  EXPECT_TRUE(isa<DenseResourceElementsAttr>(attr));
  auto back = qcc::getF32Values(attr);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, values);
}

TEST(Constants, SmallTensorsStayDenseAndRoundTrip) {
  MLIRContext ctx;
  auto type = RankedTensorType::get({4}, IntegerType::get(&ctx, 64));
  int64_t values[] = {0, -1, 16, 1LL << 40};
  ArrayRef<char> bytes(reinterpret_cast<const char *>(values), sizeof(values));
  ElementsAttr attr = qcc::makeElements(type, bytes, "shape");
  EXPECT_TRUE(isa<DenseElementsAttr>(attr));
  auto back = qcc::getBytes(attr);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(std::memcmp(back->data(), values, sizeof(values)), 0);
}

TEST(Constants, SplatExpandsToEveryElement) {
  MLIRContext ctx;
  auto type = RankedTensorType::get({3}, Float32Type::get(&ctx));
  auto attr = DenseElementsAttr::get(type, 2.5f);
  auto back = qcc::getF32Values(attr);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, (std::vector<float>{2.5f, 2.5f, 2.5f}));
}

#include "format/KernelKinds.h"

namespace {
// The dialect's kind attribute holds format/KernelKinds.def's enum: every
// kind prints as the table spells it and parses back, in the attribute's own
// form and in qcc.kernel's bare form; an unknown spelling is refused by name.
TEST(KernelKindTest, AttributeSpellsTheTable) {
  MLIRContext ctx;
  ctx.loadDialect<qcc::QccDialect, func::FuncDialect>();
  for (int i = 0; i < qcc::format::kNumKernelKinds; ++i) {
    auto k = (qcc::format::KernelKind)i;
    std::string text =
        std::string("#qcc.kernel_kind<") + qcc::format::spelling(k) + ">";
    Attribute parsed = parseAttribute(text, &ctx);
    auto attr = dyn_cast_or_null<qcc::KernelKindAttr>(parsed);
    ASSERT_TRUE(attr) << text;
    EXPECT_EQ(attr.getValue(), k);
    std::string printed;
    llvm::raw_string_ostream os(printed);
    Attribute(attr).print(os);
    EXPECT_EQ(printed, text);

    // qcc.kernel with this kind, bare, round-trips through its custom form.
    std::string op = std::string("func.func @f(%a: f32) -> f32 {\n"
                                 "  %0 = qcc.kernel ") +
                     qcc::format::spelling(k) +
                     " \"k0\"(%a) : (f32) -> f32 {\n"
                     "  ^bb0(%x: f32):\n    qcc.yield %x : f32\n  }\n"
                     "  return %0 : f32\n}\n";
    ParserConfig config(&ctx, /*verifyAfterParse=*/false);
    OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(op, config);
    ASSERT_TRUE(m) << op;
    qcc::KernelOp kernel;
    m->walk([&](qcc::KernelOp o) { kernel = o; });
    ASSERT_TRUE(kernel);
    EXPECT_EQ(kernel.getKind(), k);
    // (The body holds no anchor op: printed as if verified, both forms.)
    std::string custom, generic;
    llvm::raw_string_ostream cos(custom), gos(generic);
    m->print(cos, OpPrintingFlags().assumeVerified());
    m->print(gos, OpPrintingFlags().assumeVerified().printGenericOpForm());
    EXPECT_NE(custom.find(std::string("qcc.kernel ") +
                          qcc::format::spelling(k) + " \"k0\""),
              std::string::npos)
        << custom;
    EXPECT_NE(generic.find("kind = " + text), std::string::npos) << generic;
  }
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  EXPECT_FALSE(parseAttribute("#qcc.kernel_kind<gemm_i9>", &ctx));
}

// The GEMM column of the table: exactly the kinds whose template family is a
// GEMM (spelled gemm_*), which form-kernels gives an epilogue chain.
TEST(KernelKindTest, GemmColumn) {
  for (int i = 0; i < qcc::format::kNumKernelKinds; ++i) {
    auto k = (qcc::format::KernelKind)i;
    EXPECT_EQ(qcc::format::isGemm(k),
              std::string_view(qcc::format::spelling(k)).starts_with("gemm_"))
        << qcc::format::spelling(k);
  }
}
} // namespace

// The compiler reads the module's qcc.kv_cache through the loader's parser
// (format/KvCacheConfig.h): the same defaults, the same refusals, the field
// named.
TEST(KvCacheAttr, ParsedByTheLoadersParser) {
  MLIRContext ctx;
  Builder b(&ctx);
  auto dict = [&](std::initializer_list<NamedAttribute> attrs) {
    return b.getDictionaryAttr(attrs);
  };
  auto ok = qcc::kvCacheConfig(dict(
      {b.getNamedAttr("layout", b.getStringAttr("contiguous")),
       b.getNamedAttr("layers", b.getI64IntegerAttr(2)),
       b.getNamedAttr("kv_heads", b.getI64IntegerAttr(4)),
       b.getNamedAttr("head_dim", b.getI64IntegerAttr(8))}));
  ASSERT_TRUE(!!ok) << llvm::toString(ok.takeError());
  EXPECT_EQ(ok->layout, "contiguous");
  EXPECT_EQ(ok->layers, 2);
  EXPECT_EQ(ok->kvHeads, 4);
  EXPECT_EQ(ok->headDim, 8);
  EXPECT_EQ(ok->dtype, "f32");
  EXPECT_EQ(ok->blockTokens, qcc::format::KvCacheConfig::kDefaultBlockTokens);

  auto noHeads = qcc::kvCacheConfig(
      dict({b.getNamedAttr("layout", b.getStringAttr("contiguous")),
            b.getNamedAttr("layers", b.getI64IntegerAttr(2)),
            b.getNamedAttr("head_dim", b.getI64IntegerAttr(8))}));
  ASSERT_FALSE(!!noHeads);
  std::string why = llvm::toString(noHeads.takeError());
  EXPECT_NE(why.find("qcc.kv_cache"), std::string::npos) << why;
  EXPECT_NE(why.find("kv_heads"), std::string::npos) << why;

  // A paged cache needs its block size, as at load.
  auto paged = qcc::kvCacheConfig(
      dict({b.getNamedAttr("layers", b.getI64IntegerAttr(2)),
            b.getNamedAttr("kv_heads", b.getI64IntegerAttr(4)),
            b.getNamedAttr("head_dim", b.getI64IntegerAttr(8))}));
  ASSERT_FALSE(!!paged);
  why = llvm::toString(paged.takeError());
  EXPECT_NE(why.find("block_tokens"), std::string::npos) << why;

  auto none = qcc::kvCacheConfig(nullptr);
  ASSERT_FALSE(!!none);
  llvm::consumeError(none.takeError());
}
