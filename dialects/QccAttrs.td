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

// The kind of a qcc.kernel region: format/KernelKinds.def's enum itself (the
// one definition, which the runtime shares without MLIR), spelled as the
// table spells it: `#qcc.kernel_kind<gemm_i8>`, and bare in qcc.kernel's
// custom form (`qcc.kernel gemm_i8 "k3" ...`). A new kind is a line of that table, not a case here.
def Qcc_KernelKindAttr : AttrDef<Qcc_Dialect, "KernelKind"> {
  let mnemonic = "kernel_kind";
  let summary = "The device template family of a qcc.kernel region";
  let parameters = (ins "::qcc::format::KernelKind":$value);
  let hasCustomAssemblyFormat = 1;
  // The op accessors return the enum, the builders take it.
  let returnType = "::qcc::format::KernelKind";
  let convertFromStorage = "$_self.getValue()";
  let constBuilderCall =
      "::qcc::KernelKindAttr::get($_builder.getContext(), $0)";
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
