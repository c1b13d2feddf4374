//===- LaunchRecord.h - the typed codegen -> runtime launch ABI --*- C++
//-*-===//
//
// How the runtime launches one kernel region: the emitter (codegen/Emitter)
// builds a LaunchRecord from what it knows statically; the artifact stores it
// as JSON (toJson); the runtime parses and validates it once at load
// (fromJson) and interprets it per launch with a `switch` over the enums
// below, knowing no kernel by name. Everything a kernel needs that depends
// on run-time shapes is an expression over operand / result shapes.
//
// JSON (record version kLaunchRecordVersion):
//   {"version": 1,
//    "symbols": {NAME: E, ...},            named sizes, for reading and reuse
//    "workspace": {NAME: E, ...},          scratch buffers (bytes), shared by
//                                          the steps, freed after the region
//    "steps": [{"entry": "qcc_main_k0",    extern "C" name
//               "name": "split",           optional label
//               "block": {"x": 128, "y": 1, "z": 1},
//               "grid": {"x": E, "y": E, "z": E},
//               "dynamic_smem": 81920,     bytes
//               "when": E,                 optional: launch only when E != 0
//               "waits_for_prior_grids": true,  optional: the entry waits
//                                          for the grids before it (sm_90
//                                          griddepcontrol), so the runtime
//                                          may launch it early (PDL)
//               "params": [P, ...]}, ...]} kernel parameters in order
// Expressions E: an integer; a symbol name; {"rows"|"numel": T} (product of
// all dims but the last / of all dims); {"dim": T + {"axis": a}} (a < 0
// counts from the end); {"runtime": "max_context_len"}; {"ceil_div": [E,
// E]}, {"mul": [E, ...]}, {"gt": [E, E]}, {"eq": [E, E]}, {"select": [C, A,
// B]} (A when C != 0, else B). T: {"operand": i} or {"result": i}.
// Parameters P (each has "name"): {"operand": i} / {"result": i} (device
// pointers), {"operand_f16": i} (a constant f32 operand the runtime uploads
// converted to f16), {"int": E} (int), {"int64": E} (long long), {"float":
// x}, {"null": true} (a null pointer), {"runtime": R} (runtime state, R a
// RuntimeValue spelling below), {"workspace": NAME} (a scratch buffer).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_LAUNCHRECORD_H
#define QCC_FORMAT_LAUNCHRECORD_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace qcc::format {

/// Bumped whenever the record's JSON changes meaning.
inline constexpr int kLaunchRecordVersion = 1;

/// A region operand or result.
struct TensorRef {
  enum class Side { Operand, Result };
  Side side = Side::Operand;
  uint32_t index = 0;
  static TensorRef operand(uint32_t i) { return {Side::Operand, i}; }
  static TensorRef result(uint32_t i) { return {Side::Result, i}; }
  bool operator==(const TensorRef &) const = default;
};

/// Sizes only the runtime knows.
enum class RuntimeSize {
  MaxContextLen, ///< longest cached + valid length of the batch (KV cache)
};

enum class ExprKind {
  Const,   ///< value
  Symbol,  ///< index into LaunchRecord::symbols
  Rows,    ///< tensor: product of all dims but the last
  Numel,   ///< tensor: product of all dims
  Dim,     ///< tensor, value (axis; < 0 from the end)
  Runtime, ///< runtime
  CeilDiv, ///< args[0] / args[1] rounded up (args[1] > 0)
  Mul,     ///< product of args
  Gt,      ///< args[0] > args[1] ? 1 : 0
  Eq,      ///< args[0] == args[1] ? 1 : 0
  Select,  ///< args[0] != 0 ? args[1] : args[2]
};

struct Expr {
  ExprKind kind = ExprKind::Const;
  int64_t value = 0;
  TensorRef tensor;
  RuntimeSize runtime = RuntimeSize::MaxContextLen;
  std::vector<Expr> args;

  Expr() = default;
  template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  Expr(T v) : value((int64_t)v) {}
  static Expr symbol(uint32_t index);
  static Expr rows(TensorRef t);
  static Expr numel(TensorRef t);
  static Expr dim(TensorRef t, int64_t axis);
  static Expr runtimeSize(RuntimeSize r);
  static Expr op(ExprKind kind, std::vector<Expr> args);
  static Expr ceilDiv(Expr a, Expr b) {
    return op(ExprKind::CeilDiv, {std::move(a), std::move(b)});
  }
  static Expr mul(std::vector<Expr> f) {
    return op(ExprKind::Mul, std::move(f));
  }
  static Expr gt(Expr a, Expr b) {
    return op(ExprKind::Gt, {std::move(a), std::move(b)});
  }
  static Expr eq(Expr a, Expr b) {
    return op(ExprKind::Eq, {std::move(a), std::move(b)});
  }
  static Expr select(Expr c, Expr a, Expr b) {
    return op(ExprKind::Select, {std::move(c), std::move(a), std::move(b)});
  }
  bool operator==(const Expr &) const = default;
};

