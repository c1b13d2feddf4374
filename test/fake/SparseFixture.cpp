//===- SparseFixture.cpp - artifacts with 2:4 sparse linears, for tests ---===//
//
//   qcc-sparse-fixture MODEL.onnx OUT.qpkg [--quant=w8a8] [--kv-dtype=i8]
//       [--kv-cache=contiguous] [--calib-stats=FILE]
//
// Compiles MODEL like qcc up to kv-layout, then makes every linear / qlinear
// whose weight is a constant [N, K] with K % 32 == 0 and N <= 4K (so not the
// LM head) 2:4 sparse by magnitude (the two largest |w| of every four
// consecutive k; ties to the lower k), stored as qcc.sparse_2_4 of constant
// values and metadata written by format/Sparse24.h (a qlinear's weight_sum is
// recomputed from the pruned weight), and finishes the pipeline (form-kernels,
// emit, compile, package). A test fixture, not a pruning method: the
// sparsify-2-4 pass is qcc's (--sparsity=2:4). It exists so that the sparse
// GEMM kinds can be driven end to end (the fake-driver plan test,
// test/e2e/check_gpu.py's sparse artifacts) independently of that pass.
//
//===----------------------------------------------------------------------===//
#include "compiler/Package.h"
#include "compiler/Pipeline.h"
#include "dialects/QccConstants.h"
#include "dialects/QccDialect.h"
#include "dialects/QccOps.h"
#include "format/Sparse24.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>
#include <cstring>
#include <iostream>
#include <string>

using namespace mlir;
namespace sp = qcc::format::sparse24;

namespace {

/// Zeroes all but the two largest |w| of every group of four consecutive k
/// of the row-major [n, k] weight `w`.
template <class T> void pruneGroups(T *w, int64_t n, int64_t k) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < k / 4; ++g) {
      T *grp = w + r * k + 4 * g;
      int a = 0, b = 1;
      if (std::fabs((double)grp[b]) > std::fabs((double)grp[a]))
        std::swap(a, b);
      for (int i = 2; i < 4; ++i) {
        double v = std::fabs((double)grp[i]);
        if (v > std::fabs((double)grp[a])) {
          b = a;
          a = i;
        } else if (v > std::fabs((double)grp[b])) {
          b = i;
        }
      }
      for (int i = 0; i < 4; ++i)
        if (i != a && i != b)
          grp[i] = T(0);
    }
}

/// Rewrites `gemm`'s constant weight into qcc.sparse_2_4; false if it does
/// not qualify.
bool sparsify(Operation *gemm, OpOperand &weight, OpOperand *weightSum) {
  auto c = weight.get().getDefiningOp<qcc::ConstantOp>();
  auto type = dyn_cast<RankedTensorType>(weight.get().getType());
  if (!c || !type || !type.hasStaticShape() || type.getRank() != 2)
    return false;
  int64_t n = type.getDimSize(0), k = type.getDimSize(1);
  Type elem = type.getElementType();
  if (k % sp::kKAlignment != 0 || n > 4 * k || !(elem.isF32() || elem.isInteger(8)))
    return false;
  auto bytes = qcc::getBytes(c.getValue());
  if (!bytes)
    return false;
  size_t eb = elem.isF32() ? 4 : 1;
  if (elem.isF32())
    pruneGroups(reinterpret_cast<float *>(bytes->data()), n, k);
  else
    pruneGroups(reinterpret_cast<int8_t *>(bytes->data()), n, k);
  std::vector<char> values((size_t)(n * sp::valuesCols(k)) * eb);
  std::vector<char> meta((size_t)(n * sp::metaCols(k)) * 4);
  if (auto err = sp::compress(bytes->data(), n, k, eb, values.data(),
                              reinterpret_cast<int32_t *>(meta.data()))) {
    std::cerr << "qcc-sparse-fixture: " << *err << "\n";
    return false;
  }
  OpBuilder b(gemm);
  std::string name = qcc::blobName(c.getValue(), "w");
  auto vType = RankedTensorType::get({n, sp::valuesCols(k)}, elem);
  auto mType = RankedTensorType::get({n, sp::metaCols(k)}, b.getI32Type());
  Value v = qcc::ConstantOp::create(
      b, gemm->getLoc(), qcc::makeElements(vType, values, name + ".values"));
  Value m = qcc::ConstantOp::create(
      b, gemm->getLoc(), qcc::makeElements(mType, meta, name + ".meta"));
  Value w = qcc::Sparse24Op::create(b, gemm->getLoc(), type, v, m);
  weight.set(w);
  if (c->use_empty())
    c->erase();
  if (weightSum) {
    // weight_sum[n] = sum_k Wq[n, k] of the pruned weight (asymmetric
    // activations subtract x_zero * weight_sum).
    std::vector<char> sums((size_t)n * 4);
    for (int64_t r = 0; r < n; ++r) {
      int32_t s = 0;
      for (int64_t i = 0; i < k; ++i)
        s += (int8_t)(*bytes)[(size_t)(r * k + i)];
      std::memcpy(&sums[(size_t)r * 4], &s, 4);
    }
    auto sType = cast<RankedTensorType>(weightSum->get().getType());
    weightSum->set(qcc::ConstantOp::create(
        b, gemm->getLoc(), qcc::makeElements(sType, sums, name + ".sum")));
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::cerr << "usage: qcc-sparse-fixture MODEL.onnx OUT.qpkg [--quant=w8a8] "
                 "[--kv-dtype=i8] [--kv-cache=contiguous] [--calib-stats=FILE]\n";
    return 2;
  }
  qcc::CompileOptions options;
  options.quiet = true;
  options.artifactPath = argv[2];
  options.tokenizerPath = qcc::findTokenizer("", argv[1]);
  options.calibration.tokenizerPath = options.tokenizerPath;
  for (int i = 3; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quant=w8a8")
      options.quant = qcc::QuantMode::W8A8;
    else if (a == "--kv-dtype=i8")
      options.kvDtype = qcc::KvDtype::I8;
    else if (a == "--kv-cache=contiguous")
      options.kvCache = qcc::KvLayout::Contiguous;
    else if (a.rfind("--calib-stats=", 0) == 0)
      options.calibration.statsPath = a.substr(std::strlen("--calib-stats="));
    else {
      std::cerr << "qcc-sparse-fixture: unknown option " << a << "\n";
      return 2;
    }
  }
  MLIRContext context;
  auto c = qcc::compileTo(context, argv[1], qcc::Phase::KvLayout, options);
  if (!c) {
    std::cerr << "qcc-sparse-fixture: " << llvm::toString(c.takeError())
              << "\n";
    return 1;
  }
  int sparse = 0;
  c->module->walk([&](Operation *op) {
    if (auto q = dyn_cast<qcc::QLinearOp>(op))
      sparse += sparsify(op, q.getWeightMutable(), &q.getWeightSumMutable());
    else if (auto l = dyn_cast<qcc::LinearOp>(op))
      sparse += sparsify(op, l.getWeightMutable(), nullptr);
  });
  for (qcc::Phase p : {qcc::Phase::FormKernels, qcc::Phase::Emit,
                       qcc::Phase::Compile, qcc::Phase::Package})
    if (auto err = qcc::runPhase(context, *c, p)) {
      std::cerr << "qcc-sparse-fixture: " << llvm::toString(std::move(err))
                << "\n";
      return 1;
    }
  std::cout << "qcc-sparse-fixture: " << sparse << " linears 2:4 sparse, wrote "
            << options.artifactPath << "\n";
  return 0;
}
