// RUN: qcc-opt %s --split-input-file --verify-diagnostics

func.func @linear_k_mismatch(%x: tensor<?x64xf32>, %w: tensor<32x48xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{input size 64 differs from the weight's K 48}}
  %0 = qcc.linear %x, %w : (tensor<?x64xf32>, tensor<32x48xf32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @attention_heads(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{num_heads must be a positive multiple of num_kv_heads}}
  %0 = qcc.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 3 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @attention_kv_width(%q: tensor<?x?x64xf32>, %k: tensor<?x?x48xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{key width must be num_kv_heads * head size}}
  %0 = qcc.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x64xf32>, tensor<?x?x48xf32>, tensor<?x?x48xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @rotary_odd_head(%x: tensor<?x?x60xf32>, %t: tensor<?x15xf32>) -> tensor<?x?x60xf32> {
  // expected-error @+1 {{the rotated part (rotary_dim, else head_dim) must be positive, even and at most head_dim}}
  %0 = qcc.rotary %x, %t, %t {head_dim = 15 : i64} : (tensor<?x?x60xf32>, tensor<?x15xf32>, tensor<?x15xf32>) -> tensor<?x?x60xf32>
  return %0 : tensor<?x?x60xf32>
}

// -----

func.func @rotary_dim_past_head(%x: tensor<?x?x64xf32>, %t: tensor<?x32xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{the rotated part (rotary_dim, else head_dim) must be positive, even and at most head_dim}}
  %0 = qcc.rotary %x, %t, %t {head_dim = 16 : i64, rotary_dim = 32 : i64} : (tensor<?x?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @rotary_table_not_rotary_dim(%x: tensor<?x?x64xf32>, %t: tensor<?x16xf32>) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{cos and sin must be [S, R] or [B, S, R] with R = rotary_dim}}
  %0 = qcc.rotary %x, %t, %t {head_dim = 16 : i64, rotary_dim = 4 : i64} : (tensor<?x?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x?x64xf32>
  return %0 : tensor<?x?x64xf32>
}

// -----

func.func @gelu_mode(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{approximate must be "none" or "tanh", not "sigmoid"}}
  %0 = qcc.gelu %x {approximate = "sigmoid"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @layer_norm_gamma(%x: tensor<?x64xf32>, %g: tensor<32xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{gamma must be [D] with D the input's last dimension}}
  %0 = qcc.layer_norm %x, %g {epsilon = 1.0e-5 : f32} : (tensor<?x64xf32>, tensor<32xf32>) -> tensor<?x64xf32>
  return %0 : tensor<?x64xf32>
}

// -----

func.func @broadcast(%a: tensor<3x4xf32>, %b: tensor<5xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{operands are not broadcast-compatible}}
  %0 = qcc.add %a, %b : (tensor<3x4xf32>, tensor<5xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @transpose_perm(%a: tensor<3x4xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{perm is not a permutation}}
  %0 = qcc.transpose %a {perm = array<i64: 0, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @reshape_count(%a: tensor<3x4xf32>, %s: tensor<2xi64>) -> tensor<5x2xf32> {
  // expected-error @+1 {{input and result element counts differ}}
  %0 = qcc.reshape %a, %s : (tensor<3x4xf32>, tensor<2xi64>) -> tensor<5x2xf32>
  return %0 : tensor<5x2xf32>
}

// -----

func.func @embedding_shape(%t: tensor<256x64xf32>, %ids: tensor<?x?xi64>) -> tensor<?x64xf32> {
  // expected-error @+1 {{result must be ids' shape followed by E}}
  %0 = qcc.embedding %t, %ids : (tensor<256x64xf32>, tensor<?x?xi64>) -> tensor<?x64xf32>
  return %0 : tensor<?x64xf32>
}

// -----

func.func @split_sizes(%a: tensor<6xf32>) -> (tensor<2xf32>, tensor<3xf32>) {
  // expected-error @+1 {{sizes must add up to the input size along axis}}
  %0:2 = qcc.split %a {axis = 0 : i64, sizes = array<i64: 2, 3>} : (tensor<6xf32>) -> (tensor<2xf32>, tensor<3xf32>)
  return %0#0, %0#1 : tensor<2xf32>, tensor<3xf32>
}

// -----

func.func @and_not_bool(%a: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{operands and result must be i1}}
  %0 = qcc.and %a, %a : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @less_result_not_bool(%a: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{result element type must be i1}}
  %0 = qcc.less %a, %a : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

func.func @cumsum_axis(%a: tensor<2x3xi64>) -> tensor<2x3xi64> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = qcc.cumsum %a {axis = 2 : i64} : (tensor<2x3xi64>) -> tensor<2x3xi64>
  return %0 : tensor<2x3xi64>
}

// -----

func.func @gather_elements_rank(%a: tensor<2x3xf32>, %i: tensor<3xi64>) -> tensor<3xf32> {
  // expected-error @+1 {{input and indices must have the same rank >= 1}}
  %0 = qcc.gather_elements %a, %i {axis = 0 : i64} : (tensor<2x3xf32>, tensor<3xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @reduce_sum_bool(%a: tensor<2x3xi1>) -> tensor<2x1xi1> {
  // expected-error @+1 {{result element type must be the input's (not i1)}}
  %0 = qcc.reduce_sum %a {axes = array<i64: 1>} : (tensor<2x3xi1>) -> tensor<2x1xi1>
  return %0 : tensor<2x1xi1>
}

// -----

// #qcc.quant: a channel axis goes with per_channel granularity only.
func.func @quant_axis_without_per_channel(%x: tensor<?x2xf32>) -> tensor<?x2xi8> {
  // expected-error @+1 {{a quantization axis is given exactly with per_channel granularity}}
  %q, %s, %z = qcc.quantize %x {quant = #qcc.quant<bits = 8, symmetric, per_token, axis = 1>} : (tensor<?x2xf32>) -> (tensor<?x2xi8>, tensor<?x1xf32>, tensor<?x1xi32>)
  return %q : tensor<?x2xi8>
}

// -----

func.func @kernel_kind_body(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{of kind 'gemm_i8' needs a qcc.qlinear in its body}}
  %0 = qcc.kernel gemm_i8 "k0" (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %1 = qcc.relu %a : tensor<4x8xf32>
    qcc.yield %1 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

func.func @quantize_bits_not_result_width(%x: tensor<?x2xf32>) -> tensor<?x2xi8> {
  // expected-error @+1 {{quantizes to 8 bits (the result is i8), not 4}}
  %q, %s, %z = qcc.quantize %x {quant = #qcc.quant<bits = 4, symmetric, per_token>} : (tensor<?x2xf32>) -> (tensor<?x2xi8>, tensor<?x1xf32>, tensor<?x1xi32>)
  return %q : tensor<?x2xi8>
}

// -----

func.func @quantize_per_channel(%x: tensor<?x2xf32>) -> tensor<?x2xi8> {
  // expected-error @+1 {{granularity must be per_token or per_tensor}}
  %q, %s, %z = qcc.quantize %x {quant = #qcc.quant<bits = 8, symmetric, per_channel, axis = 0>} : (tensor<?x2xf32>) -> (tensor<?x2xi8>, tensor<?x1xf32>, tensor<?x1xi32>)
  return %q : tensor<?x2xi8>
}

// -----

func.func @kernel_kind_unknown(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // A kind is a spelling of format/KernelKinds.def; another is named.
  // expected-error @+1 {{unknown kernel kind 'gemm_i4'}}
  %0 = qcc.kernel gemm_i4 "k0" (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    qcc.yield %a : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

func.func @sparse_2_4_k(%v: tensor<8x24xf32>, %m: tensor<8x1xi32>) -> tensor<8x48xf32> {
  // expected-error @+1 {{K (48) must be a static multiple of 32}}
  %0 = qcc.sparse_2_4 %v, %m : (tensor<8x24xf32>, tensor<8x1xi32>) -> tensor<8x48xf32>
  return %0 : tensor<8x48xf32>
}

// -----

func.func @sparse_2_4_values(%v: tensor<8x16xf32>, %m: tensor<8x2xi32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{values must be [N, K/2] = [N, 32]}}
  %0 = qcc.sparse_2_4 %v, %m : (tensor<8x16xf32>, tensor<8x2xi32>) -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

func.func @sparse_2_4_meta(%v: tensor<2x16xi8>) -> tensor<2x32xi8> {
  // Row 1's group 3 names positions 2, 1 (nibble 0x6): not ascending.
  %m = qcc.constant dense<[[0x44444444], [0x44446444]]> : tensor<2x1xi32>
  // expected-error @+1 {{invalid metadata: row 1, group 3 (k 12..15) has metadata positions 2, 1; 2:4 needs two distinct positions in ascending order}}
  %0 = qcc.sparse_2_4 %v, %m : (tensor<2x16xi8>, tensor<2x1xi32>) -> tensor<2x32xi8>
  return %0 : tensor<2x32xi8>
}

// -----

func.func @weight_int4_group(%p: tensor<8x32xi8>, %s: tensor<8x2xf16>) -> tensor<8x64xf32> {
  // expected-error @+1 {{K = 64 is not a multiple of the group size 48}}
  %0 = qcc.weight_int4 %p, %s group_size 48 : (tensor<8x32xi8>, tensor<8x2xf16>) -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

func.func @weight_int4_packed(%p: tensor<8x64xi8>, %s: tensor<8x2xf16>) -> tensor<8x64xf32> {
  // expected-error @+1 {{packed must be [N, K/2] = [N, 32]}}
  %0 = qcc.weight_int4 %p, %s group_size 32 : (tensor<8x64xi8>, tensor<8x2xf16>) -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

func.func @weight_int4_scales(%p: tensor<8x32xi8>, %s: tensor<8x4xf16>) -> tensor<8x64xf32> {
  // expected-error @+1 {{scales must be [N, K/group_size] = [N, 2]}}
  %0 = qcc.weight_int4 %p, %s group_size 32 : (tensor<8x32xi8>, tensor<8x4xf16>) -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

func.func @weight_int4_perm(%p: tensor<1x2xi8>, %s: tensor<1x1xf16>) -> tensor<1x4xf32> {
  %r = qcc.constant dense<[0, 2, 2, 1]> : tensor<4xi32>
  // expected-error @+1 {{invalid perm: permutation names column 2 twice}}
  %0 = qcc.weight_int4 %p, %s, %r group_size 4 : (tensor<1x2xi8>, tensor<1x1xf16>, tensor<4xi32>) -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}

// -----

func.func @weight_int4_offsets(%p: tensor<8x32xi8>, %s: tensor<8x2xf16>, %o: tensor<8x1xf16>) -> tensor<8x64xf32> {
  // expected-error @+1 {{offsets must have the shape of scales}}
  %0 = qcc.weight_int4 %p, %s offsets %o group_size 32 : (tensor<8x32xi8>, tensor<8x2xf16>, tensor<8x1xf16>) -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

func.func @weight_int4_offsets_type(%p: tensor<8x32xi8>, %s: tensor<8x2xf16>, %o: tensor<8x2xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{operand #2 must be ranked tensor of 16-bit float values}}
  %0 = qcc.weight_int4 %p, %s offsets %o group_size 32 : (tensor<8x32xi8>, tensor<8x2xf16>, tensor<8x2xf32>) -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

func.func @quantize_outlier_order(%x: tensor<?x8xf32>) -> tensor<?x8xi8> {
  // expected-error @+1 {{outlier columns must be ascending and distinct (5 then 2)}}
  %q, %s, %z = qcc.quantize %x {outlier_columns = array<i64: 5, 2>, quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x8xf32>) -> (tensor<?x8xi8>, tensor<?x1xf32>, tensor<?x1xi32>)
  return %q : tensor<?x8xi8>
}

// -----

func.func @qlinear_outlier_range(%x: tensor<?x8xf32>, %w: tensor<4x8xi8>, %ws: tensor<4xf32>, %wsum: tensor<4xi32>, %wo: tensor<4x1xf32>) -> tensor<?x4xf32> {
  %q, %s, %z = qcc.quantize %x {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x8xf32>) -> (tensor<?x8xi8>, tensor<?x1xf32>, tensor<?x1xi32>)
  // expected-error @+1 {{outlier column 8 is outside [0, 8)}}
  %y = qcc.qlinear %q, %s, %z, %w, %ws, %wsum outliers(%x, %wo) {outlier_columns = array<i64: 8>} : (tensor<?x8xi8>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<4x8xi8>, tensor<4xf32>, tensor<4xi32>, tensor<?x8xf32>, tensor<4x1xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @qlinear_outlier_weight(%x: tensor<?x8xf32>, %w: tensor<4x8xi8>, %ws: tensor<4xf32>, %wsum: tensor<4xi32>, %wo: tensor<4x2xf32>) -> tensor<?x4xf32> {
  %q, %s, %z = qcc.quantize %x {outlier_columns = array<i64: 3>, quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x8xf32>) -> (tensor<?x8xi8>, tensor<?x1xf32>, tensor<?x1xi32>)
  // expected-error @+1 {{outlier_weight must be [N, number of outlier columns]}}
  %y = qcc.qlinear %q, %s, %z, %w, %ws, %wsum outliers(%x, %wo) {outlier_columns = array<i64: 3>} : (tensor<?x8xi8>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<4x8xi8>, tensor<4xf32>, tensor<4xi32>, tensor<?x8xf32>, tensor<4x2xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @qlinear_outlier_quantize_disagrees(%x: tensor<?x8xf32>, %w: tensor<4x8xi8>, %ws: tensor<4xf32>, %wsum: tensor<4xi32>, %wo: tensor<4x1xf32>) -> tensor<?x4xf32> {
  %q, %s, %z = qcc.quantize %x {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x8xf32>) -> (tensor<?x8xi8>, tensor<?x1xf32>, tensor<?x1xi32>)
  // expected-error @+1 {{the quantize of the input must read outlier_input with the same outlier_columns}}
  %y = qcc.qlinear %q, %s, %z, %w, %ws, %wsum outliers(%x, %wo) {outlier_columns = array<i64: 3>} : (tensor<?x8xi8>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<4x8xi8>, tensor<4xf32>, tensor<4xi32>, tensor<?x8xf32>, tensor<4x1xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @qlinear_outlier_no_columns(%x: tensor<?x8xf32>, %w: tensor<4x8xi8>, %ws: tensor<4xf32>, %wsum: tensor<4xi32>, %wo: tensor<4x1xf32>) -> tensor<?x4xf32> {
  %q, %s, %z = qcc.quantize %x {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x8xf32>) -> (tensor<?x8xi8>, tensor<?x1xf32>, tensor<?x1xi32>)
  // expected-error @+1 {{outlier_input, outlier_weight and outlier_columns come together}}
  %y = qcc.qlinear %q, %s, %z, %w, %ws, %wsum outliers(%x, %wo) : (tensor<?x8xi8>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<4x8xi8>, tensor<4xf32>, tensor<4xi32>, tensor<?x8xf32>, tensor<4x1xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @kv_attention_alibi_per_head(%q: tensor<1x2x64xf32>, %k: tensor<1x2x32xf32>) -> tensor<1x2x64xf32> {
  // expected-error @+1 {{alibi must have one slope per query head (4), got 2}}
  %a = qcc.kv_attention %q, %k, %k {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f32, alibi = array<f32: 0.5, 0.25>} : (tensor<1x2x64xf32>, tensor<1x2x32xf32>, tensor<1x2x32xf32>) -> tensor<1x2x64xf32>
  return %a : tensor<1x2x64xf32>
}

// -----

func.func @top_k_bool(%x: tensor<4xi1>, %k: tensor<1xi64>) -> tensor<2xi1> {
  // expected-error @+1 {{cannot order i1 elements}}
  %v, %i = qcc.top_k %x, %k {axis = 0 : i64} : (tensor<4xi1>, tensor<1xi64>) -> (tensor<2xi1>, tensor<2xi64>)
  return %v : tensor<2xi1>
}

// -----

func.func @top_k_too_many(%x: tensor<?x4xf32>, %k: tensor<1xi64>) -> tensor<?x5xf32> {
  // expected-error @+1 {{result shape does not fit the input's off the axis or exceeds it along the axis}}
  %v, %i = qcc.top_k %x, %k {axis = 1 : i64} : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x5xf32>, tensor<?x5xi64>)
  return %v : tensor<?x5xf32>
}

// -----

func.func @top_k_k_length(%x: tensor<?x4xf32>, %k: tensor<2xi64>) -> tensor<?x2xf32> {
  // expected-error @+1 {{k must hold one element}}
  %v, %i = qcc.top_k %x, %k {axis = 1 : i64} : (tensor<?x4xf32>, tensor<2xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  return %v : tensor<?x2xf32>
}

// -----

func.func @tile_repeats(%x: tensor<2x3xf32>, %r: tensor<3xi64>) -> tensor<?x?xf32> {
  // expected-error @+1 {{needs one repeat per dimension: 3 for rank 2}}
  %0 = qcc.tile %x, %r : (tensor<2x3xf32>, tensor<3xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

func.func @tile_not_a_multiple(%x: tensor<2x3xf32>, %r: tensor<2xi64>) -> tensor<4x7xf32> {
  // expected-error @+1 {{result size 7 is no multiple of the input size 3}}
  %0 = qcc.tile %x, %r : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<4x7xf32>
  return %0 : tensor<4x7xf32>
}

// -----

func.func @one_hot_values(%i: tensor<3xi64>, %d: tensor<i64>, %v: tensor<3xf32>) -> tensor<3x?xf32> {
  // expected-error @+1 {{values must be a pair [off, on]}}
  %0 = qcc.one_hot %i, %d, %v {axis = -1 : i64} : (tensor<3xi64>, tensor<i64>, tensor<3xf32>) -> tensor<3x?xf32>
  return %0 : tensor<3x?xf32>
}

// -----

func.func @one_hot_axis(%i: tensor<3xi64>, %d: tensor<i64>, %v: tensor<2xf32>) -> tensor<3x?xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = qcc.one_hot %i, %d, %v {axis = 2 : i64} : (tensor<3xi64>, tensor<i64>, tensor<2xf32>) -> tensor<3x?xf32>
  return %0 : tensor<3x?xf32>
}

// -----

func.func @one_hot_shape(%i: tensor<3xi64>, %d: tensor<i64>, %v: tensor<2xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{result shape differs from the indices' off the axis}}
  %0 = qcc.one_hot %i, %d, %v {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>, tensor<2xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @non_zero_rows(%x: tensor<2x3xf32>) -> tensor<3x?xi64> {
  // expected-error @+1 {{result must have 2 rows (one per dimension of the input)}}
  %0 = qcc.non_zero %x : (tensor<2x3xf32>) -> tensor<3x?xi64>
  return %0 : tensor<3x?xi64>
}

// -----

func.func @scatter_elements_reduction(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>, %u: tensor<2x2xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{reduction must be none, add, mul, max or min, not "sub"}}
  %0 = qcc.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = "sub"} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @scatter_elements_off_axis(%x: tensor<2x3xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{indices dimension 0 (3) exceeds the input's (2)}}
  %0 = qcc.scatter_elements %x, %i, %u {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @scatter_elements_updates(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>, %u: tensor<2x1xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{updates must have the shape of the indices}}
  %0 = qcc.scatter_elements %x, %i, %u {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x1xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @moe_expert_shapes(%x: tensor<?x64xf32>, %ids: tensor<?x2xi64>, %g: tensor<?x2xf32>, %up: tensor<8x128x64xf32>, %down: tensor<4x64x128xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{up_weight [E, I, H] and down_weight [E, H, I] disagree on E or I}}
  %0 = qcc.moe %x, %ids, %g, %up, %down {activation = "silu"} : (tensor<?x64xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<8x128x64xf32>, tensor<4x64x128xf32>) -> tensor<?x64xf32>
  return %0 : tensor<?x64xf32>
}

// -----

func.func @moe_routes(%x: tensor<?x64xf32>, %ids: tensor<?x2xi64>, %g: tensor<?x1xf32>, %up: tensor<8x128x64xf32>, %down: tensor<8x64x128xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{expert_ids and gates must both be [T, k]}}
  %0 = qcc.moe %x, %ids, %g, %up, %down {activation = "silu"} : (tensor<?x64xf32>, tensor<?x2xi64>, tensor<?x1xf32>, tensor<8x128x64xf32>, tensor<8x64x128xf32>) -> tensor<?x64xf32>
  return %0 : tensor<?x64xf32>
}

// -----

func.func @moe_activation(%x: tensor<?x64xf32>, %ids: tensor<?x2xi64>, %g: tensor<?x2xf32>, %up: tensor<8x128x64xf32>, %down: tensor<8x64x128xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{activation must be silu, gelu, gelu_tanh or relu, not "tanh"}}
  %0 = qcc.moe %x, %ids, %g, %up, %down {activation = "tanh"} : (tensor<?x64xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<8x128x64xf32>, tensor<8x64x128xf32>) -> tensor<?x64xf32>
  return %0 : tensor<?x64xf32>
}

// -----

func.func @fp8_quantize_asymmetric(%x: tensor<?x2xf32>) {
  // expected-error @+1 {{FP8 quantization is symmetric}}
  %q, %s, %z = qcc.quantize %x {quant = #qcc.quant<bits = 8, asymmetric, per_token>} : (tensor<?x2xf32>) -> (tensor<?x2xf8E4M3FN>, tensor<?x1xf32>, tensor<?x1xi32>)
  return
}

// -----

func.func @fp8_qlinear_mixed(%x: tensor<?x2xf8E4M3FN>, %s: tensor<?x1xf32>, %z: tensor<?x1xi32>, %w: tensor<3x2xi8>, %ws: tensor<3xf32>, %wsum: tensor<3xi32>) {
  // expected-error @+1 {{input and weight must both be i8 or both f8E4M3FN}}
  %y = qcc.qlinear %x, %s, %z, %w, %ws, %wsum : (tensor<?x2xf8E4M3FN>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<3x2xi8>, tensor<3xf32>, tensor<3xi32>) -> tensor<?x3xf32>
  return
}
