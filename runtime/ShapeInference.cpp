//===- ShapeInference.cpp - result shapes without running an op -----------===//
#include "runtime/ShapeInference.h"

#include <map>
#include <set>
#include <stdexcept>

using namespace qcc::rt;

namespace {

[[noreturn]] void fail(const Node &n, const std::string &why) {
  throw std::runtime_error("shape of node '" + n.name + "' (" + n.op +
                           "): " + why);
}

const std::set<std::string> &sameAsFirst() {
  static const std::set<std::string> ops = {
      "layer_norm", "rms_norm", "gelu",       "silu", "rotary", "softmax",
      "sqrt",       "reciprocal", "erf",      "tanh", "sigmoid", "exp",
      "cos",        "sin",        "relu",     "neg",  "not",     "cast",
      "abs",        "log",        "is_nan",   "cumsum",
      "attention",  "kv_attention"};
  return ops;
}

const std::set<std::string> &broadcasting() {
  static const std::set<std::string> ops = {
      "add",  "sub",        "mul",     "div",           "pow", "max", "min",
      "equal", "less",      "less_equal", "greater", "greater_equal", "and",
      "or",   "where"};
  return ops;
}

Shape broadcast(const Node &n, const std::vector<Shape> &ops) {
  Shape out;
  for (const Shape &s : ops) {
    if (s.size() > out.size())
      out.insert(out.begin(), s.size() - out.size(), 1);
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &o = out[out.size() - s.size() + i];
      int64_t d = s[i];
      if (o == 1)
        o = d;
      else if (d != 1 && d != o)
        fail(n, "shapes " + shapeString(ops[0]) + " and " + shapeString(s) +
                    " do not broadcast");
    }
  }
  return out;
}

} // namespace

const Shape &qcc::rt::operandShape(const Node &n, const std::vector<Shape> &ops,
                                   size_t i, size_t minRank) {
  if (i >= ops.size() || ops[i].size() < minRank)
    fail(n, "operand " + std::to_string(i) + " missing or of rank < " +
                std::to_string(minRank));
  return ops[i];
}

std::map<int64_t, Shape>
qcc::rt::inferBodyShapes(const Node &n, const std::vector<Shape> &ops) {
  std::map<int64_t, Shape> shapes;
  for (size_t i = 0; i < n.body->args.size(); ++i)
    shapes[n.body->args[i]] = i < ops.size() ? ops[i] : Shape();
  for (const Node &inner : n.body->nodes) {
    std::vector<Shape> in;
    for (int64_t id : inner.inputs) {
      auto it = shapes.find(id);
      if (id >= 0 && it == shapes.end())
        fail(n, "body node '" + inner.name + "' reads a value the region "
                "does not define");
      in.push_back(id >= 0 ? it->second : Shape());
    }
    std::vector<Shape> out = inferShapes(inner, in);
    if (out.size() != inner.outputs.size())
      fail(inner, "result count");
    for (size_t r = 0; r < out.size(); ++r)
      shapes[inner.outputs[r]] = out[r];
  }
  return shapes;
}

std::vector<Shape> qcc::rt::inferShapes(const Node &n,
                                        const std::vector<Shape> &ops) {
  if (n.body) {
    std::map<int64_t, Shape> shapes = inferBodyShapes(n, ops);
    std::vector<Shape> out;
    for (int64_t id : n.body->yields) {
      auto it = shapes.find(id);
      if (it == shapes.end())
        fail(n, "yields a value the region does not define");
      out.push_back(it->second);
    }
    return out;
  }
  if (sameAsFirst().count(n.op))
    return {operandShape(n, ops, 0, 0)};
  if (broadcasting().count(n.op))
    return {broadcast(n, ops)};
  if (n.op == "linear" || n.op == "qlinear") {
    const Shape &x = operandShape(n, ops, 0, 1);
    const Shape &w = operandShape(n, ops, n.op == "linear" ? 1 : 3, 2);
    Shape y = x;
    y.back() = w[0];
    return {y};
  }
  if (n.op == "quantize") {
    const Shape &x = operandShape(n, ops, 0, 1);
    Shape s = {1};
    if (n.attrs.value("granularity", "") == "per_token") {
      s = x;
      s.back() = 1;
    }
    return {x, s, s};
  }
  if (n.op == "gather_elements")
    return {operandShape(n, ops, 1, 1)};
  if (n.op == "embedding") {
    const Shape &table = operandShape(n, ops, 0, 2);
    Shape y = operandShape(n, ops, 1, 0);
    y.push_back(table[1]);
    return {y};
  }
  fail(n, "no shape rule for this op");
}