/// Device pointers and ints of runtime state (KV cache, error flag).
enum class RuntimeValue {
  KvPool,       ///< paged cache storage
  KvData,       ///< contiguous cache storage
  KvBlockTable, ///< paged: [batch, max_blocks_per_seq] block ids
  KvSlotOfRow,  ///< contiguous: [batch] slot ids
  KvKScales,    ///< int8 cache: per layer, kv head and channel
  KvVScales,    ///< int8 per-head cache: per layer and kv head
  CachedLens,        ///< [batch] tokens already cached
  ValidLens,         ///< [batch] real tokens in this call
  ErrorFlag,         ///< int set by a kernel that saw bad input
  KvMaxBlocksPerSeq, ///< int: the block table's row stride
  KvMaxTokens,       ///< int: contiguous cache tokens per slot
  KvVTokenScales,    ///< int8 kivi cache: a scale per cached V row (else null)
  KvLayers,          ///< int: layers the device's cache holds (a layer split:
                     ///< the first N; kernels of layers < N only)
};

enum class ParamKind {
  Operand,    ///< tensor (operand): device pointer
  OperandF16, ///< tensor (constant f32 operand), uploaded as f16
  Result,     ///< tensor (result): device pointer
  Int32,      ///< expr
  Int64,      ///< expr
  Float32,    ///< number
  Null,       ///< a null pointer
  Runtime,    ///< runtime
  Workspace,  ///< index into LaunchRecord::workspace
};

struct Param {
  std::string name;
  ParamKind kind = ParamKind::Null;
  TensorRef tensor;
  Expr expr;
  float number = 0;
  RuntimeValue runtime = RuntimeValue::ErrorFlag;
  uint32_t workspace = 0;
  bool operator==(const Param &) const = default;

  static Param operand(std::string name, uint32_t i);
  static Param operandF16(std::string name, uint32_t i);
  static Param result(std::string name, uint32_t i);
  static Param int32(std::string name, Expr e);
  static Param int64(std::string name, Expr e);
  static Param float32(std::string name, float x);
  static Param null(std::string name);
  static Param runtimeValue(std::string name, RuntimeValue r);
  static Param workspaceBuffer(std::string name, uint32_t index);
};

struct NamedExpr {
  std::string name;
  Expr value;
  bool operator==(const NamedExpr &) const = default;
};

struct LaunchStep {
  std::string entry, name;
  unsigned block[3] = {1, 1, 1};
  Expr grid[3] = {1, 1, 1};
  uint32_t dynamicSmem = 0;
  std::optional<Expr> when;
  /// The kernel waits for the grids before it on entry
  /// (qcc::wait_for_prior_grids): programmatic dependent launch is safe.
  bool waitsForPriorGrids = false;
  std::vector<Param> params;
  bool operator==(const LaunchStep &) const = default;
};

struct LaunchRecord {
  /// In dependency order: a symbol refers only to earlier ones.
  std::vector<NamedExpr> symbols;
  std::vector<NamedExpr> workspace;
  std::vector<LaunchStep> steps;
  bool operator==(const LaunchRecord &) const = default;

  /// The index of a symbol (appended when new; `value` may refer only to
  /// symbols already added).
  uint32_t addSymbol(const std::string &name, Expr value);
  /// Expr::symbol of an existing symbol; throws when there is none.
  Expr sym(const std::string &name) const;
  uint32_t addWorkspace(const std::string &name, Expr bytes);
  /// The largest operand / result index any expression or parameter uses
  /// (-1: none), to check against the region at load.
  int64_t maxIndex(TensorRef::Side side) const;
};

const char *spelling(RuntimeSize r);
const char *spelling(RuntimeValue r);
/// The enum of a spelling, if it is one.
std::optional<RuntimeSize> parseRuntimeSize(const std::string &s);
std::optional<RuntimeValue> parseRuntimeValue(const std::string &s);
/// Whether a RuntimeValue is part of the KV cache (needs one to exist).
bool needsKvCache(RuntimeValue r);

nlohmann::json toJson(const Expr &e, const LaunchRecord &r);
nlohmann::json toJson(const LaunchRecord &r);
/// Parses and validates a record; throws std::runtime_error with one line
/// naming what is malformed ("launch record: step 0: param 3: ...").
LaunchRecord fromJson(const nlohmann::json &j);

/// What an expression reads at evaluation time.
struct ExprEnv {
  std::function<const std::vector<int64_t> &(TensorRef)> shape;
  std::function<int64_t(RuntimeSize)> runtime;
};

/// Evaluates expressions of one record for one launch (symbols memoized).
/// Throws std::runtime_error on a bad axis or a ceil_div by <= 0.
class ExprEvaluator {
public:
  ExprEvaluator(const LaunchRecord &record, ExprEnv env)
      : record(record), env(std::move(env)), symbols(record.symbols.size()) {}
  int64_t operator()(const Expr &e);

private:
  const LaunchRecord &record;
  ExprEnv env;
  std::vector<std::optional<int64_t>> symbols;
};

/// Calls `f` on every leaf of `e` (Const, Symbol, Rows, Numel, Dim,
/// Runtime); with `r`, also on the leaves of the symbols `e` refers to.
void forEachLeaf(const Expr &e, const std::function<void(const Expr &)> &f,
                 const LaunchRecord *r = nullptr);
/// Whether `e` (through its symbols) reads a runtime size.
bool readsRuntime(const Expr &e, const LaunchRecord &r);

} // namespace qcc::format

#endif // QCC_FORMAT_LAUNCHRECORD_H
