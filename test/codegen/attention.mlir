// Prefill attention without a KV cache: one CTA of 4 warps per 64 (HeadDim
// 64) or 32 (other multiples of 32) query rows, per head and sequence; the
// K/V tiles' shared memory derives from the head size (64: 49,408 B; 128:
// 82,176 B). Rotary embedding of q and k is fused (a null table pointer when
// absent).

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// Causal, 4 heads of 64.
// CHECK-LABEL: ===== unit qcc_causal_k0 (regions: causal/k0) kind attention
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":49408,"entry":"qcc_causal_k0","grid":{"x":{"ceil_div":["seq_q",64]},"y":4,"z":"batch"},"params":[{"name":"q","operand":0},{"name":"k","operand":1},{"name":"v","operand":2},{"name":"out","result":0},{"int":"batch","name":"batch"},{"int":"seq_q","name":"seq_q"},{"int":"seq_kv","name":"seq_kv"},{"int":4,"name":"num_heads"},{"int":4,"name":"num_kv_heads"},{"float":0.125,"name":"scale"},{"name":"cached_lens","null":true},{"name":"valid_lens","null":true}],"waits_for_prior_grids":true}]
// CHECK: #include "qcc/attention_prefill.cuh"
// CHECK: AttnPrefillParams<float, float, qcc::NoCache>
// CHECK: qcc_causal_k0(
// CHECK: attentionPrefillTile<{{.*}}, true, false>
func.func @causal(%q: tensor<?x?x256xf32>, %k: tensor<?x?x256xf32>, %v: tensor<?x?x256xf32>) -> tensor<?x?x256xf32> {
  %0 = qcc.kernel attention "k0"(%q, %k, %v) : (tensor<?x?x256xf32>, tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32> {
  ^bb0(%a1: tensor<?x?x256xf32>, %a2: tensor<?x?x256xf32>, %a3: tensor<?x?x256xf32>):
    %1 = qcc.attention %a1, %a2, %a3 {causal = true, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 1.250000e-01 : f32} : (tensor<?x?x256xf32>, tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
    qcc.yield %1 : tensor<?x?x256xf32>
  }
  return %0 : tensor<?x?x256xf32>
}

// Rotary q and k (shared [S, W] tables: batch stride 0), grouped-query
// attention (4 heads over 2 KV heads of 128): 32 query rows per CTA.
// CHECK-LABEL: ===== unit qcc_rotary_gqa_k0 (regions: rotary_gqa/k0) kind attention
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":82176,"entry":"qcc_rotary_gqa_k0","grid":{"x":{"ceil_div":["seq_q",32]},"y":4,"z":"batch"},"params":[{"name":"q","operand":0},{"name":"k","operand":3},{"name":"v","operand":4},{"name":"out","result":0},
// CHECK-SAME: {"int":4,"name":"num_heads"},{"int":2,"name":"num_kv_heads"},
// CHECK-SAME: {"name":"rope_cos","operand":1},{"name":"rope_sin","operand":2},{"int64":0,"name":"rope_stride"}
// CHECK: attentionPrefillTile<{{.*}}, true, true>
func.func @rotary_gqa(%q: tensor<?x?x512xf32>, %cos: tensor<?x128xf32>, %sin: tensor<?x128xf32>, %k: tensor<?x?x256xf32>, %v: tensor<?x?x256xf32>) -> tensor<?x?x512xf32> {
  %0 = qcc.kernel attention "k0"(%q, %cos, %sin, %k, %v) : (tensor<?x?x512xf32>, tensor<?x128xf32>, tensor<?x128xf32>, tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x512xf32> {
  ^bb0(%a1: tensor<?x?x512xf32>, %a2: tensor<?x128xf32>, %a3: tensor<?x128xf32>, %a4: tensor<?x?x256xf32>, %a5: tensor<?x?x256xf32>):
    %1 = qcc.rotary %a1, %a2, %a3 {head_dim = 128 : i64} : (tensor<?x?x512xf32>, tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x?x512xf32>
    %2 = qcc.rotary %a4, %a2, %a3 {head_dim = 128 : i64} : (tensor<?x?x256xf32>, tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x?x256xf32>
    %3 = qcc.attention %1, %2, %a5 {causal = true, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.0883883461 : f32} : (tensor<?x?x512xf32>, tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x512xf32>
    qcc.yield %3 : tensor<?x?x512xf32>
  }
  return %0 : tensor<?x?x512xf32>
}

// CHECK-NOT: ===== no kernel
