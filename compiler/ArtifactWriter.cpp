//===- ArtifactWriter.cpp - writing .qpkg artifacts -----------------------===//
#include "compiler/ArtifactWriter.h"
#include "dialects/QccAttrNames.h"

#include "dialects/QccConstants.h"
#include "dialects/QccDialect.h"
#include "dialects/QccOps.h"
#include "dialects/QccRuntimeAttrs.h"
#include "format/ArtifactFormat.h"
#include "format/OpKind.h"
#include "passes/ConstEval.h"
#include "runtime/core/SyntheticWeights.h"
#include "runtime/core/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;
using nlohmann::json;

namespace {

llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

json shapeOf(RankedTensorType t) {
  json s = json::array();
  for (int64_t d : t.getShape())
    s.push_back(ShapedType::isDynamic(d) ? -1 : d);
  return s;
}

/// Whether `use` is a weight operand: a linear's or qlinear's weight, an
/// embedding or gather table, a 2:4 weight's values or metadata, packed
/// int4. Only constants used this way become synthetic.
bool isWeightOperand(OpOperand &use) {
  Operation *op = use.getOwner();
  if (isa<qcc::LinearOp>(op))
    return use.get() == cast<qcc::LinearOp>(op).getWeight();
  if (auto q = dyn_cast<qcc::QLinearOp>(op))
    return use.get() == q.getWeight();
  if (isa<qcc::EmbeddingOp, qcc::GatherOp>(op))
    return use.getOperandNumber() == 0;
  if (isa<qcc::Sparse24Op>(op))
    return true;
  if (auto w = dyn_cast<qcc::WeightInt4Op>(op))
    return use.get() == w.getPacked();
  return false;
}

struct Writer {
  json values = json::array();
  json constants = json::array();
  /// --synthetic-weights: the weights (keyed by value, as blobs) of at least
  /// synthetic::kMinBytes that become records, and the records written.
  llvm::DenseSet<Attribute> syntheticWeights;
  llvm::DenseMap<Attribute, int64_t> syntheticRecords;
  json synthetic = json::array();
  std::string data;
  llvm::DenseMap<Value, int64_t> ids;
  /// Entry points are clones of one graph: each weight is stored once.
  llvm::DenseMap<Attribute, std::pair<size_t, size_t>> blobs;

  size_t appendBlob(llvm::ArrayRef<char> bytes) {
    data.resize((data.size() + qcc::format::kDataAlignment - 1) /
                qcc::format::kDataAlignment * qcc::format::kDataAlignment);
    size_t offset = data.size();
    data.append(bytes.data(), bytes.size());
    return offset;
  }

  llvm::Expected<int64_t> define(Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || qcc::runtimeDType(t.getElementType()).empty())
      return error("value of unsupported type in the artifact");
    int64_t id = values.size();
    values.push_back({{"dtype", qcc::runtimeDType(t.getElementType())},
                      {"shape", shapeOf(t)}});
    ids[v] = id;
    return id;
  }

  llvm::Expected<json> port(Value v, DictionaryAttr attrs) {
    auto t = cast<RankedTensorType>(v.getType());
    json p{{"value", ids.lookup(v)},
           {"dtype", qcc::runtimeDType(t.getElementType())},
           {"shape", shapeOf(t)}};
    p["name"] = "";
    p["dims"] = std::vector<std::string>(t.getRank());
    if (attrs) {
      if (auto n = attrs.getAs<StringAttr>("qcc.name"))
        p["name"] = n.getValue().str();
      if (auto dims = attrs.getAs<ArrayAttr>(qcc::kDimNamesAttr)) {
        std::vector<std::string> names;
        for (Attribute d : dims)
          names.push_back(cast<StringAttr>(d).getValue().str());
        p["dims"] = names;
      }
    }
    return p;
  }

