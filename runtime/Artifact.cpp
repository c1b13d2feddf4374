//===- Artifact.cpp - reading and validating .qpkg files ------------------===//
#include "runtime/Artifact.h"

#include "format/Sparse24.h"

#include <functional>
#include <set>

#include <cstring>
#include <fstream>
#include <stdexcept>

using namespace qcc::rt;
using nlohmann::json;

namespace {
struct Loader {
  std::string path;
  [[noreturn]] void fail(const std::string &why) const {
    throw std::runtime_error(path + ": " + why);
  }
};
} // namespace

static Port parsePort(const Loader &l, const json &j) {
  Port p;
  p.name = j.at("name").get<std::string>();
  p.value = j.at("value").get<int64_t>();
  if (!parseDType(j.at("dtype").get<std::string>(), p.dtype))
    l.fail("port '" + p.name + "' has an unknown dtype");
  p.shape = j.at("shape").get<Shape>();
  p.dims = j.value("dims", std::vector<std::string>(p.shape.size()));
  return p;
}

/// The launch record of kernel node `n` refers only to its operands and
/// results, and converts only f32 constants to f16.
static void checkLaunch(const Loader &l, const Node &n, const KernelRecord &k,
                        const Artifact &a) {
  namespace format = qcc::format;
  using format::TensorRef;
  std::string where = "manifest: kernel " + k.function + "/" + k.region;
  if (n.attrs.value("kind", std::string()) != format::spelling(k.kind))
    l.fail(where + ": its node says kind " +
           n.attrs.value("kind", json("")).dump());
  if (!k.unsupported.empty())
    return;
  if (k.launch.maxIndex(TensorRef::Side::Operand) >= (int64_t)n.inputs.size() ||
      k.launch.maxIndex(TensorRef::Side::Result) >= (int64_t)n.outputs.size())
    l.fail(where + ": launch record refers to an operand or result the "
                   "region does not have");
  for (const format::LaunchStep &s : k.launch.steps)
    for (const format::Param &p : s.params)
      if (p.kind == format::ParamKind::OperandF16) {
        int64_t id = n.inputs[p.tensor.index];
        const Tensor *c = a.constant(id);
        if (!c || c->dtype() != DType::F32)
          l.fail(where + ": parameter " + p.name +
                 " converts a value that is not an f32 constant to f16");
      }
}

/// Every sparse_2_4 node of `fn` whose operands are constants (in a kernel
/// body: bound to constants of the enclosing node) stores a valid [N, K]
/// weight: shapes and types agree, K % 32 == 0, and every group's metadata
/// names two distinct ascending positions (format/Sparse24.h). Checked once
/// per metadata constant, here, so that the CPU's sparse GEMM can trust it.
static void checkSparse24(const Loader &l, const Artifact &a,
                          const Function &fn, std::set<int64_t> &checked) {
  namespace sp = qcc::format::sparse24;
  std::function<void(const std::vector<Node> &,
                     const std::function<int64_t(int64_t)> &)>
      walk = [&](const std::vector<Node> &nodes,
                 const std::function<int64_t(int64_t)> &outer) {
        for (const Node &n : nodes) {
          if (n.body) {
            const KernelBody &body = *n.body;
            walk(body.nodes, [&](int64_t id) {
              for (size_t i = 0; i < body.args.size(); ++i)
                if (body.args[i] == id)
                  return outer(n.inputs[i]);
              return int64_t(-1);
            });
            continue;
          }
          if (n.kind != OpKind::Sparse24 || n.inputs.size() != 2 ||
              n.outputs.size() != 1)
            continue;
          int64_t valuesId = outer(n.inputs[0]), metaId = outer(n.inputs[1]);
          const Tensor *values = a.constant(valuesId),
                       *meta = a.constant(metaId);
          if (!values || !meta || !checked.insert(metaId).second)
            continue;
          auto fail = [&](const std::string &why) {
            l.fail("function '" + fn.name + "', node '" + n.name +
                   "' (sparse_2_4): " + why);
          };
          const auto &[type, shape] = a.valueType(n.outputs[0]);
          if (values->rank() != 2 || meta->rank() != 2 ||
              meta->dtype() != DType::I32 || shape.size() != 2 ||
              type != values->dtype())
            fail("needs values [N, K/2] and i32 meta [N, K/32] of an [N, K] "
                 "result of the values' type, got values " +
                 shapeString(values->shape()) + " " +
                 dtypeName(values->dtype()) + ", meta " +
                 shapeString(meta->shape()) + " " + dtypeName(meta->dtype()));
          int64_t n0 = values->dim(0),
                  k = values->dim(1) * sp::kGroup / sp::kKept;
          if (k % sp::kKAlignment != 0 || meta->dim(0) != n0 ||
              meta->dim(1) != sp::metaCols(k) || shape[0] != n0 ||
              shape[1] != k)
            fail("values " + shapeString(values->shape()) + ", meta " +
                 shapeString(meta->shape()) + " and result " +
                 shapeString(shape) + " do not describe one [N, K] weight "
                 "with K a multiple of " + std::to_string(sp::kKAlignment));
          if (auto why = sp::validateMeta(meta->data<int32_t>(), n0, k))
            fail("invalid metadata: " + *why);
        }
      };
  walk(fn.nodes, [](int64_t id) { return id; });
}

