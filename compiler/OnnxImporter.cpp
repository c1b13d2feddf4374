//===- OnnxImporter.cpp - ONNX protobuf -> qcc dialect --------------------===//
//
// Reads the model with protobuf, validates it with ONNX's checker, fills in
// intermediate shapes with ONNX's shape inference (with data propagation, so
// Shape -> Gather -> Concat chains give known ranks), then walks the graph in
// order and maps each node through the converter table.
//
//===----------------------------------------------------------------------===//
#include "compiler/OnnxImporter.h"
#include "compiler/OnnxConverter.h"

#include "dialects/QccDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/ADT/StringSet.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <fmt/format.h>

using namespace mlir;
using namespace qcc;

namespace {

/// Builds errors of the form `FILE: node 'NAME' (OP): REASON`.
struct ErrorSink {
  std::string file;
  llvm::Error error(const Twine &reason) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   file + ": " + reason);
  }
  llvm::Error nodeError(const onnx::NodeProto &node, const Twine &reason) const {
    // Unnamed nodes are known by their first output.
    std::string name = node.name();
    if (name.empty() && node.output_size() > 0)
      name = "producing " + node.output(0);
    return error("node '" + name + "' (" + node.op_type() + "): " + reason);
  }
};

class Importer {
public:
  Importer(MLIRContext &ctx, StringRef path)
      : ctx(ctx), builder(&ctx), sink{path.str()}, path(path.str()) {}

  llvm::Expected<OwningOpRef<ModuleOp>> run();

private:
  llvm::Error load(onnx::ModelProto &model);
  llvm::Error checkOpset(const onnx::ModelProto &model);
  llvm::Error collectTypes(const onnx::GraphProto &graph);
  llvm::Expected<RankedTensorType> typeOf(const onnx::TypeProto &t,
                                          const std::string &name,
                                          SmallVector<std::string> *dimNames);
  llvm::Error importInitializer(const onnx::TensorProto &t);
  llvm::Error importNode(const onnx::NodeProto &node);
  llvm::Expected<const OnnxConverter *>
  converterFor(const onnx::NodeProto &node);
  llvm::Expected<const OnnxConverter *>
  contribConverter(const onnx::NodeProto &node);
  llvm::Expected<std::string> readExternal(const onnx::TensorProto &t);

  MLIRContext &ctx;
  OpBuilder builder;
  ErrorSink sink;
  std::string path;
  int64_t opset = 0;
  /// The opset the model imports for each domain ("" for ai.onnx).
  llvm::StringMap<int64_t> domainOpsets;
  /// The newest default-domain opset the installed ONNX library knows; above
  /// it, its checker and shape inference would apply older schemas.
  int64_t libraryOpset = 0;
  llvm::StringMap<Value> values;
  /// uint8 initializers, for the converters that read them (readsPacked).
  llvm::StringMap<PackedTensor> packedTensors;
  llvm::StringMap<onnx::TypeProto> types;
};

} // namespace

llvm::Error Importer::load(onnx::ModelProto &model) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return sink.error("cannot read the file: " + buffer.getError().message());
  StringRef bytes = (*buffer)->getBuffer();
  if (bytes.empty())
    return sink.error("the file is empty");
  if (!model.ParseFromArray(bytes.data(), bytes.size()))
    return sink.error("not a valid ONNX model (the protobuf does not parse; "
                      "truncated or corrupted?)");
  if (!model.has_graph() || model.graph().node_size() == 0)
    return sink.error("the model has no graph or an empty graph (truncated?)");
  libraryOpset =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("")
          .second;
  registerContribSchemas();
  for (const auto &imp : model.opset_import())
    if ((imp.domain().empty() || imp.domain() == "ai.onnx") &&
        imp.version() > libraryOpset)
      return llvm::Error::success(); // checked node by node in importNode
  try {
    // The path overload resolves external data relative to the model's folder.
    onnx::checker::check_model(path);
  } catch (const std::exception &e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    return sink.error("the ONNX checker rejects the model: " + what);
  }
  return llvm::Error::success();
}

