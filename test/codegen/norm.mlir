// Layer and RMS norm: one CTA per row; threads from the normalized size D
// (D <= 1024: 128, <= 4096: 256, else 512); no dynamic shared memory.

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// CHECK-LABEL: ===== unit qcc_layer_k0 (regions: layer/k0) kind norm
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_layer_k0","grid":{"x":"rows","y":1,"z":1},"params":[{"name":"in","operand":0},{"name":"gamma","operand":1},{"name":"beta","operand":2},{"name":"out","result":0},{"int":"rows","name":"rows"},{"int":256,"name":"dim"},{"float":9.999999747378752e-06,"name":"epsilon"}],"waits_for_prior_grids":true}]
// CHECK: #include "qcc/norm.cuh"
// CHECK: extern "C" __global__
// CHECK: qcc_layer_k0(
// CHECK: normRow<{{.*}}LayerNorm, false>
func.func @layer(%x: tensor<?x?x256xf32>, %g: tensor<256xf32>, %b: tensor<256xf32>) -> tensor<?x?x256xf32> {
  %0 = qcc.kernel norm "k0"(%x, %g, %b) : (tensor<?x?x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<?x?x256xf32> {
  ^bb0(%a1: tensor<?x?x256xf32>, %a2: tensor<256xf32>, %a3: tensor<256xf32>):
    %1 = qcc.layer_norm %a1, %a2, %a3 {epsilon = 9.99999974E-6 : f32} : (tensor<?x?x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<?x?x256xf32>
    qcc.yield %1 : tensor<?x?x256xf32>
  }
  return %0 : tensor<?x?x256xf32>
}

// RMS norm has no beta: a null pointer.
// CHECK-LABEL: ===== unit qcc_rms_k0 (regions: rms/k0) kind norm
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":256,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_rms_k0","grid":{"x":"rows","y":1,"z":1},"params":[{"name":"in","operand":0},{"name":"gamma","operand":1},{"name":"beta","null":true},{"name":"out","result":0},{"int":"rows","name":"rows"},{"int":2048,"name":"dim"},{"float":
// CHECK: normRow<{{.*}}RmsNorm, false>
func.func @rms(%x: tensor<?x?x2048xf32>, %g: tensor<2048xf32>) -> tensor<?x?x2048xf32> {
  %0 = qcc.kernel norm "k0"(%x, %g) : (tensor<?x?x2048xf32>, tensor<2048xf32>) -> tensor<?x?x2048xf32> {
  ^bb0(%a1: tensor<?x?x2048xf32>, %a2: tensor<2048xf32>):
    %1 = qcc.rms_norm %a1, %a2 {epsilon = 9.99999997E-7 : f32} : (tensor<?x?x2048xf32>, tensor<2048xf32>) -> tensor<?x?x2048xf32>
    qcc.yield %1 : tensor<?x?x2048xf32>
  }
  return %0 : tensor<?x?x2048xf32>
}

// CHECK-NOT: ===== no kernel
