// RUN: qcc-opt %s --form-kernels --split-input-file | FileCheck %s
// Every op left out of a kernel it could join gets a remark saying why:
// RUN: qcc-opt %s --form-kernels --split-input-file --verify-diagnostics -o /dev/null

// A GPT-2 block in W8A8: norm + quantize, GEMM + GELU, GEMM + residual add.
// CHECK-LABEL: func.func @gpt2_mlp(
// CHECK: %[[NQ:.*]]:3 = qcc.kernel norm_quantize "k{{[0-9]+}}"
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.layer_norm
// CHECK-NEXT: qcc.quantize
// CHECK-NEXT: qcc.yield
// CHECK: %[[H:.*]] = qcc.kernel gemm_i8 "k{{[0-9]+}}"(%[[NQ]]#0, %[[NQ]]#1, %[[NQ]]#2,
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.qlinear
// CHECK-NEXT: qcc.gelu
// CHECK-NEXT: qcc.yield
// CHECK: qcc.kernel quantize
// CHECK: %[[O:.*]] = qcc.kernel gemm_i8 {{.*}} {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.qlinear
// CHECK-NEXT: qcc.add
// CHECK-NEXT: qcc.yield
// CHECK: return %[[O]]
func.func @gpt2_mlp(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %g = qcc.constant dense<1.0> : tensor<64xf32>
  %w1 = qcc.constant dense<1> : tensor<256x64xi8>
  %s1 = qcc.constant dense<0.1> : tensor<256xf32>
  %n1 = qcc.constant dense<64> : tensor<256xi32>
  %w2 = qcc.constant dense<1> : tensor<64x256xi8>
  %s2 = qcc.constant dense<0.1> : tensor<64xf32>
  %n2 = qcc.constant dense<256> : tensor<64xi32>
  %n = qcc.layer_norm %x, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %q, %qs, %qz = qcc.quantize %n {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x?x64xf32>) -> (tensor<?x?x64xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>)
  %h = qcc.qlinear %q, %qs, %qz, %w1, %s1, %n1 : (tensor<?x?x64xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<256x64xi8>, tensor<256xf32>, tensor<256xi32>) -> tensor<?x?x256xf32>
  %a = qcc.gelu %h {approximate = "tanh"} : tensor<?x?x256xf32>
  %q2, %qs2, %qz2 = qcc.quantize %a {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x?x256xf32>) -> (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>)
  %o = qcc.qlinear %q2, %qs2, %qz2, %w2, %s2, %n2 : (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<64x256xi8>, tensor<64xf32>, tensor<64xi32>) -> tensor<?x?x64xf32>
  %r = qcc.add %o, %x : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// A LLaMA attention block: rotary on q and k fused into the attention
// kernel; the SwiGLU product is an elementwise kernel.
// CHECK-LABEL: func.func @llama_attention(
// CHECK: qcc.kernel attention "k{{[0-9]+}}"
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.rotary
// CHECK-NEXT: qcc.rotary
// CHECK-NEXT: qcc.kv_attention
// CHECK-NEXT: qcc.yield
// CHECK: qcc.kernel elementwise {{.*}} {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.silu
// CHECK-NEXT: qcc.mul
// CHECK-NEXT: qcc.yield
func.func @llama_attention(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %v: tensor<?x?x32xf32>, %cos: tensor<?x?x16xf32>, %sin: tensor<?x?x16xf32>, %up: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %qr = qcc.rotary %q, %cos, %sin {head_dim = 16 : i64} : (tensor<?x?x64xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x64xf32>
  %kr = qcc.rotary %k, %cos, %sin {head_dim = 16 : i64} : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x32xf32>
  %a = qcc.kv_attention %qr, %kr, %v {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f32} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  %s = qcc.silu %a : tensor<?x?x64xf32>
  %m = qcc.mul %s, %up : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %m : tensor<?x?x64xf32>
}

// -----

// Near miss: a GEMM whose result has two users keeps its epilogue outside
// (fusing the GELU would hide the pre-activation value from the other user).
// CHECK-LABEL: func.func @gemm_result_used_twice(
// CHECK: qcc.kernel gemm_f16 {{.*}} {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.linear
// CHECK-NEXT: qcc.yield
// CHECK: qcc.kernel elementwise
func.func @gemm_result_used_twice(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %w = qcc.constant dense<0.5> : tensor<64x64xf32>
  %y = qcc.linear %x, %w : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  // expected-remark @+1 {{form-kernels: qcc.gelu not fused: the GEMM result it reads has other users}}
  %g = qcc.gelu %y : tensor<?x64xf32>
  return %y, %g : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// Two GEMMs summed by one add (phi's parallel attention + MLP block): the add
// joins the first GEMM's region as its residual and the second GEMM's region
// holds the GEMM alone, its result an input of the first's (it used to be
// claimed twice and erased under the second region: a crash).
// CHECK-LABEL: func.func @gemms_summed(
// CHECK: %[[B:.*]] = qcc.kernel gemm_f16 {{.*}} {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.linear
// CHECK-NEXT: qcc.yield
// CHECK: qcc.kernel gemm_f16 {{.*}}%[[B]]{{.*}} {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.linear
// CHECK-NEXT: qcc.add
// CHECK-NEXT: qcc.yield
func.func @gemms_summed(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w1 = qcc.constant dense<0.5> : tensor<64x64xf32>
  %w2 = qcc.constant dense<0.25> : tensor<64x64xf32>
  %a = qcc.linear %x, %w1 : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %b = qcc.linear %x, %w2 : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  // expected-remark @+1 {{form-kernels: qcc.add not fused: it joined another GEMM's region}}
  %y = qcc.add %a, %b : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Near miss: a norm whose output is also returned is not fused with its
// quantize (the fused kernel writes only the int8 values and scales).
// CHECK-LABEL: func.func @norm_used_twice(
// CHECK: qcc.kernel norm {{.*}} {
// CHECK: qcc.kernel quantize {{.*}} {
func.func @norm_used_twice(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xi8>) {
  %g = qcc.constant dense<1.0> : tensor<64xf32>
  %n = qcc.rms_norm %x, %g {epsilon = 1.0e-6 : f32} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  // expected-remark @+1 {{form-kernels: qcc.quantize not fused: the qcc.rms_norm it quantizes has other users}}
  %q, %qs, %qz = qcc.quantize %n {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x64xf32>) -> (tensor<?x64xi8>, tensor<?x1xf32>, tensor<?x1xi32>)
  return %n, %q : tensor<?x64xf32>, tensor<?x64xi8>
}

// -----

// SwiGLU: silu(gate) * up joins the gate GEMM (the product is an epilogue
// stage over the up GEMM's result); the up GEMM's region is the GEMM alone.
// CHECK-LABEL: func.func @swiglu(
// CHECK: %[[UP:.*]] = qcc.kernel gemm_f16 "k{{[0-9]+}}"
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.linear
// CHECK-NEXT: qcc.yield
// CHECK: qcc.kernel gemm_f16 "k{{[0-9]+}}"(%arg0, %{{.*}}, %[[UP]])
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.linear
// CHECK-NEXT: qcc.silu
// CHECK-NEXT: qcc.mul
// CHECK-NEXT: qcc.yield
// CHECK-NOT: qcc.kernel elementwise
func.func @swiglu(%x: tensor<?x64xf32>) -> tensor<?x96xf32> {
  %wg = qcc.constant dense<0.5> : tensor<96x64xf32>
  %wu = qcc.constant dense<0.25> : tensor<96x64xf32>
  %g = qcc.linear %x, %wg : (tensor<?x64xf32>, tensor<96x64xf32>) -> tensor<?x96xf32>
  %a = qcc.silu %g : tensor<?x96xf32>
  %u = qcc.linear %x, %wu : (tensor<?x64xf32>, tensor<96x64xf32>) -> tensor<?x96xf32>
  // expected-remark @+1 {{form-kernels: qcc.mul not fused: it joined another GEMM's region}}
  %m = qcc.mul %a, %u : (tensor<?x96xf32>, tensor<?x96xf32>) -> tensor<?x96xf32>
  return %m : tensor<?x96xf32>
}

// -----

// Decode: plain GEMMs over one quantized input (q, k, v) become one grouped
// GEMV region with a result each, placed where the first was (a user of q
// comes before the v GEMM); k's GEMM with an activation keeps its own
// region. Outside decode they stay apart.
// CHECK-LABEL: func.func @qkv_decode(
// CHECK: %[[G:.*]]:2 = qcc.kernel gemm_i8 "k{{[0-9]+}}"
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.qlinear
// CHECK-NEXT: qcc.qlinear
// CHECK-NEXT: qcc.yield
// CHECK: qcc.shape %[[G]]#0
// CHECK: qcc.kernel gemm_i8 {{.*}} {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.qlinear
// CHECK-NEXT: qcc.silu
func.func @qkv_decode(%x: tensor<?x1x64xi8>, %xs: tensor<?x1x1xf32>, %xz: tensor<?x1x1xi32>) -> (tensor<?x1x64xf32>, tensor<3xi64>, tensor<?x1x32xf32>, tensor<?x1x32xf32>) attributes {qcc.tokens_per_row = 1 : i64} {
  %wq = qcc.constant dense<1> : tensor<64x64xi8>
  %wk = qcc.constant dense<2> : tensor<32x64xi8>
  %wv = qcc.constant dense<3> : tensor<32x64xi8>
  %s64 = qcc.constant dense<0.1> : tensor<64xf32>
  %n64 = qcc.constant dense<64> : tensor<64xi32>
  %s32 = qcc.constant dense<0.1> : tensor<32xf32>
  %n32 = qcc.constant dense<64> : tensor<32xi32>
  %q = qcc.qlinear %x, %xs, %xz, %wq, %s64, %n64 : (tensor<?x1x64xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<64x64xi8>, tensor<64xf32>, tensor<64xi32>) -> tensor<?x1x64xf32>
  %shape = qcc.shape %q : (tensor<?x1x64xf32>) -> tensor<3xi64>
  %k = qcc.qlinear %x, %xs, %xz, %wk, %s32, %n32 : (tensor<?x1x64xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<32x64xi8>, tensor<32xf32>, tensor<32xi32>) -> tensor<?x1x32xf32>
  %ka = qcc.silu %k : tensor<?x1x32xf32>
  %v = qcc.qlinear %x, %xs, %xz, %wv, %s32, %n32 : (tensor<?x1x64xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<32x64xi8>, tensor<32xf32>, tensor<32xi32>) -> tensor<?x1x32xf32>
  return %q, %shape, %ka, %v : tensor<?x1x64xf32>, tensor<3xi64>, tensor<?x1x32xf32>, tensor<?x1x32xf32>
}

// CHECK-LABEL: func.func @qk_prefill(
// CHECK: qcc.kernel gemm_f16 {{.*}} {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.linear
// CHECK-NEXT: qcc.yield
// CHECK: qcc.kernel gemm_f16 {{.*}} {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.linear
// CHECK-NEXT: qcc.yield
func.func @qk_prefill(%x: tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %wq = qcc.constant dense<1.0> : tensor<64x64xf32>
  %wk = qcc.constant dense<2.0> : tensor<64x64xf32>
  %q = qcc.linear %x, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k = qcc.linear %x, %wk : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  return %q, %k : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// A shape read of the normed value (a Hugging Face export's view arithmetic)
// reads the norm's input instead, and the norm fuses with its quantize.
// CHECK-LABEL: func.func @norm_shape_read(
// CHECK: qcc.shape %arg0
// CHECK: qcc.kernel norm_quantize
// CHECK-NOT: qcc.kernel norm "
func.func @norm_shape_read(%x: tensor<?x64xf32>) -> (tensor<2xi64>, tensor<?x64xi8>) {
  %g = qcc.constant dense<1.0> : tensor<64xf32>
  %n = qcc.rms_norm %x, %g {epsilon = 1.0e-6 : f32} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %s = qcc.shape %n : (tensor<?x64xf32>) -> tensor<2xi64>
  %q, %qs, %qz = qcc.quantize %n {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x64xf32>) -> (tensor<?x64xi8>, tensor<?x1xf32>, tensor<?x1xi32>)
  return %s, %q : tensor<2xi64>, tensor<?x64xi8>
}

// -----

// Near miss: a rotary whose result is also returned stays outside the
// attention kernel (the kernel does not write the rotated keys out).
// CHECK-LABEL: func.func @rotary_used_twice(
// CHECK: qcc.rotary
// CHECK: qcc.kernel attention {{.*}} {
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.rotary
// CHECK-NEXT: qcc.kv_attention
func.func @rotary_used_twice(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %v: tensor<?x?x32xf32>, %cos: tensor<?x?x16xf32>, %sin: tensor<?x?x16xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x32xf32>) {
  %qr = qcc.rotary %q, %cos, %sin {head_dim = 16 : i64} : (tensor<?x?x64xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x64xf32>
  // expected-remark @+1 {{form-kernels: qcc.rotary not fused: its result has users besides the attention}}
  %kr = qcc.rotary %k, %cos, %sin {head_dim = 16 : i64} : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x32xf32>
  %a = qcc.kv_attention %qr, %kr, %v {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f32} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  return %a, %kr : tensor<?x?x64xf32>, tensor<?x?x32xf32>
}

// -----

// A qlinear with float outlier columns (int8-fallback) becomes gemm_i8_mixed:
// the float input and the float weight columns enter as operands. The norm's
// output is read in float too, so its quantize stays a kernel of its own.
// CHECK-LABEL: func.func @outlier_columns(
// CHECK: %[[N:.*]] = qcc.kernel norm "k{{[0-9]+}}"
// CHECK: %[[Q:.*]]:3 = qcc.kernel quantize "k{{[0-9]+}}"(%[[N]])
// CHECK: qcc.kernel gemm_i8_mixed "k{{[0-9]+}}"(%[[Q]]#0, %[[Q]]#1, %[[Q]]#2, %{{.*}}, %{{.*}}, %{{.*}}, %[[N]], %{{.*}})
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.qlinear {{.*}} outliers(
// CHECK-NEXT: qcc.yield
func.func @outlier_columns(%x: tensor<?x?x64xf32>) -> tensor<?x?x256xf32> {
  %g = qcc.constant dense<1.0> : tensor<64xf32>
  %w1 = qcc.constant dense<1> : tensor<256x64xi8>
  %s1 = qcc.constant dense<0.1> : tensor<256xf32>
  %n1 = qcc.constant dense<63> : tensor<256xi32>
  %wo = qcc.constant dense<0.5> : tensor<256x1xf32>
  %n = qcc.layer_norm %x, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  // expected-remark @+1 {{form-kernels: qcc.quantize not fused: the qcc.layer_norm it quantizes has other users}}
  %q, %qs, %qz = qcc.quantize %n {outlier_columns = array<i64: 7>, quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x?x64xf32>) -> (tensor<?x?x64xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>)
  %h = qcc.qlinear %q, %qs, %qz, %w1, %s1, %n1 outliers(%n, %wo) {outlier_columns = array<i64: 7>} : (tensor<?x?x64xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<256x64xi8>, tensor<256xf32>, tensor<256xi32>, tensor<?x?x64xf32>, tensor<256x1xf32>) -> tensor<?x?x256xf32>
  return %h : tensor<?x?x256xf32>
}

// -----

// W4A16: the weight_int4 joins its linear's region (gemm_w4, with the gelu
// epilogue): the packed weight and the scales are the operands.
// CHECK-LABEL: func.func @int4_weight(
// CHECK: qcc.kernel gemm_w4 "k{{[0-9]+}}"(%{{.*}}, %{{.*}}, %arg0)
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.weight_int4
// CHECK-NEXT: qcc.linear
// CHECK-NEXT: qcc.gelu
// CHECK-NEXT: qcc.yield
func.func @int4_weight(%x: tensor<?x?x64xf32>) -> tensor<?x?x32xf32> {
  %p = qcc.constant dense<17> : tensor<32x32xi8>
  %s = qcc.constant dense<0.5> : tensor<32x2xf16>
  %w = qcc.weight_int4 %p, %s group_size 32 : (tensor<32x32xi8>, tensor<32x2xf16>) -> tensor<32x64xf32>
  %y = qcc.linear %x, %w : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %g = qcc.gelu %y : tensor<?x?x32xf32>
  return %g : tensor<?x?x32xf32>
}

// -----

// An act-ordered weight_int4 (gemm_w4 does not gather the input's columns
// yet): the linear stays out of every region and runs on the host; its gelu
// becomes an elementwise kernel of its own.
// CHECK-LABEL: func.func @int4_weight_act_order(
// CHECK: %[[W:.*]] = qcc.weight_int4
// CHECK-NEXT: %[[Y:.*]] = qcc.linear %arg0, %[[W]]
// CHECK-NEXT: qcc.kernel elementwise "k{{[0-9]+}}"(%[[Y]])
// CHECK-NOT: gemm_w4
func.func @int4_weight_act_order(%x: tensor<?x?x64xf32>, %r: tensor<64xi32>) -> tensor<?x?x32xf32> {
  %p = qcc.constant dense<17> : tensor<32x32xi8>
  %s = qcc.constant dense<0.5> : tensor<32x2xf16>
  %w = qcc.weight_int4 %p, %s, %r group_size 32 : (tensor<32x32xi8>, tensor<32x2xf16>, tensor<64xi32>) -> tensor<32x64xf32>
  // expected-remark @+1 {{form-kernels: qcc.linear not fused: its qcc.weight_int4 is act-ordered (gemm_w4 does not gather the input's columns yet): it runs on the host}}
  %y = qcc.linear %x, %w : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %g = qcc.gelu %y : tensor<?x?x32xf32>
  return %g : tensor<?x?x32xf32>
}

// -----

// A qcc.moe is a moe kernel of its own (the experts' grouped GEMMs over the
// routed tokens); the router's top-k and gate lookup stay outside.
// CHECK-LABEL: func.func @moe(
// CHECK: %[[K:.*]] = qcc.kernel moe "k{{[0-9]+}}"(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5)
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.moe
// CHECK-NEXT: qcc.yield
// CHECK: return %[[K]]
func.func @moe(%x: tensor<?x64xf32>, %ids: tensor<?x2xi64>, %g: tensor<?x2xf32>, %up: tensor<4x96x64xf32>, %down: tensor<4x64x96xf32>, %gate: tensor<4x96x64xf32>) -> tensor<?x64xf32> {
  %y = qcc.moe %x, %ids, %g, %up, %down, %gate {activation = "silu"} : (tensor<?x64xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<4x96x64xf32>, tensor<4x64x96xf32>, tensor<4x96x64xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// A mixture-of-experts router (Mixtral): softmax over the experts, top_k of
// the largest, the top-k values over their sum: one router region yielding
// the ids and the renormalized gates; its top_k carries its static k
// ("qcc.k") for the runtime's shapes. The experts (qcc.moe) are a region of
// their own.
// CHECK-LABEL: func.func @router_renormalized(
// CHECK: %[[R:.*]]:2 = qcc.kernel router "k{{[0-9]+}}"(%{{.*}}, %{{.*}}) : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xi64>, tensor<?x2xf32>)
// CHECK: qcc.softmax
// CHECK: qcc.top_k {{.*}} {axis = 1 : i64, qcc.k = 2 : i64}
// CHECK: qcc.reduce_sum
// CHECK: qcc.div
// CHECK: qcc.kernel moe {{.*}}(%{{.*}}, %[[R]]#0, %[[R]]#1,
func.func @router_renormalized(%x: tensor<?x8xf32>, %logits: tensor<?x4xf32>, %up: tensor<4x16x8xf32>, %down: tensor<4x8x16xf32>) -> tensor<?x8xf32> {
  %k = qcc.constant dense<2> : tensor<1xi64>
  %p = qcc.softmax %logits {axis = 1 : i64} : tensor<?x4xf32>
  %v, %i = qcc.top_k %p, %k {axis = 1 : i64} : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  %s = qcc.reduce_sum %v {axes = array<i64: 1>} : (tensor<?x2xf32>) -> tensor<?x1xf32>
  %g = qcc.div %v, %s : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
  %y = qcc.moe %x, %i, %g, %up, %down {activation = "relu"} : (tensor<?x8xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Without the renormalization (Qwen-MoE's norm_topk_prob off): the region
// yields the top-k values themselves.
// CHECK-LABEL: func.func @router_plain(
// CHECK: %[[R:.*]]:2 = qcc.kernel router "k{{[0-9]+}}"(%{{.*}}, %{{.*}}) : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
// CHECK-NOT: qcc.reduce_sum
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @router_plain(%logits: tensor<?x4xf32>) -> (tensor<?x2xf32>, tensor<?x2xi64>) {
  %k = qcc.constant dense<2> : tensor<1xi64>
  %p = qcc.softmax %logits {axis = -1 : i64} : tensor<?x4xf32>
  %v, %i = qcc.top_k %p, %k {axis = -1 : i64} : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  return %v, %i : tensor<?x2xf32>, tensor<?x2xi64>
}

// -----

// Near miss: the probabilities are read beside the top_k (an auxiliary
// loss, say): the softmax stays out of any region.
// CHECK-LABEL: func.func @router_probabilities_read(
// CHECK-NOT: qcc.kernel router
// CHECK: qcc.softmax
func.func @router_probabilities_read(%logits: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x2xi64>) {
  %k = qcc.constant dense<2> : tensor<1xi64>
  %p = qcc.softmax %logits {axis = 1 : i64} : tensor<?x4xf32>
  %v, %i = qcc.top_k %p, %k {axis = 1 : i64} : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  return %p, %i : tensor<?x4xf32>, tensor<?x2xi64>
}
