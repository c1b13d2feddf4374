//===- Artifact.cpp - reading and validating .qpkg files ------------------===//
#include "runtime/core/Artifact.h"

#include "format/Quant.h"
#include "format/KvCacheConfig.h"

#include "format/Checked.h"
#include "format/Int4.h"
#include "format/Sparse24.h"
#include "runtime/core/SyntheticWeights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <stdexcept>

using namespace qcc::rt;
using nlohmann::json;
namespace format = qcc::format;

namespace {
/// Nesting deeper than this is refused before parsing: nothing qcc writes
/// comes near it, and every recursive walk of the manifest (its parse, the
/// kernel bodies, dump()) stays far from the stack's end.
constexpr int kMaxManifestDepth = 64;
/// Ranks beyond this are refused: qcc's ops have rank <= 5 or so.
constexpr size_t kMaxRank = 32;

struct Loader {
  std::string path;
  [[noreturn]] void fail(const std::string &why) const {
    throw std::runtime_error(path + ": " + why);
  }
};

} // namespace

/// `j` as an int64_t, if it is an integer that fits.
static std::optional<int64_t> asInt64(const json &j) {
  if (j.is_number_unsigned())
    return j.get<uint64_t>() <= (uint64_t)INT64_MAX
               ? std::optional<int64_t>(j.get<int64_t>())
               : std::nullopt;
  if (j.is_number_integer())
    return j.get<int64_t>();
  return std::nullopt;
}

/// A non-negative integer field of `j`.
static uint64_t unsignedField(const Loader &l, const json &j, const char *key,
                              const std::string &where) {
  const json &v = j.at(key);
  if (!v.is_number_unsigned() &&
      !(v.is_number_integer() && v.get<int64_t>() >= 0))
    l.fail("manifest: " + where + ": \"" + key +
           "\" is not a non-negative integer");
  return v.get<uint64_t>();
}

/// A shape: at most kMaxRank dims, each >= 0 (or -1, dynamic, where
/// allowed), whose static part has an element count that fits int64_t.
static Shape parseShape(const Loader &l, const json &j, bool allowDynamic,
                        const std::string &where) {
  if (!j.is_array() || j.size() > kMaxRank)
    l.fail("manifest: " + where + ": the shape is not a list of at most " +
           std::to_string(kMaxRank) + " dims");
  Shape shape;
  for (const json &d : j) {
    std::optional<int64_t> v = asInt64(d);
    if (!v || *v < (allowDynamic ? -1 : 0))
      l.fail("manifest: " + where + ": invalid dim " + d.dump());
    shape.push_back(*v);
  }
  Shape known;
  for (int64_t d : shape)
    known.push_back(d < 0 ? 1 : d);
  if (!format::checkedNumElements(known))
    l.fail("manifest: " + where + ": shape " + shapeString(shape) +
           " has more elements than fit in 64 bits");
  return shape;
}

/// The JSON type of every node attribute the runtime reads (the CPU kernels
/// through rt::Attrs; the CUDA backend, the roofline, shape inference and
/// calibration directly), as the dialect declares it (dialects/*.td; written
/// by passes/ConstEval.cpp runtimeAttrs). Checked at load, so no reader meets
/// another type; the values' ranges (an axis within the rank, ...) are the
/// kernels' to check, per call, against the operands they get.
enum class AttrType { Int, Float, Bool, Ints, Floats, String };
struct AttrRule {
  const char *name;
  AttrType type;
};
constexpr AttrRule kAttrRules[] = {
    {"axis", AttrType::Int},        {"batch_dims", AttrType::Int},
    {"end", AttrType::Int},         {"head_dim", AttrType::Int},
    {"k", AttrType::Int},           {"kernel", AttrType::Int},
    {"layer", AttrType::Int},       {"num_heads", AttrType::Int},
    {"num_kv_heads", AttrType::Int}, {"rotary_dim", AttrType::Int},
    {"start", AttrType::Int},       {"window", AttrType::Int},
    {"alpha", AttrType::Float},     {"beta", AttrType::Float},
    {"epsilon", AttrType::Float},   {"scale", AttrType::Float},
    {"softcap", AttrType::Float},   {"allowzero", AttrType::Bool},
    {"asymmetric", AttrType::Bool}, {"causal", AttrType::Bool},
    {"exclusive", AttrType::Bool},  {"keepdims", AttrType::Bool},
    {"largest", AttrType::Bool},    {"reverse", AttrType::Bool},
    {"transA", AttrType::Bool},     {"transB", AttrType::Bool},
    {"upper", AttrType::Bool},
    {"axes", AttrType::Ints},       {"perm", AttrType::Ints},
    {"outlier_columns", AttrType::Ints},
    {"sizes", AttrType::Ints},      {"steps", AttrType::Ints},
    {"alibi", AttrType::Floats},
    {"approximate", AttrType::String}, {"granularity", AttrType::String},
    {"kind", AttrType::String},     {"reduction", AttrType::String},
    {"to", AttrType::String},
};

