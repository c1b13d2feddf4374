// RUN: qcc-opt %s --quantize="fp8=true" --split-input-file | FileCheck %s
// RUN: qcc-opt %s --quantize="fp8=true activations=static" --split-input-file | FileCheck %s --check-prefix=STATIC

// FP8 E4M3 weights per output channel at absmax / 448: row [254, -127]
// becomes [448, -224] at scale 254 / 448, row [1, 0.5] [448, 224] at
// 1 / 448; the weight sums are 0 (an FP8 quantize has no zero point).
// CHECK-LABEL: func.func @linear(
// CHECK: %[[Q:[^,]*]], %[[S:[^,]*]], %[[Z:[^ ]*]] = qcc.quantize %{{.*}} {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x2xf32>) -> (tensor<?x2xf8E4M3FN>, tensor<?x1xf32>, tensor<?x1xi32>)
// CHECK-DAG: %[[WQ:.*]] = qcc.constant dense<{{\[\[}}4.480000e+02, -2.240000e+02], [4.480000e+02, 2.240000e+02]]> : tensor<2x2xf8E4M3FN>
// CHECK-DAG: %[[WS:.*]] = qcc.constant dense<[0.566964269, 0.00223214296]> : tensor<2xf32>
// CHECK-DAG: %[[SUM:.*]] = qcc.constant dense<0> : tensor<2xi32>
// CHECK: qcc.qlinear %[[Q]], %[[S]], %[[Z]], %[[WQ]], %[[WS]], %[[SUM]], %{{.*}} : {{.*}} -> tensor<?x2xf32>
// A static scale is the calibration abs-max over 448: 4 / 448.
// STATIC-LABEL: func.func @linear(
// STATIC: qcc.quantize %{{.*}} {quant = #qcc.quant<bits = 8, symmetric, per_tensor>, scale = 0.00892857183 : f32} : (tensor<?x2xf32>) -> (tensor<?x2xf8E4M3FN>
func.func @linear(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %w = qcc.constant dense<[[254.0, -127.0], [1.0, 0.5]]> : tensor<2x2xf32>
  %b = qcc.constant dense<[0.5, -0.5]> : tensor<2xf32>
  %y = qcc.linear %x, %w, %b {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}
