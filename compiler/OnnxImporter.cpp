//===- OnnxImporter.cpp - ONNX protobuf -> qcc dialect --------------------===//
//
// Reads the model with protobuf, validates what ONNX's checker would trust
// (names, references, tensors and their data, declared dimensions:
// validate()), checks it with ONNX's checker, then walks the graph in order
// and maps each node through the converter table: its arity and attribute
// types checked first, its ops verified after. The converters compute every
// result type; ONNX's shape inference is not run (Importer::run says why).
//
//===----------------------------------------------------------------------===//
#include "compiler/OnnxImporter.h"
#include "compiler/LoraMerge.h"
#include "compiler/OnnxConverter.h"
#include "dialects/QccAttrNames.h"

#include "dialects/QccConstants.h"
#include "dialects/QccDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>

#include <fmt/format.h>

#include <limits>

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
    // Unnamed nodes are known by their first output. Names are shown as
    // UTF-8 even where the model's are not (validate() refuses those).
    std::string name = node.name();
    if (name.empty() && node.output_size() > 0)
      name = "producing " + node.output(0);
    return error("node '" + llvm::json::fixUTF8(name) + "' (" +
                 llvm::json::fixUTF8(node.op_type()) + "): " + reason);
  }
};

/// Where an external tensor's bytes lie: [offset, offset + length) of file.
struct ExternalRange {
  std::string file;
  uint64_t offset = 0, length = 0;
};

/// The bytes one element of an initializer of ONNX type `dataType` takes in
/// raw data, 0 for a type qcc does not import.
int64_t rawElementBytes(int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto_DataType_FLOAT:
  case onnx::TensorProto_DataType_INT32:
    return 4;
  case onnx::TensorProto_DataType_INT64:
    return 8;
  case onnx::TensorProto_DataType_FLOAT16:
  case onnx::TensorProto_DataType_BFLOAT16:
    return 2;
  case onnx::TensorProto_DataType_INT8:
  case onnx::TensorProto_DataType_UINT8:
  case onnx::TensorProto_DataType_BOOL:
    return 1;
  default:
    return 0;
  }
}

/// The number of elements of `dims`, or an error if a dimension is negative
/// or the count exceeds kMaxElements (checked, so it cannot overflow).
llvm::Expected<int64_t> elementCount(llvm::ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     fmt::format("negative dimension {}", d));
    if (d > kMaxElements)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("dimension {} exceeds qcc's limit of 2^40", d));
    if (d != 0 && n > kMaxElements / d)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "more elements than qcc's limit of 2^40");
    n *= d;
  }
  return n;
}

class Importer {
public:
  Importer(MLIRContext &ctx, StringRef path, const ImportOptions &options)
      : ctx(ctx), builder(&ctx), sink{path.str()}, path(path.str()),
        options(options) {}
  /// A model held in memory: `name` stands for the file (no external data).
  Importer(MLIRContext &ctx, StringRef bytes, StringRef name)
      : ctx(ctx), builder(&ctx), sink{name.str()}, path(name.str()),
        bytes(bytes), inMemory(true) {}

