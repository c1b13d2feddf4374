// RUN: qcc-opt %s --split-input-file --verify-diagnostics

// The sparse GEMM kinds read the weight's compressed form: their body holds
// a linear / qlinear whose weight is a qcc.sparse_2_4 of block arguments.
func.func @dense_weight(%x: tensor<?x32xf16>, %w: tensor<64x32xf16>) -> tensor<?x64xf16> {
  // expected-error @+1 {{of kind 'gemm_f16_sp' needs a qcc.linear whose weight is a qcc.sparse_2_4 of block arguments in its body}}
  %0 = qcc.kernel gemm_f16_sp "k0"(%x, %w) : (tensor<?x32xf16>, tensor<64x32xf16>) -> tensor<?x64xf16> {
  ^bb0(%a: tensor<?x32xf16>, %b: tensor<64x32xf16>):
    %1 = qcc.linear %a, %b : (tensor<?x32xf16>, tensor<64x32xf16>) -> tensor<?x64xf16>
    qcc.yield %1 : tensor<?x64xf16>
  }
  return %0 : tensor<?x64xf16>
}

// -----

func.func @meta_inside(%x: tensor<?x32xf16>, %v: tensor<64x16xf16>) -> tensor<?x64xf16> {
  // expected-error @+1 {{of kind 'gemm_f16_sp' needs a qcc.linear whose weight is a qcc.sparse_2_4 of block arguments in its body}}
  %0 = qcc.kernel gemm_f16_sp "k0"(%x, %v) : (tensor<?x32xf16>, tensor<64x16xf16>) -> tensor<?x64xf16> {
  ^bb0(%a: tensor<?x32xf16>, %b: tensor<64x16xf16>):
    %m = qcc.constant dense<1145324612> : tensor<64x1xi32>
    %w = qcc.sparse_2_4 %b, %m : (tensor<64x16xf16>, tensor<64x1xi32>) -> tensor<64x32xf16>
    %1 = qcc.linear %a, %w : (tensor<?x32xf16>, tensor<64x32xf16>) -> tensor<?x64xf16>
    qcc.yield %1 : tensor<?x64xf16>
  }
  return %0 : tensor<?x64xf16>
}

// -----

func.func @i8_needs_qlinear(%x: tensor<?x32xf16>, %v: tensor<64x16xf16>, %m: tensor<64x1xi32>) -> tensor<?x64xf16> {
  // expected-error @+1 {{of kind 'gemm_i8_sp' needs a qcc.qlinear whose weight is a qcc.sparse_2_4 of block arguments in its body}}
  %0 = qcc.kernel gemm_i8_sp "k0"(%x, %v, %m) : (tensor<?x32xf16>, tensor<64x16xf16>, tensor<64x1xi32>) -> tensor<?x64xf16> {
  ^bb0(%a: tensor<?x32xf16>, %b: tensor<64x16xf16>, %c: tensor<64x1xi32>):
    %w = qcc.sparse_2_4 %b, %c : (tensor<64x16xf16>, tensor<64x1xi32>) -> tensor<64x32xf16>
    %1 = qcc.linear %a, %w : (tensor<?x32xf16>, tensor<64x32xf16>) -> tensor<?x64xf16>
    qcc.yield %1 : tensor<?x64xf16>
  }
  return %0 : tensor<?x64xf16>
}
