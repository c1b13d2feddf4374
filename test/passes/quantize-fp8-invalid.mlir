// RUN: qcc-opt %s --quantize="fp8=true" --split-input-file --verify-diagnostics

// FP8 weights have no 2:4 form.
func.func @fp8_sparse(%x: tensor<?x32xf32>) -> tensor<?x2xf32> {
  %v = qcc.constant dense<1.0> : tensor<2x16xf32>
  %m = qcc.constant dense<1145324612> : tensor<2x1xi32>
  %w = qcc.sparse_2_4 %v, %m : (tensor<2x16xf32>, tensor<2x1xi32>) -> tensor<2x32xf32>
  // expected-error @+1 {{quantize: FP8 weights are dense (no 2:4 form); drop --sparsity or use --quant=w8a8}}
  %y = qcc.linear %x, %w {qcc.input_absmax = dense<1.0> : tensor<32xf32>} : (tensor<?x32xf32>, tensor<2x32xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}
