//===- TensorIO.cpp - reading and writing tensor files --------------------===//
#include "runtime/core/TensorIO.h"
#include "runtime/core/HalfFloat.h"

#include "format/Checked.h"

#include <charconv>
#include <cstring>
#include <fstream>
#include <stdexcept>

using namespace qcc::rt;

/// The file's bytes, read only when they fit in memory (and never from a
/// FIFO or a device that does not end).
static std::string readFile(const std::string &path) {
  std::vector<char> bytes = qcc::format::readFileChecked(path);
  return std::string(bytes.begin(), bytes.end());
}

/// The bytes a tensor of `shape` needs, checked before anything is
/// allocated: an input file may declare [2^62, 4] and hold nothing.
static uint64_t tensorBytes(DType dtype, const Shape &shape,
                            const std::string &what) {
  for (int64_t d : shape)
    if (d < 0)
      throw std::runtime_error(what + ": negative dimension in shape " +
                               shapeString(shape));
  std::optional<uint64_t> bytes =
      qcc::format::checkedBytes(shape, dtypeSize(dtype));
  if (!bytes)
    throw std::runtime_error(what + ": shape " + shapeString(shape) +
                             " has more elements than fit in 64 bits");
  return *bytes;
}

//===----------------------------------------------------------------------===//
// .npy (format versions 1.0-3.0)
//===----------------------------------------------------------------------===//

static bool npyDType(const std::string &descr, DType &t) {
  static const std::pair<const char *, DType> table[] = {
      {"<f4", DType::F32}, {"<f2", DType::F16}, {"<i8", DType::I64},
      {"<i4", DType::I32}, {"|i1", DType::I8},  {"|b1", DType::Bool}};
  for (auto &[d, dt] : table)
    if (descr == d) {
      t = dt;
      return true;
    }
  return false;
}

static const char *npyDescr(DType t) {
  switch (t) {
  case DType::F32: return "<f4";
  case DType::F16: return "<f2";
  case DType::I64: return "<i8";
  case DType::I32: return "<i4";
  case DType::I8: return "|i1";
  case DType::Bool: return "|b1";
  case DType::BF16: // writeNpy widens them to f32
  case DType::F8E4M3: break;
  }
  throw std::runtime_error("bf16 has no .npy dtype");
}

/// The value of `key` in the header dict, e.g. '<f4' for 'descr': '<f4',
/// or (2, 5) for 'shape'; throws naming `path` when the header is malformed.
static std::string dictValue(const std::string &header, const std::string &key,
                             const std::string &path) {
  auto malformed = [&]() -> std::string {
    throw std::runtime_error(path + ": malformed .npy header (its '" + key +
                             "' entry)");
  };
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos)
    throw std::runtime_error(path + ": .npy header has no '" + key + "'");
  size_t colon = header.find(':', k + key.size() + 2);
  if (colon == std::string::npos)
    return malformed();
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos)
    return malformed();
  size_t end;
  if (header[start] == '(' || header[start] == '\'') {
    end = header.find(header[start] == '(' ? ')' : '\'', start + 1);
    if (end == std::string::npos)
      return malformed();
    ++end; // keeps the closing ) or '
  } else {
    end = header.find_first_of(",}", start);
    if (end == std::string::npos)
      return malformed();
  }
  return header.substr(start, end - start);
}

/// "(2, 5)", "(5,)", "()" -> the dims; throws naming `path` on anything else.
static Shape npyShape(const std::string &text, const std::string &path) {
  auto bad = [&]() -> Shape {
    throw std::runtime_error(path + ": malformed .npy shape " + text);
  };
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    return bad();
  Shape shape;
  const char *p = text.data() + 1, *end = text.data() + text.size() - 1;
  while (true) {
    while (p < end && *p == ' ')
      ++p;
    if (p == end)
      break;
    int64_t d;
    auto [next, ec] = std::from_chars(p, end, d);
    if (ec == std::errc::result_out_of_range)
      throw std::runtime_error(path + ": .npy shape " + text +
                               " has a dimension beyond 64 bits");
    if (ec != std::errc() || d < 0)
      return bad();
    shape.push_back(d);
    p = next;
    while (p < end && *p == ' ')
      ++p;
    if (p == end)
      break;
    if (*p != ',')
      return bad();
    ++p;
  }
  return shape;
}

