// An elementwise chain becomes one expression type over its operands
// (qcc::ew::*), evaluated by 256 threads x 4 elements. A broadcast operand
// is indexed modulo its size: its "mod" parameter is 0 when it has as many
// elements as the result.

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// silu(a) * b + bias, the bias broadcast over rows.
// CHECK-LABEL: ===== unit qcc_chain_k0 (regions: chain/k0) kind elementwise
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":256,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_chain_k0","grid":{"x":{"ceil_div":["n",1024]},"y":1,"z":1},"params":[{"name":"in0","operand":0},{"name":"in1","operand":1},{"name":"in2","operand":2},{"int64":{"select":[{"eq":[{"numel":{"operand":0}},"n"]},0,{"numel":{"operand":0}}]},"name":"mod0"},{"int64":{{.*}}"name":"mod1"},{"int64":{{.*}}"name":"mod2"},{"name":"out","result":0},{"int64":"n","name":"n"}],"waits_for_prior_grids":true}],"symbols":{"n":{"numel":{"result":0}}}
// CHECK: #include "qcc/elementwise.cuh"
// CHECK: qcc::ew::Add<qcc::ew::Mul<qcc::ew::Silu<qcc::ew::Arg<0>>, qcc::ew::Arg<1>>, qcc::ew::Arg<2>>
// CHECK: qcc_chain_k0(
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

// CHECK-NOT: ===== no kernel
