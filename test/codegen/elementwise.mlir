// An elementwise chain becomes one expression type over its operands
// (qcc::ew::*), evaluated by 256 threads x 4 elements. Each operand is read
// as ONNX broadcasting says: a static bias modulo its size; an operand of
// dynamic shape at i when it has as many elements as the result ("full"),
// else at broadcast.h's index from the result's dimensions and its strides
// (0 along a size-1 dimension). EmitterTest checks the indices themselves.

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// silu(a) * b + bias, the bias broadcast over rows.
// CHECK-LABEL: ===== unit qcc_chain_k0 (regions: chain/k0) kind elementwise
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":256,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_chain_k0","grid":{"x":{"ceil_div":["n",1024]},"y":1,"z":1},"params":[{"name":"in0","operand":0},{"name":"in1","operand":1},{"name":"in2","operand":2},{"int64":{"eq":[{"numel":{"operand":0}},"n"]},"name":"full0"},{{.*}}"name":"s0_2"},{"int64":{"eq":[{"numel":{"operand":1}},"n"]},"name":"full1"},{{.*}}"name":"s1_2"},{"int64":{"dim":{"axis":0,"result":0}},"name":"d0"},{{.*}}"name":"d2"},{"name":"out","result":0},{"int64":"n","name":"n"}],"waits_for_prior_grids":true}],"symbols":{"n":{"numel":{"result":0}}}
// CHECK: #include "qcc/elementwise.cuh"
// CHECK: qcc::ew::Add<qcc::ew::Mul<qcc::ew::Silu<qcc::ew::Arg<0>>, qcc::ew::Arg<1>>, qcc::ew::Arg<2>>
// CHECK: qcc_chain_k0(
// CHECK: x[0] = in0[full0 ? i : qcc::broadcastIndex(i, dims, st0)];
// CHECK: x[2] = in2[i % 512LL];
func.func @chain(%a: tensor<?x?x512xf32>, %b: tensor<?x?x512xf32>, %c: tensor<512xf32>) -> tensor<?x?x512xf32> {
  %0 = qcc.kernel elementwise "k0"(%a, %b, %c) : (tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<512xf32>) -> tensor<?x?x512xf32> {
  ^bb0(%a1: tensor<?x?x512xf32>, %a2: tensor<?x?x512xf32>, %a3: tensor<512xf32>):
    %1 = qcc.silu %a1 : tensor<?x?x512xf32>
    %2 = qcc.mul %1, %a2 : (tensor<?x?x512xf32>, tensor<?x?x512xf32>) -> tensor<?x?x512xf32>
    %3 = qcc.add %2, %a3 : (tensor<?x?x512xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
    qcc.yield %3 : tensor<?x?x512xf32>
  }
  return %0 : tensor<?x?x512xf32>
}

// Mixtral's router weights over their sum: [T, 2] / [T, 1], the divisor
// broadcast along the last dimension (stride 0 there).
// CHECK-LABEL: ===== unit qcc_router_k0 (regions: router/k0) kind elementwise
// CHECK: "name":"full1"},{"int64":{"select":[{"eq":[{"dim":{"axis":0,"operand":1}},1]},0,{"mul":[1,{"dim":{"axis":1,"operand":1}}]}]},"name":"s1_0"},{"int64":{"select":[{"eq":[{"dim":{"axis":1,"operand":1}},1]},0,{"mul":[1]}]},"name":"s1_1"}
// CHECK: qcc::ew::Div<qcc::ew::Arg<0>, qcc::ew::Arg<1>>
// CHECK: x[1] = in1[full1 ? i : qcc::broadcastIndex(i, dims, st1)];
func.func @router(%w: tensor<?x2xf32>, %s: tensor<?x1xf32>) -> tensor<?x2xf32> {
  %0 = qcc.kernel elementwise "k0"(%w, %s) : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32> {
  ^bb0(%w1: tensor<?x2xf32>, %s1: tensor<?x1xf32>):
    %1 = qcc.div %w1, %s1 : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
    qcc.yield %1 : tensor<?x2xf32>
  }
  return %0 : tensor<?x2xf32>
}

// Rotary's angles: cos and sin have CUDA kernels.
// CHECK-LABEL: ===== unit qcc_angles_k0 (regions: angles/k0) kind elementwise
// CHECK: qcc::ew::Cos<qcc::ew::Mul<qcc::ew::Arg<0>, qcc::ew::Arg<1>>>
func.func @angles(%p: tensor<?x?x32xf32>, %f: tensor<f32>) -> tensor<?x?x32xf32> {
  %0 = qcc.kernel elementwise "k0"(%p, %f) : (tensor<?x?x32xf32>, tensor<f32>) -> tensor<?x?x32xf32> {
  ^bb0(%p1: tensor<?x?x32xf32>, %f1: tensor<f32>):
    %1 = qcc.mul %p1, %f1 : (tensor<?x?x32xf32>, tensor<f32>) -> tensor<?x?x32xf32>
    %2 = qcc.cos %1 : tensor<?x?x32xf32>
    qcc.yield %2 : tensor<?x?x32xf32>
  }
  return %0 : tensor<?x?x32xf32>
}

// CHECK-NOT: ===== no kernel
