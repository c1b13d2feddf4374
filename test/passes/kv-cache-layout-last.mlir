// RUN: qcc-opt %s --kv-cache-layout --split-input-file | FileCheck %s

// prefill_last: prefill with the logits of one position per row (`last`,
// i64 [B, 1]). The rows are gathered before the head's row-wise producers
// (the final norm) so that the norm, the LM head and the logits cover one
// position per row.
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: -> (tensor<?x?x100xf32> {qcc.dim_names = ["batch", "seq", ""], qcc.name = "logits"})
// CHECK-LABEL: func.func @prefill_last(
// CHECK-SAME: %[[LAST:[^:]*]]: tensor<?x1xi64> {qcc.dim_names = ["batch", ""], qcc.name = "last"})
// CHECK-SAME: -> (tensor<?x1x100xf32> {qcc.dim_names = ["batch", "", ""], qcc.name = "logits"})
// CHECK: %[[IDX:.*]] = qcc.unsqueeze %[[LAST]] {axes = array<i64: 2>} : (tensor<?x1xi64>) -> tensor<?x1x1xi64>
// CHECK: %[[H:.*]] = qcc.add
// CHECK: %[[G:.*]] = qcc.gather_nd %[[H]], %[[IDX]] {batch_dims = 1 : i64} : (tensor<?x?x64xf32>, tensor<?x1x1xi64>) -> tensor<?x1x64xf32>
// CHECK: %[[N:.*]] = qcc.rms_norm %[[G]], {{.*}} -> tensor<?x1x64xf32>
// CHECK: %[[L:.*]] = qcc.linear %[[N]], {{.*}} -> tensor<?x1x100xf32>
// CHECK: return %[[L]] : tensor<?x1x100xf32>
// CHECK-LABEL: func.func @decode(
func.func @main(%ids: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "input_ids"}) -> (tensor<?x?x100xf32> {qcc.dim_names = ["batch", "seq", ""], qcc.name = "logits"}) {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %g = qcc.constant dense<1.0> : tensor<64xf32>
  %w = qcc.constant dense<0.125> : tensor<100x64xf32>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %a = qcc.attention %x, %x, %x {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %h = qcc.add %x, %a : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %n = qcc.rms_norm %h, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %l = qcc.linear %n, %w : (tensor<?x?x64xf32>, tensor<100x64xf32>) -> tensor<?x?x100xf32>
  return %l : tensor<?x?x100xf32>
}

// -----

// W8A8 with per-token activations: the quantize is row-wise too; a softcap
// (div, tanh, mul by constants) after the head goes along.
// CHECK-LABEL: func.func @prefill_last(
// CHECK: %[[IDX:.*]] = qcc.unsqueeze
// CHECK: %[[H:.*]] = qcc.add
// CHECK: qcc.gather_nd %[[H]], %[[IDX]] {batch_dims = 1 : i64}
// CHECK: qcc.rms_norm {{.*}} -> tensor<?x1x64xf32>
// CHECK: qcc.quantize {{.*}} -> (tensor<?x1x64xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>)
// CHECK: qcc.qlinear {{.*}} -> tensor<?x1x100xf32>
// CHECK: qcc.div {{.*}} -> tensor<?x1x100xf32>
// CHECK: qcc.tanh {{.*}} : tensor<?x1x100xf32>
// CHECK: %[[CAP:.*]] = qcc.mul {{.*}} -> tensor<?x1x100xf32>
// CHECK: return %[[CAP]] : tensor<?x1x100xf32>
func.func @main(%ids: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "input_ids"}) -> (tensor<?x?x100xf32> {qcc.name = "logits"}) {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %g = qcc.constant dense<1.0> : tensor<64xf32>
  %w = qcc.constant dense<3> : tensor<100x64xi8>
  %ws = qcc.constant dense<0.01> : tensor<100xf32>
  %wsum = qcc.constant dense<192> : tensor<100xi32>
  %cap = qcc.constant dense<30.0> : tensor<f32>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %a = qcc.attention %x, %x, %x {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %h = qcc.add %x, %a : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %n = qcc.rms_norm %h, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %q, %s, %z = qcc.quantize %n {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x?x64xf32>) -> (tensor<?x?x64xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>)
  %l = qcc.qlinear %q, %s, %z, %w, %ws, %wsum : (tensor<?x?x64xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<100x64xi8>, tensor<100xf32>, tensor<100xi32>) -> tensor<?x?x100xf32>
  %d = qcc.div %l, %cap : (tensor<?x?x100xf32>, tensor<f32>) -> tensor<?x?x100xf32>
  %t = qcc.tanh %d : tensor<?x?x100xf32>
  %c = qcc.mul %t, %cap : (tensor<?x?x100xf32>, tensor<f32>) -> tensor<?x?x100xf32>
  return %c : tensor<?x?x100xf32>
}

// -----

// A per-tensor dynamic quantize reads every row: it stays over all of them,
// and the head's int8 rows are gathered after it (its scale and zero point,
// [1], are not).
// CHECK-LABEL: func.func @prefill_last(
// CHECK: %[[IDX:.*]] = qcc.unsqueeze
// CHECK: qcc.rms_norm {{.*}} -> tensor<?x?x64xf32>
// CHECK: %[[Q:.*]], %[[S:.*]], %[[Z:.*]] = qcc.quantize {{.*}} -> (tensor<?x?x64xi8>, tensor<1xf32>, tensor<1xi32>)
// CHECK: %[[G:.*]] = qcc.gather_nd %[[Q]], %[[IDX]] {batch_dims = 1 : i64} : (tensor<?x?x64xi8>, tensor<?x1x1xi64>) -> tensor<?x1x64xi8>
// CHECK: qcc.qlinear %[[G]], %[[S]], %[[Z]], {{.*}} -> tensor<?x1x100xf32>
func.func @main(%ids: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "input_ids"}) -> (tensor<?x?x100xf32> {qcc.name = "logits"}) {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %g = qcc.constant dense<1.0> : tensor<64xf32>
  %w = qcc.constant dense<3> : tensor<100x64xi8>
  %ws = qcc.constant dense<0.01> : tensor<100xf32>
  %wsum = qcc.constant dense<192> : tensor<100xi32>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %a = qcc.attention %x, %x, %x {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %n = qcc.rms_norm %a, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %q, %s, %z = qcc.quantize %n {quant = #qcc.quant<bits = 8, symmetric, per_tensor>} : (tensor<?x?x64xf32>) -> (tensor<?x?x64xi8>, tensor<1xf32>, tensor<1xi32>)
  %l = qcc.qlinear %q, %s, %z, %w, %ws, %wsum : (tensor<?x?x64xi8>, tensor<1xf32>, tensor<1xi32>, tensor<100x64xi8>, tensor<100xf32>, tensor<100xi32>) -> tensor<?x?x100xf32>
  return %l : tensor<?x?x100xf32>
}

// -----

// The normed rows are an output too: the norm keeps every position, the
// gather comes after it.
// CHECK-LABEL: func.func @prefill_last(
// CHECK: %[[N:.*]] = qcc.rms_norm {{.*}} -> tensor<?x?x64xf32>
// CHECK: %[[G:.*]] = qcc.gather_nd %[[N]]
// CHECK: %[[L:.*]] = qcc.linear %[[G]], {{.*}} -> tensor<?x1x100xf32>
// CHECK: return %[[L]], %[[N]] : tensor<?x1x100xf32>, tensor<?x?x64xf32>
func.func @main(%ids: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "input_ids"}) -> (tensor<?x?x100xf32> {qcc.name = "logits"}, tensor<?x?x64xf32> {qcc.name = "hidden"}) {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %g = qcc.constant dense<1.0> : tensor<64xf32>
  %w = qcc.constant dense<0.125> : tensor<100x64xf32>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %a = qcc.attention %x, %x, %x {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %n = qcc.rms_norm %a, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %l = qcc.linear %n, %w : (tensor<?x?x64xf32>, tensor<100x64xf32>) -> tensor<?x?x100xf32>
  return %l, %n : tensor<?x?x100xf32>, tensor<?x?x64xf32>
}

// -----

// Logits that come from no linear head (here: attention itself): no
// prefill_last; generation then samples from prefill.
// CHECK-LABEL: func.func @prefill(
// CHECK-NOT: func.func @prefill_last
// CHECK-LABEL: func.func @decode(
func.func @main(%ids: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "input_ids"}) -> tensor<?x?x64xf32> {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %a = qcc.attention %x, %x, %x {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}
