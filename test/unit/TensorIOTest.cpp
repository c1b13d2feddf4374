//===- TensorIOTest.cpp - hostile .npy and TensorProto inputs -------------===//
//
// runtime/core/TensorIO: a file that declares more than it holds, a malformed
// header or a negative dim is refused with one line naming the file, before
// anything is allocated; tensors too large for the machine are refused with
// the size asked and the size there is. fuzz/NpyFuzzer.cpp and
// fuzz/TensorProtoFuzzer.cpp search for more.
//
//===----------------------------------------------------------------------===//
#include "format/Checked.h"
#include "runtime/core/TensorIO.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

using namespace qcc::rt;

namespace {

/// A version-1 .npy file with this header dict and `data` after it.
std::string npy(const std::string &dict, const std::string &data = "") {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file.push_back(char(header.size() & 0xff));
  file.push_back(char(header.size() >> 8));
  return file + header + data;
}

std::string npyRefusal(const std::string &bytes) {
  try {
    parseNpy(bytes, "in.npy");
    return "";
  } catch (const std::runtime_error &e) {
    return e.what();
  }
}

std::string protoRefusal(const std::string &bytes) {
  try {
    parseTensorProto(bytes, "in.pb");
    return "";
  } catch (const std::runtime_error &e) {
    return e.what();
  }
}

TEST(TensorIO, NpyRoundTrip) {
  std::string bytes = npy("{'descr': '<f4', 'fortran_order': False, "
                          "'shape': (2, 1), }",
                          std::string(8, '\0'));
  Tensor t = parseNpy(bytes, "in.npy");
  EXPECT_EQ(t.shape(), (Shape{2, 1}));
  EXPECT_EQ(parseNpy(npy("{'descr': '<i8', 'fortran_order': False, "
                         "'shape': (), }",
                         std::string(8, '\0')),
                     "in.npy")
                .rank(),
            0);
}

TEST(TensorIO, NpyShapeWithoutData) {
  // [2^62, 4] floats would be 2^66 bytes: refused, nothing allocated.
  EXPECT_EQ(npyRefusal(npy("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (4611686018427387904, 4), }")),
            "in.npy: shape [4611686018427387904, 4] has more elements than "
            "fit in 64 bits");
  EXPECT_EQ(npyRefusal(npy("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (1073741824, 4), }")),
            "in.npy: holds 0 bytes of data, but its shape [1073741824, 4] "
            "needs 17179869184");
}

TEST(TensorIO, NpyMalformedHeaders) {
  // Once "basic_string::substr: __pos (which is 1) > this->size()" and
  // "stoll": now one line naming the file.
  EXPECT_EQ(npyRefusal(npy("{'descr': , 'fortran_order': False, "
                           "'shape': (2,), }")),
            "in.npy: malformed .npy header (its 'descr' entry)");
  EXPECT_EQ(npyRefusal(npy("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (x, 2), }")),
            "in.npy: malformed .npy shape (x, 2)");
  EXPECT_EQ(npyRefusal(npy("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (-1, 4), }")),
            "in.npy: malformed .npy shape (-1, 4)");
  EXPECT_EQ(npyRefusal(npy("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (99999999999999999999,), }")),
            "in.npy: .npy shape (99999999999999999999,) has a dimension "
            "beyond 64 bits");
  EXPECT_EQ(npyRefusal(npy("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (2,")),
            "in.npy: malformed .npy header (its 'shape' entry)");
  EXPECT_EQ(npyRefusal(npy("{'descr'")),
            "in.npy: malformed .npy header (its 'descr' entry)");
  EXPECT_EQ(npyRefusal(std::string("\x93NUMPY\x09\x00\x00\x00", 10)),
            "in.npy: unsupported .npy format version 9");
}

/// A varint of the protobuf wire format.
std::string varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s.push_back(char(v | 0x80));
    v >>= 7;
  }
  s.push_back(char(v));
  return s;
}

/// A TensorProto of (field key byte, varint) pairs; `tail` appended.
std::string proto(std::initializer_list<std::pair<char, uint64_t>> fields,
                  const std::string &tail = "") {
  std::string p;
  for (auto [key, v] : fields) {
    p.push_back(key);
    p.append(varint(v));
  }
  p.append(tail);
  return p;
}

TEST(TensorIO, TensorProtoShapeWithoutData) {
  // 0x08: a dim, 0x10: data_type (1: float), 0x22: packed float_data.
  // dims [2^62, 4], no data.
  EXPECT_EQ(protoRefusal(proto({{0x08, uint64_t(1) << 62}, {0x08, 4}, {0x10, 1}})),
            "in.pb: shape [4611686018427387904, 4] has more elements than fit "
            "in 64 bits");
  // A negative dim (a varint of -1).
  EXPECT_EQ(protoRefusal(proto({{0x08, uint64_t(-1)}, {0x10, 1}})),
            "in.pb: negative dimension in shape [-1]");
  // [2^30, 4] and no data: refused by size, nothing allocated.
  EXPECT_EQ(protoRefusal(proto({{0x08, uint64_t(1) << 30}, {0x08, 4}, {0x10, 1}})),
            "in.pb: float_data does not match shape");
  // Packed float_data that is not a whole number of floats.
  EXPECT_EQ(protoRefusal(proto({{0x10, 1}, {0x22, 3}}, "abc")),
            "in.pb: not a valid ONNX TensorProto");
  // An empty packed float_data for an empty tensor (a fuzz finding:
  // memcpy to a null buffer).
  EXPECT_EQ(protoRefusal(proto({{0x08, 0}, {0x10, 1}, {0x22, 0}})), "");
}

TEST(TensorIO, TensorsBeyondMemoryAreRefused) {
  uint64_t have = qcc::format::physicalMemoryBytes();
  int64_t elements = (int64_t)std::min<uint64_t>(have, INT64_MAX / 8) + 1;
  try {
    Tensor t(DType::I64, {elements});
    FAIL() << "a tensor larger than memory was allocated";
  } catch (const std::runtime_error &e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("a tensor of i64[", 0), 0u) << msg;
    EXPECT_NE(msg.find(" needs "), std::string::npos) << msg;
    EXPECT_NE(msg.find("; this machine has "), std::string::npos) << msg;
  }
}

TEST(TensorIO, OnlyRegularFilesAreRead) {
  try {
    readTensorFile("/dev/zero.npy");
    FAIL();
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()), "/dev/zero.npy: cannot open the file");
  }
  std::string fifo = testing::TempDir() + "/fifo.npy";
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  try {
    readTensorFile(fifo);
    FAIL();
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()), fifo + ": not a regular file");
  }
  std::remove(fifo.c_str());
}

} // namespace
