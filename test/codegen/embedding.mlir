// Embedding lookup: 128 threads, one CTA per id; out-of-range ids set the
// runtime's error flag.

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// CHECK-LABEL: ===== unit qcc_tokens_k0 (regions: tokens/k0) kind embedding
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_tokens_k0","grid":{"x":"num_ids","y":1,"z":1},"params":[{"name":"table","operand":0},{"name":"ids","operand":1},{"name":"out","result":0},{"name":"error_flag","runtime":"error_flag"},{"int64":3000,"name":"vocab"},{"int":256,"name":"dim"},{"int":"num_ids","name":"num_ids"}],"waits_for_prior_grids":true}],"symbols":{"num_ids":{"numel":{"operand":1}}}
// CHECK: #include "qcc/embedding.cuh"
// CHECK: qcc_tokens_k0(
// CHECK: embeddingRow<128>
func.func @tokens(%table: tensor<3000x256xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x256xf32> {
  %0 = qcc.kernel embedding "k0"(%table, %ids) : (tensor<3000x256xf32>, tensor<?x?xi64>) -> tensor<?x?x256xf32> {
  ^bb0(%a1: tensor<3000x256xf32>, %a2: tensor<?x?xi64>):
    %1 = qcc.embedding %a1, %a2 : (tensor<3000x256xf32>, tensor<?x?xi64>) -> tensor<?x?x256xf32>
    qcc.yield %1 : tensor<?x?x256xf32>
  }
  return %0 : tensor<?x?x256xf32>
}

// CHECK-NOT: ===== no kernel
