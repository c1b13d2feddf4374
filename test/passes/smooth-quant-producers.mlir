// RUN: qcc-opt %s --smooth-quant --split-input-file | FileCheck %s
// RUN: qcc-opt %s --smooth-quant="norms-only=true" --split-input-file | FileCheck %s --check-prefix=NORMS
// A linear whose producer cannot absorb 1/s gets a remark saying why:
// RUN: qcc-opt %s --smooth-quant --split-input-file --verify-diagnostics -o /dev/null

// SwiGLU: silu(gate) * up feeds the down projection; up's rows and bias
// absorb 1/s. alpha 0.5, down absmax [4, 1], down column max [1, 1]:
// s = [2, 1]; up rows [2, 4] / 2, bias [2, 3] -> [1, 3]; down columns * s.
// CHECK-LABEL: func.func @swiglu_up_down(
// CHECK-DAG: %[[WU:.*]] = qcc.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00], [1.000000e+00, 1.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG: %[[BU:.*]] = qcc.constant dense<[1.000000e+00, 3.000000e+00]> : tensor<2xf32>
// CHECK: %[[U:.*]] = qcc.linear %{{.*}}, %[[WU]], %[[BU]]
// CHECK: %[[M:.*]] = qcc.mul %{{.*}}, %[[U]]
// CHECK: %[[WD:.*]] = qcc.constant dense<{{\[\[}}2.000000e+00, 1.000000e+00], [2.000000e+00, 1.000000e+00]]> : tensor<2x2xf32>
// CHECK: qcc.linear %[[M]], %[[WD]] {qcc.input_absmax = dense<[2.000000e+00, 1.000000e+00]> : tensor<2xf32>}
// NORMS-LABEL: func.func @swiglu_up_down(
// NORMS: qcc.linear %{{.*}} {qcc.input_absmax = dense<[4.000000e+00, 1.000000e+00]>
func.func @swiglu_up_down(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %wg = qcc.constant dense<1.0> : tensor<2x2xf32>
  %wu = qcc.constant dense<[[2.0, 4.0], [1.0, 1.0]]> : tensor<2x2xf32>
  %bu = qcc.constant dense<[2.0, 3.0]> : tensor<2xf32>
  %wd = qcc.constant dense<1.0> : tensor<2x2xf32>
  %g = qcc.linear %x, %wg : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  %a = qcc.silu %g : tensor<?x2xf32>
  %u = qcc.linear %x, %wu, %bu : (tensor<?x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  %m = qcc.mul %a, %u : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %y = qcc.linear %m, %wd {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// GeGLU, the up factor first: the same folding.
// CHECK-LABEL: func.func @geglu_up_down(
// CHECK: %[[WU:.*]] = qcc.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00], [1.000000e+00, 1.000000e+00]]> : tensor<2x2xf32>
// CHECK: %[[U:.*]] = qcc.linear %{{.*}}, %[[WU]]
// CHECK: %[[M:.*]] = qcc.mul %[[U]], %{{.*}}
// CHECK: qcc.linear %[[M]], %{{.*}} {qcc.input_absmax = dense<[2.000000e+00, 1.000000e+00]> : tensor<2xf32>}
func.func @geglu_up_down(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %wg = qcc.constant dense<1.0> : tensor<2x2xf32>
  %wu = qcc.constant dense<[[2.0, 4.0], [1.0, 1.0]]> : tensor<2x2xf32>
  %wd = qcc.constant dense<1.0> : tensor<2x2xf32>
  %g = qcc.linear %x, %wg : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  %a = qcc.gelu %g : tensor<?x2xf32>
  %u = qcc.linear %x, %wu : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  %m = qcc.mul %u, %a : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %y = qcc.linear %m, %wd {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// V -> O, one KV head per query head (head size 1): s = [2, 1] from the
// output projection's absmax [4, 1]; the value projection's rows absorb 1/s.
// CHECK-LABEL: func.func @value_output(
// CHECK: %[[WV:.*]] = qcc.constant dense<{{\[\[}}5.000000e-01, 5.000000e-01], [1.000000e+00, 1.000000e+00]]> : tensor<2x2xf32>
// CHECK: %[[V:.*]] = qcc.linear %{{.*}}, %[[WV]]
// CHECK: %[[A:.*]] = qcc.attention %{{.*}}, %{{.*}}, %[[V]]
// CHECK: qcc.linear %[[A]], %{{.*}} {qcc.input_absmax = dense<[2.000000e+00, 1.000000e+00]> : tensor<2xf32>}
func.func @value_output(%x: tensor<?x?x2xf32>) -> tensor<?x?x2xf32> {
  %w = qcc.constant dense<1.0> : tensor<2x2xf32>
  %v = qcc.linear %x, %w : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  %a = qcc.attention %x, %x, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 1.0 : f32, causal = true} : (tensor<?x?x2xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  %y = qcc.linear %a, %w {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  return %y : tensor<?x?x2xf32>
}

// -----

// V -> O under GQA: two query heads share one KV head of size 2. Output
// column h*2 + d reads V channel d: s_d from the max over both heads,
// absmax [4, 1, 1, 16] -> s = [2, 4] for columns [2, 4, 2, 4]. The int8 KV
// scale's absmax 6 becomes 6 / min(s) = 3.
// CHECK-LABEL: func.func @value_output_gqa(
// CHECK: %[[WV:.*]] = qcc.constant dense<{{\[\[}}5.000000e-01, 5.000000e-01], [2.500000e-01, 2.500000e-01]]> : tensor<2x2xf32>
// CHECK: %[[V:.*]] = qcc.linear %{{.*}}, %[[WV]]
// CHECK: %[[A:.*]] = qcc.attention %{{.*}}, %{{.*}}, %[[V]] {{.*}}qcc.v_absmax = dense<3.000000e+00> : tensor<1xf32>
// CHECK: %[[WO:.*]] = qcc.constant dense<{{\[\[}}2.000000e+00, 4.000000e+00, 2.000000e+00, 4.000000e+00]]> : tensor<1x4xf32>
// CHECK: qcc.linear %[[A]], %[[WO]] {qcc.input_absmax = dense<[2.000000e+00, 2.500000e-01, 5.000000e-01, 4.000000e+00]> : tensor<4xf32>}
func.func @value_output_gqa(%q: tensor<?x?x4xf32>, %x: tensor<?x?x2xf32>) -> tensor<?x?x1xf32> {
  %wv = qcc.constant dense<1.0> : tensor<2x2xf32>
  %wo = qcc.constant dense<1.0> : tensor<1x4xf32>
  %v = qcc.linear %x, %wv : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  %a = qcc.attention %q, %x, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 1.0 : f32, causal = true, qcc.v_absmax = dense<6.0> : tensor<1xf32>} : (tensor<?x?x4xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x4xf32>
  %y = qcc.linear %a, %wo {qcc.input_absmax = dense<[4.0, 1.0, 1.0, 16.0]> : tensor<4xf32>} : (tensor<?x?x4xf32>, tensor<1x4xf32>) -> tensor<?x?x1xf32>
  return %y : tensor<?x?x1xf32>
}

// -----

// Nothing absorbs 1/s: a non-gated MLP's gelu (nonlinear in the channel),
// an up projection with another user, a value that is not a projection.
// CHECK-LABEL: func.func @cannot_absorb(
// CHECK: qcc.linear %{{.*}} {qcc.input_absmax = dense<[4.000000e+00, 1.000000e+00]>
// CHECK: qcc.linear %{{.*}} {qcc.input_absmax = dense<[4.000000e+00, 1.000000e+00]>
// CHECK: qcc.linear %{{.*}} {qcc.input_absmax = dense<[4.000000e+00, 1.000000e+00]>
func.func @cannot_absorb(%x: tensor<?x?x2xf32>) -> (tensor<?x?x2xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32>) {
  %w = qcc.constant dense<1.0> : tensor<2x2xf32>
  %g = qcc.gelu %x : tensor<?x?x2xf32>
  // expected-remark @+1 {{smooth-quant: qcc.linear not smoothed: its input comes from qcc.gelu, which cannot absorb 1/s}}
  %y = qcc.linear %g, %w {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  %u = qcc.linear %x, %w : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  // expected-remark @+1 {{smooth-quant: qcc.mul not smoothed: neither factor is a qcc.linear used only there, of the product's shape}}
  %m = qcc.mul %g, %u : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  %d = qcc.linear %m, %w {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  // expected-remark @+1 {{smooth-quant: qcc.attention not smoothed: its value is not a qcc.linear used only there (a rotary or another user would see the scaled values)}}
  %a = qcc.attention %x, %x, %x {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 1.0 : f32, causal = true} : (tensor<?x?x2xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  %o = qcc.linear %a, %w {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  return %y, %d, %o, %u : tensor<?x?x2xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32>
}

// -----

// The exporter's spelling: the norm's shape is read (by the head-merge
// reshape's shape), and the output projection reads the attention through a
// reshape that keeps the channels. Both groups are smoothed: q/k/v (s = [2,
// 1] from absmax [4, 1]: gamma [0.5, 1]) and v -> o.
// CHECK-LABEL: func.func @shape_and_reshape(
// CHECK: %[[G:.*]] = qcc.constant dense<[5.000000e-01, 1.000000e+00]> : tensor<2xf32>
// CHECK: qcc.rms_norm %{{.*}}, %[[G]]
// CHECK: %[[A:.*]] = qcc.attention
// CHECK: %[[R:.*]] = qcc.reshape %[[A]]
// CHECK: qcc.linear %[[R]], %{{.*}} {qcc.input_absmax = dense<[2.000000e+00, 1.000000e+00]> : tensor<2xf32>}
func.func @shape_and_reshape(%x: tensor<?x?x2xf32>) -> tensor<?x?x2xf32> {
  %g = qcc.constant dense<1.0> : tensor<2xf32>
  %w = qcc.constant dense<1.0> : tensor<2x2xf32>
  %n = qcc.rms_norm %x, %g {epsilon = 1.0e-6 : f32} : (tensor<?x?x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  %s = qcc.shape %n : (tensor<?x?x2xf32>) -> tensor<3xi64>
  %q = qcc.linear %n, %w {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  %v = qcc.linear %n, %w {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  %a = qcc.attention %q, %q, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 1.0 : f32, causal = true} : (tensor<?x?x2xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  %r = qcc.reshape %a, %s : (tensor<?x?x2xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  %y = qcc.linear %r, %w {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x?x?xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  return %y : tensor<?x?x2xf32>
}
