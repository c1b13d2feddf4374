//===- QccDialect.td - the qcc dialect ---------------------*- tablegen -*-===//
//
// The qcc dialect: primitive ops that mirror the ONNX ops qcc imports, and the
// transformer ops that the raising passes produce from them.
//
//===----------------------------------------------------------------------===//

#ifndef QCC_DIALECT_TD
#define QCC_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Qcc_Dialect : Dialect {
  let name = "qcc";
  let cppNamespace = "::qcc";
  let summary = "Ops for ahead-of-time compilation of quantized transformers";
  let description = [{
    The qcc dialect holds a transformer at two levels on tensors:

    * primitive ops, one per supported ONNX op, with the ONNX semantics of the
      opset range the importer accepts (13-17); broadcasting follows numpy rules;
    * transformer ops (`linear`, `layer_norm`, `rms_norm`, `gelu`, `silu`,
      `softmax`, `attention`, `rotary`, `embedding`) that the raising passes form
      from exporter subgraphs and that later passes quantize, sparsify and turn
      into kernels.

    Dynamic dimensions are `?` in tensor types; their ONNX names (such as
    `batch` and `seq`) are kept on function arguments and results in the
    `qcc.dim_names` attribute. Large weights are `dense_resource` blobs.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
}

// Every qcc op is pure: tensors in, tensors out.
class Qcc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Qcc_Dialect, mnemonic, !listconcat([Pure], traits)>;

def Qcc_Float : AnyTypeOf<[F32, F16, BF16]>;
def Qcc_Int : AnyTypeOf<[I64, I32, I8]>;
// F8E4M3FN: FP8 W8A8's weights and quantized activations (stored, not computed on).
def Qcc_Element : AnyTypeOf<[F32, F16, BF16, I64, I32, I8, I1, F8E4M3FN]>;

def Qcc_Tensor : RankedTensorOf<[Qcc_Element]>;
def Qcc_FloatTensor : RankedTensorOf<[Qcc_Float]>;
def Qcc_IntTensor : RankedTensorOf<[Qcc_Int]>;
def Qcc_BoolTensor : RankedTensorOf<[I1]>;
// A 1-D tensor of int64 that holds a shape, starts/ends, or similar indices.
def Qcc_IndexVector : 1DTensorOf<[I64]>;
def Qcc_Scalar : 0DTensorOf<[Qcc_Element]>;

#endif // QCC_DIALECT_TD
