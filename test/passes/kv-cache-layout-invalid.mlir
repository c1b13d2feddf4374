// RUN: qcc-opt %s --kv-cache-layout --split-input-file --verify-diagnostics

// A decoder that also has bidirectional attention cannot use one cache: it
// compiles without one, saying why.
// expected-warning @+1 {{kv-cache-layout: no KV cache: some attentions are causal, others not: an attention is bidirectional}}
func.func @main(%ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %a = qcc.attention %x, %x, %x {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %b = qcc.attention %a, %a, %a {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = false} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %b : tensor<?x?x64xf32>
}

// -----

// Positions concatenated with something else cannot get a batch dimension:
// the model compiles without a cache, saying why.
// expected-warning @+1 {{kv-cache-layout: no KV cache: concat of positions with other values is not supported}}
func.func @main(%ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %other = qcc.constant dense<7> : tensor<1xi64>
  %shape = qcc.shape %ids : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = qcc.gather %shape, %c1 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %range = qcc.range %c0, %seq, %c1 : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %cat = qcc.concat %range, %other {axis = 0 : i64} : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %pe = qcc.embedding %wte, %cat : (tensor<100x64xf32>, tensor<?xi64>) -> tensor<?x64xf32>
  %y = qcc.add %x, %pe : (tensor<?x?x64xf32>, tensor<?x64xf32>) -> tensor<?x?x64xf32>
  %a = qcc.attention %y, %y, %y {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

// -----

// The past form without its present outputs: the past would be lost.
// expected-error @+1 {{kv-cache-layout: a decoder with a KV cache must take only token ids [batch, seq] (and attention_mask / position_ids), or also the past keys/values of every attention: a past input is not returned with the new keys/values appended (present)}}
func.func @main(%ids: tensor<?x?xi64> {qcc.name = "input_ids"}, %pk: tensor<?x4x?x16xf32> {qcc.name = "past.0.key"}, %pv: tensor<?x4x?x16xf32> {qcc.name = "past.0.value"}) -> (tensor<?x?x64xf32> {qcc.name = "logits"}, tensor<?x4x?x16xf32> {qcc.name = "present.0.key"}) {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %wpe = qcc.constant dense<0.25> : tensor<32x64xf32>
  %wk = qcc.constant dense<0.125> : tensor<64x64xf32>
  %wv = qcc.constant dense<0.0625> : tensor<64x64xf32>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %m2 = qcc.constant dense<-2> : tensor<1xi64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %shape = qcc.shape %ids : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = qcc.gather %shape, %c1 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %ps = qcc.shape %pk : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %pl1 = qcc.slice %ps, %m2, %m1 {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %pl = qcc.squeeze %pl1 {axes = array<i64: 0>} : (tensor<1xi64>) -> tensor<i64>
  %limit = qcc.add %seq, %pl : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %range = qcc.range %pl, %limit, %c1 : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pos = qcc.unsqueeze %range {axes = array<i64: 0>} : (tensor<?xi64>) -> tensor<1x?xi64>
  %te = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %pe = qcc.embedding %wpe, %pos : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %x = qcc.add %te, %pe : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  %k = qcc.linear %x, %wk : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %v = qcc.linear %x, %wv : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %kh = qcc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %vs = qcc.shape %v {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %v, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %presk = qcc.concat %pk, %kh {axis = 2 : i64} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %presv = qcc.concat %pv, %vh {axis = 2 : i64} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %tk = qcc.transpose %pk {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %sk = qcc.shape %tk {end = 2 : i64} : (tensor<?x?x4x16xf32>) -> tensor<2xi64>
  %shk = qcc.concat %sk, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %rk = qcc.reshape %tk, %shk : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  %kall = qcc.concat %rk, %k {axis = 1 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %tv = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %sv = qcc.shape %tv {end = 2 : i64} : (tensor<?x?x4x16xf32>) -> tensor<2xi64>
  %shv = qcc.concat %sv, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %rv = qcc.reshape %tv, %shv : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  %vall = qcc.concat %rv, %v {axis = 1 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %a = qcc.attention %x, %kall, %vall {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a, %presk : tensor<?x?x64xf32>, tensor<?x4x?x16xf32>
}

// -----

// A sliding window with an attention sink (key 0 always visible) is neither
// causal + padding nor a window: no cache, and qcc says where the mask
// differs.
// expected-warning @+1 {{kv-cache-layout: no KV cache: the mask differs from causal + padding at batch 0, query 3, key 1 (past 0, seq 6)}}
func.func @main(%ids: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "input_ids"}, %am: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "attention_mask"}) -> tensor<?x?x64xf32> {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %c2 = qcc.constant dense<2> : tensor<i64>
  %zero = qcc.constant dense<0.0> : tensor<f32>
  %ninf = qcc.constant dense<0xFF800000> : tensor<f32>
  %shape = qcc.shape %ids : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = qcc.gather %shape, %c1 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %r = qcc.range %c0, %seq, %c1 : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %q = qcc.unsqueeze %r {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %causal = qcc.less_equal %r, %q : (tensor<?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %lo = qcc.sub %q, %c2 : (tensor<?x1xi64>, tensor<i64>) -> tensor<?x1xi64>
  %near = qcc.greater %r, %lo : (tensor<?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %sink = qcc.equal %r, %c0 : (tensor<?xi64>, tensor<i64>) -> tensor<?xi1>
  %near1 = qcc.or %near, %sink : (tensor<?x?xi1>, tensor<?xi1>) -> tensor<?x?xi1>
  %win = qcc.and %causal, %near1 : (tensor<?x?xi1>, tensor<?x?xi1>) -> tensor<?x?xi1>
  %pad = qcc.equal %am, %c1 : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi1>
  %pad4 = qcc.unsqueeze %pad {axes = array<i64: 1, 2>} : (tensor<?x?xi1>) -> tensor<?x1x1x?xi1>
  %keep = qcc.and %win, %pad4 : (tensor<?x?xi1>, tensor<?x1x1x?xi1>) -> tensor<?x1x?x?xi1>
  %mask = qcc.where %keep, %zero, %ninf : (tensor<?x1x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x1x?x?xf32>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %a = qcc.attention %x, %x, %x, %mask {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = false} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x1x?x?xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}