  llvm::Expected<OwningOpRef<ModuleOp>> run();

private:
  llvm::Error load(onnx::ModelProto &model);
  llvm::Error checkOpset(const onnx::ModelProto &model);
  llvm::Error collectTypes(const onnx::GraphProto &graph);
  llvm::Expected<RankedTensorType> typeOf(const onnx::TypeProto &t,
                                          const std::string &name,
                                          SmallVector<std::string> *dimNames);
  llvm::Error validate(const onnx::ModelProto &model);
  llvm::Error checkTensor(const onnx::TensorProto &t);
  llvm::Error checkDeclaredShape(const onnx::ValueInfoProto &vi);
  llvm::Expected<ExternalRange> externalRange(const onnx::TensorProto &t);
  llvm::Error importInitializer(const onnx::TensorProto &t);
  llvm::Error mergeLoraAdapters(const onnx::GraphProto &graph);
  llvm::Error findRuntimeLora(const onnx::GraphProto &graph);
  llvm::Error addLoraBranch(const onnx::NodeProto &reader,
                            const onnx::NodeProto &at);
  bool routesRows(Value v);
  bool chosenByRouter(Value indices);
  bool carriesTokens(Value v);
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
  ImportOptions options;
  /// The model's bytes when it is held in memory (inMemory).
  StringRef bytes;
  bool inMemory = false;
  int64_t opset = 0;
  /// The opset the model imports for each domain ("" for ai.onnx).
  llvm::StringMap<int64_t> domainOpsets;
  /// The newest default-domain opset the installed ONNX library knows; above
  /// it, its checker would apply older schemas.
  int64_t libraryOpset = 0;
  llvm::StringMap<Value> values;
  /// uint8 initializers, for the converters that read them (readsPacked).
  llvm::StringMap<PackedTensor> packedTensors;
  llvm::StringMap<onnx::TypeProto> types;
  /// Runtime LoRA adapters: per adapter, its targets; per adapted node, the
  /// (adapter index, target) pairs.
  std::vector<std::vector<LoraTarget>> loraTargets;
  std::map<const onnx::NodeProto *,
           std::vector<std::pair<size_t, const LoraTarget *>>>
      loraReaders;
  /// Where each adapted node's update is added: after the node, or after
  /// the bias Add that is its only reader (so that raise-linear still folds
  /// the bias into the linear).
  std::map<const onnx::NodeProto *, const onnx::NodeProto *> loraAttach;
  /// routesRows' answers so far.
  llvm::DenseMap<Value, bool> routed;
  /// The first error diagnostic of the verifier (run()'s handler).
  std::string diagnostic;
};

} // namespace

llvm::Error Importer::load(onnx::ModelProto &model) {
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  if (!inMemory) {
    // A device or a pipe (qcc /dev/zero) never ends: only a regular file of
    // at most protobuf's limit is read.
    llvm::sys::fs::file_status status;
    if (std::error_code ec = llvm::sys::fs::status(path, status))
      return sink.error("cannot read the file: " + ec.message());
    if (status.type() != llvm::sys::fs::file_type::regular_file)
      return sink.error("cannot read the file: not a regular file");
    if (status.getSize() > kMaxModelBytes)
      return sink.error(fmt::format(
          "the file is {} bytes; an ONNX model is at most {} bytes "
          "(protobuf's limit; larger weights belong in external data)",
          status.getSize(), kMaxModelBytes));
    auto read = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
    if (!read)
      return sink.error("cannot read the file: " + read.getError().message());
    buffer = std::move(*read);
    bytes = buffer->getBuffer();
  }
  if (bytes.empty())
    return sink.error("the file is empty");
  if (bytes.size() > kMaxModelBytes ||
      !model.ParseFromArray(bytes.data(), bytes.size()))
    return sink.error("not a valid ONNX model (the protobuf does not parse; "
                      "truncated or corrupted?)");
  if (!model.has_graph() || model.graph().node_size() == 0)
    return sink.error("the model has no graph or an empty graph (truncated?)");
  // What the checker reads is checked first: it trusts a tensor's data and
  // its references.
  if (auto err = validate(model))
    return err;
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
    if (inMemory)
      onnx::checker::check_model(model);
    else
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
      if (d.dim_value() < 0 || d.dim_value() > kMaxElements)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            fmt::format("value '{}' has dimension {} (qcc takes 0 to 2^40)",
                        llvm::json::fixUTF8(name), d.dim_value()));
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

/// Errors without the file's name, for the caller to say whose they are.
llvm::Error reason(const Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
}

