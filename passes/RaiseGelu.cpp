//===- RaiseGelu.cpp - raise-gelu ----------------------------------------===//
//
// GELU as the exporters spell it, a product of the three factors x, 0.5 and
// (1 + erf(x / sqrt(2))) or (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) (or
// BLOOM's factored sqrt(2 / pi) x (1 + 0.044715 x^2)), written as two Muls
// grouped either way, becomes qcc.gelu x.
//
//===----------------------------------------------------------------------===//
#include "dialects/QccOps.h"
#include "passes/Passes.h"
#include "passes/PatternUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <array>
#include <numbers>

namespace qcc {
#define GEN_PASS_DEF_RAISEGELU
#include "passes/Passes.h.inc"
} // namespace qcc

#define DEBUG_TYPE "qcc-raise-gelu"

using namespace mlir;
using namespace qcc;

namespace {

constexpr double kSqrt2 = std::numbers::sqrt2;
constexpr double kSqrt2OverPi = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;
constexpr double kCubicCoeff = 0.044715;

/// The ways to read `root` = Mul(Mul(a, b), c) (operands of both Muls in any
/// order) as the three factors {a, b, c}.
static SmallVector<std::array<Value, 3>> threeFactorProducts(MulOp root) {
  SmallVector<std::array<Value, 3>> out;
  for (unsigned i = 0; i < 2; ++i)
    if (auto inner = root->getOperand(i).getDefiningOp<MulOp>())
      out.push_back({inner.getLhs(), inner.getRhs(), root->getOperand(1 - i)});
  return out;
}

/// `x` if `v` = Add(f(t), 1) (either order) with `f` = OpT; the caller checks
/// that `t` is the right function of `x` through `argOf`.
template <typename OpT>
static Value onePlus(Value v, function_ref<Value(Value)> argOf) {
  Value x;
  matchCommutative(v.getDefiningOp<AddOp>(), [&](Value f, Value one) {
    auto op = f.getDefiningOp<OpT>();
    if (!op || !isSplatNear(one, 1.0))
      return false;
    x = argOf(op.getInput());
    return bool(x);
  });
  return x;
}

/// `x` if `t` = Div(x, sqrt(2)) or Mul(x, 1 / sqrt(2)) (either order).
static Value erfArgument(Value t) {
  if (auto div = t.getDefiningOp<DivOp>())
    return isSplatNear(div.getRhs(), kSqrt2) ? div.getLhs() : Value();
  return getOperandBesideSplat(t.getDefiningOp<MulOp>(), 1.0 / kSqrt2);
}

/// `x` if `v` = Pow(x, 3) or Mul(x, Mul(x, x)) (any operand order).
static Value cubeBase(Value v) {
  if (auto pow = v.getDefiningOp<PowOp>())
    return isSplatNear(pow.getRhs(), 3.0) ? pow.getLhs() : Value();
  Value x;
  matchCommutative(v.getDefiningOp<MulOp>(), [&](Value a, Value sq) {
    if (getSquareBase(sq) != a)
      return false;
    x = a;
    return true;
  });
  return x;
}

/// Whether `v` is 0.044715 x^2: the product of x, x and the constant (two
/// Muls grouped either way), or of the constant and Square(x).
static bool isCubicCoeffTimesSquare(Value v, Value x) {
  auto mul = v.getDefiningOp<MulOp>();
  if (!mul)
    return false;
  if (getSquareBase(getOperandBesideSplat(mul, kCubicCoeff)) == x)
    return true;
  for (const std::array<Value, 3> &f : threeFactorProducts(mul))
    for (unsigned i = 0; i < 3; ++i)
      if (isSplatNear(f[i], kCubicCoeff) && f[(i + 1) % 3] == x &&
          f[(i + 2) % 3] == x)
        return true;
  return false;
}

/// `x` if `u` = sqrt(2 / pi) x (1 + 0.044715 x^2) as BLOOM writes it: a
/// product of the three factors (two Muls grouped either way).
static Value factoredTanhArgument(Value u) {
  auto mul = u.getDefiningOp<MulOp>();
  if (!mul)
    return {};
  for (const std::array<Value, 3> &f : threeFactorProducts(mul))
    for (unsigned i = 0; i < 3; ++i) {
      if (!isSplatNear(f[i], kSqrt2OverPi))
        continue;
      for (auto [x, branch] : {std::pair(f[(i + 1) % 3], f[(i + 2) % 3]),
                               std::pair(f[(i + 2) % 3], f[(i + 1) % 3])}) {
        Value base = x;
        if (matchCommutative(branch.getDefiningOp<AddOp>(),
                             [&](Value q, Value one) {
                               return isSplatNear(one, 1.0) &&
                                      isCubicCoeffTimesSquare(q, base);
                             }))
          return x;
      }
    }
  return {};
}

/// `x` if `u` = Mul(Add(x, Mul(x^3, 0.044715)), sqrt(2 / pi)), operands of
/// the Adds and Muls in any order, or factoredTanhArgument's form.
static Value tanhArgument(Value u) {
  if (Value x = factoredTanhArgument(u))
    return x;
  Value s = getOperandBesideSplat(u.getDefiningOp<MulOp>(), kSqrt2OverPi);
  if (!s)
    return {};
  Value x;
  matchCommutative(s.getDefiningOp<AddOp>(), [&](Value a, Value t) {
    Value cube = getOperandBesideSplat(t.getDefiningOp<MulOp>(), kCubicCoeff);
    if (!cube || cubeBase(cube) != a)
      return false;
    x = a;
    return true;
  });
  return x;
}

/// Shared by both forms: `root` is x * 0.5 * branch(x), where `branchInput`
/// returns x for a factor that is the form's (1 + ...) branch.
static LogicalResult rewriteGelu(MulOp root, PatternRewriter &rewriter,
                                 function_ref<Value(Value)> branchInput,
                                 StringRef approximate, StringRef branchName) {
  auto products = threeFactorProducts(root);
  if (products.empty())
    return rewriter.notifyMatchFailure(root, "not a product of three factors");
  std::string reason = ("no factor is " + branchName).str();
  for (auto &f : products) {
    for (unsigned i = 0; i < 3; ++i) {
      Value x = branchInput(f[i]);
      if (!x)
        continue;
      Value a = f[(i + 1) % 3], b = f[(i + 2) % 3];
      if (!((a == x && isSplatNear(b, 0.5)) ||
            (b == x && isSplatNear(a, 0.5)))) {
        reason = ("the factors beside " + branchName +
                  " are not its x and the constant 0.5")
                     .str();
        continue;
      }
      if (x.getType() != root.getType())
        return rewriter.notifyMatchFailure(
            root, "the product's type differs from the input's");
      rewriter.replaceOpWithNewOp<GeluOp>(root, root.getType(), x, approximate);
      return success();
    }
  }
  return rewriter.notifyMatchFailure(root, reason);
}

/// x * 0.5 * (1 + erf(x / sqrt(2))) -> qcc.gelu x {approximate = "none"}.
struct GeluErfForm : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    return rewriteGelu(
        mul, rewriter, [](Value v) { return onePlus<ErfOp>(v, erfArgument); },
        "none", "1 + erf(x / sqrt(2))");
  }
};

/// x * 0.5 * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
///   -> qcc.gelu x {approximate = "tanh"}.
struct GeluTanhForm : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    return rewriteGelu(
        mul, rewriter, [](Value v) { return onePlus<TanhOp>(v, tanhArgument); },
        "tanh", "1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))");
  }
};

struct RaiseGeluPass : qcc::impl::RaiseGeluBase<RaiseGeluPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<GeluErfForm, GeluTanhForm>(&getContext());
    if (failed(applyPatternsTraced(getOperation(), std::move(patterns),
                                   DEBUG_TYPE)))
      signalPassFailure();
  }
};

} // namespace