llvm::Error Importer::checkOpset(const onnx::ModelProto &model) {
  for (const auto &imp : model.opset_import()) {
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      opset = imp.version();
    domainOpsets[imp.domain() == "ai.onnx" ? "" : imp.domain()] =
        imp.version();
  }
  if (opset == 0)
    return sink.error("the model imports no default-domain (ai.onnx) opset");
  if (opset > kMaxKnownOpset)
    return sink.error(fmt::format(
        "opset {} is newer than qcc knows (up to {}; op semantics may have "
        "changed)",
        opset, kMaxKnownOpset));
  if (opset < kMinOpset)
    return sink.error(fmt::format(
        "opset {} is not supported (qcc imports opsets {}-{}, and newer ones "
        "for ops whose semantics did not change)",
        opset, kMinOpset, kMaxTestedOpset));
  return llvm::Error::success();
}

llvm::Error Importer::collectTypes(const onnx::GraphProto &graph) {
  for (const auto &list : {graph.input(), graph.value_info(), graph.output()})
    for (const auto &vi : list)
      if (vi.has_type())
        types[vi.name()] = vi.type();
  return llvm::Error::success();
}

llvm::Expected<RankedTensorType>
Importer::typeOf(const onnx::TypeProto &t, const std::string &name,
                 SmallVector<std::string> *dimNames) {
  if (!t.has_tensor_type())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "value '" + name + "' is not a tensor (sequence and optional types "
        "are not supported)");
  const auto &tt = t.tensor_type();
  Type et = onnxElementType(&ctx, tt.elem_type());
  if (!et)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "value '" + name +
                                       "' has unsupported element type " +
                                       onnxTypeName(tt.elem_type()));
  if (!tt.has_shape())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "value '" + name +
            "' has unknown rank (qcc needs the rank of every value)");
  SmallVector<int64_t> shape;
  for (const auto &d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      shape.push_back(d.dim_value());
      if (dimNames)
        dimNames->push_back("");
    } else {
      shape.push_back(ShapedType::kDynamic);
      if (dimNames)
        dimNames->push_back(d.has_dim_param() ? d.dim_param() : "?");
    }
  }
  return RankedTensorType::get(shape, et);
}

llvm::Expected<std::string>
Importer::readExternal(const onnx::TensorProto &t) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::stoll(kv.value());
    else if (kv.key() == "length")
      length = std::stoll(kv.value());
  }
  if (location.empty() || llvm::sys::path::is_absolute(location) ||
      StringRef(location).contains(".."))
    return sink.error("initializer '" + t.name() +
                      "' has an invalid external data location '" + location +
                      "'");
  SmallString<256> file(llvm::sys::path::parent_path(path));
  llvm::sys::path::append(file, location);
  auto buffer = llvm::MemoryBuffer::getFile(file);
  if (!buffer)
    return sink.error("initializer '" + t.name() + "': cannot read external "
                      "data file '" + file + "': " +
                      buffer.getError().message());
  StringRef all = (*buffer)->getBuffer();
  if (length < 0)
    length = all.size() - offset;
  if (offset < 0 || offset + length > (int64_t)all.size())
    return sink.error(fmt::format(
        "initializer '{}': external data [{}, {}) lies outside '{}' ({} bytes)",
        t.name(), offset, offset + length, file.str().str(), all.size()));
  return all.substr(offset, length).str();
}

