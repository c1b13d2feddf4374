// Dynamic int8 quantize: 256 threads, one CTA per row (per token) or one
// for the whole tensor (per tensor).

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// CHECK-LABEL: ===== unit qcc_per_token_k0 (regions: per_token/k0) kind quantize
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":256,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_per_token_k0","grid":{"x":"M","y":1,"z":1},"params":[{"name":"x","operand":0},{"name":"q","result":0},{"name":"s","result":1},{"name":"z","result":2},{"int":"M","name":"M"},{"int":"K","name":"K"}],"waits_for_prior_grids":true}],"symbols":{"K":1024,"M":{"rows":{"operand":0}}}
// CHECK: #include "qcc/quantize.cuh"
// CHECK: qcc_per_token_k0(
// CHECK: quantize_rows<256, false>
func.func @per_token(%x: tensor<?x?x1024xf32>) -> (tensor<?x?x1024xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>) {
  %0:3 = qcc.kernel quantize "k0"(%x) : (tensor<?x?x1024xf32>) -> (tensor<?x?x1024xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>) {
  ^bb0(%a1: tensor<?x?x1024xf32>):
    %q, %s, %z = qcc.quantize %a1 {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x?x1024xf32>) -> (tensor<?x?x1024xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>)
    qcc.yield %q, %s, %z : tensor<?x?x1024xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>
  }
  return %0#0, %0#1, %0#2 : tensor<?x?x1024xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>
}

// CHECK-NOT: ===== no kernel