  /// Marks the weights of `module` that become synthetic records.
  void findSyntheticWeights(ModuleOp module) {
    module.walk([&](qcc::ConstantOp c) {
      // The size from the type: no copy of the data to measure it.
      auto t = cast<RankedTensorType>(c.getType());
      qcc::rt::DType dtype;
      if (c->use_empty() || !t.hasStaticShape() ||
          !qcc::rt::parseDType(qcc::runtimeDType(t.getElementType()), dtype) ||
          (uint64_t)t.getNumElements() * qcc::rt::dtypeSize(dtype) <
              qcc::rt::synthetic::kMinBytes ||
          !llvm::all_of(c->getUses(), isWeightOperand))
        return;
      syntheticWeights.insert(c.getValue());
    });
  }

  /// The record standing for weight `c` (one per distinct value): 2:4
  /// metadata as valid random patterns, anything else normal with the
  /// weight's own RMS.
  llvm::Expected<int64_t> syntheticRecord(qcc::ConstantOp c) {
    auto [it, fresh] = syntheticRecords.try_emplace(c.getValue(), 0);
    if (!fresh)
      return it->second;
    auto t = cast<RankedTensorType>(c.getType());
    qcc::rt::DType dtype;
    if (!qcc::rt::parseDType(qcc::runtimeDType(t.getElementType()), dtype))
      return error("no runtime dtype");
    bool meta = llvm::any_of(c->getUses(), [](OpOperand &u) {
      auto s = dyn_cast<qcc::Sparse24Op>(u.getOwner());
      return s && u.get() == s.getMeta();
    });
    auto dist = meta ? qcc::rt::synthetic::Dist::Sparse24Meta
                     : qcc::rt::synthetic::Dist::Normal;
    if (!qcc::rt::synthetic::fills(dist, dtype))
      return error(std::string("a ") + qcc::rt::dtypeName(dtype) +
                   " weight cannot be synthetic");
    double stddev = 0.0;
    if (!meta) {
      auto bytes = qcc::getBytes(c.getValue());
      if (!bytes)
        return error("the weight has no data");
      stddev = qcc::rt::synthetic::rms(dtype, bytes->data(),
                                       (uint64_t)t.getNumElements());
    }
    it->second = synthetic.size();
    // One seed per record: weights differ from each other, and the same
    // compile writes the same artifact.
    synthetic.push_back({{"dist", qcc::rt::synthetic::distName(dist)},
                         {"stddev", stddev},
                         {"seed", 0x5EED0000ull + synthetic.size()},
                         {"dtype", qcc::runtimeDType(t.getElementType())},
                         {"shape", shapeOf(t)}});
    return it->second;
  }

  /// The index of the compiled kernel for region `region` of `function` in
  /// ArtifactOptions::kernels (-1: none).
  std::map<std::pair<std::string, std::string>, int64_t> kernelIndex;
  std::string currentFunction;

