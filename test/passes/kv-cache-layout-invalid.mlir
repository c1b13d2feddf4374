// RUN: qcc-opt %s --kv-cache-layout --split-input-file --verify-diagnostics

// A decoder that also has bidirectional attention cannot use one cache.
func.func @main(%ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %a = qcc.attention %x, %x, %x {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  // expected-error @+1 {{kv-cache-layout: a decoder's attention must be causal without a mask to use a KV cache}}
  %b = qcc.attention %a, %a, %a {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = false} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %b : tensor<?x?x64xf32>
}

// -----

// Positions concatenated with something else cannot get a batch dimension.
func.func @main(%ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %other = qcc.constant dense<7> : tensor<1xi64>
  %shape = qcc.shape %ids : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = qcc.gather %shape, %c1 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %range = qcc.range %c0, %seq, %c1 : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  // expected-error @+1 {{kv-cache-layout: concat of positions with other values is not supported}}
  %cat = qcc.concat %range, %other {axis = 0 : i64} : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %pe = qcc.embedding %wte, %cat : (tensor<100x64xf32>, tensor<?xi64>) -> tensor<?x64xf32>
  %y = qcc.add %x, %pe : (tensor<?x?x64xf32>, tensor<?x64xf32>) -> tensor<?x?x64xf32>
  %a = qcc.attention %y, %y, %y {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}