Tensor qcc::rt::parseNpy(const std::string &bytes, const std::string &path) {
  auto fail = [&](const std::string &why) -> Tensor {
    throw std::runtime_error(path + ": " + why);
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return fail("not a .npy file");
  int major = (unsigned char)bytes[6];
  if (major < 1 || major > 3)
    return fail("unsupported .npy format version " + std::to_string(major));
  size_t headerLen, offset;
  if (major == 1) {
    headerLen = (unsigned char)bytes[8] | ((unsigned char)bytes[9] << 8);
    offset = 10;
  } else {
    if (bytes.size() < 12)
      return fail("truncated .npy header");
    uint32_t len;
    std::memcpy(&len, &bytes[8], 4);
    headerLen = len;
    offset = 12;
  }
  if (!qcc::format::rangeWithin(offset, headerLen, bytes.size()))
    return fail("truncated .npy header");
  std::string header = bytes.substr(offset, headerLen);
  std::string descr = dictValue(header, "descr", path);
  if (descr.size() < 2 || descr.front() != '\'' || descr.back() != '\'')
    return fail("malformed .npy header (its 'descr' entry)");
  descr = descr.substr(1, descr.size() - 2);
  DType dtype;
  if (!npyDType(descr, dtype))
    return fail("unsupported .npy dtype '" + descr +
                "' (supported: float32, float16, int64, int32, int8, bool)");
  if (dictValue(header, "fortran_order", path) != "False")
    return fail("Fortran-order arrays are not supported");
  Shape shape = npyShape(dictValue(header, "shape", path), path);
  uint64_t need = tensorBytes(dtype, shape, path);
  size_t data = offset + headerLen;
  if (bytes.size() - data != need)
    return fail("holds " + std::to_string(bytes.size() - data) +
                " bytes of data, but its shape " + shapeString(shape) +
                " needs " + std::to_string(need));
  Tensor t(dtype, shape);
  if (need > 0) // an empty tensor has no buffer to copy to
    std::memcpy(t.data<char>(), bytes.data() + data, need);
  return t;
}

void qcc::rt::writeNpy(const std::string &path, const Tensor &t) {
  // numpy has no bfloat16 and no float8: widened, exactly.
  if (t.dtype() == DType::BF16 || t.dtype() == DType::F8E4M3)
    return writeNpy(path, convertFloat(t, DType::F32));
  std::string shape = "(";
  for (int64_t d : t.shape())
    shape += std::to_string(d) + ",";
  if (t.rank() > 1)
    shape.pop_back();
  shape += ")";
  std::string header = std::string("{'descr': '") + npyDescr(t.dtype()) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so that the data starts at a multiple of 64 bytes.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    throw std::runtime_error(path + ": cannot write");
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = header.size();
  out.put(len & 0xff).put(len >> 8);
  out.write(header.data(), header.size());
  out.write(static_cast<const char *>(t.raw()), t.bytes());
  if (!out)
    throw std::runtime_error(path + ": write failed");
}

//===----------------------------------------------------------------------===//
// ONNX TensorProto, read from the protobuf wire format directly so that the
// runtime needs no protobuf library. Fields: 1 dims, 2 data_type,
// 4 float_data, 5 int32_data, 7 int64_data, 8 name, 9 raw_data.
//===----------------------------------------------------------------------===//

namespace {
struct Wire {
  const std::string &buf;
  size_t pos = 0;
  std::string what;
  [[noreturn]] void fail() const {
    throw std::runtime_error(what + ": not a valid ONNX TensorProto");
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= buf.size())
        fail();
      uint8_t b = buf[pos++];
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80))
        return v;
    }
    fail();
  }
  std::string_view bytes() {
    uint64_t n = varint();
    if (n > buf.size() - pos)
      fail();
    std::string_view s(buf.data() + pos, n);
    pos += n;
    return s;
  }
};
} // namespace