llvm::Error Importer::importInitializer(const onnx::TensorProto &t) {
  std::string external;
  bool isExternal =
      t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL;
  if (isExternal) {
    auto bytes = readExternal(t);
    if (!bytes)
      return bytes.takeError();
    external = std::move(*bytes);
  }
  if (t.data_type() == onnx::TensorProto_DataType_UINT8) {
    // No uint8 tensors in qcc: kept as bytes for MatMulNBits and the like.
    PackedTensor packed{{t.dims().begin(), t.dims().end()}, {}};
    int64_t n = 1;
    for (int64_t d : packed.shape)
      n *= d;
    if (isExternal)
      packed.bytes = std::move(external);
    else if (t.has_raw_data())
      packed.bytes = t.raw_data();
    else
      for (int32_t v : t.int32_data())
        packed.bytes.push_back((char)(uint8_t)v);
    if ((int64_t)packed.bytes.size() != n)
      return sink.error(fmt::format("initializer '{}': holds {} bytes of "
                                    "data, but its shape needs {}",
                                    t.name(), packed.bytes.size(), n));
    packedTensors[t.name()] = std::move(packed);
    return llvm::Error::success();
  }
  std::string error;
  auto attr = tensorToElements(&ctx, t, isExternal ? &external : nullptr, error);
  if (failed(attr))
    return sink.error("initializer '" + t.name() + "': " + error);
  Location loc = NameLoc::get(builder.getStringAttr(t.name()),
                              FileLineColLoc::get(&ctx, path, 0, 0));
  values[t.name()] = ConstantOp::create(builder, loc, *attr).getResult();
  return llvm::Error::success();
}

/// The contrib converter (onnxruntime's ops) for `node`, null if there is
/// none. ONNX's schemas do not know these ops: the version is the newest one
/// the table lists that the model's opset for the op's domain selects.
llvm::Expected<const OnnxConverter *>
Importer::contribConverter(const onnx::NodeProto &node) {
  std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  const OnnxConverter *converter = nullptr;
  int best = 0;
  std::vector<int> known;
  int64_t domainOpset = domainOpsets.lookup(domain);
  for (const auto &c : onnxContribConverters()) {
    if (c.domain != domain || c.opType != node.op_type())
      continue;
    for (int v : c.versions) {
      known.push_back(v);
      if (v <= domainOpset && v > best) {
        best = v;
        converter = &c;
      }
    }
  }
  if (!known.empty() && !converter)
    return sink.nodeError(
        node, domainOpset == 0
                  ? "the model imports no opset of domain '" + domain + "'"
                  : fmt::format("opset {} of domain '{}' selects no version "
                                "of this op that qcc supports (supported "
                                "versions: {})",
                                domainOpset, domain, fmt::join(known, ", ")));
  return converter;
}

/// The converter for `node`: onnxruntime's contrib ops by the opset of their
/// domain, default-domain ops by the version that the opset selects.
llvm::Expected<const OnnxConverter *>
Importer::converterFor(const onnx::NodeProto &node) {
  if (auto contrib = contribConverter(node); !contrib || *contrib)
    return contrib;
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    std::string known;
    for (const auto &c : onnxContribConverters())
      if (c.domain == node.domain())
        known += (known.empty() ? "" : ", ") + c.opType;
    return sink.nodeError(
        node, known.empty() ? "ops of domain '" + node.domain() +
                                  "' are not supported"
                            : "unsupported op of domain '" + node.domain() +
                                  "' (qcc converts only " + known + ")");
  }
  // The op version the opset selects: from ONNX's schemas where the library
  // knows the opset, else the newest version <= opset in the converter table
  // (which lists every version of its ops up to kMaxKnownOpset).
  std::vector<int> known;
  for (const auto &c : onnxConverters())
    if (c.opType == node.op_type())
      known.insert(known.end(), c.versions.begin(), c.versions.end());
  int version = 0;
  if (opset <= libraryOpset) {
    const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
        node.op_type(), opset, node.domain());
    if (!schema)
      return sink.nodeError(node, fmt::format("unknown op in opset {}", opset));
    version = schema->SinceVersion();
  } else {
    for (int v : known)
      if (v <= opset)
        version = std::max(version, v);
  }
  if (known.empty())
    return sink.nodeError(node, "unsupported op (qcc has no converter for "
                                "it; `qcc --list-ops` lists the supported ops)");
  const OnnxConverter *converter = nullptr;
  for (const auto &c : onnxConverters())
    if (c.opType == node.op_type() && llvm::is_contained(c.versions, version))
      converter = &c;
  if (!converter)
    return sink.nodeError(
        node, fmt::format("opset {} selects version {} of this op, which qcc "
                          "does not support (supported versions: {})",
                          opset, version, fmt::join(known, ", ")));
  return converter;
}

