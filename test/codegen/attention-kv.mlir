// Attention over the module's KV cache (qcc.kv_cache, kv-cache-layout): the
// prefill kernel appends K and V to the paged cache and attends over it; in
// decode (one token per row, qcc.tokens_per_row = 1) a split-K kernel over
// the cache (ceil(max_context_len / 256) splits, workspaces "ml" and "acc")
// and, with more than one split, a combine kernel. Decode GEMMs take the
// GEMV path: 8 rows per grid.y, 4 warps of 2 columns each.

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

module attributes {qcc.kv_cache = {block_tokens = 16 : i64, dtype = "f32", head_dim = 64 : i64, kv_heads = 4 : i64, layers = 4 : i64, layout = "paged", max_positions = 256 : i64}} {

// CHECK-LABEL: ===== unit qcc_prefill_k0 (regions: prefill/k0) kind attention
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":49408,"entry":"qcc_prefill_k0","grid":{"x":{"ceil_div":["seq_q",64]},"y":4,"z":"batch"},"params":[{"name":"q","operand":0},{"name":"k","operand":1},{"name":"v","operand":2},{"name":"out","result":0},{"int":"batch","name":"batch"},{"int":"seq_q","name":"seq_q"},{"int":"seq_kv","name":"seq_kv"},{"int":4,"name":"num_heads"},{"int":4,"name":"num_kv_heads"},{"float":0.125,"name":"scale"},{"name":"cached_lens","runtime":"cached_lens"},{"name":"valid_lens","runtime":"valid_lens"},{"name":"k_scales","runtime":"kv_cache.k_scales"},{"name":"v_scales","runtime":"kv_cache.v_scales"},{"name":"v_token_scales","runtime":"kv_cache.v_token_scales"},{"name":"layers","runtime":"kv_cache.layers"},{"int":2,"name":"layer"},{"name":"cache","runtime":"kv_cache.pool"},{"name":"table","runtime":"kv_cache.block_table"},{"name":"table_stride","runtime":"kv_cache.max_blocks_per_seq"},{"int":16,"name":"tokens"}],"waits_for_prior_grids":true}]
// CHECK: #include "qcc/attention_prefill.cuh"
// CHECK: AttnPrefillParams<float, float, qcc::PagedCache<float>>
// CHECK: qcc_prefill_k0(
// CHECK: attentionPrefillTile<
func.func @prefill(%q: tensor<?x?x256xf32>, %k: tensor<?x?x256xf32>, %v: tensor<?x?x256xf32>) -> tensor<?x?x256xf32> {
  %0 = qcc.kernel attention "k0"(%q, %k, %v) : (tensor<?x?x256xf32>, tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32> {
  ^bb0(%a1: tensor<?x?x256xf32>, %a2: tensor<?x?x256xf32>, %a3: tensor<?x?x256xf32>):
    %1 = qcc.kv_attention %a1, %a2, %a3 {layer = 2 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 1.250000e-01 : f32} : (tensor<?x?x256xf32>, tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
    qcc.yield %1 : tensor<?x?x256xf32>
  }
  return %0 : tensor<?x?x256xf32>
}

// CHECK-LABEL: ===== unit qcc_decode_k0 (regions: decode/k0) kind gemm_i8
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_decode_k0","grid":{"x":192,"y":{"ceil_div":["M",8]},"z":1},"params":[{"name":"x","operand":0},{"name":"w","operand":3},{"name":"xs","operand":1},{"name":"xz","operand":2},{"name":"ws","operand":4},{"name":"wsum","operand":5},{"name":"bias","operand":6},{"name":"y","result":0},{"int":"M","name":"M"},{"int":768,"name":"N"},{"int":256,"name":"K"}],"waits_for_prior_grids":true,"when":{"gt":[9,"M"]}},{"block":{"x":128,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_decode_k0_rows","grid":{"x":96,"y":{"ceil_div":["M",8]},"z":1},"name":"rows",
// CHECK: #include "qcc/gemv_i8.cuh"
// CHECK: typedef qcc::GemvI8Config<8, 4, 1, 4> Cfg;
// CHECK: qcc_decode_k0(
// CHECK: qcc::gemv_i8<Cfg>(p, epi);
// CHECK: typedef qcc::GemvI8Config<8, 4, 2> CfgRows;
// CHECK: qcc_decode_k0_rows(
// CHECK: const int m0 = blockIdx.y * CfgRows::kMaxM;
// CHECK: qcc::gemv_i8<CfgRows>(p, epi);

// CHECK-LABEL: ===== unit qcc_decode_k1 (regions: decode/k1) kind attention
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_decode_k1","grid":{"x":"splits","y":4,"z":"batch"},"name":"split","params":[{"name":"q","operand":0},{"name":"k","operand":1},{"name":"v","operand":2},{"name":"out","result":0},{"name":"ws_ml","workspace":"ml"},{"name":"ws_acc","workspace":"acc"},{"int":"batch","name":"batch"},{"int":4,"name":"num_heads"},{"int":4,"name":"num_kv_heads"},{"float":0.125,"name":"scale"},{"name":"cached_lens","runtime":"cached_lens"},{"name":"valid_lens","runtime":"valid_lens"},{"name":"k_scales","runtime":"kv_cache.k_scales"},{"name":"v_scales","runtime":"kv_cache.v_scales"},{"name":"v_token_scales","runtime":"kv_cache.v_token_scales"},{"name":"layers","runtime":"kv_cache.layers"},{"int":3,"name":"layer"},{"name":"cache","runtime":"kv_cache.pool"},{"name":"table","runtime":"kv_cache.block_table"},{"name":"table_stride","runtime":"kv_cache.max_blocks_per_seq"},{"int":16,"name":"tokens"}],"waits_for_prior_grids":true}
// CHECK-SAME: {"block":{"x":64,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_decode_k1_combine","grid":{"x":4,"y":"batch","z":1},"name":"combine","params":[{"name":"ws_ml","workspace":"ml"},{"name":"ws_acc","workspace":"acc"},{"name":"out","result":0},{"int":4,"name":"num_heads"},{"int":"splits","name":"splits"}],"waits_for_prior_grids":true,"when":{"gt":["splits",1]}}]
// CHECK-SAME: "splits":{"ceil_div":[{"runtime":"max_context_len"},256]}
// CHECK-SAME: "workspace":{"acc":{"mul":[{"mul":["batch",4]},"splits",256]},"ml":{"mul":[{"mul":["batch",4]},"splits",8]}}
// CHECK: #include "qcc/attention_decode.cuh"
// CHECK: AttnDecodeParams<float, float, qcc::PagedCache<float>>
// CHECK: qcc_decode_k1(
// CHECK: attentionDecodeSplit<
// CHECK: qcc_decode_k1_combine(
// CHECK: attentionDecodeCombineRow<
func.func @decode(%x: tensor<?x1x256xi8>, %xs: tensor<?x1x1xf32>, %xz: tensor<?x1x1xi32>, %w: tensor<768x256xi8>, %ws: tensor<768xf32>, %wsum: tensor<768xi32>, %b: tensor<768xf32>, %q: tensor<?x1x256xf32>, %k: tensor<?x1x256xf32>, %v: tensor<?x1x256xf32>) -> (tensor<?x1x768xf32>, tensor<?x1x256xf32>) attributes {qcc.tokens_per_row = 1 : i64} {
  %0 = qcc.kernel gemm_i8 "k0"(%x, %xs, %xz, %w, %ws, %wsum, %b) : (tensor<?x1x256xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<768x256xi8>, tensor<768xf32>, tensor<768xi32>, tensor<768xf32>) -> tensor<?x1x768xf32> {
  ^bb0(%a1: tensor<?x1x256xi8>, %a2: tensor<?x1x1xf32>, %a3: tensor<?x1x1xi32>, %a4: tensor<768x256xi8>, %a5: tensor<768xf32>, %a6: tensor<768xi32>, %a7: tensor<768xf32>):
    %1 = qcc.qlinear %a1, %a2, %a3, %a4, %a5, %a6, %a7 : (tensor<?x1x256xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<768x256xi8>, tensor<768xf32>, tensor<768xi32>, tensor<768xf32>) -> tensor<?x1x768xf32>
    qcc.yield %1 : tensor<?x1x768xf32>
  }
  %2 = qcc.kernel attention "k1"(%q, %k, %v) : (tensor<?x1x256xf32>, tensor<?x1x256xf32>, tensor<?x1x256xf32>) -> tensor<?x1x256xf32> {
  ^bb0(%a1: tensor<?x1x256xf32>, %a2: tensor<?x1x256xf32>, %a3: tensor<?x1x256xf32>):
    %3 = qcc.kv_attention %a1, %a2, %a3 {layer = 3 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 1.250000e-01 : f32} : (tensor<?x1x256xf32>, tensor<?x1x256xf32>, tensor<?x1x256xf32>) -> tensor<?x1x256xf32>
    qcc.yield %3 : tensor<?x1x256xf32>
  }
  return %0, %2 : tensor<?x1x768xf32>, tensor<?x1x256xf32>
}

}

// CHECK-NOT: ===== no kernel