  /// Serializes the ops of `b` into `nodes`; the terminator's operand ids go
  /// to `yields`. A qcc.kernel region becomes one node with op "kernel" whose
  /// "body" holds its block arguments, nodes and yields.
  llvm::Error block(Block &b, json &nodes, json &yields) {
    for (Operation &op : b) {
      if (op.hasTrait<OpTrait::IsTerminator>()) {
        for (Value v : op.getOperands())
          yields.push_back(ids.lookup(v));
        continue;
      }
      std::string where = "?";
      if (auto name = dyn_cast<NameLoc>(op.getLoc()))
        where = name.getName().str();
      if (op.getDialect() == nullptr ||
          op.getDialect()->getNamespace() != "qcc")
        return error("op '" + op.getName().getStringRef() + "' (from '" +
                     where + "') cannot be written to an artifact");
      SmallVector<int64_t> outIds;
      for (Value r : op.getResults()) {
        auto id = define(r);
        if (!id)
          return error(op.getName().getStringRef() + " (from '" + where +
                       "'): " + llvm::toString(id.takeError()));
        outIds.push_back(*id);
      }
      if (auto c = dyn_cast<qcc::ConstantOp>(op)) {
        if (c->use_empty())
          continue; // e.g. a float weight replaced by its int8 form
        if (syntheticWeights.contains(c.getValue())) {
          auto id = syntheticRecord(c);
          if (!id)
            return error("constant '" + where + "': " +
                         llvm::toString(id.takeError()));
          constants.push_back({{"value", outIds[0]}, {"synthetic", *id}});
          continue;
        }
        auto [it, fresh] = blobs.try_emplace(c.getValue());
        if (fresh) {
          auto bytes = qcc::getBytes(c.getValue());
          if (!bytes)
            return error("constant '" + where + "' has no data");
          it->second = {appendBlob(*bytes), bytes->size()};
        }
        constants.push_back({{"value", outIds[0]},
                             {"offset", it->second.first},
                             {"size", it->second.second}});
        continue;
      }
      // The runtime knows the ops of format/OpKinds.def (OpKindTest holds
      // that table to the dialect).
      std::optional<qcc::format::OpKind> kind = qcc::runtimeOpKind(&op);
      if (!kind)
        return error("op '" + op.getName().getStringRef() + "' (from '" +
                     where + "') has no artifact op kind");
      json node{{"op", qcc::format::opKindName(*kind)}, {"name", where}};
      std::vector<int64_t> in;
      for (Value v : op.getOperands())
        in.push_back(ids.lookup(v));
      node["in"] = in;
      node["out"] = std::vector<int64_t>(outIds.begin(), outIds.end());
      json attrs = json::object();
      if (auto k = dyn_cast<qcc::KernelOp>(op)) {
        // The region's name identifies it; its kernel (if compiled) by index.
        std::string region = k.getSymName().str();
        node["name"] = region;
        attrs["kind"] = qcc::format::spelling(k.getKind());
        auto it = kernelIndex.find({currentFunction, region});
        attrs["kernel"] = it == kernelIndex.end() ? int64_t(-1) : it->second;
        json args = json::array(), bodyNodes = json::array(),
             bodyYields = json::array();
        for (BlockArgument a : k.getBody().front().getArguments()) {
          auto id = define(a);
          if (!id)
            return error("kernel " + region + ": " +
                         llvm::toString(id.takeError()));
          args.push_back(*id);
        }
        if (auto err = block(k.getBody().front(), bodyNodes, bodyYields))
          return err;
        node["body"] = {{"args", args}, {"nodes", bodyNodes},
                        {"yield", bodyYields}};
        node["attrs"] = attrs;
        nodes.push_back(node);
        continue;
      }
      auto opAttrs = qcc::runtimeAttrs(&op);
      if (!opAttrs)
        return error(op.getName().getStringRef() + " (from '" + where +
                     "'): " + llvm::toString(opAttrs.takeError()));
      node["attrs"] = *opAttrs;
      nodes.push_back(node);
    }
    return llvm::Error::success();
  }

  llvm::Expected<json> function(func::FuncOp fn) {
    currentFunction = fn.getSymName().str();
    json nodes = json::array(), inputs = json::array(),
         outputs = json::array();
    for (auto [i, arg] : llvm::enumerate(fn.getArguments())) {
      if (auto id = define(arg); !id)
        return id.takeError();
      auto p = port(arg, fn.getArgAttrDict(i));
      if (!p)
        return p.takeError();
      inputs.push_back(*p);
    }
    json yields = json::array();
    if (auto err = block(fn.getBody().front(), nodes, yields))
      return std::move(err);
    Operation *ret = fn.getBody().front().getTerminator();
    for (auto [i, v] : llvm::enumerate(ret->getOperands())) {
      auto p = port(v, fn.getResultAttrDict(i));
      if (!p)
        return p.takeError();
      outputs.push_back(*p);
    }
    return json{{"name", fn.getSymName().str()},
                {"inputs", inputs},
                {"outputs", outputs},
                {"nodes", nodes}};
  }
};

} // namespace