/// Whether `j` has the type `t` (integers: fitting int64_t; floats: finite).
static bool hasAttrType(const json &j, AttrType t) {
  switch (t) {
  case AttrType::Int:
    return asInt64(j).has_value();
  case AttrType::Float:
    return j.is_number() && std::isfinite(j.get<double>());
  case AttrType::Bool:
    return j.is_boolean();
  case AttrType::Ints:
    return j.is_array() && std::all_of(j.begin(), j.end(), [](const json &e) {
             return asInt64(e).has_value();
           });
  case AttrType::Floats:
    return j.is_array() && std::all_of(j.begin(), j.end(), [](const json &e) {
             return e.is_number() && std::isfinite(e.get<double>());
           });
  case AttrType::String:
    return j.is_string();
  }
  return false;
}

/// `text`, cut short for an error line.
static std::string clipped(std::string text) {
  if (text.size() > 64)
    text = text.substr(0, 61) + "...";
  return text;
}

static const char *attrTypeName(AttrType t) {
  switch (t) {
  case AttrType::Int:
    return "an integer";
  case AttrType::Float:
    return "a finite number";
  case AttrType::Bool:
    return "a boolean";
  case AttrType::Ints:
    return "a list of integers";
  case AttrType::Floats:
    return "a list of finite numbers";
  case AttrType::String:
    return "a string";
  }
  return "?";
}

/// A value id of the manifest: in [0, numValues).
static int64_t valueId(const Loader &l, const json &j, size_t numValues,
                       const std::string &where) {
  std::optional<int64_t> id = asInt64(j);
  if (!id || *id < 0 || *id >= (int64_t)numValues)
    l.fail("manifest: " + where + " refers to unknown value " + j.dump());
  return *id;
}

static Port parsePort(const Loader &l, const json &j, const Artifact &a,
                      const std::string &where) {
  Port p;
  p.name = j.at("name").get<std::string>();
  std::string at = where + " '" + p.name + "'";
  p.value = valueId(l, j.at("value"), a.numValues(), at);
  if (!parseDType(j.at("dtype").get<std::string>(), p.dtype))
    l.fail("port '" + p.name + "' has an unknown dtype");
  p.shape = parseShape(l, j.at("shape"), /*allowDynamic=*/true, at);
  p.dims = j.value("dims", std::vector<std::string>(p.shape.size()));
  if (p.dims.size() != p.shape.size())
    l.fail("manifest: " + at + ": " + std::to_string(p.dims.size()) +
           " dim names for rank " + std::to_string(p.shape.size()));
  const auto &[type, shape] = a.valueType(p.value);
  if (type != p.dtype || shape.size() != p.shape.size())
    l.fail("manifest: " + at + " is " + dtypeName(p.dtype) +
           shapeString(p.shape) + " but its value is " + dtypeName(type) +
           shapeString(shape));
  return p;
}

