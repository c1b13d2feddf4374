//===- ShapeInference.cpp - result shapes without running an op -----------===//
#include "runtime/core/ShapeInference.h"

#include <map>
#include <stdexcept>

using namespace qcc::rt;

namespace {

[[noreturn]] void fail(const Node &n, const std::string &why) {
  throw std::runtime_error("shape of node '" + n.name + "' (" +
                           opKindName(n.kind) + "): " + why);
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
  // No default: a new OpKind without a case does not compile (-Wswitch).
  switch (n.kind) {
  case OpKind::Kernel: {
    if (!n.body)
      fail(n, "a kernel without a body");
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
  case OpKind::LayerNorm:
  case OpKind::RmsNorm:
  case OpKind::Hadamard:
  case OpKind::Gelu:
  case OpKind::Silu:
  case OpKind::Rotary:
  case OpKind::Softmax:
  case OpKind::Sqrt:
  case OpKind::Reciprocal:
  case OpKind::Erf:
  case OpKind::Tanh:
  case OpKind::Sigmoid:
  case OpKind::Exp:
  case OpKind::Cos:
  case OpKind::Sin:
  case OpKind::Relu:
  case OpKind::Neg:
  case OpKind::Not:
  case OpKind::Cast:
  case OpKind::Abs:
  case OpKind::Log:
  case OpKind::IsNaN:
  case OpKind::CumSum:
  case OpKind::Attention:
  case OpKind::KvAttention:
    return {operandShape(n, ops, 0, 0)};
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Pow:
  case OpKind::Max:
  case OpKind::Min:
  case OpKind::Equal:
  case OpKind::Less:
  case OpKind::LessEqual:
  case OpKind::Greater:
  case OpKind::GreaterEqual:
  case OpKind::And:
  case OpKind::Or:
  case OpKind::Where:
    return {broadcast(n, ops)};
  case OpKind::Linear:
  case OpKind::QLinear: {
    const Shape &x = operandShape(n, ops, 0, 1);
    const Shape &w =
        operandShape(n, ops, n.kind == OpKind::Linear ? 1 : 3, 2);
    Shape y = x;
    y.back() = w[0];
    return {y};
  }
  case OpKind::Lora: { // input [..., K], b [J, N, R] -> [..., N]
    Shape y = operandShape(n, ops, 0, 1);
    y.back() = operandShape(n, ops, 2, 3)[1];
    return {y};
  }
  case OpKind::Moe: // [T, H] in, [T, H] out
    return {operandShape(n, ops, 0, 2)};
  case OpKind::Sparse24:
  case OpKind::WeightInt4: { // values / packed [N, K/2] -> [N, K]
    Shape w = operandShape(n, ops, 0, 2);
    w[1] *= 2;
    return {w};
  }
  case OpKind::Quantize: {
    const Shape &x = operandShape(n, ops, 0, 1);
    Shape s = {1};
    if (n.attrs.value("granularity", "") == "per_token") {
      s = x;
      s.back() = 1;
    }
    return {x, s, s};
  }
  case OpKind::GatherElements:
    return {operandShape(n, ops, 1, 1)};
  case OpKind::ReduceMean:
  case OpKind::ReduceSum:
  case OpKind::ReduceMax: { // the router region's sum of its top-k gates
    Shape y = operandShape(n, ops, 0, 0);
    int64_t rank = (int64_t)y.size();
    std::vector<bool> reduced((size_t)rank, false);
    if (!n.attrs.contains("axes") || !n.attrs["axes"].is_array())
      fail(n, "no axes");
    for (const auto &a : n.attrs["axes"]) {
      if (!a.is_number_integer())
        fail(n, "a non-integer axis");
      int64_t axis = a.get<int64_t>();
      if (axis < -rank || axis >= rank)
        fail(n, "axis out of range");
      reduced[(size_t)(axis < 0 ? axis + rank : axis)] = true;
    }
    bool keep = n.attrs.value("keepdims", true);
    Shape out;
    for (int64_t d = 0; d < rank; ++d)
      if (!reduced[(size_t)d])
        out.push_back(y[(size_t)d]);
      else if (keep)
        out.push_back(1);
    return {out};
  }
  case OpKind::TopK: {
    // Its size along the axis is the value of k: known without it only in a
    // router region, whose top_k carries it ("qcc.k", form-kernels).
    if (!n.attrs.contains("qcc.k") || !n.attrs["qcc.k"].is_number_integer())
      fail(n, "no shape rule for this op outside a router region");
    Shape y = operandShape(n, ops, 0, 1);
    int64_t rank = (int64_t)y.size(), axis = n.attrs.value("axis", int64_t(-1));
    if (axis < -rank || axis >= rank)
      fail(n, "axis out of range");
    int64_t k = n.attrs["qcc.k"].get<int64_t>();
    int64_t &d = y[(size_t)(axis < 0 ? axis + rank : axis)];
    if (k < 0 || k > d)
      fail(n, "k = " + std::to_string(k) + " is out of range for " + shapeString(y));
    d = k;
    return {y, y};
  }
  case OpKind::Embedding: {
    const Shape &table = operandShape(n, ops, 0, 2);
    Shape y = operandShape(n, ops, 1, 0);
    y.push_back(table[1]);
    return {y};
  }
  // Shape glue runs on the host (the CPU session computes its shapes), and
  // form-kernels puts none of these into a region.
  case OpKind::MatMul:
  case OpKind::Gemm:
  case OpKind::Transpose:
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
  case OpKind::Concat:
  case OpKind::Split:
  case OpKind::Slice:
  case OpKind::Gather:
  case OpKind::GatherNd:
  case OpKind::ScatterNd:
  case OpKind::ScatterElements:
  case OpKind::Tile:
  case OpKind::OneHot:  // its new dimension is the value of depth
  case OpKind::NonZero: // data-dependent: known only once it has run
  case OpKind::Shape:
  case OpKind::ConstantOfShape:
  case OpKind::Range:
  case OpKind::Expand:
  case OpKind::Trilu:
    break;
  }
  fail(n, "no shape rule for this op");
}
