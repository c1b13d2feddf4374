// RUN: qcc-opt %s --smooth-quant --split-input-file | FileCheck %s
// RUN: qcc-opt %s --smooth-quant="alpha=1.0" --split-input-file | FileCheck %s --check-prefix=ALPHA1
// auto-alpha: the grid alpha with the least W8A8 error on qcc.input_samples.
// RUN: qcc-opt %s --smooth-quant="auto-alpha=true report-alpha=true" --split-input-file 2>&1 | FileCheck %s --check-prefix=AUTO
// A norm whose group is left unsmoothed gets a remark saying why:
// RUN: qcc-opt %s --smooth-quant --split-input-file --verify-diagnostics -o /dev/null

// q, k, v read one layer_norm: one s for all three (max over their weights).
// With alpha 0.5, absmax [4, 1] and weight column max [1, 1]:
// s = [2, 1]; gamma [1, 1] -> [0.5, 1], beta [2, 2] -> [1, 2],
// weight columns scaled by s, absmax -> [2, 1].
// CHECK-LABEL: func.func @qkv_share_one_scale(
// CHECK-DAG: %[[G:.*]] = qcc.constant dense<[5.000000e-01, 1.000000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[B:.*]] = qcc.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK: %[[N:.*]] = qcc.layer_norm %{{.*}}, %[[G]], %[[B]]
// CHECK: %[[W:.*]] = qcc.constant dense<{{\[\[}}2.000000e+00, 1.000000e+00], [2.000000e+00, -1.000000e+00]]> : tensor<2x2xf32>
// CHECK: qcc.linear %[[N]], %[[W]] {qcc.input_absmax = dense<[2.000000e+00, 1.000000e+00]> : tensor<2xf32>}
// CHECK: qcc.linear %[[N]], %{{.*}} {qcc.input_absmax = dense<[2.000000e+00, 1.000000e+00]> : tensor<2xf32>}
// ALPHA1-LABEL: func.func @qkv_share_one_scale(
// ALPHA1: qcc.constant dense<[2.500000e-01, 1.000000e+00]> : tensor<2xf32>
func.func @qkv_share_one_scale(%x: tensor<?x2xf32>) -> (tensor<?x2xf32>, tensor<?x2xf32>) {
  %g = qcc.constant dense<1.0> : tensor<2xf32>
  %b = qcc.constant dense<2.0> : tensor<2xf32>
  %wq = qcc.constant dense<[[1.0, 1.0], [1.0, -1.0]]> : tensor<2x2xf32>
  %wk = qcc.constant dense<[[0.5, 0.5], [0.5, 0.5]]> : tensor<2x2xf32>
  %n = qcc.layer_norm %x, %g, %b {epsilon = 1.0e-5 : f32} : (tensor<?x2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  %q = qcc.linear %n, %wq {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  %k = qcc.linear %n, %wk {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  return %q, %k : tensor<?x2xf32>, tensor<?x2xf32>
}

// -----

// A runtime LoRA adapter reading the norm (qcc.lora) joins the group: its A
// columns absorb s as the weight columns do ((A s)(X / s) = A X): s = [2, 1],
// A [[[1, 1]], [[3, -1]]] -> [[[2, 1]], [[6, -1]]]; B is untouched.
// CHECK-LABEL: func.func @lora_reads_the_norm(
// CHECK: %[[B:.*]] = qcc.constant dense<5.000000e-01> : tensor<2x2x1xf32>
// CHECK: %[[N:.*]] = qcc.rms_norm
// CHECK: %[[A:.*]] = qcc.constant dense<{{\[\[\[}}2.000000e+00, 1.000000e+00]], {{\[\[}}6.000000e+00, -1.000000e+00]]]> : tensor<2x1x2xf32>
// CHECK: qcc.lora %[[N]], %[[A]], %[[B]]
func.func @lora_reads_the_norm(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %g = qcc.constant dense<1.0> : tensor<2xf32>
  %w = qcc.constant dense<[[1.0, 1.0], [1.0, 1.0]]> : tensor<2x2xf32>
  %a = qcc.constant dense<[[[1.0, 1.0]], [[3.0, -1.0]]]> : tensor<2x1x2xf32>
  %b = qcc.constant dense<0.5> : tensor<2x2x1xf32>
  %n = qcc.rms_norm %x, %g {epsilon = 1.0e-6 : f32} : (tensor<?x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  %y = qcc.linear %n, %w {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  %d = qcc.lora %n, %a, %b : (tensor<?x2xf32>, tensor<2x1x2xf32>, tensor<2x2x1xf32>) -> tensor<?x2xf32>
  %s = qcc.add %y, %d : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  return %s : tensor<?x2xf32>
}

// -----

// rms_norm has no beta; gate/up share one s.
// CHECK-LABEL: func.func @rms_gate_up(
// CHECK: %[[G:.*]] = qcc.constant dense<[5.000000e-01, 1.000000e+00]> : tensor<2xf32>
// CHECK: qcc.rms_norm %{{.*}}, %[[G]]
func.func @rms_gate_up(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %g = qcc.constant dense<1.0> : tensor<2xf32>
  %w = qcc.constant dense<[[1.0, 1.0], [1.0, 1.0]]> : tensor<2x2xf32>
  %n = qcc.rms_norm %x, %g {epsilon = 1.0e-6 : f32} : (tensor<?x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  %a = qcc.linear %n, %w {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  %b = qcc.linear %n, %w {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  %m = qcc.mul %a, %b : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  return %m : tensor<?x2xf32>
}

// -----

// Not smoothed: the norm has a user that is not a linear (it would see the
// smoothed values).
// CHECK-LABEL: func.func @norm_with_other_user(
// CHECK: qcc.linear %{{.*}} {qcc.input_absmax = dense<[4.000000e+00, 1.000000e+00]>
func.func @norm_with_other_user(%x: tensor<?x2xf32>) -> (tensor<?x2xf32>, tensor<?x2xf32>) {
  %g = qcc.constant dense<1.0> : tensor<2xf32>
  %w = qcc.constant dense<1.0> : tensor<2x2xf32>
  // expected-remark @+1 {{smooth-quant: qcc.layer_norm not smoothed: its result is also used by func.return}}
  %n = qcc.layer_norm %x, %g {epsilon = 1.0e-5 : f32} : (tensor<?x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  %y = qcc.linear %n, %w {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  return %y, %n : tensor<?x2xf32>, tensor<?x2xf32>
}

// -----

// Not smoothed: a linear of the group has no calibration statistics (no
// activation absmax to balance against).
// CHECK-LABEL: func.func @linear_without_stats(
// CHECK: %[[G:.*]] = qcc.constant dense<1.000000e+00> : tensor<2xf32>
// CHECK: qcc.rms_norm %{{.*}}, %[[G]]
func.func @linear_without_stats(%x: tensor<?x2xf32>) -> (tensor<?x2xf32>, tensor<?x2xf32>) {
  %g = qcc.constant dense<1.0> : tensor<2xf32>
  %w = qcc.constant dense<1.0> : tensor<2x2xf32>
  // expected-remark @+1 {{smooth-quant: qcc.rms_norm not smoothed: a qcc.linear reading it has no calibration statistics (qcc.input_absmax)}}
  %n = qcc.rms_norm %x, %g {epsilon = 1.0e-6 : f32} : (tensor<?x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  %a = qcc.linear %n, %w {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  %b = qcc.linear %n, %w : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  return %a, %b : tensor<?x2xf32>, tensor<?x2xf32>
}

// -----

// Not smoothed: a gamma computed at run time cannot absorb 1/s.
// CHECK-LABEL: func.func @gamma_not_constant(
// CHECK: qcc.linear %{{.*}} {qcc.input_absmax = dense<[4.000000e+00, 1.000000e+00]>
func.func @gamma_not_constant(%x: tensor<?x2xf32>, %g: tensor<2xf32>) -> tensor<?x2xf32> {
  %w = qcc.constant dense<1.0> : tensor<2x2xf32>
  // expected-remark @+1 {{smooth-quant: qcc.rms_norm not smoothed: its gamma is not a constant}}
  %n = qcc.rms_norm %x, %g {epsilon = 1.0e-6 : f32} : (tensor<?x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  %y = qcc.linear %n, %w {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// Sampled rows with a 64x outlier channel: alpha 0.4 gives the least
// error of the grid (0.5 doubles it); gamma_0 = 1 / 64^0.4. The samples
// stop here.
// AUTO: smooth-quant: norm group of 1, alpha 0.4: W8A8 error {{.*}} (alpha 0.5: {{.*}})
// AUTO-LABEL: func.func @auto_alpha(
// AUTO: qcc.constant dense<[0.189464569, 1.000000e+00]> : tensor<2xf32>
// AUTO-NOT: qcc.input_samples
func.func @auto_alpha(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %g = qcc.constant dense<1.0> : tensor<2xf32>
  %w = qcc.constant dense<[[1.0, 0.5], [-0.25, 1.0]]> : tensor<2x2xf32>
  %n = qcc.rms_norm %x, %g {epsilon = 1.0e-6 : f32} : (tensor<?x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  %y = qcc.linear %n, %w {qcc.input_absmax = dense<[64.0, 1.0]> : tensor<2xf32>, qcc.input_samples = dense<[[64.0, 0.3], [-32.0, 1.0], [16.0, -0.7], [8.0, 0.55]]> : tensor<4x2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}