/// Where external tensor `t`'s bytes lie, checked: a relative location
/// inside the model's folder naming a regular file, offset and length decimal
/// numbers (checked conversion) with offset + length inside the file. Errors
/// give the reason only.
llvm::Expected<ExternalRange>
Importer::externalRange(const onnx::TensorProto &t) {
  auto fail = [&](const Twine &why) { return reason(why); };
  if (inMemory)
    return fail("external data is not supported for a model held in memory");
  std::string location;
  std::optional<uint64_t> offset, length;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
      continue;
    }
    if (kv.key() != "offset" && kv.key() != "length")
      continue; // checksum and the like
    uint64_t v;
    if (StringRef(kv.value()).getAsInteger(10, v) ||
        v > (uint64_t)std::numeric_limits<int64_t>::max())
      return fail(fmt::format("external data {} '{}' is not a number of "
                              "bytes",
                              kv.key(), llvm::json::fixUTF8(kv.value())));
    (kv.key() == "offset" ? offset : length) = v;
  }
  if (location.empty() || llvm::sys::path::is_absolute(location) ||
      StringRef(location).contains("..") || !llvm::json::isUTF8(location))
    return fail("invalid external data location '" +
                llvm::json::fixUTF8(location) + "'");
  SmallString<256> file(llvm::sys::path::parent_path(path));
  llvm::sys::path::append(file, location);
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(file, status))
    return fail("cannot read external data file '" + file + "': " +
                ec.message());
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return fail("external data file '" + file + "' is not a regular file");
  uint64_t size = status.getSize();
  ExternalRange r{file.str().str(), offset.value_or(0), 0};
  if (r.offset > size)
    return fail(fmt::format("external data offset {} lies outside '{}' ({} "
                            "bytes)",
                            r.offset, r.file, size));
  r.length = length.value_or(size - r.offset);
  if (r.length > size - r.offset)
    return fail(fmt::format("external data [{}, {} + {}) lies outside '{}' "
                            "({} bytes)",
                            r.offset, r.offset, r.length, r.file, size));
  return r;
}

/// A tensor (an initializer, a tensor attribute) checked before ONNX or a
/// converter reads it: dimensions, element type, and data that holds exactly
/// the elements its dimensions say (raw, external or typed fields). Errors
/// give the reason only.
llvm::Error Importer::checkTensor(const onnx::TensorProto &t) {
  auto fail = [&](const Twine &why) { return reason(why); };
  auto n = elementCount(SmallVector<int64_t>(t.dims().begin(), t.dims().end()));
  if (!n)
    return fail(llvm::toString(n.takeError()));
  int64_t eb = rawElementBytes(t.data_type());
  if (eb == 0)
    return fail("unsupported element type " + onnxTypeName(t.data_type()));
  int64_t bytes = *n * eb; // <= 2^43
  if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    auto range = externalRange(t);
    if (!range)
      return range.takeError();
    if ((int64_t)range->length != bytes)
      return fail(fmt::format("holds {} bytes of external data, but its "
                              "shape needs {}",
                              range->length, bytes));
    return llvm::Error::success();
  }
  if (t.has_raw_data()) {
    if ((int64_t)t.raw_data().size() != bytes)
      return fail(fmt::format("holds {} bytes of data, but its shape needs {}",
                              t.raw_data().size(), bytes));
    return llvm::Error::success();
  }
  int64_t count = t.data_type() == onnx::TensorProto_DataType_FLOAT
                      ? t.float_data_size()
                  : t.data_type() == onnx::TensorProto_DataType_INT64
                      ? t.int64_data_size()
                      : t.int32_data_size();
  if (count != *n)
    return fail(fmt::format("its data does not hold the {} elements its "
                            "shape needs",
                            *n));
  return llvm::Error::success();
}

/// A declared value type's dimensions: the converters read them (validate()
/// runs this on every declared value).
llvm::Error Importer::checkDeclaredShape(const onnx::ValueInfoProto &vi) {
  if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape())
    return llvm::Error::success(); // typeOf refuses where it matters
  SmallVector<int64_t> dims;
  for (const auto &d : vi.type().tensor_type().shape().dim()) {
    if (d.has_dim_param() && !llvm::json::isUTF8(d.dim_param()))
      return sink.error("value '" + llvm::json::fixUTF8(vi.name()) +
                        "' has a dimension name that is not UTF-8");
    if (d.has_dim_value())
      dims.push_back(d.dim_value());
  }
  if (auto n = elementCount(dims); !n)
    return sink.error("value '" + llvm::json::fixUTF8(vi.name()) +
                      "': " + llvm::toString(n.takeError()));
  return llvm::Error::success();
}

