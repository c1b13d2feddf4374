// A norm fused with the per-token int8 quantize of its output (W8A8): the
// norm's float output is not stored ("out" is null), the int8 rows with
// their scale and zero point are.

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// CHECK-LABEL: ===== unit qcc_layer_k0 (regions: layer/k0) kind norm_quantize
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_layer_k0","grid":{"x":"rows","y":1,"z":1},"params":[{"name":"in","operand":0},{"name":"gamma","operand":1},{"name":"beta","operand":2},{"name":"out","null":true},{"name":"q","result":0},{"name":"q_scale","result":1},{"name":"q_zero_point","result":2},{"int":"rows","name":"rows"},{"int":256,"name":"dim"},{"float":
// CHECK: #include "qcc/norm.cuh"
// CHECK: qcc_layer_k0(
// CHECK: normRow<{{.*}}LayerNorm, true>
func.func @layer(%x: tensor<?x?x256xf32>, %g: tensor<256xf32>, %b: tensor<256xf32>) -> (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>) {
  %0:3 = qcc.kernel norm_quantize "k0"(%x, %g, %b) : (tensor<?x?x256xf32>, tensor<256xf32>, tensor<256xf32>) -> (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>) {
  ^bb0(%a1: tensor<?x?x256xf32>, %a2: tensor<256xf32>, %a3: tensor<256xf32>):
    %1 = qcc.layer_norm %a1, %a2, %a3 {epsilon = 9.99999974E-6 : f32} : (tensor<?x?x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<?x?x256xf32>
    %q, %s, %z = qcc.quantize %1 {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x?x256xf32>) -> (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>)
    qcc.yield %q, %s, %z : tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>
  }
  return %0#0, %0#1, %0#2 : tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>
}

// CHECK-LABEL: ===== unit qcc_rms_k0 (regions: rms/k0) kind norm_quantize
// CHECK-NEXT: // launch: {{.*}}"block":{"x":512,"y":1,"z":1}
// CHECK-SAME: "params":[{"name":"in","operand":0},{"name":"gamma","operand":1},{"name":"beta","null":true},{"name":"out","null":true},{"name":"q","result":0},{"name":"q_scale","result":1},{"name":"q_zero_point","result":2},{"int":"rows","name":"rows"},{"int":8192,"name":"dim"},
// CHECK: normRow<{{.*}}RmsNorm, true>
func.func @rms(%x: tensor<?x?x8192xf32>, %g: tensor<8192xf32>) -> (tensor<?x?x8192xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>) {
  %0:3 = qcc.kernel norm_quantize "k0"(%x, %g) : (tensor<?x?x8192xf32>, tensor<8192xf32>) -> (tensor<?x?x8192xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>) {
  ^bb0(%a1: tensor<?x?x8192xf32>, %a2: tensor<8192xf32>):
    %1 = qcc.rms_norm %a1, %a2 {epsilon = 9.99999997E-7 : f32} : (tensor<?x?x8192xf32>, tensor<8192xf32>) -> tensor<?x?x8192xf32>
    %q, %s, %z = qcc.quantize %1 {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x?x8192xf32>) -> (tensor<?x?x8192xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>)
    qcc.yield %q, %s, %z : tensor<?x?x8192xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>
  }
  return %0#0, %0#1, %0#2 : tensor<?x?x8192xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>
}

// CHECK-NOT: ===== no kernel
