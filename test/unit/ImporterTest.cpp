//===- ImporterTest.cpp - the ONNX importer -------------------------------===//
#include "compiler/OnnxImporter.h"
#include "dialects/QccOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;

static std::string model(const char *name) {
  return std::string(QCC_SOURCE_DIR) + "/test/models/" + name;
}

TEST(Importer, BertSignatureKeepsNamesAndSymbolicDims) {
  MLIRContext ctx;
  auto module = qcc::importOnnxFile(ctx, model("bert.onnx"));
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  auto main = (*module)->lookupSymbol<func::FuncOp>("main");
  ASSERT_TRUE(main);
  ASSERT_EQ(main.getNumArguments(), 2u);
  EXPECT_EQ(main.getArgAttrOfType<StringAttr>(1, "qcc.name").getValue(),
            "attention_mask");
  auto dims = main.getArgAttrOfType<ArrayAttr>(0, qcc::kDimNamesAttr);
  ASSERT_TRUE(dims);
  EXPECT_EQ(cast<StringAttr>(dims[0]).getValue(), "batch");
  EXPECT_EQ(cast<StringAttr>(dims[1]).getValue(), "seq");
  auto type = cast<RankedTensorType>(main.getArgument(0).getType());
  EXPECT_TRUE(type.isDynamicDim(0) && type.isDynamicDim(1));
}

TEST(Importer, EveryNodeBecomesAQccOp) {
  MLIRContext ctx;
  auto module = qcc::importOnnxFile(ctx, model("gpt2.onnx"));
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  int softmaxes = 0;
  (*module)->walk([&](Operation *op) {
    bool structural = isa<func::FuncOp, func::ReturnOp, ModuleOp>(op);
    EXPECT_TRUE(structural || op->getDialect()->getNamespace() == "qcc")
        << op->getName().getStringRef().str();
    softmaxes += isa<qcc::SoftmaxOp>(op);
  });
  EXPECT_EQ(softmaxes, 2); // one per layer
}

TEST(Importer, UnsupportedOpNamesNodeAndOp) {
  MLIRContext ctx;
  auto module = qcc::importOnnxFile(ctx, model("invalid/unsupported_op.onnx"));
  ASSERT_FALSE(bool(module));
  std::string msg = llvm::toString(module.takeError());
  EXPECT_NE(msg.find("unsupported_op.onnx"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'det_node' (Det)"), std::string::npos) << msg;
}

TEST(Importer, ConverterTableListsVersions) {
  auto ops = qcc::supportedOnnxOps();
  auto it = std::find_if(ops.begin(), ops.end(),
                         [](auto &p) { return p.first == "ReduceMean"; });
  ASSERT_NE(it, ops.end());
  EXPECT_EQ(it->second, (std::vector<int>{13, 18}));
}
