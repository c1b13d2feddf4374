//===- LaunchRecord.cpp - launch records: JSON and evaluation ------------===//
#include "format/LaunchRecord.h"

#include <map>
#include <stdexcept>

using nlohmann::json;

namespace qcc::format {

Expr Expr::symbol(uint32_t index) {
  Expr e;
  e.kind = ExprKind::Symbol;
  e.value = index;
  return e;
}
static Expr tensorExpr(ExprKind kind, TensorRef t, int64_t value = 0) {
  Expr e;
  e.kind = kind;
  e.tensor = t;
  e.value = value;
  return e;
}
Expr Expr::rows(TensorRef t) { return tensorExpr(ExprKind::Rows, t); }
Expr Expr::numel(TensorRef t) { return tensorExpr(ExprKind::Numel, t); }
Expr Expr::dim(TensorRef t, int64_t axis) {
  return tensorExpr(ExprKind::Dim, t, axis);
}
Expr Expr::runtimeSize(RuntimeSize r) {
  Expr e;
  e.kind = ExprKind::Runtime;
  e.runtime = r;
  return e;
}
Expr Expr::op(ExprKind kind, std::vector<Expr> args) {
  Expr e;
  e.kind = kind;
  e.args = std::move(args);
  return e;
}

static Param makeParam(std::string name, ParamKind kind) {
  Param p;
  p.name = std::move(name);
  p.kind = kind;
  return p;
}
static Param tensorParam(std::string name, ParamKind kind, TensorRef t) {
  Param p = makeParam(std::move(name), kind);
  p.tensor = t;
  return p;
}
static Param exprParam(std::string name, ParamKind kind, Expr e) {
  Param p = makeParam(std::move(name), kind);
  p.expr = std::move(e);
  return p;
}
Param Param::operand(std::string name, uint32_t i) {
  return tensorParam(std::move(name), ParamKind::Operand,
                     TensorRef::operand(i));
}
Param Param::operandF16(std::string name, uint32_t i) {
  return tensorParam(std::move(name), ParamKind::OperandF16,
                     TensorRef::operand(i));
}
Param Param::result(std::string name, uint32_t i) {
  return tensorParam(std::move(name), ParamKind::Result, TensorRef::result(i));
}
Param Param::int32(std::string name, Expr e) {
  return exprParam(std::move(name), ParamKind::Int32, std::move(e));
}
Param Param::int64(std::string name, Expr e) {
  return exprParam(std::move(name), ParamKind::Int64, std::move(e));
}
Param Param::float32(std::string name, float x) {
  Param p = makeParam(std::move(name), ParamKind::Float32);
  p.number = x;
  return p;
}
Param Param::null(std::string name) {
  return makeParam(std::move(name), ParamKind::Null);
}
Param Param::runtimeValue(std::string name, RuntimeValue r) {
  Param p = makeParam(std::move(name), ParamKind::Runtime);
  p.runtime = r;
  return p;
}
Param Param::workspaceBuffer(std::string name, uint32_t index) {
  Param p = makeParam(std::move(name), ParamKind::Workspace);
  p.workspace = index;
  return p;
}

uint32_t LaunchRecord::addSymbol(const std::string &name, Expr value) {
  for (const NamedExpr &s : symbols)
    if (s.name == name)
      throw std::logic_error("launch record: symbol '" + name + "' twice");
  symbols.push_back({name, std::move(value)});
  return (uint32_t)symbols.size() - 1;
}
Expr LaunchRecord::sym(const std::string &name) const {
  for (size_t i = 0; i < symbols.size(); ++i)
    if (symbols[i].name == name)
      return Expr::symbol((uint32_t)i);
  throw std::logic_error("launch record: no symbol '" + name + "'");
}
uint32_t LaunchRecord::addWorkspace(const std::string &name, Expr bytes) {
  workspace.push_back({name, std::move(bytes)});
  return (uint32_t)workspace.size() - 1;
}

/// Whether an expression of this kind reads a tensor's shape.
static bool readsShape(ExprKind k) {
  switch (k) {
  case ExprKind::Rows:
  case ExprKind::Numel:
  case ExprKind::Dim:
    return true;
  case ExprKind::Const:
  case ExprKind::Symbol:
  case ExprKind::Runtime:
  case ExprKind::CeilDiv:
  case ExprKind::Mul:
  case ExprKind::Gt:
  case ExprKind::Eq:
  case ExprKind::Select:
    return false;
  }
  return false;
}

void forEachLeaf(const Expr &e, const std::function<void(const Expr &)> &f,
                 const LaunchRecord *r) {
  if (!e.args.empty()) {
    for (const Expr &a : e.args)
      forEachLeaf(a, f, r);
    return;
  }
  f(e);
  if (r && e.kind == ExprKind::Symbol)
    forEachLeaf(r->symbols.at(e.value).value, f, r);
}

static void maxIndexOf(const Expr &e, TensorRef::Side side, int64_t &m) {
  forEachLeaf(e, [&](const Expr &leaf) {
    if (readsShape(leaf.kind) && leaf.tensor.side == side)
      m = std::max<int64_t>(m, leaf.tensor.index);
  });
}

int64_t LaunchRecord::maxIndex(TensorRef::Side side) const {
  int64_t m = -1;
  for (const NamedExpr &s : symbols)
    maxIndexOf(s.value, side, m);
  for (const NamedExpr &w : workspace)
    maxIndexOf(w.value, side, m);
  for (const LaunchStep &s : steps) {
    for (const Expr &g : s.grid)
      maxIndexOf(g, side, m);
    if (s.when)
      maxIndexOf(*s.when, side, m);
    for (const Param &p : s.params) {
      switch (p.kind) {
      case ParamKind::Operand:
      case ParamKind::OperandF16:
      case ParamKind::Result:
        if (p.tensor.side == side)
          m = std::max<int64_t>(m, p.tensor.index);
        break;
      case ParamKind::Int32:
      case ParamKind::Int64:
        maxIndexOf(p.expr, side, m);
        break;
      case ParamKind::Float32:
      case ParamKind::Null:
      case ParamKind::Runtime:
      case ParamKind::Workspace:
        break;
      }
    }
  }
  return m;
}

//===--- spellings
//---------------------------------------------------------===//

const char *spelling(RuntimeSize r) {
  switch (r) {
  case RuntimeSize::MaxContextLen:
    return "max_context_len";
  }
  return "?";
}

const char *spelling(RuntimeValue r) {
  switch (r) {
  case RuntimeValue::KvPool:
    return "kv_cache.pool";
  case RuntimeValue::KvData:
    return "kv_cache.data";
  case RuntimeValue::KvBlockTable:
    return "kv_cache.block_table";
  case RuntimeValue::KvSlotOfRow:
    return "kv_cache.slot_of_row";
  case RuntimeValue::KvKScales:
    return "kv_cache.k_scales";
  case RuntimeValue::KvVScales:
    return "kv_cache.v_scales";
  case RuntimeValue::CachedLens:
    return "cached_lens";
  case RuntimeValue::ValidLens:
    return "valid_lens";
  case RuntimeValue::ErrorFlag:
    return "error_flag";
  case RuntimeValue::KvMaxBlocksPerSeq:
    return "kv_cache.max_blocks_per_seq";
  case RuntimeValue::KvMaxTokens:
    return "kv_cache.max_tokens";
  case RuntimeValue::KvVTokenScales:
    return "kv_cache.v_token_scales";
  case RuntimeValue::KvLayers:
    return "kv_cache.layers";
  }
  return "?";
}

bool needsKvCache(RuntimeValue r) {
  switch (r) {
  case RuntimeValue::KvPool:
  case RuntimeValue::KvData:
  case RuntimeValue::KvBlockTable:
  case RuntimeValue::KvSlotOfRow:
  case RuntimeValue::KvKScales:
  case RuntimeValue::KvVScales:
  case RuntimeValue::KvMaxBlocksPerSeq:
  case RuntimeValue::KvMaxTokens:
  case RuntimeValue::KvVTokenScales:
  case RuntimeValue::KvLayers:
    return true;
  case RuntimeValue::CachedLens:
  case RuntimeValue::ValidLens:
  case RuntimeValue::ErrorFlag:
    return false;
  }
  return false;
}

std::optional<RuntimeSize> parseRuntimeSize(const std::string &s) {
  for (RuntimeSize r : {RuntimeSize::MaxContextLen})
    if (s == spelling(r))
      return r;
  return std::nullopt;
}

std::optional<RuntimeValue> parseRuntimeValue(const std::string &s) {
  for (int i = 0; i <= (int)RuntimeValue::KvLayers; ++i)
    if (s == spelling((RuntimeValue)i))
      return (RuntimeValue)i;
  return std::nullopt;
}

//===--- to JSON
//------------------------------------------------------------===//

static json tensorJson(TensorRef t) {
  return json{
      {t.side == TensorRef::Side::Operand ? "operand" : "result", t.index}};
}

static const char *opName(ExprKind k) {
  switch (k) {
  case ExprKind::CeilDiv:
    return "ceil_div";
  case ExprKind::Mul:
    return "mul";
  case ExprKind::Gt:
    return "gt";
  case ExprKind::Eq:
    return "eq";
  case ExprKind::Select:
    return "select";
  case ExprKind::Const:
  case ExprKind::Symbol:
  case ExprKind::Rows:
  case ExprKind::Numel:
  case ExprKind::Dim:
  case ExprKind::Runtime:
    break;
  }
  return nullptr;
}

json toJson(const Expr &e, const LaunchRecord &r) {
  switch (e.kind) {
  case ExprKind::Const:
    return e.value;
  case ExprKind::Symbol:
    return r.symbols.at(e.value).name;
  case ExprKind::Rows:
    return json{{"rows", tensorJson(e.tensor)}};
  case ExprKind::Numel:
    return json{{"numel", tensorJson(e.tensor)}};
  case ExprKind::Dim: {
    json t = tensorJson(e.tensor);
    t["axis"] = e.value;
    return json{{"dim", t}};
  }
  case ExprKind::Runtime:
    return json{{"runtime", spelling(e.runtime)}};
  case ExprKind::CeilDiv:
  case ExprKind::Mul:
  case ExprKind::Gt:
  case ExprKind::Eq:
  case ExprKind::Select: {
    json args = json::array();
    for (const Expr &a : e.args)
      args.push_back(toJson(a, r));
    return json{{opName(e.kind), args}};
  }
  }
  return nullptr;
}

static json paramJson(const Param &p, const LaunchRecord &r) {
  json j{{"name", p.name}};
  switch (p.kind) {
  case ParamKind::Operand:
  case ParamKind::Result:
    j.update(tensorJson(p.tensor));
    break;
  case ParamKind::OperandF16:
    j["operand_f16"] = p.tensor.index;
    break;
  case ParamKind::Int32:
    j["int"] = toJson(p.expr, r);
    break;
  case ParamKind::Int64:
    j["int64"] = toJson(p.expr, r);
    break;
  case ParamKind::Float32:
    j["float"] = p.number;
    break;
  case ParamKind::Null:
    j["null"] = true;
    break;
  case ParamKind::Runtime:
    j["runtime"] = spelling(p.runtime);
    break;
  case ParamKind::Workspace:
    j["workspace"] = r.workspace.at(p.workspace).name;
    break;
  }
  return j;
}

json toJson(const LaunchRecord &r) {
  json symbols = json::object(), workspace = json::object();
  for (const NamedExpr &s : r.symbols)
    symbols[s.name] = toJson(s.value, r);
  for (const NamedExpr &w : r.workspace)
    workspace[w.name] = toJson(w.value, r);
  json steps = json::array();
  for (const LaunchStep &s : r.steps) {
    json j{{"entry", s.entry},
           {"block", {{"x", s.block[0]}, {"y", s.block[1]}, {"z", s.block[2]}}},
           {"grid",
            {{"x", toJson(s.grid[0], r)},
             {"y", toJson(s.grid[1], r)},
             {"z", toJson(s.grid[2], r)}}},
           {"dynamic_smem", s.dynamicSmem}};
    if (!s.name.empty())
      j["name"] = s.name;
    if (s.when)
      j["when"] = toJson(*s.when, r);
    if (s.waitsForPriorGrids)
      j["waits_for_prior_grids"] = true;
    json params = json::array();
    for (const Param &p : s.params)
      params.push_back(paramJson(p, r));
    j["params"] = params;
    steps.push_back(j);
  }
  return json{{"version", kLaunchRecordVersion},
              {"symbols", symbols},
              {"workspace", workspace},
              {"steps", steps}};
}

//===--- from JSON
//----------------------------------------------------------===//

namespace {

[[noreturn]] void bad(const std::string &where, const std::string &what) {
  throw std::runtime_error("launch record: " + where + ": " + what);
}

uint32_t index(const json &j, const std::string &where) {
  if (!j.is_number_unsigned() || j.get<uint64_t>() > 0xffffffffu)
    bad(where, "index " + j.dump() + " is not a non-negative integer");
  return j.get<uint32_t>();
}

/// {"operand": i} / {"result": i} inside `j` (which may hold more keys).
TensorRef tensorOf(const json &j, const std::string &where) {
  if (!j.is_object())
    bad(where, "tensor reference " + j.dump() + " is not an object");
  bool o = j.contains("operand"), r = j.contains("result");
  if (o == r)
    bad(where, "tensor reference " + j.dump() +
                   " needs exactly one of operand, result");
  return o ? TensorRef::operand(index(j["operand"], where))
           : TensorRef::result(index(j["result"], where));
}

struct Parser {
  const json &symbolsJson;
  LaunchRecord &record;
  std::map<std::string, int> state; // symbol -> 1 visiting, 2 done

