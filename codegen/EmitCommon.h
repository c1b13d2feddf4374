//===- EmitCommon.h - what the emitter's kernel families share --*- C++ -*-===//
//
// Internal to the CUDA emitter (Emitter.h documents it): the region a family
// emits from, the unit it returns, and the one declaration of each extern
// "C" entry point's interface (KernelInterface). Emitter.cpp dispatches over
// the kernel kind to one emit function per family, each in its own file:
// EmitGemm.cpp (the six GEMM kinds), EmitNorm.cpp (norm, norm_quantize,
// quantize), EmitElementwise.cpp (embedding, elementwise),
// EmitAttention.cpp, EmitMoe.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_CODEGEN_EMITCOMMON_H
#define QCC_CODEGEN_EMITCOMMON_H

#include "dialects/QccOps.h"
#include "format/LaunchRecord.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace qcc::codegen::detail {

using format::Expr;
using format::LaunchStep;
using format::Param;
using format::RuntimeValue;
using format::TensorRef;

/// Per region: where its block arguments / yielded values come from.
struct Region {
  mutable qcc::KernelOp kernel;
  mlir::Block &body;
  std::string function;
  bool decode;
  explicit Region(qcc::KernelOp k, std::string fn, bool decode)
      : kernel(k), body(k.getBody().front()), function(std::move(fn)),
        decode(decode) {}
  /// Operand index of a block argument, or -1.
  int argIndex(mlir::Value v) const;
  /// Result index under which `v` is yielded, or -1.
  int resultIndex(mlir::Value v) const;
  template <class T> T find() const {
    for (mlir::Operation &op : body)
      if (auto t = mlir::dyn_cast<T>(op))
        return t;
    return nullptr;
  }
};

/// The source of a unit as a function of its entry name: a unit is named
/// after the first region that emits it (Emitter.cpp), so the families
/// generate their text for a name given later, and identical units are
/// found by comparing the text for one fixed name.
using SourceFn = std::function<std::string(const std::string &entry)>;

/// The outcome of emitting one region.
struct Unit {
  SourceFn source;
  /// Step entries hold only their suffix ("", "_cast", "_rows"): the
  /// unit's entry name goes in front once it is known.
  format::LaunchRecord launch;
  std::string unsupported;
  /// Defines a named size and returns a reference to it.
  format::Expr symbol(const std::string &name, format::Expr value) {
    return format::Expr::symbol(launch.addSymbol(name, std::move(value)));
  }
};

Unit unsupported(std::string why);

/// One extern "C" entry point's interface, declared once: its parameters in
/// order, each a launch-record Param (name and role: operand, result,
/// workspace, runtime value, scalar) with its C type. The wrapper's
/// signature and the launch step's `params` are both read from it, so the
/// runtime's parameter list and the device signature cannot disagree in
/// order, names or slot types; a scalar's C type follows from its kind
/// (int32: int, int64: long long, float32: float) rather than being spelled
/// twice.
class KernelInterface {
public:
  /// A pointer parameter: `pointee` spells what it points to, const included
  /// ("const float"). Operands, results, workspaces, nulls and the runtime's
  /// buffers.
  KernelInterface &pointer(std::string pointee, format::Param p);
  /// A scalar parameter (int32, int64, float32, or the runtime's int sizes).
  KernelInterface &scalar(format::Param p);
  /// Appends another interface's parameters.
  KernelInterface &append(const KernelInterface &other);

  /// "const float *x, int M": the wrapper's parameter list.
  std::string signature() const;
  const std::vector<format::Param> &params() const { return params_; }
  /// Whether a parameter is called `name`.
  bool has(llvm::StringRef name) const;
  bool empty() const { return params_.empty(); }

private:
  std::vector<std::string> decls_;
  std::vector<format::Param> params_;
};

/// One field of a device parameter struct as its declaration lists it
/// (the *_PARAMS X-macros of codegen/kernels/*_config.h, which the device
/// templates expand into the struct): a name, whether it has a default, or
/// (name null) the end of a group.
struct ParamsField {
  const char *name;
  bool hasDefault;
};
#define QCC_EMIT_PARAMS_FIELD(type, name, init) {#name, sizeof(#init) > 1},
#define QCC_EMIT_PARAMS_LINE() {nullptr, false},
/// The fields of the struct a *_PARAMS X-macro declares, in order.
#define QCC_PARAMS_FIELDS(LIST)                                                \
  LIST(QCC_EMIT_PARAMS_FIELD, QCC_EMIT_PARAMS_LINE)

/// What a wrapper puts into a parameter struct's fields: by default the
/// interface's parameter of the same name; `values` gives an expression for
/// others ("nullptr", "rows", a baked constant); `statements` the lines
/// that fill a field that is a struct of its own ("  p.rope.cos = ...;\n").
/// A field with a default may be left out; one without, or a value for no
/// field, is a bug in the emitter (report_fatal_error), so the struct's
/// declaration and the wrapper cannot drift apart.
struct FieldValues {
  std::vector<std::pair<std::string, std::string>> values, statements;
};
/// `  p.a = a; p.b = b;\n` per group of `fields`, in declaration order.
std::string assignFields(llvm::ArrayRef<ParamsField> fields,
                         const KernelInterface &iface,
                         const FieldValues &given = {});
/// `{a, b, c}`: the aggregate initializer of `fields` (no nested structs).
std::string aggregateInit(llvm::ArrayRef<ParamsField> fields,
                          const KernelInterface &iface,
                          const FieldValues &given = {});

/// A launch step: the entry suffix, block size, grid, dynamic shared memory
/// and its interface's parameters.
format::LaunchStep step(std::string suffix, unsigned threads,
                        const KernelInterface &iface, format::Expr gx,
                        format::Expr gy = 1, format::Expr gz = 1,
                        uint32_t smem = 0);

/// `extern "C" __global__ void __launch_bounds__(<bounds>)\n<entry>(<sig>)`
/// followed by " {\n" (the wrapper's opening line), then `beforeWait`
/// (statements that read only weights: nothing earlier in the stream writes
/// them) and the wait for the grids before it (qcc::wait_for_prior_grids),
/// which makes programmatic dependent launch safe (step() records it).
std::string wrapperHead(const std::string &bounds, const std::string &entry,
                        const KernelInterface &iface,
                        const std::string &beforeWait = "");

/// `  <callee>(a, b, ...);\n}\n`: a wrapper body that passes its
/// parameters on as they are, in order (the wrapper's closing brace too).
std::string forwardTo(const std::string &callee, const KernelInterface &iface);

/// The generated unit's first lines: a banner and the device templates.
std::string header(std::initializer_list<const char *> includes);

mlir::RankedTensorType tensorOf(mlir::Value v);
int64_t lastDim(mlir::Value v);
/// C++ spelling of a float element type, or "".
std::string cType(mlir::Type t);
/// A float as a CUDA literal that reads back to the same float (9
/// significant digits round-trip binary32).
std::string floatLiteral(float x);
/// The device type naming a linear's float outlier columns (common.cuh).
std::string outlierColumnsType(llvm::ArrayRef<int64_t> columns);

// The kernel families (format::KernelFamily, the switch in Emitter.cpp):
// each tells its kinds apart (r.kernel.getKind()).
Unit emitGemm(const Region &r);
Unit emitNorm(const Region &r);
Unit emitElementwise(const Region &r);
Unit emitAttention(const Region &r, mlir::DictionaryAttr kvCache);
Unit emitMoe(const Region &r);

} // namespace qcc::codegen::detail

#endif // QCC_CODEGEN_EMITCOMMON_H
