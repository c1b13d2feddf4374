//===- QccAttrs.td - qcc attributes ------------------------*- tablegen -*-===//
//
// Attributes and enums of the qcc dialect (one attribute-definition file per
// dialect: the generated parser/printer is the dialect's).
//
//===----------------------------------------------------------------------===//

#ifndef QCC_ATTRS_TD
#define QCC_ATTRS_TD

include "dialects/QccDialect.td"
include "mlir/IR/EnumAttr.td"

// format/KernelKinds.def, in its order and spellings (the runtime links no
// MLIR; KernelKindTest checks that the two agree).
def Qcc_KernelKind : I32EnumAttr<"KernelKind",
    "the device template family of a qcc.kernel region", [
  I32EnumAttrCase<"GemmI8", 0, "gemm_i8">,
  I32EnumAttrCase<"GemmF16", 1, "gemm_f16">,
  I32EnumAttrCase<"Norm", 2, "norm">,
  I32EnumAttrCase<"NormQuantize", 3, "norm_quantize">,
  I32EnumAttrCase<"Quantize", 4, "quantize">,
  I32EnumAttrCase<"Embedding", 5, "embedding">,
  I32EnumAttrCase<"Elementwise", 6, "elementwise">,
  I32EnumAttrCase<"Attention", 7, "attention">,
  I32EnumAttrCase<"GemmI8Sp", 8, "gemm_i8_sp">,
  I32EnumAttrCase<"GemmF16Sp", 9, "gemm_f16_sp">,
  I32EnumAttrCase<"GemmI8Mixed", 10, "gemm_i8_mixed">,
  I32EnumAttrCase<"GemmW4", 11, "gemm_w4">,
  I32EnumAttrCase<"Moe", 12, "moe">,
  I32EnumAttrCase<"Router", 13, "router">]> {
  let cppNamespace = "::qcc";
}

def Qcc_QuantScheme : I32EnumAttr<"QuantScheme",
    "how quantized integers map to real values", [
      I32EnumAttrCase<"Symmetric", 0, "symmetric">,
      I32EnumAttrCase<"Asymmetric", 1, "asymmetric">]> {
  let cppNamespace = "::qcc";
  let genSpecializedAttr = 0;
}

def Qcc_QuantGranularity : I32EnumAttr<"QuantGranularity",
    "the values that share one scale", [
      I32EnumAttrCase<"PerToken", 0, "per_token">,
      I32EnumAttrCase<"PerTensor", 1, "per_tensor">,
      I32EnumAttrCase<"PerChannel", 2, "per_channel">]> {
  let cppNamespace = "::qcc";
  let genSpecializedAttr = 0;
}

def Qcc_QuantAttr : AttrDef<Qcc_Dialect, "Quant"> {
  let mnemonic = "quant";
  let summary = "How values are quantized to integers";
  let description = [{
    The quantization facts of a tensor (docs/QUANTIZATION.md): the integer
    width, the scheme, which values share one scale, and for `per_channel`
    the channel axis.

    * `symmetric`: q = clamp(round_half_even(x / scale), -qmax, qmax), zero
      point 0, with qmax = 2^(bits-1) - 1 (127 for 8 bits) and scale =
      absmax / qmax;
    * `asymmetric`: q = clamp(round_half_even(x / scale) + zp, -2^(bits-1),
      qmax), scale = (max - min) / (2^bits - 1).

    The ranges are `format/Quant.h`'s, which the runtime shares (it reads
    the width from the i8 tensor type in the artifact).

    ```mlir
    #qcc.quant<bits = 8, symmetric, per_token>
    #qcc.quant<bits = 8, symmetric, per_channel, axis = 0>
    ```
  }];
  let parameters = (ins "unsigned":$bits,
                        EnumParameter<Qcc_QuantScheme>:$scheme,
                        EnumParameter<Qcc_QuantGranularity>:$granularity,
                        OptionalParameter<"std::optional<int64_t>">:$axis);
  let assemblyFormat = "`<` `bits` `=` $bits `,` $scheme `,` $granularity "
                       "(`,` `axis` `=` $axis^)? `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool isSymmetric() const {
      return getScheme() == ::qcc::QuantScheme::Symmetric;
    }
    /// The largest quantized value, 2^(bits-1) - 1 (format/Quant.h).
    int32_t getQMax() const { return ::qcc::format::symmetricQMax(getBits()); }
    /// The smallest: -qmax symmetric, -2^(bits-1) asymmetric.
    int32_t getQMin() const {
      return isSymmetric() ? -getQMax()
                           : ::qcc::format::asymmetricQMin(getBits());
    }
  }];
}

#endif // QCC_ATTRS_TD
