// RUN: qcc-opt %s --allow-unregistered-dialect | qcc-opt --allow-unregistered-dialect | FileCheck %s
// Every op parses, verifies and prints back in its assembly format.

// CHECK-LABEL: func @transformer_ops
func.func @transformer_ops(%x: tensor<?x?x64xf32>, %ids: tensor<?x?xi64>,
                           %cos: tensor<?x16xf32>, %sin: tensor<?x16xf32>,
                           %mask: tensor<?x1x1x?xf32>) -> tensor<?x?x64xf32> {
  %table = qcc.constant dense<0.5> : tensor<256x64xf32>
  %w = qcc.constant dense<0.25> : tensor<64x64xf32>
  %b = qcc.constant dense<0.0> : tensor<64xf32>
  %wkv = qcc.constant dense<0.25> : tensor<32x64xf32>
  // CHECK: qcc.embedding
  %e = qcc.embedding %table, %ids : (tensor<256x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  // CHECK: qcc.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999974E-6 : f32}
  %ln = qcc.layer_norm %e, %b, %b {epsilon = 1.0e-5 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  // CHECK: qcc.rms_norm
  %rn = qcc.rms_norm %ln, %b {epsilon = 1.0e-6 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  // CHECK: qcc.linear %{{.*}}, %{{.*}}, %{{.*}} :
  %q = qcc.linear %rn, %w, %b : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  // CHECK: qcc.linear %{{.*}}, %{{.*}} :
  %k = qcc.linear %rn, %wkv : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  // CHECK: qcc.rotary {{.*}} {head_dim = 16 : i64}
  %qr = qcc.rotary %q, %cos, %sin {head_dim = 16 : i64} : (tensor<?x?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x?x64xf32>
  // CHECK: qcc.attention {{.*}} {causal = true, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32}
  %a = qcc.attention %qr, %k, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  // CHECK: qcc.attention {{.*}}, %{{.*}} {causal = false
  %am = qcc.attention %a, %a, %a, %mask {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = false} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x1x1x?xf32>) -> tensor<?x?x64xf32>
  // CHECK: qcc.gelu %{{.*}} {approximate = "tanh"}
  %g = qcc.gelu %am {approximate = "tanh"} : tensor<?x?x64xf32>
  // CHECK: qcc.gelu %{{.*}} : tensor
  %g2 = qcc.gelu %g : tensor<?x?x64xf32>
  // CHECK: qcc.silu
  %s = qcc.silu %g2 : tensor<?x?x64xf32>
  // CHECK: qcc.softmax %{{.*}} {axis = -1 : i64}
  %sm = qcc.softmax %s {axis = -1 : i64} : tensor<?x?x64xf32>
  return %sm : tensor<?x?x64xf32>
}

// CHECK-LABEL: func @partial_rotary
func.func @partial_rotary(%x: tensor<?x?x64xf32>, %cos: tensor<?x?x4xf32>,
                          %sin: tensor<?x?x4xf32>) -> tensor<?x?x64xf32> {
  // CHECK: qcc.rotary {{.*}} {head_dim = 16 : i64, rotary_dim = 4 : i64}
  %r = qcc.rotary %x, %cos, %sin {head_dim = 16 : i64, rotary_dim = 4 : i64} : (tensor<?x?x64xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// CHECK-LABEL: func @primitive_ops
func.func @primitive_ops(%x: tensor<?x?x64xf32>, %c: tensor<?x?x64xi1>) -> tensor<?x4x?x16xf32> {
  %two = qcc.constant dense<2.0> : tensor<f32>
  // CHECK: qcc.pow
  %p = qcc.pow %x, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  // CHECK: qcc.reduce_mean %{{.*}} {axes = array<i64: 2>}
  %m = qcc.reduce_mean %p {axes = array<i64: 2>} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %d = qcc.sub %x, %m : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %w = qcc.where %c, %d, %x : (tensor<?x?x64xi1>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %e = qcc.erf %w : tensor<?x?x64xf32>
  // CHECK: qcc.shape
  %shape = qcc.shape %e : (tensor<?x?x64xf32>) -> tensor<3xi64>
  %i0 = qcc.constant dense<[0, 1]> : tensor<2xi64>
  %bt = qcc.gather %shape, %i0 {axis = 0 : i64} : (tensor<3xi64>, tensor<2xi64>) -> tensor<2xi64>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %target = qcc.concat %bt, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  // CHECK: qcc.reshape
  %r = qcc.reshape %e, %target : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  // CHECK: qcc.transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>}
  %t = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  return %t : tensor<?x4x?x16xf32>
}

// Mask and position builders: comparisons, logic, cumsum, gather_elements.
// CHECK-LABEL: func @mask_ops
func.func @mask_ops(%mask: tensor<?x?xi64>, %x: tensor<?x8xf32>) -> (tensor<?x?xi1>, tensor<?x?xi64>, tensor<?x8xf32>, tensor<?x1xf32>) {
  %one = qcc.constant dense<1> : tensor<i64>
  // CHECK: qcc.cumsum %{{.*}} {axis = 1 : i64}
  %c = qcc.cumsum %mask {axis = 1 : i64} : (tensor<?x?xi64>) -> tensor<?x?xi64>
  // CHECK: qcc.cumsum %{{.*}} {axis = 1 : i64, exclusive = true, reverse = true}
  %cr = qcc.cumsum %mask {axis = 1 : i64, exclusive = true, reverse = true} : (tensor<?x?xi64>) -> tensor<?x?xi64>
  %pos = qcc.sub %c, %one : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi64>
  %lt = qcc.less %pos, %cr : (tensor<?x?xi64>, tensor<?x?xi64>) -> tensor<?x?xi1>
  %le = qcc.less_equal %pos, %cr : (tensor<?x?xi64>, tensor<?x?xi64>) -> tensor<?x?xi1>
  %gt = qcc.greater %pos, %cr : (tensor<?x?xi64>, tensor<?x?xi64>) -> tensor<?x?xi1>
  %ge = qcc.greater_equal %pos, %cr : (tensor<?x?xi64>, tensor<?x?xi64>) -> tensor<?x?xi1>
  // CHECK: qcc.and
  %a = qcc.and %lt, %le : (tensor<?x?xi1>, tensor<?x?xi1>) -> tensor<?x?xi1>
  // CHECK: qcc.or
  %o = qcc.or %gt, %ge : (tensor<?x?xi1>, tensor<?x?xi1>) -> tensor<?x?xi1>
  %ao = qcc.and %a, %o : (tensor<?x?xi1>, tensor<?x?xi1>) -> tensor<?x?xi1>
  %zero = qcc.constant dense<0.0> : tensor<f32>
  // CHECK: qcc.max
  %mx = qcc.max %x, %zero : (tensor<?x8xf32>, tensor<f32>) -> tensor<?x8xf32>
  // CHECK: qcc.min
  %mn = qcc.min %mx, %zero : (tensor<?x8xf32>, tensor<f32>) -> tensor<?x8xf32>
  %ab = qcc.abs %mn : tensor<?x8xf32>
  %lg = qcc.log %ab : tensor<?x8xf32>
  // CHECK: qcc.is_nan
  %nan = qcc.is_nan %lg : (tensor<?x8xf32>) -> tensor<?x8xi1>
  %sel = qcc.where %nan, %zero, %lg : (tensor<?x8xi1>, tensor<f32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  %idx = qcc.constant dense<[[7, 0]]> : tensor<1x2xi64>
  // CHECK: qcc.gather_elements %{{.*}}, %{{.*}} {axis = 1 : i64}
  %g = qcc.gather_elements %sel, %idx {axis = 1 : i64} : (tensor<?x8xf32>, tensor<1x2xi64>) -> tensor<1x2xf32>
  %upd = qcc.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %row = qcc.constant dense<[[0]]> : tensor<1x1xi64>
  // CHECK: qcc.scatter_nd
  %sc = qcc.scatter_nd %g, %row, %upd : (tensor<1x2xf32>, tensor<1x1xi64>, tensor<1x2xf32>) -> tensor<1x2xf32>
  // CHECK: qcc.reduce_max
  %rm = qcc.reduce_max %sel {axes = array<i64: 1>} : (tensor<?x8xf32>) -> tensor<?x1xf32>
  return %ao, %pos, %sel, %rm : tensor<?x?xi1>, tensor<?x?xi64>, tensor<?x8xf32>, tensor<?x1xf32>
}

// repeat_interleave (GPT-J's rotary tables): repeats known at run time.
// CHECK-LABEL: func @tile_op
func.func @tile_op(%x: tensor<?x8xf32>, %reps: tensor<2xi64>) -> tensor<?x?xf32> {
  // CHECK: qcc.tile %{{.*}}, %{{.*}} : (tensor<?x8xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  %t = qcc.tile %x, %reps : (tensor<?x8xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %t : tensor<?x?xf32>
}

// A mixture-of-experts router's experts per token.
// CHECK-LABEL: func @top_k_op
func.func @top_k_op(%logits: tensor<?x4xf32>) -> (tensor<?x2xi64>, tensor<?x?xf32>) {
  %k = qcc.constant dense<[2]> : tensor<1xi64>
  // CHECK: qcc.top_k %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  %v, %i = qcc.top_k %logits, %k {axis = 1 : i64} : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  // CHECK: qcc.top_k %{{.*}}, %{{.*}} {axis = -1 : i64, largest = false}
  %sv, %si = qcc.top_k %logits, %k {axis = -1 : i64, largest = false} : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x?xf32>, tensor<?x?xi64>)
  return %i, %sv : tensor<?x2xi64>, tensor<?x?xf32>
}

// The router's expert mask.
// CHECK-LABEL: func @one_hot_op
func.func @one_hot_op(%i: tensor<?x2xi64>) -> tensor<?x2x4xf32> {
  %depth = qcc.constant dense<4> : tensor<i64>
  %offon = qcc.constant dense<[0.0, 1.0]> : tensor<2xf32>
  // CHECK: qcc.one_hot %{{.*}}, %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<?x2xi64>, tensor<i64>, tensor<2xf32>) -> tensor<?x2x4xf32>
  %mask = qcc.one_hot %i, %depth, %offon {axis = 2 : i64} : (tensor<?x2xi64>, tensor<i64>, tensor<2xf32>) -> tensor<?x2x4xf32>
  return %mask : tensor<?x2x4xf32>
}

// Each expert's tokens: a size known only when it runs.
// CHECK-LABEL: func @non_zero_op
func.func @non_zero_op(%mask: tensor<?x2x4xf32>) -> tensor<3x?xi64> {
  // CHECK: qcc.non_zero %{{.*}} : (tensor<?x2x4xf32>) -> tensor<3x?xi64>
  %nz = qcc.non_zero %mask : (tensor<?x2x4xf32>) -> tensor<3x?xi64>
  return %nz : tensor<3x?xi64>
}

// An expert's output added into its tokens' rows (index_add_).
// CHECK-LABEL: func @scatter_elements_op
func.func @scatter_elements_op(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %rows = qcc.constant dense<[[0, 2, 1, 0, 0, 0, 0, 3]]> : tensor<1x8xi64>
  %upd = qcc.constant dense<1.0> : tensor<1x8xf32>
  // CHECK: qcc.scatter_elements %{{.*}}, %{{.*}}, %{{.*}} {axis = 0 : i64, reduction = "add"}
  %sc = qcc.scatter_elements %x, %rows, %upd {axis = 0 : i64, reduction = "add"} : (tensor<?x8xf32>, tensor<1x8xi64>, tensor<1x8xf32>) -> tensor<?x8xf32>
  return %sc : tensor<?x8xf32>
}

// The quantization facts are one typed attribute, #qcc.quant.
// CHECK-LABEL: func @quantize_ops
func.func @quantize_ops(%x: tensor<?x64xf32>) -> (tensor<?x64xi8>, tensor<?x64xi8>, tensor<?x64xi8>) {
  // CHECK: qcc.quantize %{{.*}} {quant = #qcc.quant<bits = 8, symmetric, per_token>}
  %q0, %s0, %z0 = qcc.quantize %x {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x64xf32>) -> (tensor<?x64xi8>, tensor<?x1xf32>, tensor<?x1xi32>)
  // CHECK: qcc.quantize %{{.*}} {quant = #qcc.quant<bits = 8, asymmetric, per_tensor>}
  %q1, %s1, %z1 = qcc.quantize %x {quant = #qcc.quant<bits = 8, asymmetric, per_tensor>} : (tensor<?x64xf32>) -> (tensor<?x64xi8>, tensor<1xf32>, tensor<1xi32>)
  // CHECK: qcc.quantize %{{.*}} {quant = #qcc.quant<bits = 8, symmetric, per_tensor>, scale = 5.000000e-01 : f32}
  %q2, %s2, %z2 = qcc.quantize %x {quant = #qcc.quant<bits = 8, symmetric, per_tensor>, scale = 0.5 : f32} : (tensor<?x64xf32>) -> (tensor<?x64xi8>, tensor<1xf32>, tensor<1xi32>)
  // A weight's facts (per output channel) print the axis:
  // CHECK: "test.weights"() {quant = #qcc.quant<bits = 8, symmetric, per_channel, axis = 0>}
  "test.weights"() {quant = #qcc.quant<bits = 8, symmetric, per_channel, axis = 0>} : () -> ()
  return %q0, %q1, %q2 : tensor<?x64xi8>, tensor<?x64xi8>, tensor<?x64xi8>
}

// An f32 result is the code read back (QDQ): W4A8's int4 linears read it.
// CHECK-LABEL: func @quantize_dequantize
func.func @quantize_dequantize(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // CHECK: qcc.quantize %{{.*}} : (tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xi32>)
  %q, %s, %z = qcc.quantize %x {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x1xf32>, tensor<?x1xi32>)
  return %q : tensor<?x64xf32>
}

// Float outlier columns (int8-fallback): the quantize reads them as 0, the
// qlinear takes the float input and weight columns. A dynamic K (a
// reshape's result) is checked against the qlinear's weight.
// CHECK-LABEL: func @outlier_columns
// CHECK: qcc.quantize %{{.*}} {outlier_columns = array<i64: 1, 60>, quant = #qcc.quant<bits = 8, symmetric, per_token>}
// CHECK: qcc.qlinear %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} outliers(%{{.*}}, %{{.*}}) {outlier_columns = array<i64: 1, 60>}
func.func @outlier_columns(%x: tensor<?x?xf32>, %w: tensor<8x64xi8>, %ws: tensor<8xf32>, %wsum: tensor<8xi32>, %b: tensor<8xf32>, %wo: tensor<8x2xf32>) -> tensor<?x8xf32> {
  %q, %s, %z = qcc.quantize %x {outlier_columns = array<i64: 1, 60>, quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x?xf32>) -> (tensor<?x?xi8>, tensor<?x1xf32>, tensor<?x1xi32>)
  %y = qcc.qlinear %q, %s, %z, %w, %ws, %wsum, %b outliers(%x, %wo) {outlier_columns = array<i64: 1, 60>} : (tensor<?x?xi8>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<8x64xi8>, tensor<8xf32>, tensor<8xi32>, tensor<8xf32>, tensor<?x?xf32>, tensor<8x2xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// A 2:4 weight in its compressed form feeds a linear as the dense weight.
// CHECK-LABEL: func @sparse_2_4
func.func @sparse_2_4(%x: tensor<?x64xf16>, %v: tensor<16x32xf16>, %m: tensor<16x2xi32>) -> tensor<?x16xf16> {
  // CHECK: %[[W:.*]] = qcc.sparse_2_4 %{{.*}}, %{{.*}} : (tensor<16x32xf16>, tensor<16x2xi32>) -> tensor<16x64xf16>
  %w = qcc.sparse_2_4 %v, %m : (tensor<16x32xf16>, tensor<16x2xi32>) -> tensor<16x64xf16>
  // CHECK: qcc.linear %{{.*}}, %[[W]]
  %y = qcc.linear %x, %w : (tensor<?x64xf16>, tensor<16x64xf16>) -> tensor<?x16xf16>
  return %y : tensor<?x16xf16>
}

// A W4A16 weight in its packed int4 form (with and without act-order's
// permutation, with and without offsets) feeds a linear as the float weight.
// CHECK-LABEL: func @weight_int4
func.func @weight_int4(%x: tensor<?x64xf32>, %p: tensor<16x32xi8>, %s: tensor<16x2xf16>, %r: tensor<64xi32>, %o: tensor<16x2xf16>) -> (tensor<?x16xf32>, tensor<16x64xf16>) {
  // CHECK: %[[W:.*]] = qcc.weight_int4 %{{.*}}, %{{.*}} group_size 32 : (tensor<16x32xi8>, tensor<16x2xf16>) -> tensor<16x64xf32>
  %w = qcc.weight_int4 %p, %s group_size 32 : (tensor<16x32xi8>, tensor<16x2xf16>) -> tensor<16x64xf32>
  // CHECK: qcc.weight_int4 %{{.*}}, %{{.*}}, %{{.*}} group_size 32 : (tensor<16x32xi8>, tensor<16x2xf16>, tensor<64xi32>) -> tensor<16x64xf16>
  %h = qcc.weight_int4 %p, %s, %r group_size 32 : (tensor<16x32xi8>, tensor<16x2xf16>, tensor<64xi32>) -> tensor<16x64xf16>
  // CHECK: qcc.weight_int4 %{{.*}}, %{{.*}} offsets %{{.*}} group_size 32 : (tensor<16x32xi8>, tensor<16x2xf16>, tensor<16x2xf16>) -> tensor<16x64xf32>
  %a = qcc.weight_int4 %p, %s offsets %o group_size 32 : (tensor<16x32xi8>, tensor<16x2xf16>, tensor<16x2xf16>) -> tensor<16x64xf32>
  // CHECK: qcc.weight_int4 %{{.*}}, %{{.*}}, %{{.*}} offsets %{{.*}} group_size 32 : (tensor<16x32xi8>, tensor<16x2xf16>, tensor<64xi32>, tensor<16x2xf16>) -> tensor<16x64xf32>
  %ap = qcc.weight_int4 %p, %s, %r offsets %o group_size 32 : (tensor<16x32xi8>, tensor<16x2xf16>, tensor<64xi32>, tensor<16x2xf16>) -> tensor<16x64xf32>
  // CHECK: qcc.linear %{{.*}}, %[[W]]
  %y = qcc.linear %x, %w : (tensor<?x64xf32>, tensor<16x64xf32>) -> tensor<?x16xf32>
  return %y, %h : tensor<?x16xf32>, tensor<16x64xf16>
}

// CHECK-LABEL: func @moe
// CHECK: qcc.moe %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 {activation = "silu"}
// CHECK: qcc.moe %arg0, %arg1, %arg2, %arg3, %arg4 {activation = "gelu_tanh"}
func.func @moe(%x: tensor<?x64xf32>, %ids: tensor<?x2xi64>, %g: tensor<?x2xf32>, %up: tensor<8x128x64xf32>, %down: tensor<8x64x128xf32>, %gate: tensor<8x128x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %0 = qcc.moe %x, %ids, %g, %up, %down, %gate {activation = "silu"} : (tensor<?x64xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<8x128x64xf32>, tensor<8x64x128xf32>, tensor<8x128x64xf32>) -> tensor<?x64xf32>
  %1 = qcc.moe %x, %ids, %g, %up, %down {activation = "gelu_tanh"} : (tensor<?x64xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<8x128x64xf32>, tensor<8x64x128xf32>) -> tensor<?x64xf32>
  return %0, %1 : tensor<?x64xf32>, tensor<?x64xf32>
}
