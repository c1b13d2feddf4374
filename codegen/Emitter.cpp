//===- Emitter.cpp - qcc.kernel regions -> CUDA C++ -----------------------===//
//
// See Emitter.h for the launch record; each family's file lists its tiles.
// This file is the driver (the switch over the kernel kind, unit naming and
// sharing) and what the families share (EmitCommon.h).
//
//===----------------------------------------------------------------------===//
#include "codegen/Emitter.h"
#include "codegen/EmitCommon.h"
#include "dialects/QccAttrNames.h"

#include "dialects/QccOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cassert>
#include <cstdio>

#include <map>

using namespace mlir;
using nlohmann::json;

namespace qcc::codegen {

json EmittedKernel::manifest() const {
  json j{{"function", function},
         {"region", name},
         {"kind", format::spelling(kind)},
         {"entry", entry}};
  if (unsupported.empty())
    j["launch"] = format::toJson(launch);
  else
    j["unsupported"] = unsupported;
  return j;
}

namespace detail {

using format::ParamKind;
int Region::argIndex(Value v) const {
  if (auto a = dyn_cast<BlockArgument>(v))
    if (a.getOwner() == &body)
      return a.getArgNumber();
  return -1;
}

int Region::resultIndex(Value v) const {
  auto y = cast<qcc::YieldOp>(body.getTerminator());
  for (auto [i, x] : llvm::enumerate(y.getValues()))
    if (x == v)
      return i;
  return -1;
}

Unit unsupported(std::string why) {
  Unit u;
  u.unsupported = std::move(why);
  return u;
}

namespace {
/// The C type of a scalar parameter's 8-byte slot as the runtime fills it
/// (format/LaunchRecord.h), or nullptr for a pointer.
const char *scalarType(const Param &p) {
  switch (p.kind) {
  case ParamKind::Int32:
    return "int";
  case ParamKind::Int64:
    return "long long";
  case ParamKind::Float32:
    return "float";
  case ParamKind::Runtime:
    switch (p.runtime) {
    case RuntimeValue::KvMaxBlocksPerSeq:
    case RuntimeValue::KvMaxTokens:
    case RuntimeValue::KvLayers:
      return "int";
    case RuntimeValue::KvPool:
    case RuntimeValue::KvData:
    case RuntimeValue::KvBlockTable:
    case RuntimeValue::KvSlotOfRow:
    case RuntimeValue::KvKScales:
    case RuntimeValue::KvVScales:
    case RuntimeValue::CachedLens:
    case RuntimeValue::ValidLens:
    case RuntimeValue::ErrorFlag:
    case RuntimeValue::KvVTokenScales:
      return nullptr;
    }
    return nullptr;
  case ParamKind::Operand:
  case ParamKind::OperandF16:
  case ParamKind::Result:
  case ParamKind::Null:
  case ParamKind::Workspace:
    return nullptr;
  }
  return nullptr;
}
} // namespace

KernelInterface &KernelInterface::pointer(std::string pointee, Param p) {
  assert(!scalarType(p) && "a scalar parameter declared as a pointer");
  decls_.push_back(std::move(pointee) + " *" + p.name);
  params_.push_back(std::move(p));
  return *this;
}

KernelInterface &KernelInterface::scalar(Param p) {
  const char *type = scalarType(p);
  assert(type && "a pointer parameter declared as a scalar");
  decls_.push_back(std::string(type) + " " + p.name);
  params_.push_back(std::move(p));
  return *this;
}

KernelInterface &KernelInterface::append(const KernelInterface &other) {
  llvm::append_range(decls_, other.decls_);
  llvm::append_range(params_, other.params_);
  return *this;
}

bool KernelInterface::has(StringRef name) const {
  return llvm::any_of(params_, [&](const Param &p) { return p.name == name; });
}

std::string KernelInterface::signature() const {
  std::string s;
  for (const std::string &d : decls_)
    s += (s.empty() ? "" : ", ") + d;
  return s;
}

namespace {
/// The fields of `fields` in order, each with its value, or with the
/// statements that fill it (`nested`); a field left at its default is left
/// out. Reports a field without a value, or a value for no field, as fatal.
struct FilledField {
  const char *name; // nullptr: the end of a group
  std::string value;
  bool nested = false;
};
std::vector<FilledField> fillFields(ArrayRef<ParamsField> fields,
                                    const KernelInterface &iface,
                                    const FieldValues &given) {
  auto lookup = [](const std::vector<std::pair<std::string, std::string>> &m,
                   StringRef name) -> const std::string * {
    for (const auto &[k, v] : m)
      if (k == name)
        return &v;
    return nullptr;
  };
  std::vector<FilledField> out;
  size_t used = 0;
  for (const ParamsField &f : fields) {
    if (!f.name) {
      out.push_back({nullptr, "", false});
      continue;
    }
    if (const std::string *v = lookup(given.values, f.name)) {
      out.push_back({f.name, *v, false});
      ++used;
    } else if (const std::string *s = lookup(given.statements, f.name)) {
      out.push_back({f.name, *s, true});
      ++used;
    } else if (iface.has(f.name)) {
      out.push_back({f.name, f.name, false});
    } else if (!f.hasDefault) {
      llvm::report_fatal_error(llvm::Twine("qcc emitter: parameter struct "
                                           "field '") +
                               f.name + "' has no value");
    }
  }
  if (used != given.values.size() + given.statements.size())
    llvm::report_fatal_error("qcc emitter: a value for no parameter struct "
                             "field");
  return out;
}
} // namespace

std::string assignFields(ArrayRef<ParamsField> fields,
                         const KernelInterface &iface,
                         const FieldValues &given) {
  std::string s, line;
  auto endLine = [&] {
    if (!line.empty()) {
      s += "  ";
      s += line;
      s += "\n";
    }
    line.clear();
  };
  for (const FilledField &f : fillFields(fields, iface, given)) {
    if (!f.name) {
      endLine();
    } else if (f.nested) {
      endLine();
      s += f.value;
    } else {
      if (!line.empty())
        line += " ";
      line += std::string("p.") + f.name + " = " + f.value + ";";
    }
  }
  endLine();
  return s;
}

std::string aggregateInit(ArrayRef<ParamsField> fields,
                          const KernelInterface &iface,
                          const FieldValues &given) {
  std::string s;
  size_t named = llvm::count_if(fields, [](const ParamsField &f) { return f.name; });
  for (const FilledField &f : fillFields(fields, iface, given)) {
    assert(!f.nested && "an aggregate initializer of nested statements");
    if (f.name) {
      s += (s.empty() ? "" : ", ") + f.value;
      --named;
    }
  }
  // Positional: a field left at its default would shift the ones after it.
  if (named != 0)
    llvm::report_fatal_error("qcc emitter: an aggregate initializer that "
                             "leaves a field out");
  return "{" + s + "}";
}

LaunchStep step(std::string suffix, unsigned threads,
                const KernelInterface &iface, Expr gx, Expr gy, Expr gz,
                uint32_t smem) {
  LaunchStep s;
  s.entry = std::move(suffix);
  s.block[0] = threads;
  s.grid[0] = std::move(gx);
  s.grid[1] = std::move(gy);
  s.grid[2] = std::move(gz);
  s.dynamicSmem = smem;
  // Every entry starts with wrapperHead's wait (programmatic launch is safe).
  s.waitsForPriorGrids = true;
  s.params = iface.params();
  return s;
}

std::string wrapperHead(const std::string &bounds, const std::string &entry,
                        const KernelInterface &iface,
                        const std::string &beforeWait) {
  return "extern \"C\" __global__ void __launch_bounds__(" + bounds + ")\n" +
         entry + "(" + iface.signature() + ") {\n" + beforeWait +
         "  qcc::wait_for_prior_grids();\n";
}

std::string forwardTo(const std::string &callee, const KernelInterface &iface) {
  std::string args;
  for (const Param &p : iface.params())
    args += (args.empty() ? "" : ", ") + p.name;
  return "  " + callee + "(" + args + ");\n}\n";
}

RankedTensorType tensorOf(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}
int64_t lastDim(Value v) {
  auto t = tensorOf(v);
  return t && t.getRank() > 0 ? t.getShape().back() : ShapedType::kDynamic;
}

std::string cType(Type t) {
  if (t.isF32())
    return "float";
  if (t.isF16())
    return "__half";
  return "";
}

std::string header(std::initializer_list<const char *> includes) {
  std::string s = "// Generated by qcc (codegen/Emitter.cpp).\n";
  for (const char *i : includes)
    s += std::string("#include \"qcc/") + i + "\"\n";
  return s + "\n";
}

std::string floatLiteral(float x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9ef", (double)x);
  return buf;
}

std::string outlierColumnsType(ArrayRef<int64_t> columns) {
  std::string s = "qcc::OutlierColumns<";
  for (size_t i = 0; i < columns.size(); ++i)
    s += (i ? ", " : "") + std::to_string(columns[i]);
  return s + ">";
}

} // namespace detail

namespace {

using namespace detail;

/// Entry points that take one token per row (kv-cache-layout marks its
/// `decode` with qcc.tokens_per_row = 1, docs/KV_CACHE.md): GEMMs take the
/// skinny path and attention the split-K path.
bool takesOneTokenPerRow(func::FuncOp fn) {
  auto tokens = fn->getAttrOfType<IntegerAttr>(qcc::kTokensPerRowAttr);
  return tokens && tokens.getInt() == 1;
}

/// The name units are compared under: two regions share a unit when their
/// sources for the same entry name are equal.
constexpr const char *kKeyEntry = "qcc_unit";

} // namespace

EmitResult emitKernels(ModuleOp module) {
  EmitResult result;
  auto kvCache = module->getAttrOfType<DictionaryAttr>(qcc::kKvCacheAttr);
  std::map<std::string, size_t> unitOf; // source for kKeyEntry -> unit index
  for (auto fn : module.getOps<func::FuncOp>()) {
    bool decode = takesOneTokenPerRow(fn);
    fn.walk([&](qcc::KernelOp k) {
      Region r(k, fn.getSymName().str(), decode);
      Unit u;
      switch (format::family(k.getKind())) {
      case format::KernelFamily::Gemm:
        u = emitGemm(r);
        break;
      case format::KernelFamily::Norm:
        u = emitNorm(r);
        break;
      case format::KernelFamily::Elementwise:
        u = emitElementwise(r);
        break;
      case format::KernelFamily::Attention:
        u = emitAttention(r, kvCache);
        break;
      case format::KernelFamily::Moe:
        u = emitMoe(r);
        break;
      }

      EmittedKernel e;
      e.function = r.function;
      e.name = k.getSymName().str();
      e.kind = k.getKind();
      e.unsupported = u.unsupported;
      size_t index = result.kernels.size();
      if (e.unsupported.empty()) {
        auto [it, fresh] =
            unitOf.try_emplace(u.source(kKeyEntry), result.units.size());
        if (fresh) {
          KernelUnit unit;
          unit.name = "qcc_" + e.function + "_" + e.name;
          unit.source = u.source(unit.name);
          result.units.push_back(std::move(unit));
        }
        KernelUnit &unit = result.units[it->second];
        unit.kernels.push_back(index);
        e.unit = it->second;
        e.source = unit.source;
        e.entry = unit.name;
        for (LaunchStep &step : u.launch.steps)
          step.entry = unit.name + step.entry;
      }
      e.launch = u.launch;
      result.kernels.push_back(std::move(e));
    });
  }
  return result;
}

} // namespace qcc::codegen