  uint32_t symbol(const std::string &name, const std::string &where) {
    int &s = state[name];
    if (s == 1)
      bad(where, "symbol '" + name + "' is defined in terms of itself");
    if (s == 0) {
      if (!symbolsJson.contains(name))
        bad(where, "unknown symbol '" + name + "'");
      s = 1;
      Expr e = expr(symbolsJson[name], "symbol " + name);
      state[name] = 2;
      record.symbols.push_back({name, std::move(e)});
    }
    for (size_t i = 0; i < record.symbols.size(); ++i)
      if (record.symbols[i].name == name)
        return (uint32_t)i;
    bad(where, "unknown symbol '" + name + "'");
  }

  Expr expr(const json &j, const std::string &where) {
    if (j.is_number_integer())
      return Expr(j.get<int64_t>());
    if (j.is_string())
      return Expr::symbol(symbol(j.get<std::string>(), where));
    if (!j.is_object() || j.size() != 1)
      bad(where, "malformed expression " + j.dump());
    // j.begin()'s key and value, not *j.items().begin(): that binds to a
    // proxy that dies with the full expression (ASan: stack-use-after-scope).
    const std::string &op = j.begin().key();
    const json &a = j.begin().value();
    if (op == "rows")
      return Expr::rows(tensorOf(a, where));
    if (op == "numel")
      return Expr::numel(tensorOf(a, where));
    if (op == "dim") {
      TensorRef t = tensorOf(a, where);
      if (!a.contains("axis") || !a["axis"].is_number_integer() ||
          a.size() != 2)
        bad(where, "dim " + a.dump() + " needs an integer axis");
      return Expr::dim(t, a["axis"].get<int64_t>());
    }
    if (op == "runtime") {
      auto r =
          a.is_string() ? parseRuntimeSize(a.get<std::string>()) : std::nullopt;
      if (!r)
        bad(where, "unknown runtime size " + a.dump());
      return Expr::runtimeSize(*r);
    }
    static const std::pair<const char *, ExprKind> ops[] = {
        {"ceil_div", ExprKind::CeilDiv},
        {"mul", ExprKind::Mul},
        {"gt", ExprKind::Gt},
        {"eq", ExprKind::Eq},
        {"select", ExprKind::Select}};
    for (auto [name, kind] : ops) {
      if (op != name)
        continue;
      size_t arity = kind == ExprKind::Mul      ? a.size()
                     : kind == ExprKind::Select ? 3
                                                : 2;
      if (!a.is_array() || a.size() != arity || arity == 0)
        bad(where, op + " needs " +
                       (kind == ExprKind::Mul ? std::string("some")
                                              : std::to_string(arity)) +
                       " arguments, got " + a.dump());
      std::vector<Expr> args;
      for (const json &x : a)
        args.push_back(expr(x, where));
      return Expr::op(kind, std::move(args));
    }
    bad(where, "unknown operation '" + op + "'");
  }
};

unsigned blockDim(const json &b, const char *axis, const std::string &where) {
  if (!b.contains(axis))
    return 1;
  const json &v = b[axis];
  if (!v.is_number_unsigned() || v.get<uint64_t>() == 0 ||
      v.get<uint64_t>() > 1024)
    bad(where,
        std::string("block.") + axis + " " + v.dump() + " is not in [1, 1024]");
  return v.get<unsigned>();
}

Param param(const json &p, Parser &parse, const LaunchRecord &r,
            const std::string &where) {
  Param out;
  if (!p.is_object() || !p.contains("name") || !p["name"].is_string() ||
      p.size() != 2)
    bad(where, "malformed parameter " + p.dump());
  out.name = p["name"].get<std::string>();
  auto it = p.begin();
  if (it.key() == "name")
    ++it;
  const std::string &k = it.key();
  const json &v = it.value();
  if (k == "operand" || k == "result") {
    out.kind = k == "operand" ? ParamKind::Operand : ParamKind::Result;
    out.tensor = tensorOf(json{{k, v}}, where);
  } else if (k == "operand_f16") {
    out.kind = ParamKind::OperandF16;
    out.tensor = TensorRef::operand(index(v, where));
  } else if (k == "int" || k == "int64") {
    out.kind = k == "int" ? ParamKind::Int32 : ParamKind::Int64;
    out.expr = parse.expr(v, where);
  } else if (k == "float") {
    if (!v.is_number())
      bad(where, "float " + v.dump() + " is not a number");
    out.kind = ParamKind::Float32;
    out.number = v.get<float>();
  } else if (k == "null") {
    if (v != true)
      bad(where, "null must be true");
    out.kind = ParamKind::Null;
  } else if (k == "runtime") {
    auto rv =
        v.is_string() ? parseRuntimeValue(v.get<std::string>()) : std::nullopt;
    if (!rv)
      bad(where, "unknown runtime value " + v.dump());
    out.kind = ParamKind::Runtime;
    out.runtime = *rv;
  } else if (k == "workspace") {
    out.kind = ParamKind::Workspace;
    bool found = false;
    for (size_t i = 0; i < r.workspace.size(); ++i)
      if (v.is_string() && r.workspace[i].name == v.get<std::string>()) {
        out.workspace = (uint32_t)i;
        found = true;
      }
    if (!found)
      bad(where, "unknown workspace " + v.dump());
  } else {
    bad(where, "unknown parameter kind '" + k + "'");
  }
  return out;
}

} // namespace

LaunchRecord fromJson(const json &j) {
  LaunchRecord r;
  if (!j.is_object())
    bad("record", "not an object");
  if (!j.contains("version") || j["version"] != kLaunchRecordVersion)
    bad("record", "version " +
                      (j.contains("version") ? j["version"].dump()
                                             : std::string("missing")) +
                      ", this runtime reads " +
                      std::to_string(kLaunchRecordVersion));
  for (const char *key : {"symbols", "workspace", "steps"})
    if (!j.contains(key))
      bad("record", std::string("no \"") + key + "\"");
  const json &symbols = j["symbols"], &workspace = j["workspace"],
             &steps = j["steps"];
  if (!symbols.is_object() || !workspace.is_object() || !steps.is_array() ||
      steps.empty())
    bad("record", "symbols and workspace must be objects, steps a non-empty "
                  "array");
  Parser parse{symbols, r, {}};
  for (auto &[name, e] : symbols.items())
    parse.symbol(name, "symbol " + name);
  for (auto &[name, e] : workspace.items())
    r.workspace.push_back({name, parse.expr(e, "workspace " + name)});
  for (size_t i = 0; i < steps.size(); ++i) {
    std::string where = "step " + std::to_string(i);
    const json &s = steps[i];
    LaunchStep step;
    if (!s.is_object() || !s.contains("entry") || !s["entry"].is_string() ||
        s["entry"].get<std::string>().empty())
      bad(where, "no entry name");
    step.entry = s["entry"].get<std::string>();
    step.name = s.value("name", "");
    if (!s.contains("block") || !s["block"].is_object())
      bad(where, "no block");
    const char *axes[] = {"x", "y", "z"};
    uint64_t threads = 1;
    for (int a = 0; a < 3; ++a)
      threads *= step.block[a] = blockDim(s["block"], axes[a], where);
    if (threads > 1024)
      bad(where, "block of " + std::to_string(threads) + " threads");
    if (!s.contains("grid") || !s["grid"].is_object())
      bad(where, "no grid");
    for (int a = 0; a < 3; ++a) {
      if (!s["grid"].contains(axes[a]))
        bad(where, std::string("no grid.") + axes[a]);
      step.grid[a] = parse.expr(s["grid"][axes[a]], where + " grid");
    }
    if (s.contains("dynamic_smem")) {
      const json &m = s["dynamic_smem"];
      if (!m.is_number_unsigned() || m.get<uint64_t>() > 1u << 20)
        bad(where, "dynamic_smem " + m.dump() + " is not a byte count");
      step.dynamicSmem = m.get<uint32_t>();
    }
    if (s.contains("when"))
      step.when = parse.expr(s["when"], where + " when");
    if (s.contains("waits_for_prior_grids")) {
      if (!s["waits_for_prior_grids"].is_boolean())
        bad(where, "waits_for_prior_grids " +
                       s["waits_for_prior_grids"].dump() + " is not a boolean");
      step.waitsForPriorGrids = s["waits_for_prior_grids"].get<bool>();
    }
    if (!s.contains("params") || !s["params"].is_array())
      bad(where, "no params");
    for (size_t k = 0; k < s["params"].size(); ++k)
      step.params.push_back(param(s["params"][k], parse, r,
                                  where + ": param " + std::to_string(k)));
    r.steps.push_back(std::move(step));
  }
  return r;
}

//===--- evaluation
//---------------------------------------------------------===//

int64_t ExprEvaluator::operator()(const Expr &e) {
  auto shape = [&]() -> const std::vector<int64_t> & {
    return env.shape(e.tensor);
  };
  switch (e.kind) {
  case ExprKind::Const:
    return e.value;
  case ExprKind::Symbol: {
    std::optional<int64_t> &v = symbols.at(e.value);
    if (!v)
      v = (*this)(record.symbols[e.value].value);
    return *v;
  }
  case ExprKind::Rows: { // (0 when the tensor is empty)
    const std::vector<int64_t> &s = shape();
    int64_t n = 1;
    for (int64_t d : s)
      n *= d;
    return s.empty() ? 1 : s.back() == 0 ? 0 : n / s.back();
  }
  case ExprKind::Numel: {
    int64_t n = 1;
    for (int64_t d : shape())
      n *= d;
    return n;
  }
  case ExprKind::Dim: {
    const std::vector<int64_t> &s = shape();
    int64_t a = e.value < 0 ? e.value + (int64_t)s.size() : e.value;
    if (a < 0 || a >= (int64_t)s.size())
      throw std::runtime_error("launch record: axis " +
                               std::to_string(e.value) + " of a rank-" +
                               std::to_string(s.size()) + " tensor");
    return s[a];
  }
  case ExprKind::Runtime:
    return env.runtime(e.runtime);
  case ExprKind::CeilDiv: {
    int64_t a = (*this)(e.args[0]), b = (*this)(e.args[1]);
    if (b <= 0)
      throw std::runtime_error("launch record: ceil_div by " +
                               std::to_string(b));
    return (a + b - 1) / b;
  }
  case ExprKind::Mul: {
    int64_t p = 1;
    for (const Expr &a : e.args)
      p *= (*this)(a);
    return p;
  }
  case ExprKind::Gt:
    return (*this)(e.args[0]) > (*this)(e.args[1]) ? 1 : 0;
  case ExprKind::Eq:
    return (*this)(e.args[0]) == (*this)(e.args[1]) ? 1 : 0;
  case ExprKind::Select:
    return (*this)(e.args[0]) != 0 ? (*this)(e.args[1]) : (*this)(e.args[2]);
  }
  throw std::runtime_error("launch record: malformed expression");
}

bool readsRuntime(const Expr &e, const LaunchRecord &r) {
  bool reads = false;
  forEachLeaf(
      e, [&](const Expr &leaf) { reads |= leaf.kind == ExprKind::Runtime; },
      &r);
  return reads;
}

} // namespace qcc::format