llvm::Expected<std::vector<char>>
qcc::serializeArtifact(ModuleOp module, llvm::StringRef path,
                       const ArtifactOptions &options) {
  Writer w;
  if (options.syntheticWeights)
    w.findSyntheticWeights(module);
  json functions = json::array();
  for (auto fn : module.getOps<func::FuncOp>()) {
    auto f = w.function(fn);
    if (!f)
      return error(path + ": " + llvm::toString(f.takeError()));
    functions.push_back(*f);
  }
  // The GPU plan: the same entry points after form-kernels, kernel regions
  // as "kernel" nodes (sharing the constants above: blobs are keyed by value).
  json gpuFunctions = json::array();
  if (options.gpuPlan) {
    for (const auto &[i, k] : llvm::enumerate(options.kernels))
      w.kernelIndex[{k.record.value("function", ""),
                     k.record.value("region", "")}] = i;
    mlir::ModuleOp plan = options.gpuPlan;
    for (auto fn : plan.getOps<func::FuncOp>()) {
      auto f = w.function(fn);
      if (!f)
        return error(path + ": GPU plan: " + llvm::toString(f.takeError()));
      gpuFunctions.push_back(*f);
    }
  }
  json sections = json::object();
  if (!options.tokenizerPath.empty()) {
    auto buf = llvm::MemoryBuffer::getFile(options.tokenizerPath);
    if (!buf)
      return error(options.tokenizerPath + ": cannot read the tokenizer: " +
                   buf.getError().message());
    StringRef bytes = (*buf)->getBuffer();
    size_t offset = w.appendBlob({bytes.data(), bytes.size()});
    // qrun tells a tokenizer.json from a SentencePiece model by content.
    sections["tokenizer"] = {{"offset", offset}, {"size", bytes.size()}};
  }
  json kernels = json::array();
  std::map<std::string, std::pair<size_t, size_t>> kernelBlobs;
  for (const auto &k : options.kernels) {
    json record = k.record;
    json binaries = json::object();
    for (const auto &[target, bytes] : k.binaries) {
      auto [it, fresh] = kernelBlobs.try_emplace(bytes);
      if (fresh)
        it->second = {w.appendBlob({bytes.data(), bytes.size()}), bytes.size()};
      binaries[target] = {{"offset", it->second.first},
                          {"size", it->second.second}};
    }
    record["binaries"] = binaries;
    kernels.push_back(record);
  }
  // The KV cache layout chosen by kv-cache-layout, for the runtime, checked
  // by the loader's own parser: an artifact whose cache the runtime would
  // refuse is not written.
  json kvCache = nullptr;
  if (auto kv = module->getAttrOfType<DictionaryAttr>(qcc::kKvCacheAttr)) {
    auto j = qcc::kvCacheJson(kv);
    if (!j)
      return error(path + ": " + llvm::toString(j.takeError()));
    std::string why;
    if (!format::KvCacheConfig::parse(*j, &why))
      return error(path + ": qcc.kv_cache: " + why);
    kvCache = *j;
  }
  json manifest{{"format_version", format::kFormatVersion},
                {"producer", "qcc"},
                {"source", options.sourceName},
                {"values", w.values},
                {"constants", w.constants},
                {"functions", functions},
                {"sections", sections}};
  if (!kvCache.is_null())
    manifest["kv_cache"] = kvCache;
  if (auto names = module->getAttrOfType<ArrayAttr>(qcc::kLoraAdaptersAttr)) {
    json adapters = json::array();
    for (auto name : names.getAsValueRange<StringAttr>())
      adapters.push_back(name.str());
    manifest["lora_adapters"] = adapters;
  }
  if (options.syntheticWeights)
    manifest["synthetic"] = w.synthetic;
  if (!options.kernels.empty()) {
    manifest["kernels"] = kernels;
  }
  if (options.gpuPlan)
    manifest["gpu_functions"] = gpuFunctions;
  // The importer refuses names that are not UTF-8; a file name (source) may
  // still not be: replaced (U+FFFD) rather than thrown on.
  return format::packageFile(
      manifest.dump(-1, ' ', false, json::error_handler_t::replace), w.data);
}

llvm::Error qcc::writeArtifact(ModuleOp module, llvm::StringRef path,
                               const ArtifactOptions &options) {
  auto file = serializeArtifact(module, path, options);
  if (!file)
    return file.takeError();
  // Written to a temporary file beside `path` and renamed over it when
  // complete: an error leaves neither a partial artifact nor a lost old one.
  if (llvm::Error err = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
        os.write(file->data(), file->size());
        return llvm::Error::success();
      }))
    return error(path + ": cannot write the artifact: " +
                 llvm::toString(std::move(err)));
  return llvm::Error::success();
}
