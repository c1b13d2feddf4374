// The scales of an int8 KV cache (docs/QUANTIZATION.md section 4): per head
// (K and V, calibration absmax / 127, 1 where the absmax is 0), or kivi (K per
// channel from qcc.k_channel_absmax; V per token, left to the runtime).
// RUN: qcc-opt %s --kv-cache-layout="kv-dtype=i8" --split-input-file | FileCheck %s --check-prefix=HEAD
// RUN: qcc-opt %s --kv-cache-layout="kv-dtype=i8 kv-scales=kivi" --split-input-file | FileCheck %s --check-prefix=KIVI
// An FP8 cache: per head, absmax / 448 (E4M3's largest value), 1 at 0.
// RUN: qcc-opt %s --kv-cache-layout="kv-dtype=fp8" --split-input-file | FileCheck %s --check-prefix=FP8
// RUN: sed 's/qcc.k_absmax/qcc.other/' %s | not qcc-opt --kv-cache-layout="kv-dtype=fp8" --split-input-file 2>&1 | FileCheck %s --check-prefix=FP8NOSTATS
// An f16 cache has no scales and needs no statistics:
// RUN: sed 's/qcc.k_absmax/qcc.other/' %s | qcc-opt --kv-cache-layout="kv-dtype=f16" --split-input-file | FileCheck %s --check-prefix=F16
// kivi needs an int8 cache and the per-channel statistics:
// RUN: not qcc-opt %s --kv-cache-layout="kv-scales=kivi" --split-input-file 2>&1 | FileCheck %s --check-prefix=F32
// RUN: sed 's/qcc.k_channel_absmax/qcc.other/' %s | not qcc-opt --kv-cache-layout="kv-dtype=i8 kv-scales=kivi" --split-input-file 2>&1 | FileCheck %s --check-prefix=NOSTATS

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
// FP8: qcc.kv_cache = {
// FP8-SAME: dtype = "fp8"
// FP8-SAME: k_scales = {{\[}}[0.283482134 : f32, 0.566964269 : f32]]
// FP8-SAME: v_scales = {{\[}}[0.141741067 : f32, 1.000000e+00 : f32]]
// F16: qcc.kv_cache = {
// F16-SAME: dtype = "f16"
// F16-NOT: scales
// F16-SAME: }
// FP8NOSTATS: error: kv-cache-layout: an FP8 KV cache needs calibration statistics (qcc.k_absmax per kv head)
// F32: error: kv-cache-layout: kv-scales=kivi needs kv-dtype=i8
// NOSTATS: error: kv-cache-layout: an int8 KV cache needs calibration statistics (qcc.k_channel_absmax per key channel)
func.func @main(%ids: tensor<?x?xi64> {qcc.dim_names = ["batch", "seq"], qcc.name = "input_ids"}) -> tensor<?x?x8xf32> {
  %wte = qcc.constant dense<0.5> : tensor<10x8xf32>
  %x = qcc.embedding %wte, %ids : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %a = qcc.attention %x, %x, %x {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f32, causal = true, qcc.k_absmax = dense<[127.0, 254.0]> : tensor<2xf32>, qcc.v_absmax = dense<[63.5, 0.0]> : tensor<2xf32>, qcc.k_channel_absmax = dense<[127.0, 63.5, 127.0, 31.75, 254.0, 0.0, 127.0, 127.0]> : tensor<8xf32>} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %a : tensor<?x?x8xf32>
}

// -----

// q and k permuted alike within each head, with the exporter's past (an
// interleaved rotary's gathers): per-head scales do not depend on the order,
// so @prefill attends without the gathers; kivi's per-channel K scales are
// calibrated in @main's order, so with them the keys keep it.
// HEAD-LABEL: func.func @prefill(
// HEAD-NOT: qcc.gather
// HEAD: qcc.kv_attention
// KIVI-LABEL: func.func @prefill(
// KIVI: qcc.gather
// KIVI: qcc.gather
// KIVI: qcc.kv_attention
func.func @main(%ids: tensor<?x?xi64> {qcc.name = "input_ids"}, %pk: tensor<?x2x?x4xf32> {qcc.name = "past.0.key"}, %pv: tensor<?x2x?x4xf32> {qcc.name = "past.0.value"}) -> (tensor<?x?x8xf32> {qcc.name = "logits"}, tensor<?x2x?x4xf32> {qcc.name = "present.0.key"}, tensor<?x2x?x4xf32> {qcc.name = "present.0.value"}) {
  %wte = qcc.constant dense<0.5> : tensor<10x8xf32>
  %back = qcc.constant dense<[0, 2, 1, 3, 4, 6, 5, 7]> : tensor<8xi64>
  %hd = qcc.constant dense<[2, 4]> : tensor<2xi64>
  %w8 = qcc.constant dense<8> : tensor<1xi64>
  %x = qcc.embedding %wte, %ids : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %q = qcc.gather %x, %back {axis = 2 : i64} : (tensor<?x?x8xf32>, tensor<8xi64>) -> tensor<?x?x8xf32>
  %k = qcc.gather %x, %back {axis = 2 : i64} : (tensor<?x?x8xf32>, tensor<8xi64>) -> tensor<?x?x8xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x8xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %kh = qcc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %v4 = qcc.reshape %x, %kshape : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %presk = qcc.concat %pk, %kh {axis = 2 : i64} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %presv = qcc.concat %pv, %vh {axis = 2 : i64} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %tk = qcc.transpose %pk {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %sk = qcc.shape %tk {end = 2 : i64} : (tensor<?x?x2x4xf32>) -> tensor<2xi64>
  %shk = qcc.concat %sk, %w8 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %rk = qcc.reshape %tk, %shk : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %kall = qcc.concat %rk, %k {axis = 1 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %tv = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %sv = qcc.shape %tv {end = 2 : i64} : (tensor<?x?x2x4xf32>) -> tensor<2xi64>
  %shv = qcc.concat %sv, %w8 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %rv = qcc.reshape %tv, %shv : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %vall = qcc.concat %rv, %x {axis = 1 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %a = qcc.attention %q, %kall, %vall {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f32, causal = true, qcc.k_absmax = dense<[127.0, 254.0]> : tensor<2xf32>, qcc.v_absmax = dense<[63.5, 0.0]> : tensor<2xf32>, qcc.k_channel_absmax = dense<[127.0, 63.5, 127.0, 31.75, 254.0, 0.0, 127.0, 127.0]> : tensor<8xf32>} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %a, %presk, %presv : tensor<?x?x8xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>
}
