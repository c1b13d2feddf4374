//===- Passes.td - qcc passes ------------------------------*- tablegen -*-===//
//
// One entry per pass; each has a .cpp of the same name in this folder and a
// lit test test/passes/<name>.mlir.
//
//===----------------------------------------------------------------------===//

#ifndef QCC_PASSES_TD
#define QCC_PASSES_TD

include "mlir/Pass/PassBase.td"

def FoldShapes : Pass<"fold-shapes", "mlir::func::FuncOp"> {
  let summary = "Fold shape arithmetic and constants; drop no-op glue";
  let description = [{
    TODO(owner): before/after example.
  }];
}

def RaiseLayerNorm : Pass<"raise-layer-norm", "mlir::func::FuncOp"> {
  let summary = "Raise the LayerNormalization expansion to qcc.layer_norm";
  let description = [{
    TODO(owner): before/after example.
  }];
}

def RaiseRmsNorm : Pass<"raise-rms-norm", "mlir::func::FuncOp"> {
  let summary = "Raise the RMSNorm expansion to qcc.rms_norm";
  let description = [{
    TODO(owner): before/after example.
  }];
}

def RaiseGelu : Pass<"raise-gelu", "mlir::func::FuncOp"> {
  let summary = "Raise GELU (erf and tanh forms) to qcc.gelu";
  let description = [{
    TODO(owner): before/after example.
  }];
}

def RaiseSilu : Pass<"raise-silu", "mlir::func::FuncOp"> {
  let summary = "Raise x * sigmoid(x) to qcc.silu";
  let description = [{
    TODO(owner): before/after example.
  }];
}

def RaiseLinear : Pass<"raise-linear", "mlir::func::FuncOp"> {
  let summary = "Raise MatMul / Gemm with a constant weight (+ bias) to qcc.linear";
  let description = [{
    TODO(owner): before/after example.
  }];
}

def RaiseEmbedding : Pass<"raise-embedding", "mlir::func::FuncOp"> {
  let summary = "Raise Gather of rows of a constant table to qcc.embedding";
  let description = [{
    TODO(owner): before/after example.
  }];
}

def RaiseRotary : Pass<"raise-rotary", "mlir::func::FuncOp"> {
  let summary = "Raise rotate-half rotary embedding to qcc.rotary";
  let description = [{
    TODO(owner): before/after example.
  }];
}

def RaiseAttention : Pass<"raise-attention", "mlir::func::FuncOp"> {
  let summary = "Raise scaled dot-product attention with its head split/merge "
                "to qcc.attention";
  let description = [{
    TODO(owner): before/after example.
  }];
}

#endif // QCC_PASSES_TD
