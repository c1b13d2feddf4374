//===- TensorIO.cpp - reading and writing tensor files --------------------===//
#include "runtime/TensorIO.h"
#include "runtime/HalfFloat.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

using namespace qcc::rt;

static std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(path + ": cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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
  case DType::BF16: break; // writeNpy widens it to f32
  }
  throw std::runtime_error("bf16 has no .npy dtype");
}

/// The value of `key` in the header dict, e.g. 'descr': '<f4'.
static std::string dictValue(const std::string &header, const std::string &key,
                             const std::string &path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos)
    throw std::runtime_error(path + ": .npy header has no '" + key + "'");
  size_t colon = header.find(':', k);
  size_t start = header.find_first_not_of(' ', colon + 1);
  size_t end = header[start] == '('   ? header.find(')', start) + 1
               : header[start] == '\'' ? header.find('\'', start + 1) + 1
                                       : header.find_first_of(",}", start);
  return header.substr(start, end - start);
}

static Tensor readNpy(const std::string &path) {
  std::string bytes = readFile(path);
  auto fail = [&](const std::string &why) -> Tensor {
    throw std::runtime_error(path + ": " + why);
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return fail("not a .npy file");
  int major = (unsigned char)bytes[6];
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
  if (offset + headerLen > bytes.size())
    return fail("truncated .npy header");
  std::string header = bytes.substr(offset, headerLen);
  std::string descr = dictValue(header, "descr", path);
  descr = descr.substr(1, descr.size() - 2);
  DType dtype;
  if (!npyDType(descr, dtype))
    return fail("unsupported .npy dtype '" + descr +
                "' (supported: float32, float16, int64, int32, int8, bool)");
  if (dictValue(header, "fortran_order", path) != "False")
    return fail("Fortran-order arrays are not supported");
  std::string shapeText = dictValue(header, "shape", path);
  Shape shape;
  for (size_t i = 1; i < shapeText.size();) {
    size_t j = shapeText.find_first_of(",)", i);
    std::string num = shapeText.substr(i, j - i);
    if (num.find_first_not_of(' ') != std::string::npos)
      shape.push_back(std::stoll(num));
    i = j + 1;
  }
  Tensor t(dtype, shape);
  size_t data = offset + headerLen;
  if (bytes.size() - data != t.bytes())
    return fail("holds " + std::to_string(bytes.size() - data) +
                " bytes of data, but its shape " + shapeString(shape) +
                " needs " + std::to_string(t.bytes()));
  std::memcpy(t.data<char>(), bytes.data() + data, t.bytes());
  return t;
}

void qcc::rt::writeNpy(const std::string &path, const Tensor &t) {
  if (t.dtype() == DType::BF16) // numpy has no bfloat16: widened, exactly
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
        size_t n = s.size() / 4;
        floats.resize(floats.size() + n);
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
  Tensor t(dtype, dims);
  size_t n = t.numel(), es = dtypeSize(dtype);
  if (hasRaw) {
    if (raw.size() != t.bytes())
      throw std::runtime_error(what + ": raw data size does not match shape " +
                               shapeString(dims));
    std::memcpy(t.data<char>(), raw.data(), raw.size());
  } else if (dtype == DType::F32) {
    if (floats.size() != n)
      throw std::runtime_error(what + ": float_data does not match shape");
    std::memcpy(t.data<float>(), floats.data(), n * 4);
  } else {
    if (ints.size() != n)
      throw std::runtime_error(what + ": int data does not match shape");
    for (size_t i = 0; i < n; ++i) {
      int64_t v = ints[i];
      std::memcpy(t.data<char>() + i * es, &v, es); // little-endian truncation
    }
  }
  return t;
}

Tensor qcc::rt::readTensorFile(const std::string &path) {
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0)
    return readNpy(path);
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, ".pb") == 0)
    return parseTensorProto(readFile(path), path);
  throw std::runtime_error(path + ": unknown tensor file type (use .npy or "
                                  "an ONNX TensorProto .pb)");
}
