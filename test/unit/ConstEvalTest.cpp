//===- ConstEvalTest.cpp - constant folding runs the reference kernels ----===//
#include "passes/ConstEval.h"

#include "dialects/QccDialect.h"
#include "dialects/QccOps.h"
#include "runtime/cpu/CpuKernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace mlir;

// A folded constant is the reference kernels' result (runtime/reference), bit
// for bit, whatever the path the process's CPU backend is on: here a matmul,
// whose reference sums each element's products in float in ascending k, while
// the backend's fast path sums them in another order (BLAS). The depth (67)
// and the values make the two orders round differently somewhere; the test
// checks that they do, so it cannot pass by both paths agreeing.
TEST(ConstEval, FoldsWithTheReferenceKernelsWhateverThePath) {
  constexpr int64_t M = 4, K = 67, N = 9;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(M * K), b(K * N);
  for (float &x : a)
    x = dist(rng);
  for (float &x : b)
    x = dist(rng);

  MLIRContext ctx;
  ctx.loadDialect<qcc::QccDialect, func::FuncDialect>();
  const char *src = R"(
    func.func @f(%a: tensor<4x67xf32>, %b: tensor<67x9xf32>) -> tensor<4x9xf32> {
      %y = qcc.matmul %a, %b : (tensor<4x67xf32>, tensor<67x9xf32>) -> tensor<4x9xf32>
      return %y : tensor<4x9xf32>
    })";
  OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(src, &ctx);
  ASSERT_TRUE(m);
  qcc::MatMulOp matmul;
  m->walk([&](qcc::MatMulOp op) { matmul = op; });
  ASSERT_TRUE(matmul);
  auto f32 = Float32Type::get(&ctx);
  ElementsAttr ea = DenseElementsAttr::get(RankedTensorType::get({M, K}, f32),
                                           ArrayRef<float>(a));
  ElementsAttr eb = DenseElementsAttr::get(RankedTensorType::get({K, N}, f32),
                                           ArrayRef<float>(b));

  std::vector<float> want(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float s = 0.0f;
      for (int64_t k = 0; k < K; ++k)
        s += a[i * K + k] * b[k * N + j];
      want[i * N + j] = s;
    }

  qcc::rt::setCpuKernelPath(qcc::rt::CpuKernelPath::Fast);
  std::string why;
  auto folded = qcc::evaluateOp(matmul, {ea, eb}, &why);
  ASSERT_TRUE(succeeded(folded)) << why;
  auto got = (*folded)[0].getValues<float>();
  for (int64_t i = 0; i < M * N; ++i)
    EXPECT_EQ(got[i], want[i]) << "element " << i;

  // The backend's fast path on the same operands: another order of sums.
  qcc::rt::Tensor ta(qcc::rt::DType::F32, {M, K}), tb(qcc::rt::DType::F32, {K, N});
  std::memcpy(ta.data<float>(), a.data(), a.size() * sizeof(float));
  std::memcpy(tb.data<float>(), b.data(), b.size() * sizeof(float));
  nlohmann::json none = nlohmann::json::object();
  std::vector<qcc::rt::Tensor> fast = qcc::rt::runCpuKernel(
      qcc::format::OpKind::MatMul, qcc::rt::Attrs(none), {&ta, &tb});
  int differ = 0;
  for (int64_t i = 0; i < M * N; ++i)
    differ += fast[0].data<float>()[i] != want[i];
  EXPECT_GT(differ, 0) << "the fast path summed as the reference did: the "
                          "test would not see a fold on the fast path";
}
