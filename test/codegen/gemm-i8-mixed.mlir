// gemm_i8_mixed: a qlinear with float outlier columns (the LLM.int8()-style
// fallback, docs/QUANTIZATION.md section 3). gemm_i8's tiles and operands,
// plus the f32 input (xf) and the f32 weight columns (wo); the columns are
// the type of the epilogue stage that adds their product after the
// dequantization and before the bias. The quantize reads them as 0.

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// CHECK-LABEL: ===== unit qcc_mixed_k0 (regions: mixed/k0) kind gemm_i8_mixed
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":40960,"entry":"qcc_mixed_k0"
// CHECK-SAME: "params":[{"name":"x","operand":0},{"name":"w","operand":3},{"name":"xs","operand":1},{"name":"xz","operand":2},{"name":"ws","operand":4},{"name":"wsum","operand":5},{"name":"xf","operand":7},{"name":"wo","operand":8},{"name":"bias","operand":6},{"name":"y","result":0}
// CHECK: #include "qcc/gemm_i8.cuh"
// CHECK: qcc_mixed_k0(
// CHECK: qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::AddOutliers<qcc::OutlierColumns<3, 200>>, qcc::AddBias<>, qcc::StoreF32>
// CHECK-SAME: qcc::AddOutliers<qcc::OutlierColumns<3, 200>>{xf, K, wo}
func.func @mixed(%x: tensor<?x?x256xi8>, %xs: tensor<?x?x1xf32>, %xz: tensor<?x?x1xi32>, %w: tensor<768x256xi8>, %ws: tensor<768xf32>, %wsum: tensor<768xi32>, %b: tensor<768xf32>, %xf: tensor<?x?x256xf32>, %wo: tensor<768x2xf32>) -> tensor<?x?x768xf32> {
  %0 = qcc.kernel gemm_i8_mixed "k0"(%x, %xs, %xz, %w, %ws, %wsum, %b, %xf, %wo) : (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<768x256xi8>, tensor<768xf32>, tensor<768xi32>, tensor<768xf32>, tensor<?x?x256xf32>, tensor<768x2xf32>) -> tensor<?x?x768xf32> {
  ^bb0(%a1: tensor<?x?x256xi8>, %a2: tensor<?x?x1xf32>, %a3: tensor<?x?x1xi32>, %a4: tensor<768x256xi8>, %a5: tensor<768xf32>, %a6: tensor<768xi32>, %a7: tensor<768xf32>, %a8: tensor<?x?x256xf32>, %a9: tensor<768x2xf32>):
    %1 = qcc.qlinear %a1, %a2, %a3, %a4, %a5, %a6, %a7 outliers(%a8, %a9) {outlier_columns = array<i64: 3, 200>} : (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<768x256xi8>, tensor<768xf32>, tensor<768xi32>, tensor<768xf32>, tensor<?x?x256xf32>, tensor<768x2xf32>) -> tensor<?x?x768xf32>
    qcc.yield %1 : tensor<?x?x768xf32>
  }
  return %0 : tensor<?x?x768xf32>
}

// The quantize that feeds it: the columns are read as 0.
// CHECK-LABEL: ===== unit qcc_quantize_k0 (regions: quantize/k0) kind quantize
// CHECK: quantize_rows<256, false, qcc::OutlierColumns<3, 200>>
func.func @quantize(%x: tensor<?x?x256xf32>) -> (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>) {
  %0:3 = qcc.kernel quantize "k0"(%x) : (tensor<?x?x256xf32>) -> (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>) {
  ^bb0(%a1: tensor<?x?x256xf32>):
    %q, %s, %z = qcc.quantize %a1 {outlier_columns = array<i64: 3, 200>, quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x?x256xf32>) -> (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>)
    qcc.yield %q, %s, %z : tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>
  }
  return %0#0, %0#1, %0#2 : tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>
}