Tensor qcc::rt::parseTensorProto(const std::string &buf,
                                 const std::string &what) {
  Wire w{buf, 0, what};
  Shape dims;
  int64_t dataType = 0;
  std::vector<float> floats;
  std::vector<int64_t> ints; // int32_data and int64_data (both varints)
  std::string_view raw;
  bool hasRaw = false;
  while (w.pos < buf.size()) {
    uint64_t key = w.varint();
    uint32_t field = key >> 3, wire = key & 7;
    auto packedOrOne = [&](auto &&one) {
      if (wire != 0 && wire != 2)
        w.fail();
      if (wire == 2) {
        std::string_view s = w.bytes();
        std::string sub(s);
        Wire inner{sub, 0, what};
        while (inner.pos < sub.size())
          one(inner);
      } else {
        one(w);
      }
    };
    if (field == 1) {
      packedOrOne([&](Wire &x) { dims.push_back((int64_t)x.varint()); });
    } else if (field == 2 && wire == 0) {
      dataType = w.varint();
    } else if (field == 4) {
      if (wire == 2) {
        std::string_view s = w.bytes();
        if (s.size() % 4 != 0)
          w.fail();
        size_t n = s.size() / 4;
        floats.resize(floats.size() + n);
        if (n > 0) // an empty packed field: no buffer to copy to
          std::memcpy(floats.data() + floats.size() - n, s.data(), n * 4);
      } else if (wire == 5) {
        if (w.pos + 4 > buf.size())
          w.fail();
        float f;
        std::memcpy(&f, buf.data() + w.pos, 4);
        w.pos += 4;
        floats.push_back(f);
      } else {
        w.fail();
      }
    } else if (field == 5 || field == 7) {
      packedOrOne([&](Wire &x) { ints.push_back((int64_t)x.varint()); });
    } else if (field == 9 && wire == 2) {
      raw = w.bytes();
      hasRaw = true;
    } else { // skip anything else
      if (wire == 0)
        w.varint();
      else if (wire == 2)
        w.bytes();
      else if (wire == 5)
        w.pos += 4;
      else if (wire == 1)
        w.pos += 8;
      else
        w.fail();
      if (w.pos > buf.size())
        w.fail();
    }
  }
  DType dtype;
  switch (dataType) {
  case 1: dtype = DType::F32; break;
  case 10: dtype = DType::F16; break;
  case 16: dtype = DType::BF16; break;
  case 7: dtype = DType::I64; break;
  case 6: dtype = DType::I32; break;
  case 3: dtype = DType::I8; break;
  case 9: dtype = DType::Bool; break;
  default:
    throw std::runtime_error(what + ": unsupported TensorProto data type " +
                             std::to_string(dataType));
  }
  // Sizes are compared before the tensor is allocated.
  uint64_t bytes = tensorBytes(dtype, dims, what);
  size_t es = dtypeSize(dtype), n = bytes / es;
  if (hasRaw) {
    if (raw.size() != bytes)
      throw std::runtime_error(what + ": raw data size does not match shape " +
                               shapeString(dims));
  } else if (dtype == DType::F32) {
    if (floats.size() != n)
      throw std::runtime_error(what + ": float_data does not match shape");
  } else if (ints.size() != n) {
    throw std::runtime_error(what + ": int data does not match shape");
  }
  Tensor t(dtype, dims);
  if (n == 0) { // an empty tensor has no buffer to copy to
  } else if (hasRaw) {
    std::memcpy(t.data<char>(), raw.data(), raw.size());
  } else if (dtype == DType::F32) {
    std::memcpy(t.data<float>(), floats.data(), n * 4);
  } else {
    for (size_t i = 0; i < n; ++i) {
      int64_t v = ints[i];
      std::memcpy(t.data<char>() + i * es, &v, es); // little-endian truncation
    }
  }
  return t;
}

Tensor qcc::rt::readTensorFile(const std::string &path) {
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0)
    return parseNpy(readFile(path), path);
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, ".pb") == 0)
    return parseTensorProto(readFile(path), path);
  throw std::runtime_error(path + ": unknown tensor file type (use .npy or "
                                  "an ONNX TensorProto .pb)");
}
