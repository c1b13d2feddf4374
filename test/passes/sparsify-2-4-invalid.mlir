// wanda and sparsegpt refuse a linear without the calibration statistics
// they need, naming it; bad options are refused.
// RUN: not qcc-opt %s --sparsify-2-4="method=wanda all-linears=true" --split-input-file 2>&1 | FileCheck %s --check-prefix=WANDA
// RUN: not qcc-opt %s --sparsify-2-4="method=sparsegpt all-linears=true" --split-input-file 2>&1 | FileCheck %s --check-prefix=SGPT
// RUN: not qcc-opt %s --sparsify-2-4="block-size=6" --split-input-file 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not qcc-opt %s --sparsify-2-4="exclude=[" --split-input-file 2>&1 | FileCheck %s --check-prefix=GLOB

// WANDA: error: sparsify-2-4: wanda needs the input's L2 norms (qcc.input_l2norm, f32 [32]) on a linear (calibrate)
// SGPT: error: sparsify-2-4: sparsegpt needs the input's Gram matrix (qcc.input_gram, f64 [32, 32]) on a linear (calibrate)
// SGPT: error: sparsify-2-4: sparsegpt needs the input's Gram matrix (qcc.input_gram, f64 [32, 32]) on a linear (calibrate)
// BLOCK: error: sparsify-2-4: block-size must be a positive multiple of 4, not 6
// GLOB: error: sparsify-2-4: bad exclude pattern '['
func.func @no_statistics(%x: tensor<?x32xf32>) -> tensor<?x1xf32> {
  %w = qcc.constant dense<1.0> : tensor<1x32xf32>
  %y = qcc.linear %x, %w : (tensor<?x32xf32>, tensor<1x32xf32>) -> tensor<?x1xf32>
  return %y : tensor<?x1xf32>
}

// -----

// A Gram matrix of the wrong width (or type) is refused like a missing one.
func.func @wrong_gram(%x: tensor<?x32xf32>) -> tensor<?x1xf32> {
  %w = qcc.constant dense<1.0> : tensor<1x32xf32>
  %y = qcc.linear %x, %w {qcc.input_l2norm = dense<1.0> : tensor<32xf32>, qcc.input_gram = dense<1.0> : tensor<16x16xf64>} : (tensor<?x32xf32>, tensor<1x32xf32>) -> tensor<?x1xf32>
  return %y : tensor<?x1xf32>
}
