//===- QccRuntimeAttrs.cpp - attributes as the artifact holds them --------===//
#include "dialects/QccRuntimeAttrs.h"

#include "dialects/QccOps.h"

using namespace mlir;
using namespace qcc;
using nlohmann::json;

namespace {
llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}
} // namespace

std::string qcc::runtimeDType(Type t) {
  if (t.isF32()) return "f32";
  if (t.isF16()) return "f16";
  if (t.isBF16()) return "bf16";
  if (t.isInteger(64)) return "i64";
  if (t.isInteger(32)) return "i32";
  if (t.isInteger(8)) return "i8";
  if (isa<Float8E4M3FNType>(t)) return "f8e4m3";
  if (t.isInteger(1)) return "bool";
  return "";
}

llvm::Expected<json> qcc::runtimeAttr(Attribute a) {
  if (auto b = dyn_cast<BoolAttr>(a))
    return json(b.getValue());
  if (isa<UnitAttr>(a))
    return json(true);
  if (auto arr = dyn_cast<ArrayAttr>(a)) {
    json out = json::array();
    for (Attribute e : arr) {
      auto j = runtimeAttr(e);
      if (!j)
        return j.takeError();
      out.push_back(*j);
    }
    return out;
  }
  if (auto i = dyn_cast<IntegerAttr>(a))
    return json(i.getValue().getSExtValue());
  if (auto f = dyn_cast<FloatAttr>(a))
    return json(f.getValueAsDouble());
  if (auto s = dyn_cast<StringAttr>(a))
    return json(s.getValue().str());
  if (auto arr = dyn_cast<DenseI64ArrayAttr>(a))
    return json(std::vector<int64_t>(arr.asArrayRef()));
  if (auto arr = dyn_cast<DenseF32ArrayAttr>(a))
    return json(std::vector<double>(arr.asArrayRef().begin(),
                                    arr.asArrayRef().end()));
  if (auto e = dyn_cast<DenseElementsAttr>(a)) {
    json values = json::array();
    Type et = e.getElementType();
    if (isa<FloatType>(et))
      for (APFloat v : e.getValues<APFloat>())
        values.push_back(v.convertToDouble());
    else if (et.isInteger(1))
      for (bool v : e.getValues<bool>())
        values.push_back(v ? 1 : 0);
    else
      for (APInt v : e.getValues<APInt>())
        values.push_back(v.getSExtValue());
    return json{{"dtype", runtimeDType(et)}, {"values", values}};
  }
  return error("cannot serialize attribute");
}

llvm::Expected<json> qcc::runtimeAttrs(Operation *op) {
  json attrs = json::object();
  for (NamedAttribute a : op->getAttrs()) {
    // Calibration statistics are compile-time only.
    if (a.getName() == "operandSegmentSizes" ||
        a.getName().strref().ends_with("_absmax"))
      continue;
    // The runtime reads a quantize's facts as granularity + asymmetric; the
    // width is its i8 result's (format/Quant.h has the range).
    if (auto q = dyn_cast<QuantAttr>(a.getValue())) {
      attrs["granularity"] = stringifyQuantGranularity(q.getGranularity()).str();
      if (!q.isSymmetric())
        attrs["asymmetric"] = true;
      continue;
    }
    auto j = runtimeAttr(a.getValue());
    if (!j)
      return error("attribute '" + a.getName().strref() +
                   "': " + llvm::toString(j.takeError()));
    attrs[a.getName().str()] = *j;
  }
  // The artifact has no operand segments: a weight_int4's offsets (its last
  // operand when present) are announced by `asymmetric` (format/Int4.h).
  if (auto w = dyn_cast<WeightInt4Op>(op); w && w.getOffsets())
    attrs["asymmetric"] = true;
  // The runtime has no IR types: a cast's target comes as an attribute, and
  // so does an FP8 quantize's (an int8 one has none: "i8").
  if (auto cast = dyn_cast<CastOp>(op))
    attrs["to"] = runtimeDType(cast.getType().getElementType());
  if (auto q = dyn_cast<QuantizeOp>(op);
      q && !q.getResult().getType().getElementType().isInteger(8))
    attrs["to"] = runtimeDType(q.getResult().getType().getElementType());
  return attrs;
}

llvm::Expected<json> qcc::kvCacheJson(DictionaryAttr kvCache) {
  json out = json::object();
  for (NamedAttribute a : kvCache) {
    auto j = runtimeAttr(a.getValue());
    if (!j)
      return error("qcc.kv_cache: '" + a.getName().strref() +
                   "': " + llvm::toString(j.takeError()));
    out[a.getName().str()] = *j;
  }
  return out;
}

llvm::Expected<format::KvCacheConfig> qcc::kvCacheConfig(DictionaryAttr kvCache) {
  if (!kvCache)
    return error("no qcc.kv_cache");
  auto j = kvCacheJson(kvCache);
  if (!j)
    return j.takeError();
  std::string why;
  std::optional<format::KvCacheConfig> c = format::KvCacheConfig::parse(*j, &why);
  if (!c)
    return error("qcc.kv_cache: " + why);
  return *c;
}
