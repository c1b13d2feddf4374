// The scales of an int8 KV cache (docs/QUANTIZATION.md section 4): per head
// (K and V, calibration absmax / 127, 1 where the absmax is 0), or kivi (K per
// channel from qcc.k_channel_absmax; V per token, left to the runtime).
// RUN: qcc-opt %s --kv-cache-layout="kv-dtype=i8" | FileCheck %s --check-prefix=HEAD
// RUN: qcc-opt %s --kv-cache-layout="kv-dtype=i8 kv-scales=kivi" | FileCheck %s --check-prefix=KIVI
// kivi needs an int8 cache and the per-channel statistics:
// RUN: not qcc-opt %s --kv-cache-layout="kv-scales=kivi" 2>&1 | FileCheck %s --check-prefix=F32
// RUN: sed 's/qcc.k_channel_absmax/qcc.other/' %s | not qcc-opt --kv-cache-layout="kv-dtype=i8 kv-scales=kivi" 2>&1 | FileCheck %s --check-prefix=NOSTATS

// HEAD: qcc.kv_cache = {
// HEAD-SAME: dtype = "i8"
// HEAD-SAME: k_scales = {{\[}}[1.000000e+00 : f32, 2.000000e+00 : f32]]
// HEAD-NOT: scales = "kivi"
// HEAD-SAME: v_scales = {{\[}}[5.000000e-01 : f32, 1.000000e+00 : f32]]
// KIVI: qcc.kv_cache = {
// KIVI-SAME: dtype = "i8"
// KIVI-SAME: k_scales = {{\[}}[1.000000e+00 : f32, 5.000000e-01 : f32, 1.000000e+00 : f32, 2.500000e-01 : f32, 2.000000e+00 : f32, 1.000000e+00 : f32, 1.000000e+00 : f32, 1.000000e+00 : f32]]
// KIVI-SAME: scales = "kivi"
// KIVI-NOT: v_scales
// F32: error: kv-cache-layout: kv-scales=kivi needs kv-dtype=i8
// NOSTATS: error: kv-cache-layout: an int8 KV cache needs calibration statistics (qcc.k_channel_absmax per key channel)
func.func @main(%ids: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "input_ids"}) -> tensor<?x?x8xf32> {
  %wte = qcc.constant dense<0.5> : tensor<10x8xf32>
  %x = qcc.embedding %wte, %ids : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %a = qcc.attention %x, %x, %x {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f32, causal = true, qcc.k_absmax = dense<[127.0, 254.0]> : tensor<2xf32>, qcc.v_absmax = dense<[63.5, 0.0]> : tensor<2xf32>, qcc.k_channel_absmax = dense<[127.0, 63.5, 127.0, 31.75, 254.0, 0.0, 127.0, 127.0]> : tensor<8xf32>} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %a : tensor<?x?x8xf32>
}