/// The graph checked before anything reads it, whatever the opset (ONNX's
/// checker is skipped above the library's opsets and does not guard against
/// all of this): every name UTF-8 (the artifact's
/// manifest is JSON), every reference to a value defined before, each value
/// assigned once, no subgraphs, every tensor and declared shape sound.
llvm::Error Importer::validate(const onnx::ModelProto &model) {
  const onnx::GraphProto &graph = model.graph();
  if (graph.sparse_initializer_size() > 0)
    return sink.error("sparse initializers are not supported");
  auto notUtf8 = [&](StringRef kind, const std::string &name) {
    return sink.error(kind + " '" + llvm::json::fixUTF8(name) +
                      "' is not valid UTF-8");
  };
  llvm::StringSet<> defined;
  for (const auto &list : {graph.input(), graph.value_info(), graph.output()})
    for (const auto &vi : list) {
      if (!llvm::json::isUTF8(vi.name()))
        return notUtf8("value name", vi.name());
      if (auto err = checkDeclaredShape(vi))
        return err;
    }
  for (const auto &in : graph.input())
    defined.insert(in.name());
  for (const auto &t : graph.initializer()) {
    if (!llvm::json::isUTF8(t.name()))
      return notUtf8("initializer name", t.name());
    if (auto err = checkTensor(t))
      return sink.error("initializer '" + t.name() +
                        "': " + llvm::toString(std::move(err)));
    defined.insert(t.name());
  }
  for (const auto &node : graph.node()) {
    for (const std::string *s : {&node.name(), &node.op_type(),
                                 &node.domain()})
      if (!llvm::json::isUTF8(*s))
        return sink.nodeError(node, "the node's name, op type or domain is "
                                    "not valid UTF-8");
    for (const auto &list : {node.input(), node.output()})
      for (const std::string &name : list)
        if (!llvm::json::isUTF8(name))
          return sink.nodeError(node, "value name '" +
                                          llvm::json::fixUTF8(name) +
                                          "' is not valid UTF-8");
    for (const std::string &name : node.input())
      if (!name.empty() && !defined.contains(name))
        return sink.nodeError(node, "input '" + name + "' is not defined");
    for (const auto &a : node.attribute()) {
      if (!llvm::json::isUTF8(a.name()) || !llvm::json::isUTF8(a.s()))
        return sink.nodeError(node, "attribute '" +
                                        llvm::json::fixUTF8(a.name()) +
                                        "' is not valid UTF-8");
      if (a.has_g() || a.graphs_size() > 0 ||
          a.type() == onnx::AttributeProto::GRAPH ||
          a.type() == onnx::AttributeProto::GRAPHS)
        return sink.nodeError(node, "attribute '" + a.name() +
                                        "' is a subgraph (qcc has no "
                                        "control flow)");
      for (const std::string &v : a.strings())
        if (!llvm::json::isUTF8(v))
          return sink.nodeError(node, "attribute '" + a.name() +
                                          "' is not valid UTF-8");
      SmallVector<const onnx::TensorProto *> tensors;
      if (a.has_t())
        tensors.push_back(&a.t());
      for (const auto &t : a.tensors())
        tensors.push_back(&t);
      for (const onnx::TensorProto *t : tensors)
        if (auto err = checkTensor(*t))
          return sink.nodeError(node, "attribute '" + a.name() + "': " +
                                          llvm::toString(std::move(err)));
    }
    for (const std::string &name : node.output()) {
      if (name.empty())
        continue;
      if (!defined.insert(name).second)
        return sink.nodeError(node, "output '" + name + "' is already "
                                    "defined (an ONNX graph assigns each "
                                    "value once)");
    }
  }
  return llvm::Error::success();
}