Artifact Artifact::load(const std::string &path) {
  Loader l{path};
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    l.fail("cannot open the file");
  auto size = (size_t)in.tellg();
  auto bytes = std::make_shared<std::vector<char>>(size);
  in.seekg(0);
  if (!in.read(bytes->data(), size))
    l.fail("cannot read the file");
  return fromBytes(std::move(bytes), path);
}

Artifact Artifact::fromBytes(std::shared_ptr<std::vector<char>> bytes,
                             const std::string &path) {
  Loader l{path};
  size_t size = bytes->size();
  if (size < kHeaderSize)
    l.fail("not a qcc artifact (" + std::to_string(size) +
           " bytes, shorter than the header)");
  Header h;
  std::memcpy(&h, bytes->data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
    l.fail("not a qcc artifact (bad magic)");
  if (h.version != kFormatVersion)
    l.fail("artifact format version " + std::to_string(h.version) +
           " is not supported by this runtime (it reads version " +
           std::to_string(kFormatVersion) + "); recompile the model");
  if (h.fileSize != size)
    l.fail("truncated or padded: the header says " +
           std::to_string(h.fileSize) + " bytes, the file has " +
           std::to_string(size));
  if (crc32Of(bytes->data() + kHeaderSize, size - kHeaderSize) != h.crc32)
    l.fail("corrupted: checksum mismatch");
  if (h.manifestOffset + h.manifestSize > size ||
      h.dataOffset + h.dataSize > size || h.dataOffset % kDataAlignment != 0)
    l.fail("corrupted: sections lie outside the file");

  Artifact a;
  a.path_ = path;
  a.bytes_ = bytes;
  try {
    a.manifest_ = json::parse(bytes->data() + h.manifestOffset,
                              bytes->data() + h.manifestOffset + h.manifestSize);
    const json &m = a.manifest_;
    for (const json &v : m.at("values")) {
      DType t;
      if (!parseDType(v.at("dtype").get<std::string>(), t))
        l.fail("manifest: unknown dtype " + v.at("dtype").dump());
      a.valueTypes_.emplace_back(t, v.at("shape").get<Shape>());
    }
    a.constants_.resize(a.valueTypes_.size());
    const char *data = bytes->data() + h.dataOffset;
    for (const json &c : m.at("constants")) {
      int64_t id = c.at("value").get<int64_t>();
      uint64_t off = c.at("offset").get<uint64_t>(),
               sz = c.at("size").get<uint64_t>();
      if (id < 0 || id >= (int64_t)a.valueTypes_.size())
        l.fail("manifest: constant refers to unknown value " +
               std::to_string(id));
      auto &[t, shape] = a.valueTypes_[id];
      if (off + sz > h.dataSize ||
          sz != (uint64_t)numElements(shape) * dtypeSize(t))
        l.fail("manifest: constant " + std::to_string(id) +
               " does not fit the data section");
      a.constants_[id] = Tensor::view(t, shape, data + off);
    }
    std::string function; // the one being parsed, for errors
    std::function<Node(const json &)> parseNode = [&](const json &n) {
      Node node;
      node.name = n.value("name", "");
      std::string op = n.at("op").get<std::string>();
      std::optional<OpKind> kind = format::parseOpKind(op);
      if (!kind)
        l.fail("manifest: function '" + function + "', node '" + node.name +
               "': unknown op '" + op +
               "' (compiled by a different qcc? recompile the model)");
      node.kind = *kind;
      node.inputs = n.at("in").get<std::vector<int64_t>>();
      node.outputs = n.at("out").get<std::vector<int64_t>>();
      node.attrs = n.value("attrs", json::object());
      auto known = [&](int64_t id) {
        return id >= 0 && id < (int64_t)a.valueTypes_.size();
      };
      for (int64_t id : node.inputs)
        if (id >= (int64_t)a.valueTypes_.size())
          l.fail("manifest: node '" + node.name + "' reads unknown value");
      for (int64_t id : node.outputs)
        if (!known(id))
          l.fail("manifest: node '" + node.name + "' writes unknown value");
      if (n.contains("body") != (node.kind == OpKind::Kernel))
        l.fail("manifest: function '" + function + "', node '" + node.name +
               "' (" + op + "): " +
               (node.kind == OpKind::Kernel ? "a kernel without a body"
                                            : "a body on an op that is no "
                                              "kernel"));
      if (n.contains("body")) {
        auto body = std::make_shared<KernelBody>();
        const json &b = n.at("body");
        body->args = b.at("args").get<std::vector<int64_t>>();
        body->yields = b.at("yield").get<std::vector<int64_t>>();
        for (const json &inner : b.at("nodes"))
          body->nodes.push_back(parseNode(inner));
        if (body->args.size() != node.inputs.size() ||
            body->yields.size() != node.outputs.size())
          l.fail("manifest: kernel '" + node.name +
                 "' has a body that does not match its operands/results");
        for (int64_t id : body->args)
          if (!known(id))
            l.fail("manifest: kernel '" + node.name + "' binds unknown value");
        for (int64_t id : body->yields)
          if (!known(id))
            l.fail("manifest: kernel '" + node.name + "' yields unknown value");
        node.body = std::move(body);
      }
      return node;
    };
    auto parseFunctions = [&](const json &list, std::vector<Function> &out) {
      for (const json &f : list) {
        Function fn;
        fn.name = f.at("name").get<std::string>();
        function = fn.name;
        for (const json &p : f.at("inputs"))
          fn.inputs.push_back(parsePort(l, p));
        for (const json &p : f.at("outputs"))
          fn.outputs.push_back(parsePort(l, p));
        for (const json &n : f.at("nodes"))
          fn.nodes.push_back(parseNode(n));
        out.push_back(std::move(fn));
      }
    };
    parseFunctions(m.at("functions"), a.functions_);
    if (m.contains("gpu_functions"))
      parseFunctions(m.at("gpu_functions"), a.gpuFunctions_);
    std::set<int64_t> checkedMeta;
    for (const auto *list : {&a.functions_, &a.gpuFunctions_})
      for (const Function &fn : *list)
        checkSparse24(l, a, fn, checkedMeta);
    if (m.contains("kernels"))
      for (const json &k : m.at("kernels")) {
        KernelRecord r;
        r.function = k.value("function", "");
        r.region = k.value("region", "");
        auto kind = format::parseKernelKind(k.value("kind", ""));
        if (!kind)
          l.fail("manifest: kernel " + r.region + " has unknown kind " +
                 k.value("kind", json("")).dump());
        r.kind = *kind;
        r.entry = k.value("entry", "");
        r.unsupported = k.value("unsupported", "");
        if (r.unsupported.empty()) {
          if (!k.contains("launch"))
            l.fail("manifest: kernel " + r.region + " has no launch record");
          try {
            r.launch = format::fromJson(k.at("launch"));
          } catch (const std::runtime_error &e) {
            l.fail("manifest: kernel " + r.function + "/" + r.region + ": " +
                   e.what());
          }
        }
        if (k.contains("binaries"))
          for (auto &[target, b] : k.at("binaries").items()) {
            uint64_t off = b.at("offset").get<uint64_t>(),
                     sz = b.at("size").get<uint64_t>();
            if (off + sz > h.dataSize)
              l.fail("manifest: kernel " + r.region + " binary " + target +
                     " lies outside the data");
            r.binaries[target] = {off, sz};
          }
        a.kernels_.push_back(std::move(r));
      }
    for (const Function &fn : a.gpuFunctions_)
      for (const Node &n : fn.nodes)
        if (n.body) {
          int64_t k = n.attrs.value("kernel", int64_t(-1));
          if (k >= (int64_t)a.kernels_.size())
            l.fail("manifest: kernel node '" + n.name +
                   "' refers to unknown kernel " + std::to_string(k));
          if (k >= 0)
            checkLaunch(l, n, a.kernels_[k], a);
        }
    if (m.contains("sections"))
      for (auto &[name, s] : m.at("sections").items())
        if (s.at("offset").get<uint64_t>() + s.at("size").get<uint64_t>() >
            h.dataSize)
          l.fail("manifest: section '" + name + "' lies outside the data");
    a.dataOffset_ = h.dataOffset;
  } catch (const json::exception &e) {
    l.fail(std::string("corrupted manifest: ") + e.what());
  }
  return a;
}

const Function &Artifact::function(const std::string &name) const {
  for (const Function &f : functions_)
    if (f.name == name)
      return f;
  throw std::runtime_error(path_ + ": no entry point named '" + name + "'");
}

const Function *Artifact::gpuFunction(const std::string &name) const {
  for (const Function &f : gpuFunctions_)
    if (f.name == name)
      return &f;
  return nullptr;
}

std::optional<std::string_view>
Artifact::kernelBinary(const KernelRecord &k, const std::string &target) const {
  auto it = k.binaries.find(target);
  if (it == k.binaries.end())
    return std::nullopt;
  return std::string_view(bytes_->data() + dataOffset_ + it->second.first,
                          it->second.second);
}

const Tensor *Artifact::constant(int64_t id) const {
  if (id < 0 || id >= (int64_t)constants_.size() || !constants_[id])
    return nullptr;
  return &*constants_[id];
}

std::optional<std::string_view>
Artifact::section(const std::string &name) const {
  if (!manifest_.contains("sections") || !manifest_["sections"].contains(name))
    return std::nullopt;
  const json &s = manifest_["sections"][name];
  return std::string_view(bytes_->data() + dataOffset_ +
                              s["offset"].get<uint64_t>(),
                          s["size"].get<uint64_t>());
}