/// The launch record of kernel node `n` refers only to its operands and
/// results, and converts only f32 constants to f16.
static void checkLaunch(const Loader &l, const Node &n, const KernelRecord &k,
                        const Artifact &a) {
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
                if (body.args[i] == id && i < n.inputs.size())
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

/// Every weight_int4 node of `fn` whose operands are constants stores a valid
/// [N, K] weight (format/Int4.h): i8 packed [N, K/2], f16 scales [N, K/G], a
/// group size G that is positive, even and divides K, an f32 / f16 / bf16
/// result [N, K], with act-order an i32 permutation of [0, K) and, when
/// `asymmetric`, f16 offsets of the scales' shape (its last operand). Checked
/// at load so that a hostile artifact fails with the node's name before it
/// runs (the CPU kernel checks the shapes again per call).
static void checkWeightInt4(const Loader &l, const Artifact &a,
                            const Function &fn) {
  namespace i4 = qcc::format::int4;
  for (const Node &n : fn.nodes) {
    if (n.kind != OpKind::WeightInt4)
      continue;
    auto fail = [&](const std::string &why) {
      l.fail("function '" + fn.name + "', node '" + n.name +
             "' (weight_int4): " + why);
    };
    i4::OperandSlots slots =
        i4::operandSlots(n.inputs.size(), n.attrs.value("asymmetric", false));
    if (!slots.error.empty() || n.outputs.size() != 1)
      fail((slots.error.empty() ? std::string("needs") : slots.error + ",") +
           " one result");
    auto slot = [&](int index) {
      return index >= 0 ? a.constant(n.inputs[index]) : nullptr;
    };
    const Tensor *packed = a.constant(n.inputs[0]),
                 *scales = a.constant(n.inputs[1]), *perm = slot(slots.perm),
                 *offsets = slot(slots.offsets);
    if (!packed || !scales || (slots.perm >= 0 && !perm) ||
        (slots.offsets >= 0 && !offsets))
      continue; // computed operands: the kernel checks them per call
    auto g = n.attrs.find("group_size");
    if (g == n.attrs.end() || !g->is_number_integer())
      fail("needs an integer group_size");
    int64_t groupSize = g->get<int64_t>();
    const auto &[type, shape] = a.valueType(n.outputs[0]);
    if (packed->rank() != 2 || packed->dtype() != DType::I8 ||
        scales->rank() != 2 || scales->dtype() != DType::F16 ||
        shape.size() != 2 || !(type == DType::F32 || type == DType::F16 ||
                               type == DType::BF16))
      fail("needs i8 packed [N, K/2], f16 scales [N, K/G] and a float [N, K] "
           "result, got packed " + shapeString(packed->shape()) + " " +
           dtypeName(packed->dtype()) + ", scales " +
           shapeString(scales->shape()) + " " + dtypeName(scales->dtype()) +
           ", result " + shapeString(shape) + " " + dtypeName(type));
    int64_t rows = packed->dim(0), k = shape[1];
    if (std::string why = i4::groupSizeError(k, groupSize); !why.empty())
      fail(why);
    if (shape[0] != rows || packed->dim(1) != i4::packedCols(k) ||
        scales->dim(0) != rows || scales->dim(1) != i4::scaleCols(k, groupSize))
      fail("packed " + shapeString(packed->shape()) + ", scales " +
           shapeString(scales->shape()) + " and result " + shapeString(shape) +
           " do not describe one [N, K] weight in groups of " +
           std::to_string(groupSize));
    if (offsets &&
        (offsets->dtype() != DType::F16 || offsets->shape() != scales->shape()))
      fail("offsets must be f16 " + shapeString(scales->shape()) +
           " as the scales, got " + shapeString(offsets->shape()) + " " +
           dtypeName(offsets->dtype()));
    if (perm) {
      if (perm->dtype() != DType::I32 || perm->shape() != Shape{k})
        fail("perm must be i32 [" + std::to_string(k) + "], got " +
             shapeString(perm->shape()) + " " + dtypeName(perm->dtype()));
      if (std::string why = i4::permutationError(perm->data<int32_t>(), k);
          !why.empty())
        fail(why);
    }
  }
}

/// Every quantize and qlinear node of `fn` (kernel bodies too) with
/// outlier columns (the LLM.int8()-style fallback, docs/QUANTIZATION.md
/// section 3) names valid columns of its K (format/Quant.h), and a qlinear's
/// float operands fit them: outlier_input [..., K], outlier_weight
/// [N, columns]. Checked here so that a hostile artifact fails at load with
/// the node's name; the kernels check the operands they get again.
static void checkOutliers(const Loader &l, const Artifact &a,
                          const Function &fn) {
  auto typeOf = [&](int64_t id) -> const std::pair<DType, Shape> * {
    return id >= 0 && (size_t)id < a.numValues() ? &a.valueType(id) : nullptr;
  };
  std::function<void(const std::vector<Node> &)> walk =
      [&](const std::vector<Node> &nodes) {
        for (const Node &n : nodes) {
          if (n.body)
            walk(n.body->nodes);
          auto it = n.attrs.find("outlier_columns");
          if (it == n.attrs.end())
            continue;
          auto fail = [&](const std::string &why) {
            l.fail("function '" + fn.name + "', node '" + n.name + "' (" +
                   opKindName(n.kind) + "): " + why);
          };
          if (n.kind != OpKind::Quantize && n.kind != OpKind::QLinear)
            fail("outlier_columns on an op that is no quantize or qlinear");
          std::vector<int64_t> cols = it->get<std::vector<int64_t>>();
          // The depth K: a qlinear's weight [N, K], a quantize's input.
          const auto *ref = n.inputs.empty()
                                ? nullptr
                                : typeOf(n.inputs[n.kind == OpKind::QLinear &&
                                                          n.inputs.size() > 3
                                                      ? 3
                                                      : 0]);
          if (!ref || ref->second.empty())
            fail("outlier columns on an operand without a last dimension");
          // A quantize's K may be dynamic (the input of a reshape): then
          // only the order is checked here, the range per call.
          int64_t k = ref->second.back() < 0
                          ? std::numeric_limits<int64_t>::max()
                          : ref->second.back();
          std::string why = format::outlierColumnsError(cols, k);
          if (!why.empty())
            fail(why);
          if (n.kind != OpKind::QLinear)
            continue;
          // Operands: input, scale, zero point, weight, weight scale, sum,
          // [bias], outlier_input, outlier_weight.
          if (n.inputs.size() != 8 && n.inputs.size() != 9)
            fail("with outlier columns a qlinear takes 8 or 9 operands, not " +
                 std::to_string(n.inputs.size()));
          const auto *x = typeOf(n.inputs[n.inputs.size() - 2]),
                     *w = typeOf(n.inputs[n.inputs.size() - 1]);
          int64_t n0 = ref->second.size() == 2 ? ref->second[0] : -1;
          if (!x || x->first != DType::F32 || x->second.empty() ||
              (x->second.back() != k && x->second.back() >= 0))
            fail("outlier_input must be f32 [..., " + std::to_string(k) + "]");
          if (!w || w->first != DType::F32 || w->second.size() != 2 ||
              w->second[0] != n0 || w->second[1] != (int64_t)cols.size())
            fail("outlier_weight must be f32 [" + std::to_string(n0) +
                 ", " + std::to_string(cols.size()) + "]");
        }
      };
  walk(fn.nodes);
}

Artifact Artifact::load(const std::string &path, FileAccess access) {
  switch (access) {
  case FileAccess::Map:
    return fromFile(format::FileBytes::map(path), path);
  case FileAccess::Read:
    return fromFile(format::FileBytes::read(path), path);
  }
  throw std::logic_error("unknown FileAccess");
}

Artifact Artifact::fromBytes(std::shared_ptr<std::vector<char>> bytes,
                             const std::string &path) {
  return fromFile(format::FileBytes::hold(std::move(bytes)), path);
}

/// The manifest's "synthetic" records (qcc --synthetic-weights), each
/// expanded into a tensor of its dtype and shape: {"dist", "stddev", "seed",
/// "dtype", "shape"}. The storage goes to `storage`; `total` counts it. All
/// of it must fit in half this machine's memory (a record may claim any
/// size; it is refused, not allocated).
static std::vector<Tensor>
expandSynthetic(const Loader &l, const json &m,
                std::vector<std::shared_ptr<void>> &storage, uint64_t &total) {
  std::vector<Tensor> out;
  if (!m.contains("synthetic"))
    return out;
  const json &records = m.at("synthetic");
  if (!records.is_array())
    l.fail("manifest: \"synthetic\" is not a list");
  struct Record {
    synthetic::Dist dist;
    double stddev;
    uint64_t seed, bytes;
    DType dtype;
    Shape shape;
  };
  std::vector<Record> parsed;
  total = 0;
  for (const json &r : records) {
    std::string where = "synthetic record " + std::to_string(parsed.size());
    Record rec{};
    const json &dist = r.at("dist");
    std::optional<synthetic::Dist> d =
        dist.is_string() ? synthetic::parseDist(dist.get<std::string>())
                         : std::nullopt;
    if (!d)
      l.fail("manifest: " + where + ": unknown distribution " + dist.dump());
    rec.dist = *d;
    const json &sd = r.at("stddev");
    if (!sd.is_number() || !std::isfinite(sd.get<double>()) ||
        sd.get<double>() < 0 || sd.get<double>() > 1e30)
      l.fail("manifest: " + where + ": \"stddev\" is not a finite number "
             "in [0, 1e30]");
    rec.stddev = sd.get<double>();
    rec.seed = unsignedField(l, r, "seed", where);
    const json &dt = r.at("dtype");
    if (!dt.is_string() || !parseDType(dt.get<std::string>(), rec.dtype) ||
        !synthetic::fills(rec.dist, rec.dtype))
      l.fail("manifest: " + where + ": distribution " +
             synthetic::distName(rec.dist) + " cannot fill dtype " +
             dt.dump());
    rec.shape = parseShape(l, r.at("shape"), /*allowDynamic=*/false, where);
    std::optional<uint64_t> bytes =
        format::checkedBytes(rec.shape, dtypeSize(rec.dtype));
    std::optional<uint64_t> sum =
        bytes ? format::checkedAdd(total, *bytes) : std::nullopt;
    if (!sum)
      l.fail("manifest: " + where + ": sizes overflow 64 bits");
    rec.bytes = *bytes;
    total = *sum;
    parsed.push_back(std::move(rec));
  }
  uint64_t memory = format::usableMemoryBytes();
  if (total > memory / 2)
    l.fail("synthetic weights of " + std::to_string(total) +
           " bytes exceed half of this machine's memory (" +
           std::to_string(memory) + " bytes)");
  for (const Record &rec : parsed) {
    // 64-byte aligned, as the data section's blobs are.
    uint64_t rounded = (std::max<uint64_t>(rec.bytes, 1) + 63) / 64 * 64;
    void *p = std::aligned_alloc(64, rounded);
    if (!p)
      l.fail("cannot allocate " + std::to_string(rec.bytes) +
             " bytes of synthetic weights");
    storage.emplace_back(p, std::free);
    synthetic::generate(rec.dist, rec.stddev, rec.seed, rec.dtype, p,
                        (uint64_t)format::checkedNumElements(rec.shape).value());
    out.push_back(Tensor::view(rec.dtype, rec.shape, p));
  }
  return out;
}

Artifact Artifact::fromFile(std::shared_ptr<const format::FileBytes> file,
                            const std::string &path) {
  Loader l{path};
  const format::FileBytes &bytes = *file;
  size_t size = bytes.size();
  if (size < kHeaderSize)
    l.fail("not a qcc artifact (" + std::to_string(size) +
           " bytes, shorter than the header)");
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
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
  // A mapped file's pages are dropped as they are checked: the check reads
  // every byte, and the weights a backend packs need not stay resident.
  if (format::fileCrc(bytes.data(), size,
                      [&](const char *p, size_t n) { bytes.release(p, n); }) !=
      h.crc32)
    l.fail("corrupted: checksum mismatch");
  // The CRC only proves the writer meant these bytes; a hostile writer
  // recomputes it. Everything below is checked as if it had none.
  if (h.flags != 0 || h.reserved != 0)
    l.fail("corrupted: unknown header flags");
  if (h.manifestOffset < kHeaderSize ||
      !format::rangeWithin(h.manifestOffset, h.manifestSize, size) ||
      h.dataOffset < h.manifestOffset + h.manifestSize ||
      !format::rangeWithin(h.dataOffset, h.dataSize, size) ||
      h.dataOffset % kDataAlignment != 0)
    l.fail("corrupted: sections lie outside the file or overlap");

  Artifact a;
  a.path_ = path;
  a.file_ = file;
  try {
    std::string_view text(bytes.data() + h.manifestOffset, h.manifestSize);
    if (qcc::format::jsonDepth(text) > kMaxManifestDepth)
      l.fail("corrupted manifest: nested deeper than " +
             std::to_string(kMaxManifestDepth) + " levels");
    a.manifest_ = json::parse(text);
    bytes.release(text.data(), text.size()); // parsed: not read again
    const json &m = a.manifest_;
    if (!m.is_object())
      l.fail("corrupted manifest: not a JSON object");
    for (const json &v : m.at("values")) {
      DType t;
      if (!parseDType(v.at("dtype").get<std::string>(), t))
        l.fail("manifest: unknown dtype " + v.at("dtype").dump());
      std::string where = "value " + std::to_string(a.valueTypes_.size());
      a.valueTypes_.emplace_back(
          t, parseShape(l, v.at("shape"), /*allowDynamic=*/true, where));
    }
    a.constants_.resize(a.valueTypes_.size());
    std::vector<Tensor> synthetic =
        expandSynthetic(l, m, a.synthetic_, a.syntheticBytes_);
    const char *data = bytes.data() + h.dataOffset;
    std::map<std::pair<uint64_t, uint64_t>, Tensor> copies; // (offset, size)
    // Copies take at most the data section's bytes: a hostile manifest of
    // many small overlapping constants gets views beyond that, not memory
    // without bound.
    uint64_t copied = 0;
    for (const json &c : m.at("constants")) {
      int64_t id = valueId(l, c.at("value"), a.numValues(), "constant");
      std::string what = "manifest: constant " + std::to_string(id);
      if (a.constants_[id])
        l.fail(what + " is defined twice");
      auto &[t, shape] = a.valueTypes_[id];
      if (c.contains("synthetic")) {
        uint64_t k = unsignedField(l, c, "synthetic", "constant");
        if (k >= synthetic.size())
          l.fail(what + ": synthetic record " + std::to_string(k) +
                 " does not exist");
        if (synthetic[k].dtype() != t || synthetic[k].shape() != shape)
          l.fail(what + ": synthetic record " + std::to_string(k) + " is " +
                 dtypeName(synthetic[k].dtype()) +
                 shapeString(synthetic[k].shape()) + ", the value " +
                 dtypeName(t) + shapeString(shape));
        a.constants_[id] = synthetic[k];
        continue;
      }
      uint64_t off = unsignedField(l, c, "offset", "constant"),
               sz = unsignedField(l, c, "size", "constant");
      std::optional<uint64_t> need;
      if (std::find(shape.begin(), shape.end(), -1) == shape.end())
        need = format::checkedBytes(shape, dtypeSize(t));
      if (!need || *need != sz)
        l.fail(what + ": " + std::to_string(sz) + " bytes for " +
               dtypeName(t) + shapeString(shape));
      if (!format::rangeWithin(off, sz, h.dataSize) ||
          off % kDataAlignment != 0)
        l.fail(what + " does not fit the data section");
      // One copy per span of bytes: the entry points share constants under
      // value ids of their own.
      auto shared = copies.find({off, sz});
      if (shared != copies.end() && shared->second.dtype() == t) {
        a.constants_[id] = shared->second.reshaped(shape);
      } else if (bytes.mapped() && sz < kCopyBelowBytes &&
                 copied + sz <= h.dataSize) {
        copied += sz;
        Tensor copy = Tensor::uninitialized(t, shape);
        bytes.readAt(data + off, sz, copy.data<char>()); // names the file
        copies.try_emplace({off, sz}, copy); // the first dtype's is shared
        a.constants_[id] = std::move(copy);
      } else {
        a.constants_[id] = Tensor::view(t, shape, data + off);
      }
    }
    std::string function; // the one being parsed, for errors
    // Values defined so far in the function being parsed: its inputs, the
    // constants, the results of the nodes before. A node reads only those
    // and defines each result once, so the runtime never reads a value
    // nobody wrote nor overwrites one.
    std::vector<char> defined;
    auto define = [&](int64_t id, const std::string &where) {
      if (defined[id])
        l.fail("manifest: function '" + function + "', " + where +
               " redefines value " + std::to_string(id));
      defined[id] = 1;
    };
    auto requireDefined = [&](int64_t id, const std::string &where) {
      if (id >= 0 && !defined[id])
        l.fail("manifest: function '" + function + "', " + where +
               " reads value " + std::to_string(id) +
               " before anything defines it");
    };
    std::function<Node(const json &, bool)> parseNode = [&](const json &n,
                                                            bool inKernel) {
      Node node;
      node.name = n.value("name", "");
      std::string op = n.at("op").get<std::string>();
      std::string where = "node '" + node.name + "'";
      std::optional<OpKind> kind = format::parseOpKind(op);
      if (!kind)
        l.fail("manifest: function '" + function + "', node '" + node.name +
               "': unknown op '" + op +
               "' (compiled by a different qcc? recompile the model)");
      node.kind = *kind;
      for (const json &id : n.at("in"))
        node.inputs.push_back(id == -1 ? -1
                                       : valueId(l, id, a.numValues(), where));
      for (const json &id : n.at("out"))
        node.outputs.push_back(valueId(l, id, a.numValues(), where));
      node.attrs = n.value("attrs", json::object());
      if (!node.attrs.is_object())
        l.fail("manifest: " + where + ": attrs is not an object");
      for (const AttrRule &r : kAttrRules)
        if (auto it = node.attrs.find(r.name);
            it != node.attrs.end() && !hasAttrType(*it, r.type))
          l.fail("manifest: function '" + function + "', " + where + " (" +
                 op + "): attribute '" + r.name + "' is not " +
                 attrTypeName(r.type) + ": " + clipped(it->dump()));
      if (n.contains("body") != (node.kind == OpKind::Kernel))
        l.fail("manifest: function '" + function + "', node '" + node.name +
               "' (" + op + "): " +
               (node.kind == OpKind::Kernel ? "a kernel without a body"
                                            : "a body on an op that is no "
                                              "kernel"));
      for (int64_t id : node.inputs)
        requireDefined(id, where);
      if (n.contains("body")) {
        if (inKernel)
          l.fail("manifest: kernel '" + node.name +
                 "' lies inside another kernel region");
        auto body = std::make_shared<KernelBody>();
        const json &b = n.at("body");
        std::string at = "kernel '" + node.name + "'";
        for (const json &id : b.at("args"))
          body->args.push_back(valueId(l, id, a.numValues(), at));
        for (const json &id : b.at("yield"))
          body->yields.push_back(valueId(l, id, a.numValues(), at));
        if (body->args.size() != node.inputs.size() ||
            body->yields.size() != node.outputs.size())
          l.fail("manifest: kernel '" + node.name +
                 "' has a body that does not match its operands/results");
        // An argument may be its operand's own id, a yield its result's.
        for (size_t i = 0; i < body->args.size(); ++i)
          if (body->args[i] != node.inputs[i])
            define(body->args[i], at);
        for (const json &inner : b.at("nodes"))
          body->nodes.push_back(parseNode(inner, /*inKernel=*/true));
        for (int64_t id : body->yields)
          requireDefined(id, at + " yield");
        node.body = std::move(body);
      }
      for (size_t i = 0; i < node.outputs.size(); ++i)
        if (!node.body || node.body->yields[i] != node.outputs[i])
          define(node.outputs[i], where);
      return node;
    };
    auto parseFunctions = [&](const json &list, std::vector<Function> &out) {
      for (const json &f : list) {
        Function fn;
        fn.name = f.at("name").get<std::string>();
        function = fn.name;
        defined.assign(a.numValues(), 0);
        for (size_t id = 0; id < a.numValues(); ++id)
          defined[id] = a.constants_[id].has_value();
        for (const json &p : f.at("inputs")) {
          fn.inputs.push_back(parsePort(l, p, a, "input"));
          define(fn.inputs.back().value, "input '" + fn.inputs.back().name + "'");
        }
        for (const json &n : f.at("nodes"))
          fn.nodes.push_back(parseNode(n, /*inKernel=*/false));
        for (const json &p : f.at("outputs")) {
          fn.outputs.push_back(parsePort(l, p, a, "output"));
          requireDefined(fn.outputs.back().value,
                         "output '" + fn.outputs.back().name + "'");
        }
        out.push_back(std::move(fn));
      }
    };
    parseFunctions(m.at("functions"), a.functions_);
    if (m.contains("gpu_functions"))
      parseFunctions(m.at("gpu_functions"), a.gpuFunctions_);
    std::set<int64_t> checkedMeta;
    for (const auto *list : {&a.functions_, &a.gpuFunctions_})
      for (const Function &fn : *list) {
        checkSparse24(l, a, fn, checkedMeta);
        checkOutliers(l, a, fn);
        checkWeightInt4(l, a, fn);
      }
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
            std::string at = "kernel " + r.region + " binary " + target;
            uint64_t off = unsignedField(l, b, "offset", at),
                     sz = unsignedField(l, b, "size", at);
            if (!format::rangeWithin(off, sz, h.dataSize))
              l.fail("manifest: " + at + " lies outside the data");
            r.binaries[target] = {off, sz};
          }
        a.kernels_.push_back(std::move(r));
      }
    for (const Function &fn : a.gpuFunctions_)
      for (const Node &n : fn.nodes)
        if (n.body) {
          json kernel = n.attrs.value("kernel", json(-1));
          std::optional<int64_t> k = asInt64(kernel);
          if (!k || *k < -1 || *k >= (int64_t)a.kernels_.size())
            l.fail("manifest: kernel node '" + n.name +
                   "' refers to unknown kernel " + kernel.dump());
          if (*k >= 0)
            checkLaunch(l, n, a.kernels_[*k], a);
        }
    if (m.contains("sections"))
      for (auto &[name, s] : m.at("sections").items()) {
        std::string at = "section '" + name + "'";
        uint64_t off = unsignedField(l, s, "offset", at),
                 sz = unsignedField(l, s, "size", at);
        if (!format::rangeWithin(off, sz, h.dataSize))
          l.fail("manifest: " + at + " lies outside the data");
        a.sections_[name] = {off, sz};
      }
    // Parsed here, once, like the rest of the manifest, so that the error
    // names the file; Artifact::kvCache() hands out the result.
    if (m.contains("kv_cache")) {
      try {
        a.kvCache_ = KvCacheConfig::fromJson(m.at("kv_cache"));
      } catch (const std::runtime_error &e) {
        l.fail(std::string("manifest: ") + e.what());
      }
    }
    if (m.contains("lora_adapters")) {
      const json &names = m.at("lora_adapters");
      if (!names.is_array() || names.size() > 4096)
        l.fail("manifest: lora_adapters is not a list of adapter names");
      for (const json &n : names) {
        if (!n.is_string() || n.get<std::string>().empty() ||
            n.get<std::string>().size() > 64 || n == "base" ||
            std::count(a.loraAdapters_.begin(), a.loraAdapters_.end(),
                       n.get<std::string>()))
          l.fail("manifest: lora_adapters holds an empty, long, repeated or "
                 "reserved ('base') name");
        a.loraAdapters_.push_back(n.get<std::string>());
      }
    }
    a.dataOffset_ = h.dataOffset;
  } catch (const json::exception &e) {
    l.fail(std::string("corrupted manifest: ") + e.what());
  }
  return a;
}

int64_t Artifact::loraAdapterIndex(const std::string &name) const {
  if (name.empty() || name == "base")
    return 0;
  for (size_t j = 0; j < loraAdapters_.size(); ++j)
    if (loraAdapters_[j] == name)
      return (int64_t)j + 1;
  std::string known;
  for (const std::string &n : loraAdapters_)
    known += (known.empty() ? "" : ", ") + n;
  throw std::runtime_error(path_ + ": no LoRA adapter named '" + name + "' (" +
                           (known.empty() ? "it was compiled without any: qcc "
                                            "--lora-adapter NAME=DIR"
                                          : "it has " + known) +
                           ")");
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
  return std::string_view(file_->data() + dataOffset_ + it->second.first,
                          it->second.second);
}

const Tensor *Artifact::constant(int64_t id) const {
  if (id < 0 || id >= (int64_t)constants_.size() || !constants_[id])
    return nullptr;
  return &*constants_[id];
}

std::optional<std::string_view>
Artifact::section(const std::string &name) const {
  auto it = sections_.find(name);
  if (it == sections_.end())
    return std::nullopt;
  return std::string_view(file_->data() + dataOffset_ + it->second.first,
                          it->second.second);
}