llvm::Error Importer::importNode(const onnx::NodeProto &node) {
  auto converter = converterFor(node);
  if (!converter)
    return converter.takeError();

  SmallVector<Value> inputs;
  SmallVector<const PackedTensor *> packed;
  for (const std::string &name : node.input()) {
    packed.push_back(nullptr);
    if (name.empty()) {
      inputs.push_back(Value());
      continue;
    }
    auto it = values.find(name);
    if (it != values.end()) {
      inputs.push_back(it->second);
      continue;
    }
    auto p = packedTensors.find(name);
    if (p == packedTensors.end())
      return sink.nodeError(node, "input '" + name + "' is not defined");
    if (!(*converter)->readsPacked)
      return sink.nodeError(node, "input '" + name + "' is a uint8 "
                                  "initializer, which is not supported here "
                                  "(qcc reads uint8 data only as "
                                  "MatMulNBits' packed weights)");
    inputs.push_back(Value());
    packed.back() = &p->second;
  }
  SmallVector<Type> resultTypes;
  for (const std::string &name : node.output()) {
    // Where ONNX inference gave no type, the converter computes one.
    auto it = types.find(name);
    if (it == types.end() || !it->second.tensor_type().has_shape()) {
      resultTypes.push_back(Type());
      continue;
    }
    auto type = typeOf(it->second, name, nullptr);
    if (!type) {
      llvm::consumeError(type.takeError());
      resultTypes.push_back(Type());
      continue;
    }
    resultTypes.push_back(*type);
  }

  std::string locName = node.name().empty() ? node.output(0) : node.name();
  Location loc = NameLoc::get(builder.getStringAttr(locName),
                              FileLineColLoc::get(&ctx, path, 0, 0));
  ConvertContext cc(builder, loc, node, std::move(inputs),
                    std::move(resultTypes));
  cc.packed = std::move(packed);
  auto results = (*converter)->convert(cc);
  if (failed(results))
    return sink.nodeError(node, cc.error.empty() ? "conversion failed"
                                                 : cc.error);
  for (auto [name, value] : llvm::zip(node.output(), *results))
    if (!name.empty() && value)
      values[name] = value;
  return llvm::Error::success();
}