/// The bytes of external tensor `t` (externalRange checked them).
llvm::Expected<std::string>
Importer::readExternal(const onnx::TensorProto &t) {
  auto range = externalRange(t);
  if (!range)
    return sink.error("initializer '" + t.name() +
                      "': " + llvm::toString(range.takeError()));
  auto buffer = llvm::MemoryBuffer::getFileSlice(range->file, range->length,
                                                 range->offset);
  if (!buffer)
    return sink.error("initializer '" + t.name() + "': cannot read external "
                      "data file '" + range->file + "': " +
                      buffer.getError().message());
  return (*buffer)->getBuffer().str();
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

/// Adds each adapter's updates to the weights they name (their constants,
/// which no node has read yet).
llvm::Error Importer::mergeLoraAdapters(const onnx::GraphProto &graph) {
  for (const LoraAdapter &adapter : options.loraMerges) {
    auto targets = findLoraTargets(graph, adapter);
    if (!targets)
      return sink.error("--lora " + llvm::toString(targets.takeError()));
    for (const LoraTarget &target : *targets) {
      auto constant = values.lookup(target.initializer).getDefiningOp<ConstantOp>();
      auto weight = constant ? getF32Values(constant.getValue()) : std::nullopt;
      if (!weight)
        return sink.error("--lora " + adapter.dir + ": the weight '" +
                          target.initializer + "' of module '" +
                          target.factors->module + "' has no float data");
      addLoraUpdate(target, *weight);
      auto type = cast<RankedTensorType>(constant.getType());
      constant.setValueAttr(
          makeFloatElements(type, *weight, blobName(constant.getValue(),
                                                    target.initializer)));
    }
  }
  return llvm::Error::success();
}

llvm::Error Importer::findRuntimeLora(const onnx::GraphProto &graph) {
  if (options.loraAdapters.empty())
    return llvm::Error::success();
  loraTargets.reserve(options.loraAdapters.size());
  SmallVector<Attribute> names;
  for (const auto &[name, adapter] : options.loraAdapters) {
    auto targets = findLoraTargets(graph, adapter);
    if (!targets)
      return sink.error("--lora-adapter " + name + "=" +
                        llvm::toString(targets.takeError()));
    for (const LoraTarget &t : *targets)
      if (t.factors->kind != LoraFactors::Kind::Linear)
        return sink.error("--lora-adapter " + name + "=" + adapter.dir +
                          ": module '" + t.factors->module +
                          "' is an embedding: runtime adapters apply to "
                          "linears only (merge it with --lora)");
    loraTargets.push_back(std::move(*targets));
    names.push_back(builder.getStringAttr(name));
  }
  for (size_t j = 0; j < loraTargets.size(); ++j)
    for (const LoraTarget &t : loraTargets[j])
      loraReaders[t.reader].push_back({j, &t});
  std::map<std::string, std::vector<const onnx::NodeProto *>> consumers;
  for (const auto &n : graph.node())
    for (const auto &in : n.input())
      consumers[in].push_back(&n);
  llvm::StringSet<llvm::MallocAllocator> initializerNames;
  for (const auto &t : graph.initializer())
    initializerNames.insert(t.name());
  for (const auto &entry : loraReaders) {
    // Named, not bound: clang 14's lambdas cannot capture a binding.
    const onnx::NodeProto *reader = entry.first;
    const onnx::NodeProto *at = reader;
    const auto &readers = consumers[reader->output(0)];
    bool isOutput = llvm::any_of(graph.output(), [&](const auto &o) {
      return o.name() == reader->output(0);
    });
    if (readers.size() == 1 && !isOutput && readers[0]->op_type() == "Add" &&
        readers[0]->domain().empty() && readers[0]->input_size() == 2) {
      const onnx::NodeProto *add = readers[0];
      const std::string &other = add->input(0) == reader->output(0)
                                     ? add->input(1)
                                     : add->input(0);
      if (initializerNames.contains(other))
        at = add;
    }
    loraAttach[at] = reader;
  }
  auto module = builder.getInsertionBlock()->getParentOp()
                    ->getParentOfType<ModuleOp>();
  module->setAttr(kLoraAdaptersAttr, builder.getArrayAttr(names));
  return llvm::Error::success();
}

/// Whether `v` or a value it is computed from satisfies `matches`.
static bool computedFrom(Value v, llvm::function_ref<bool(Value)> matches) {
  SmallVector<Value> stack{v};
  llvm::DenseSet<Value> seen;
  while (!stack.empty()) {
    Value cur = stack.pop_back_val();
    if (!seen.insert(cur).second)
      continue;
    if (matches(cur))
      return true;
    if (Operation *def = cur.getDefiningOp())
      for (Value operand : def->getOperands())
        stack.push_back(operand);
  }
  return false;
}

/// Whether `indices` derive from a top_k or non_zero (a router's choice).
bool Importer::chosenByRouter(Value indices) {
  return computedFrom(indices, [](Value v) {
    return v.getDefiningOp<TopKOp>() || v.getDefiningOp<NonZeroOp>();
  });
}

/// Whether float `v` is computed from the tokens' hidden states: it reaches
/// an embedding lookup (a gather of a float constant) or a float input, not
/// only positions and constants (Cohere's rotary angles, gathered through a
/// non_zero of a length mask, are not).
bool Importer::carriesTokens(Value v) {
  return computedFrom(v, [](Value cur) {
    if (!isa<FloatType>(cast<ShapedType>(cur.getType()).getElementType()))
      return false;
    if (isa<BlockArgument>(cur))
      return true;
    auto g = cur.getDefiningOp<GatherOp>();
    return g && g.getInput().getDefiningOp<ConstantOp>();
  });
}

/// Whether some row of `root` may come from a float activation's rows gathered
/// along a leading axis by a router's choice (a mixture-of-experts expert's
/// routed tokens), so that its rows are no longer the batch's tokens in
/// order. A scatter restores the order (its data is in token order); a
/// gather along the last axis moves features, not rows; gathers of
/// constants (embedding tables, cos/sin caches), of integers (shapes) and by
/// positions or ids are lookups.
bool Importer::routesRows(Value root) {
  // A leading-axis gather of a computed float value by indices that a
  // router chose (top_k, non_zero: data-dependent routing). Lookups by
  // positions or ids (rotary tables, embeddings, a cache's gathered
  // present) keep their rows' tokens.
  auto gathersRows = [&](Operation *def) {
    Value data = def->getNumOperands() > 1 ? def->getOperand(0) : Value();
    if (!data || data.getDefiningOp<ConstantOp>() ||
        !isa<FloatType>(cast<ShapedType>(data.getType()).getElementType()))
      return false;
    auto leading = [&](int64_t axis) {
      int64_t rank = cast<RankedTensorType>(data.getType()).getRank();
      return (axis < 0 ? axis + rank : axis) < rank - 1;
    };
    bool rowGather = false;
    if (auto g = dyn_cast<GatherOp>(def))
      rowGather = leading(g.getAxis());
    else if (auto g = dyn_cast<GatherElementsOp>(def))
      rowGather = leading(g.getAxis());
    else
      rowGather = isa<GatherNdOp>(def);
    return rowGather && chosenByRouter(def->getOperand(1)) &&
           carriesTokens(data);
  };
  // Iterative post-order over the producers (a deep graph would overflow
  // a recursive walk), answers kept in `routed`.
  struct Frame {
    Value v;
    unsigned next;
  };
  SmallVector<Frame> stack;
  if (!routed.count(root))
    stack.push_back({root, 0});
  while (!stack.empty()) {
    size_t top = stack.size() - 1;
    Value v = stack[top].v;
    Operation *def = v.getDefiningOp();
    if (stack[top].next == 0) {
      // Leaves: arguments, constants and scatters keep the tokens' order;
      // a router's gather is where it is lost (decided once).
      bool gathers = def && gathersRows(def);
      if (!def || gathers ||
          isa<ConstantOp, ScatterNdOp, ScatterElementsOp>(def)) {
        routed[v] = gathers;
        stack.pop_back();
        continue;
      }
    }
    if (stack[top].next < def->getNumOperands()) {
      Value operand = def->getOperand(stack[top].next++);
      if (!routed.count(operand))
        stack.push_back({operand, 0});
      continue;
    }
    bool any = false;
    for (Value operand : def->getOperands())
      any |= routed.lookup(operand);
    routed[v] = any;
    stack.pop_back();
  }
  return routed.lookup(root);
}

/// After `at` (an adapted MatMul / Gemm `reader`, or its bias Add): its
/// result plus qcc.lora of the reader's input, the adapters' factors stacked
/// [J, R, K] and [J, N, R] (ranks padded with zeros, PEFT's scaling folded
/// into B, zeros for the adapters that leave this linear alone).
llvm::Error Importer::addLoraBranch(const onnx::NodeProto &node,
                                    const onnx::NodeProto &at) {
  const auto &uses = loraReaders.at(&node);
  Value x = values.lookup(node.input(0));
  Value y = at.output_size() > 0 ? values.lookup(at.output(0)) : Value();
  auto yt = y ? dyn_cast<RankedTensorType>(y.getType()) : RankedTensorType();
  const LoraFactors &first = *uses.front().second->factors;
  int64_t K = first.cols, N = first.rows;
  if (!x || !yt || !isa<FloatType>(yt.getElementType()))
    return sink.nodeError(node, "--lora-adapter: the adapted linear's result "
                                "is not a float tensor");
  // Rows must be the batch's tokens in order for each to know its sequence:
  // not rows gathered from them (a mixture-of-experts expert's routed
  // tokens).
  if (routesRows(x))
    return sink.nodeError(node, "--lora-adapter: module '" +
                                    uses.front().second->factors->module +
                                    "': its linear reads rows gathered from "
                                    "the batch's tokens (a mixture-of-experts "
                                    "expert's routed tokens), so a row's "
                                    "sequence and adapter are unknown; merge it "
                                    "with --lora");
  int64_t J = (int64_t)options.loraAdapters.size(), R = 0;
  for (const auto &[j, t] : uses)
    R = std::max(R, t->factors->rank);
  std::vector<float> a((size_t)(J * R * K), 0.f), b((size_t)(J * N * R), 0.f);
  for (const auto &[j, t] : uses) {
    const LoraFactors &f = *t->factors;
    for (int64_t r = 0; r < f.rank; ++r)
      for (int64_t k = 0; k < K; ++k)
        a[(size_t)((j * R + r) * K + k)] = f.a[(size_t)(r * K + k)];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t r = 0; r < f.rank; ++r)
        b[(size_t)((j * N + n) * R + r)] =
            (float)(f.scaling * f.b[(size_t)(n * f.rank + r)]);
  }
  Location loc = NameLoc::get(builder.getStringAttr(node.name()),
                              FileLineColLoc::get(&ctx, path, 0, 0));
  auto f32 = builder.getF32Type();
  std::string weight = uses.front().second->initializer;
  auto constant = [&](ArrayRef<int64_t> shape, const std::vector<float> &v,
                      const std::string &name) {
    return ConstantOp::create(
               builder, loc,
               makeFloatElements(RankedTensorType::get(shape, f32), v, name))
        .getResult();
  };
  Value aStack = constant({J, R, K}, a, weight + ".lora_a");
  Value bStack = constant({J, N, R}, b, weight + ".lora_b");
  Value delta = LoraOp::create(builder, loc, yt, x, aStack, bStack);
  if (failed(verify(delta.getDefiningOp())))
    return sink.nodeError(node, "--lora-adapter: the adapter's factors do not "
                                "fit the linear's input and result (" +
                                diagnostic + ")");
  values[at.output(0)] = AddOp::create(builder, loc, yt, y, delta);
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
  // What the converter may trust: the node's arity and its attributes' types.
  if (std::string why = checkArity(node, (*converter)->arity); !why.empty())
    return sink.nodeError(node, why);
  for (const auto &a : node.attribute()) {
    auto expected = attributeType(a.name());
    if (expected != onnx::AttributeProto::UNDEFINED && a.type() != expected)
      return sink.nodeError(
          node, "attribute '" + a.name() + "' must be of type " +
                    onnx::AttributeProto_AttributeType_Name(expected) +
                    ", not " +
                    (onnx::AttributeProto_AttributeType_IsValid(a.type())
                         ? onnx::AttributeProto_AttributeType_Name(
                               (onnx::AttributeProto_AttributeType)a.type())
                         : std::to_string(a.type())));
  }

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
    // Where the model declares no type, the converter computes one.
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

  // checkArity: output 0 is named.
  std::string locName = node.name().empty() ? node.output(0) : node.name();
  Location loc = NameLoc::get(builder.getStringAttr(locName),
                              FileLineColLoc::get(&ctx, path, 0, 0));
  ConvertContext cc(builder, loc, node, std::move(inputs),
                    std::move(resultTypes));
  cc.packed = std::move(packed);
  Block *block = builder.getInsertionBlock();
  Operation *last = block->empty() ? nullptr : &block->back();
  auto results = (*converter)->convert(cc);
  if (failed(results))
    return sink.nodeError(node, cc.error.empty() ? "conversion failed"
                                                 : cc.error);
  if (!cc.typeConflict.empty())
    return sink.nodeError(node, cc.typeConflict);
  // The next converter, and the raising patterns, may trust these ops: each
  // verifies, and no result holds more than kMaxElements.
  diagnostic.clear();
  for (Operation &op : llvm::make_range(
           last ? std::next(last->getIterator()) : block->begin(),
           block->end())) {
    if (failed(verify(&op)))
      return sink.nodeError(node, diagnostic.empty()
                                      ? "the converted op does not verify"
                                      : diagnostic);
    for (Type t : op.getResultTypes())
      if (auto rt = dyn_cast<RankedTensorType>(t)) {
        SmallVector<int64_t> dims;
        for (int64_t d : rt.getShape())
          if (!ShapedType::isDynamic(d))
            dims.push_back(d);
        if (auto n = elementCount(dims); !n)
          return sink.nodeError(node, "a result would have " +
                                          llvm::toString(n.takeError()));
      }
  }
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
  // No ONNX shape inference: the converters compute every result type
  // (as they always did above the library's opsets), and ONNX 1.12's
  // inference functions trust attribute values and input types that the
  // converters check (LayerNormalization's axis indexes the input's shape;
  // data propagation dereferences a missing type). Types the model itself
  // declares (value_info) are still checked against the computed ones.
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
  if (auto err = mergeLoraAdapters(graph))
    return std::move(err);
  if (auto err = findRuntimeLora(graph))
    return std::move(err);
  {
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      if (diagnostic.empty() && d.getSeverity() == DiagnosticSeverity::Error)
        diagnostic = d.str();
      return success();
    });
    for (const auto &node : graph.node()) {
      if (auto err = importNode(node))
        return std::move(err);
      if (auto it = loraAttach.find(&node); it != loraAttach.end())
        if (auto err = addLoraBranch(*it->second, node))
          return std::move(err);
    }
  }

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
qcc::importOnnxFile(MLIRContext &context, StringRef path,
                    const ImportOptions &options) {
  Importer importer(context, path, options);
  return importer.run();
}

llvm::Expected<OwningOpRef<ModuleOp>>
qcc::importOnnxBytes(MLIRContext &context, StringRef bytes, StringRef name) {
  Importer importer(context, bytes, name);
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
