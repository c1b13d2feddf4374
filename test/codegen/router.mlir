// A router region (softmax, top_k, renormalization: form-kernels) becomes
// router.cuh's routerRow: one warp per token row, 4 rows per CTA; E, K, the
// experts per lane (ceil(E / 32)) and whether it renormalizes are template
// arguments. The gates and ids are the region's results in its yield order.

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// Mixtral's router over 8 experts, top 2, renormalized.
// CHECK-LABEL: ===== unit qcc_mixtral_k0 (regions: mixtral/k0) kind router
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_mixtral_k0","grid":{"x":{"ceil_div":["rows",4]},"y":1,"z":1},"params":[{"name":"logits","operand":0},{"name":"gates","result":1},{"name":"ids","result":0},{"int64":"rows","name":"rows"}],"waits_for_prior_grids":true}],"symbols":{"rows":{"rows":{"operand":0}}}
// CHECK: #include "qcc/router.cuh"
// CHECK: qcc::routerRow<4, 8, 2, 1, true>(logits, gates, ids, rows);
func.func @mixtral(%logits: tensor<?x8xf32>, %k: tensor<1xi64>) -> (tensor<?x2xi64>, tensor<?x2xf32>) {
  %0:2 = qcc.kernel router "k0"(%logits, %k) : (tensor<?x8xf32>, tensor<1xi64>) -> (tensor<?x2xi64>, tensor<?x2xf32>) {
  ^bb0(%l: tensor<?x8xf32>, %k1: tensor<1xi64>):
    %p = qcc.softmax %l {axis = 1 : i64} : tensor<?x8xf32>
    %v, %i = qcc.top_k %p, %k1 {axis = 1 : i64, qcc.k = 2 : i64} : (tensor<?x8xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
    %s = qcc.reduce_sum %v {axes = array<i64: 1>} : (tensor<?x2xf32>) -> tensor<?x1xf32>
    %g = qcc.div %v, %s : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
    qcc.yield %i, %g : tensor<?x2xi64>, tensor<?x2xf32>
  }
  return %0#0, %0#1 : tensor<?x2xi64>, tensor<?x2xf32>
}

// Qwen-MoE's over 60 experts (two per lane), top 4, not renormalized.
// CHECK-LABEL: ===== unit qcc_qwen_k0 (regions: qwen/k0) kind router
// CHECK: qcc::routerRow<4, 60, 4, 2, false>(logits, gates, ids, rows);
func.func @qwen(%logits: tensor<?x?x60xf32>, %k: tensor<1xi64>) -> (tensor<?x?x4xf32>, tensor<?x?x4xi64>) {
  %0:2 = qcc.kernel router "k0"(%logits, %k) : (tensor<?x?x60xf32>, tensor<1xi64>) -> (tensor<?x?x4xf32>, tensor<?x?x4xi64>) {
  ^bb0(%l: tensor<?x?x60xf32>, %k1: tensor<1xi64>):
    %p = qcc.softmax %l {axis = 2 : i64} : tensor<?x?x60xf32>
    %v, %i = qcc.top_k %p, %k1 {axis = 2 : i64, qcc.k = 4 : i64} : (tensor<?x?x60xf32>, tensor<1xi64>) -> (tensor<?x?x4xf32>, tensor<?x?x4xi64>)
    qcc.yield %v, %i : tensor<?x?x4xf32>, tensor<?x?x4xi64>
  }
  return %0#0, %0#1 : tensor<?x?x4xf32>, tensor<?x?x4xi64>
}

// CHECK-NOT: ===== no kernel