llvm::Expected<OwningOpRef<ModuleOp>> Importer::run() {
  ctx.loadDialect<QccDialect, func::FuncDialect>();
  onnx::ModelProto model;
  if (auto err = load(model))
    return std::move(err);
  if (auto err = checkOpset(model))
    return std::move(err);
  // Above the library's opsets its schemas are out of date: the converters
  // then compute every type themselves.
  if (opset <= libraryOpset) {
    try {
      onnx::ShapeInferenceOptions options{/*check_type=*/false,
                                          /*error_mode=*/0,
                                          /*enable_data_propagation=*/true};
      onnx::shape_inference::InferShapes(
          model, onnx::OpSchemaRegistry::Instance(), options);
    } catch (const std::exception &e) {
      std::string what = e.what();
      std::replace(what.begin(), what.end(), '\n', ' ');
      return sink.error("ONNX shape inference failed: " + what);
    }
  }
  const onnx::GraphProto &graph = model.graph();
  if (auto err = collectTypes(graph))
    return std::move(err);

  Location fileLoc = FileLineColLoc::get(&ctx, path, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(module->getBody());

  llvm::StringSet<llvm::MallocAllocator> initializerNames;
  for (const auto &t : graph.initializer())
    initializerNames.insert(t.name());

  // Signature: graph inputs that are not initializers, then graph outputs.
  SmallVector<Type> argTypes, resultTypes;
  SmallVector<DictionaryAttr> argAttrs, resultAttrs;
  SmallVector<std::string> argNames;
  auto signatureAttrs = [&](const std::string &name,
                            ArrayRef<std::string> dims) {
    SmallVector<Attribute> dimAttrs;
    for (const auto &d : dims)
      dimAttrs.push_back(builder.getStringAttr(d));
    return builder.getDictionaryAttr(
        {builder.getNamedAttr("qcc.name", builder.getStringAttr(name)),
         builder.getNamedAttr(kDimNamesAttr, builder.getArrayAttr(dimAttrs))});
  };
  for (const auto &in : graph.input()) {
    if (initializerNames.contains(in.name()))
      continue;
    SmallVector<std::string> dims;
    auto type = typeOf(in.type(), in.name(), &dims);
    if (!type && in.type().tensor_type().elem_type() ==
                     onnx::TensorProto_DataType_UINT8) {
      // Packed weights given at run time: name the node that reads them.
      for (const auto &node : graph.node())
        if (llvm::is_contained(node.input(), in.name())) {
          llvm::consumeError(type.takeError());
          return sink.nodeError(node, "input '" + in.name() +
                                          "' is a uint8 graph input, which is "
                                          "not supported (qcc has no uint8 "
                                          "tensors; MatMulNBits' packed "
                                          "weights must be initializers)");
        }
    }
    if (!type)
      return sink.error("graph input: " + llvm::toString(type.takeError()));
    argTypes.push_back(*type);
    argAttrs.push_back(signatureAttrs(in.name(), dims));
    argNames.push_back(in.name());
  }
  for (const auto &out : graph.output()) {
    SmallVector<std::string> dims;
    auto type = typeOf(out.type(), out.name(), &dims);
    if (!type)
      return sink.error("graph output: " + llvm::toString(type.takeError()));
    resultTypes.push_back(*type);
    resultAttrs.push_back(signatureAttrs(out.name(), dims));
  }

  auto func = func::FuncOp::create(builder, 
      fileLoc, "main", builder.getFunctionType(argTypes, resultTypes));
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resultAttrs);
  Block *entry = func.addEntryBlock();
  for (auto [name, arg] : llvm::zip(argNames, entry->getArguments()))
    values[name] = arg;
  builder.setInsertionPointToStart(entry);

  for (const auto &t : graph.initializer())
    if (auto err = importInitializer(t))
      return std::move(err);
  for (const auto &node : graph.node())
    if (auto err = importNode(node))
      return std::move(err);

  SmallVector<Value> results;
  for (const auto &out : graph.output()) {
    auto it = values.find(out.name());
    if (it == values.end())
      return sink.error("graph output '" + out.name() + "' is never produced");
    results.push_back(it->second);
  }
  func::ReturnOp::create(builder, fileLoc, results);
  // Converters may know more than the declared outputs (or forward a value
  // through Identity): the function returns what the body computes.
  func.setFunctionType(
      builder.getFunctionType(argTypes, ValueRange(results).getTypes()));

  // Verification failures name the node through the op's NameLoc.
  std::string diag;
  {
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      if (!diag.empty())
        return success();
      std::string node = "?";
      if (auto name = dyn_cast<NameLoc>(d.getLocation()))
        node = name.getName().str();
      diag = "node '" + node + "': " + d.str();
      return success();
    });
    if (failed(verify(*module)))
      return sink.error(diag.empty() ? "the imported IR does not verify"
                                     : diag);
  }
  return std::move(module);
}

llvm::Expected<OwningOpRef<ModuleOp>>
qcc::importOnnxFile(MLIRContext &context, StringRef path) {
  Importer importer(context, path);
  return importer.run();
}

std::vector<std::pair<std::string, std::vector<int>>> qcc::supportedOnnxOps() {
  std::vector<std::pair<std::string, std::vector<int>>> out;
  for (const auto &c : onnxConverters())
    out.emplace_back(c.opType, c.versions);
  for (const auto &c : onnxContribConverters())
    out.emplace_back(c.domain.empty() ? c.opType : c.domain + "." + c.opType,
                     c.versions);
  std::sort(out.begin(), out.end());
  return out;
}
