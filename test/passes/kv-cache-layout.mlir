// RUN: qcc-opt %s --kv-cache-layout --split-input-file | FileCheck %s --check-prefixes=CHECK,PAGED
// RUN: qcc-opt %s --kv-cache-layout="layout=contiguous" --split-input-file | FileCheck %s --check-prefixes=CHECK,CONTIG
// RUN: qcc-opt %s --kv-cache-layout="block-tokens=32" --split-input-file | FileCheck %s --check-prefix=BLOCK32
// max-positions bounds the context further, never past the model's own bound.
// RUN: qcc-opt %s --kv-cache-layout="max-positions=20" --split-input-file | FileCheck %s --check-prefix=MAX20
// RUN: qcc-opt %s --kv-cache-layout="max-positions=64" --split-input-file | FileCheck %s --check-prefix=MAX64

// MHA (GPT-2 style): learned positions from range(0, seq) become the
// positions input; attention becomes kv_attention with a layer index.
// The learned position table's 32 rows bound the context (max_positions).
// PAGED: module attributes {qcc.kv_cache = {block_tokens = 16 : i64, dtype = "f32", head_dim = 16 : i64, kv_heads = 4 : i64, layers = 2 : i64, layout = "paged", max_positions = 32 : i64}}
// CONTIG: module attributes {qcc.kv_cache = {block_tokens = 16 : i64, dtype = "f32", head_dim = 16 : i64, kv_heads = 4 : i64, layers = 2 : i64, layout = "contiguous", max_positions = 32 : i64}}
// BLOCK32: qcc.kv_cache = {block_tokens = 32 : i64
// MAX20: layout = "paged", max_positions = 20 : i64}}
// MAX64: layout = "paged", max_positions = 32 : i64}}
// CHECK-LABEL: func.func @main(
// CHECK: qcc.attention
// CHECK: qcc.attention
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: %[[IDS:[^:]*]]: tensor<?x?xi64> {{.*}}, %[[POS:[^:]*]]: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "positions"})
// CHECK-NOT: qcc.tokens_per_row
// CHECK-NOT: qcc.range
// CHECK: qcc.embedding %{{.*}}, %[[POS]] : (tensor<32x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
// CHECK: qcc.kv_attention %{{.*}} {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32}
// CHECK: qcc.kv_attention %{{.*}} {layer = 1 : i64,
// CHECK-NOT: qcc.attention
// CHECK-LABEL: func.func @decode(
// CHECK-SAME: tensor<?x1xi64> {{.*}}, %[[DPOS:[^:]*]]: tensor<?x1xi64> {{.*}}qcc.name = "positions"
// CHECK-SAME: attributes {qcc.tokens_per_row = 1 : i64}
// CHECK: qcc.embedding %{{.*}}, %[[DPOS]] : (tensor<32x64xf32>, tensor<?x1xi64>) -> tensor<?x1x64xf32>
// CHECK: qcc.kv_attention {{.*}}layer = 0
// CHECK: qcc.kv_attention {{.*}}layer = 1
func.func @main(%ids: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "input_ids"}) -> tensor<?x?x64xf32> {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %wpe = qcc.constant dense<0.25> : tensor<32x64xf32>
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %shape = qcc.shape %ids : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = qcc.gather %shape, %c1 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %range = qcc.range %c0, %seq, %c1 : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pos = qcc.unsqueeze %range {axes = array<i64: 0>} : (tensor<?xi64>) -> tensor<1x?xi64>
  %te = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %pe = qcc.embedding %wpe, %pos : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %x = qcc.add %te, %pe : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  %a0 = qcc.attention %x, %x, %x {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %a1 = qcc.attention %a0, %a0, %a0 {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a1 : tensor<?x?x64xf32>
}

// -----

// GQA with rotary (LLaMA style): the cos/sin tables computed from
// range(0, seq) get a leading batch dimension ([B, S, D]).
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: , %[[POS:[^:]*]]: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "positions"}
// CHECK: %[[F:.*]] = qcc.cast %[[POS]] : tensor<?x?xi64> to tensor<?x?xf32>
// CHECK: %[[U:.*]] = qcc.unsqueeze %[[F]] {axes = array<i64: 2>} : (tensor<?x?xf32>) -> tensor<?x?x1xf32>
// CHECK: %[[M:.*]] = qcc.mul %[[U]], %{{.*}} : (tensor<?x?x1xf32>, tensor<1x8xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[E:.*]] = qcc.concat %[[M]], %[[M]] {axis = 2 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x16xf32>
// CHECK: %[[COS:.*]] = qcc.cos %[[E]] : tensor<?x?x16xf32>
// CHECK: qcc.rotary %{{.*}}, %[[COS]], %{{.*}} {head_dim = 16 : i64} : (tensor<?x?x64xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>)
// CHECK: qcc.kv_attention {{.*}} {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64
// PAGED: kv_heads = 2 : i64
func.func @main(%ids: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "input_ids"}) -> tensor<?x?x64xf32> {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %wk = qcc.constant dense<0.5> : tensor<32x64xf32>
  %invf = qcc.constant dense<0.1> : tensor<1x8xf32>
  %c0 = qcc.constant dense<0.0> : tensor<f32>
  %c1 = qcc.constant dense<1.0> : tensor<f32>
  %i1 = qcc.constant dense<1> : tensor<i64>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %k = qcc.linear %x, %wk : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %shape = qcc.shape %ids : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = qcc.gather %shape, %i1 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %seqf = qcc.cast %seq : tensor<i64> to tensor<f32>
  %t = qcc.range %c0, %seqf, %c1 : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<?xf32>
  %t2 = qcc.unsqueeze %t {axes = array<i64: 1>} : (tensor<?xf32>) -> tensor<?x1xf32>
  %f = qcc.mul %t2, %invf : (tensor<?x1xf32>, tensor<1x8xf32>) -> tensor<?x8xf32>
  %emb = qcc.concat %f, %f {axis = 1 : i64} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x16xf32>
  %cos = qcc.cos %emb : tensor<?x16xf32>
  %sin = qcc.sin %emb : tensor<?x16xf32>
  %qr = qcc.rotary %x, %cos, %sin {head_dim = 16 : i64} : (tensor<?x?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x?x64xf32>
  %kr = qcc.rotary %k, %cos, %sin {head_dim = 16 : i64} : (tensor<?x?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x?x32xf32>
  %a = qcc.attention %qr, %kr, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

// -----

// The past form (HF past_key_values / present, as raise-attention leaves
// it): each past.* input is appended to (head-layout Concat, returned as a
// present.* output) and, packed, feeds the attention ahead of the new
// keys/values; positions are range(P, P + S) with P the past length.
// @prefill and @decode take only the ids and positions, return only the
// logits, and give kv_attention the new keys/values alone.
// PAGED: qcc.kv_cache = {{.*}}layers = 1 : i64
// CHECK-LABEL: func.func @main(
// CHECK-SAME: qcc.name = "past.0.key"
// CHECK: qcc.range
// CHECK: qcc.attention
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x?x64xf32>, tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: %[[IDS:[^:]*]]: tensor<?x?xi64> {qcc.name = "input_ids"}, %[[POS:[^:]*]]: tensor<?x?xi64> {qcc.name = "positions"}) -> (tensor<?x?x64xf32> {qcc.name = "logits"}) {
// CHECK-NOT: qcc.range
// CHECK: %[[X:.*]] = qcc.embedding %{{.*}}, %[[IDS]]
// CHECK: qcc.embedding %{{.*}}, %[[POS]] : (tensor<32x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
// CHECK: %[[Y:.*]] = qcc.add
// CHECK: %[[K:.*]] = qcc.linear %[[Y]]
// CHECK: %[[V:.*]] = qcc.linear %[[Y]]
// CHECK-NOT: qcc.concat
// CHECK: %[[A:.*]] = qcc.kv_attention %[[Y]], %[[K]], %[[V]] {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32}
// CHECK-NEXT: return %[[A]] : tensor<?x?x64xf32>
// CHECK-LABEL: func.func @decode(
// CHECK-SAME: tensor<?x1xi64> {qcc.name = "input_ids"}, %[[DPOS:[^:]*]]: tensor<?x1xi64> {qcc.name = "positions"}) -> (tensor<?x?x64xf32> {qcc.name = "logits"}) attributes {qcc.tokens_per_row = 1 : i64} {
// CHECK: qcc.embedding %{{.*}}, %[[DPOS]] : (tensor<32x64xf32>, tensor<?x1xi64>) -> tensor<?x1x64xf32>
// CHECK: qcc.kv_attention {{.*}}layer = 0
// CHECK-NEXT: return
func.func @main(%ids: tensor<?x?xi64> {qcc.name = "input_ids"}, %pk: tensor<?x4x?x16xf32> {qcc.name = "past.0.key"}, %pv: tensor<?x4x?x16xf32> {qcc.name = "past.0.value"}) -> (tensor<?x?x64xf32> {qcc.name = "logits"}, tensor<?x4x?x16xf32> {qcc.name = "present.0.key"}, tensor<?x4x?x16xf32> {qcc.name = "present.0.value"}) {
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
  // present: the head-layout appends
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
  // the attention's keys/values: packed past, then the new ones
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
  return %a, %presk, %presv : tensor<?x?x64xf32>, tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>
}


// -----

// The past form with q and k permuted alike within each head (an
// interleaved rotary's gathers, which raise-attention keeps where the keys
// also go to `present`, in the model's order): @main keeps them for its past
// and present; @prefill and @decode attend without them, their cache holding
// the keys in the one order both write.
// CHECK-LABEL: func.func @main(
// CHECK: qcc.gather %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<?x?x64xf32>, tensor<64xi64>) -> tensor<?x?x64xf32>
// CHECK: qcc.attention
// CHECK-LABEL: func.func @prefill(
// CHECK-NOT: qcc.gather
// CHECK: %[[Q:.*]] = qcc.linear
// CHECK: %[[K:.*]] = qcc.linear
// CHECK: %[[V:.*]] = qcc.linear
// CHECK-NOT: qcc.gather
// CHECK: qcc.kv_attention %[[Q]], %[[K]], %[[V]] {layer = 0
// CHECK-LABEL: func.func @decode(
// CHECK-NOT: qcc.gather
// CHECK: qcc.kv_attention
func.func @main(%ids: tensor<?x?xi64> {qcc.name = "input_ids"}, %pk: tensor<?x4x?x16xf32> {qcc.name = "past.0.key"}, %pv: tensor<?x4x?x16xf32> {qcc.name = "past.0.value"}) -> (tensor<?x?x64xf32> {qcc.name = "logits"}, tensor<?x4x?x16xf32> {qcc.name = "present.0.key"}, tensor<?x4x?x16xf32> {qcc.name = "present.0.value"}) {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %wpe = qcc.constant dense<0.25> : tensor<32x64xf32>
  %wq = qcc.constant dense<0.25> : tensor<64x64xf32>
  %wk = qcc.constant dense<0.125> : tensor<64x64xf32>
  %wv = qcc.constant dense<0.0625> : tensor<64x64xf32>
  %back = qcc.constant dense<[0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 16, 24, 17, 25, 18, 26, 19, 27, 20, 28, 21, 29, 22, 30, 23, 31, 32, 40, 33, 41, 34, 42, 35, 43, 36, 44, 37, 45, 38, 46, 39, 47, 48, 56, 49, 57, 50, 58, 51, 59, 52, 60, 53, 61, 54, 62, 55, 63]> : tensor<64xi64>
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
  %q0 = qcc.linear %x, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k0 = qcc.linear %x, %wk : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %v = qcc.linear %x, %wv : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %q = qcc.gather %q0, %back {axis = 2 : i64} : (tensor<?x?x64xf32>, tensor<64xi64>) -> tensor<?x?x64xf32>
  %k = qcc.gather %k0, %back {axis = 2 : i64} : (tensor<?x?x64xf32>, tensor<64xi64>) -> tensor<?x?x64xf32>
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
  %a = qcc.attention %q, %kall, %vall {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a, %presk, %presv : tensor<?x?x64xf32>, tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>
}
// -----

// An exporter-built mask (HuggingFace: causal from two ranges, key padding
// from attention_mask, Where(keep, 0, -inf)) is proven causal + padding by
// evaluation (MaskAnalysis.h): prefill/decode get kv_attention without the
// mask, and the attention_mask input goes.
// CHECK-LABEL: func.func @main({{.*}}qcc.name = "attention_mask"
// CHECK: qcc.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal = false
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: qcc.name = "input_ids"}, %{{[^:]*}}: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "positions"}) -> tensor<?x?x64xf32>
// CHECK-NOT: qcc.where
// CHECK: qcc.kv_attention %{{.*}}, %{{.*}}, %{{.*}} {layer = 0 : i64
// CHECK-LABEL: func.func @decode(
// CHECK: qcc.kv_attention
func.func @main(%ids: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "input_ids"}, %am: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "attention_mask"}) -> tensor<?x?x64xf32> {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %zero = qcc.constant dense<0.0> : tensor<f32>
  %ninf = qcc.constant dense<0xFF800000> : tensor<f32>
  %shape = qcc.shape %ids : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = qcc.gather %shape, %c1 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %r = qcc.range %c0, %seq, %c1 : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %q = qcc.unsqueeze %r {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %causal = qcc.less_equal %r, %q : (tensor<?xi64>, tensor<?x1xi64>) -> tensor<?x?xi1>
  %pad = qcc.equal %am, %c1 : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi1>
  %pad4 = qcc.unsqueeze %pad {axes = array<i64: 1, 2>} : (tensor<?x?xi1>) -> tensor<?x1x1x?xi1>
  %keep = qcc.and %causal, %pad4 : (tensor<?x?xi1>, tensor<?x1x1x?xi1>) -> tensor<?x1x?x?xi1>
  %mask = qcc.where %keep, %zero, %ninf : (tensor<?x1x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x1x?x?xf32>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %a = qcc.attention %x, %x, %x, %mask {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = false} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x1x?x?xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

// -----

// A sliding-window mask (HF: key j visible from query i iff i - W < j <= i,
// here W = 2 from the constant 2, with the key padding) is proven on the
// samples around W: kv_attention gets window = 2 and reads only the last two
// cache positions.
// CHECK-LABEL: func.func @main(
// CHECK: qcc.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal = false
// CHECK-NOT: window
// CHECK-LABEL: func.func @prefill(
// CHECK: qcc.kv_attention {{.*}}window = 2 : i64
// CHECK-LABEL: func.func @decode(
// CHECK: qcc.kv_attention {{.*}}window = 2 : i64
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
  %win = qcc.and %causal, %near : (tensor<?x?xi1>, tensor<?x?xi1>) -> tensor<?x?xi1>
  %pad = qcc.equal %am, %c1 : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi1>
  %pad4 = qcc.unsqueeze %pad {axes = array<i64: 1, 2>} : (tensor<?x?xi1>) -> tensor<?x1x1x?xi1>
  %keep = qcc.and %win, %pad4 : (tensor<?x?xi1>, tensor<?x1x1x?xi1>) -> tensor<?x1x?x?xi1>
  %mask = qcc.where %keep, %zero, %ninf : (tensor<?x1x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x1x?x?xf32>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %a = qcc.attention %x, %x, %x, %mask {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = false} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x1x?x?xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

// -----

// GroupQueryAttention's convention (compiler/OnnxContribConverters.cpp):
// positions past_b + i with past_b = max(sum(attention_mask) - S, 0), key t
// visible iff t <= past_b + i. With left padding that is not causal +
// padding, but it is on unpadded and right-padded rows (rows of padding
// tokens aside), which is what the runtime's rows are: proven in that mode,
// and the positions (an embedding lookup here) are proven to be P + i and
// become the positions input. softcap carries over to kv_attention.
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: %[[IDS:[^:]*]]: tensor<?x?xi64> {{.*}}, %[[POS:[^:]*]]: tensor<?x?xi64> {{.*}}qcc.name = "positions"}) -> tensor<?x?x64xf32>
// CHECK-NOT: qcc.reduce_sum
// CHECK: qcc.embedding %{{.*}}, %[[POS]]
// CHECK: qcc.kv_attention {{.*}}softcap = 5.000000e+01 : f32
// CHECK-LABEL: func.func @decode(
// CHECK: qcc.kv_attention
func.func @main(%ids: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "input_ids"}, %am: tensor<?x?xi64> {qcc.dim_names = ["batch", "total"], qcc.name = "attention_mask"}) -> tensor<?x?x64xf32> {
  %wte = qcc.constant dense<0.5> : tensor<100x64xf32>
  %wpe = qcc.constant dense<0.25> : tensor<64x64xf32>
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %zero = qcc.constant dense<0.0> : tensor<f32>
  %ninf = qcc.constant dense<0xFF800000> : tensor<f32>
  %sum = qcc.reduce_sum %am {axes = array<i64: 1>, keepdims = false} : (tensor<?x?xi64>) -> tensor<?xi64>
  %shape = qcc.shape %ids : (tensor<?x?xi64>) -> tensor<2xi64>
  %seq = qcc.gather %shape, %c1 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %d = qcc.sub %sum, %seq : (tensor<?xi64>, tensor<i64>) -> tensor<?xi64>
  %past = qcc.max %d, %c0 : (tensor<?xi64>, tensor<i64>) -> tensor<?xi64>
  %r = qcc.range %c0, %seq, %c1 : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pastc = qcc.unsqueeze %past {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %rr = qcc.unsqueeze %r {axes = array<i64: 0>} : (tensor<?xi64>) -> tensor<1x?xi64>
  %pos = qcc.add %pastc, %rr : (tensor<?x1xi64>, tensor<1x?xi64>) -> tensor<?x?xi64>
  %pos3 = qcc.unsqueeze %pos {axes = array<i64: 2>} : (tensor<?x?xi64>) -> tensor<?x?x1xi64>
  %tshape = qcc.shape %am : (tensor<?x?xi64>) -> tensor<2xi64>
  %total = qcc.gather %tshape, %c1 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %t = qcc.range %c0, %total, %c1 : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %t3 = qcc.unsqueeze %t {axes = array<i64: 0, 1>} : (tensor<?xi64>) -> tensor<1x1x?xi64>
  %vis = qcc.less_equal %t3, %pos3 : (tensor<1x1x?xi64>, tensor<?x?x1xi64>) -> tensor<?x?x?xi1>
  %m3 = qcc.where %vis, %zero, %ninf : (tensor<?x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?x?xf32>
  %mask = qcc.unsqueeze %m3 {axes = array<i64: 1>} : (tensor<?x?x?xf32>) -> tensor<?x1x?x?xf32>
  %x = qcc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %p = qcc.embedding %wpe, %pos : (tensor<64x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %h = qcc.add %x, %p : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %a = qcc.attention %h, %h, %h, %mask {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = false, softcap = 50.0 : f32} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x1x?x?xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

// -----

// An encoder (bidirectional attention with a padding mask) gets no cache.
// CHECK-LABEL: func.func @main(
// CHECK: qcc.attention
// CHECK-NOT: func.func @prefill
// CHECK-NOT: qcc.kv_cache
func.func @main(%x: tensor<?x?x64xf32>, %mask: tensor<?x1x1x?xf32>) -> tensor<?x?x64xf32> {
  %a = qcc.attention %x, %x, %x, %mask {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = false} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x1x1x?xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}
