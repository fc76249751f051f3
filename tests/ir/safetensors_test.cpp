// Safetensors: round trips of every dtype, a file built by hand from the format
// description, and one test per malformed file the reader must refuse.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "support/file_io.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// The 8-byte little-endian length, written byte by byte as the format describes it.
std::string lengthPrefix(uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i)
    s.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return s;
}

std::string fileOf(const std::string &header, const std::string &buffer) {
  return lengthPrefix(header.size()) + header + buffer;
}

std::string zeros(size_t n) { return std::string(n, '\0'); }

// Parses and expects an error that names the source and contains every fragment.
void expectRejected(const std::string &bytes, const std::vector<std::string> &fragments) {
  auto result = parseSafetensors(bytes, "weights.safetensors");
  ASSERT_FALSE(result.isOk()) << "accepted a malformed file";
  const std::string &message = result.message();
  EXPECT_EQ(message.rfind("weights.safetensors: ", 0), 0u) << message;
  for (const std::string &fragment : fragments)
    EXPECT_NE(message.find(fragment), std::string::npos)
        << "message lacks '" << fragment << "': " << message;
}

Tensor fromBits16(DType dtype, Shape shape, const std::vector<uint16_t> &bits) {
  Tensor t(TensorType{dtype, std::move(shape)});
  EXPECT_EQ(t.byteSize(), bits.size() * 2);
  std::memcpy(t.data(), bits.data(), t.byteSize());
  return t;
}

SafetensorsFile everyDType() {
  SafetensorsFile file;
  file.tensors["f32"] = Tensor::fromFloats(DType::F32, {2, 3},
                                           {1.5f, -0.0f, std::numeric_limits<float>::infinity(),
                                            std::numeric_limits<float>::denorm_min(), 3e38f, -7});
  // Infinity, a NaN with payload, the smallest subnormal, negative zero, the max value.
  file.tensors["f16"] = fromBits16(DType::F16, {5}, {0x7c00, 0x7e01, 0x0001, 0x8000, 0x7bff});
  file.tensors["bf16"] = fromBits16(DType::BF16, {2, 2}, {0x7f80, 0xff81, 0x3f80, 0x0001});
  file.tensors["i32"] = Tensor::fromInts(
      DType::I32, {3},
      {std::numeric_limits<int32_t>::min(), -1, std::numeric_limits<int32_t>::max()});
  // Beyond 2^53 a double would round these; the file must keep every bit.
  file.tensors["i64"] =
      Tensor::fromInts(DType::I64, {4},
                       {(int64_t{1} << 53) + 1, -((int64_t{1} << 60) + 3),
                        std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()});
  file.tensors["mask"] = Tensor::fromInts(DType::Bool, {1, 3}, {1, 0, 1});
  file.tensors["scalar"] = Tensor::fromFloats(DType::F32, {}, {42.0f});
  file.tensors["empty"] = Tensor(TensorType{DType::F16, {0, 4}});
  file.metadata["format"] = "pt";
  file.metadata["note"] = "quote \" and unicode \xc3\xa9";
  return file;
}

TEST(Safetensors, RoundTripsEveryDType) {
  SafetensorsFile file = everyDType();
  const std::string bytes = serializeSafetensors(file);
  auto parsed = parseSafetensors(bytes, "mem");
  ASSERT_TRUE(parsed.isOk()) << parsed.message();
  EXPECT_EQ(parsed->metadata, file.metadata);
  ASSERT_EQ(parsed->tensors.size(), file.tensors.size());
  for (const auto &[name, tensor] : file.tensors) {
    auto it = parsed->tensors.find(name);
    ASSERT_NE(it, parsed->tensors.end()) << name;
    EXPECT_EQ(it->second.type(), tensor.type()) << name;
    EXPECT_EQ(it->second, tensor) << name; // byte for byte, NaN payloads included
  }
  EXPECT_EQ(parsed->tensors.at("i64").getInt(0), (int64_t{1} << 53) + 1);
  EXPECT_EQ(parsed->tensors.at("f16").dataAs<uint16_t>()[1], 0x7e01);
  EXPECT_EQ(parsed->tensors.at("bf16").dataAs<uint16_t>()[1], 0xff81);
  // Serialising what was read gives the same bytes.
  EXPECT_EQ(serializeSafetensors(*parsed), bytes);
}

TEST(Safetensors, SerializedLayoutFollowsTheFormat) {
  SafetensorsFile file = everyDType();
  const std::string bytes = serializeSafetensors(file);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u) << "header is padded to a multiple of 8";
  ASSERT_LE(8 + n, bytes.size());
  const std::string header = bytes.substr(8, n);
  const size_t last = header.find_last_not_of(' ');
  EXPECT_EQ(header[last], '}') << "padding is spaces only";
  EXPECT_LT(header.size() - last - 1, 8u);

  nlohmann::json j = nlohmann::json::parse(header);
  // Tensors lie back to back in name order, starting at 0 and ending at the file's end.
  uint64_t offset = 0;
  for (const auto &[name, tensor] : file.tensors) {
    ASSERT_TRUE(j.contains(name)) << name;
    const auto &entry = j[name];
    EXPECT_EQ(entry["data_offsets"][0].get<uint64_t>(), offset) << name;
    offset += tensor.byteSize();
    EXPECT_EQ(entry["data_offsets"][1].get<uint64_t>(), offset) << name;
    EXPECT_EQ(entry["shape"].get<Shape>(), tensor.shape()) << name;
  }
  EXPECT_EQ(8 + n + offset, bytes.size());
  EXPECT_EQ(j["f32"]["dtype"], "F32");
  EXPECT_EQ(j["f16"]["dtype"], "F16");
  EXPECT_EQ(j["bf16"]["dtype"], "BF16");
  EXPECT_EQ(j["i32"]["dtype"], "I32");
  EXPECT_EQ(j["i64"]["dtype"], "I64");
  EXPECT_EQ(j["mask"]["dtype"], "BOOL");
  EXPECT_EQ(j["__metadata__"]["format"], "pt");
}

TEST(Safetensors, NoMetadataKeyWhenMetadataIsEmpty) {
  SafetensorsFile file;
  file.tensors["w"] = Tensor::fromFloats(DType::F32, {1}, {1.0f});
  const std::string bytes = serializeSafetensors(file);
  EXPECT_EQ(bytes.find("__metadata__"), std::string::npos);
  SafetensorsFile none;
  const std::string empty = serializeSafetensors(none);
  auto parsed = parseSafetensors(empty, "mem");
  ASSERT_TRUE(parsed.isOk()) << parsed.message();
  EXPECT_TRUE(parsed->tensors.empty());
  EXPECT_TRUE(parsed->metadata.empty());
}

// A file assembled from the format description alone, as another writer would produce it.
TEST(Safetensors, ReadsAHandBuiltFile) {
  std::string header = R"({"__metadata__":{"format":"pt"},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("a":{"dtype":"I64","shape":[],"data_offsets":[8,16]},)"
                       R"("h":{"dtype":"F16","shape":[1,1],"data_offsets":[16,18]},)"
                       R"("m":{"dtype":"BOOL","shape":[2],"data_offsets":[18,20]}})";
  header.append(3, ' '); // writers may pad with trailing spaces
  std::string buffer;
  // 1.0f = 0x3f800000 and -2.0f = 0xc0000000, little-endian.
  buffer += std::string("\x00\x00\x80\x3f", 4);
  buffer += std::string("\x00\x00\x00\xc0", 4);
  // 0x0102030405060708, little-endian.
  buffer += std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8);
  // f16 1.0 = 0x3c00.
  buffer += std::string("\x00\x3c", 2);
  buffer += std::string("\x01\x00", 2);

  auto parsed = parseSafetensors(fileOf(header, buffer), "hand.safetensors");
  ASSERT_TRUE(parsed.isOk()) << parsed.message();
  const SafetensorsFile &f = *parsed;
  EXPECT_EQ(f.metadata.at("format"), "pt");
  ASSERT_EQ(f.tensors.size(), 4u);
  EXPECT_EQ(f.tensors.at("b").type(), (TensorType{DType::F32, {2}}));
  EXPECT_EQ(f.tensors.at("b").getFloat(0), 1.0f);
  EXPECT_EQ(f.tensors.at("b").getFloat(1), -2.0f);
  EXPECT_EQ(f.tensors.at("a").type(), (TensorType{DType::I64, {}}));
  EXPECT_EQ(f.tensors.at("a").getInt(0), 0x0102030405060708);
  EXPECT_EQ(f.tensors.at("h").type(), (TensorType{DType::F16, {1, 1}}));
  EXPECT_EQ(f.tensors.at("h").getFloat(0), 1.0f);
  EXPECT_EQ(f.tensors.at("m").getInt(0), 1);
  EXPECT_EQ(f.tensors.at("m").getInt(1), 0);
}

TEST(Safetensors, WritesAtomicallyAndReadsBack) {
  char tmpl[] = "/tmp/kiln_safetensors_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path dir(tmpl);
  const std::string path = (dir / "model.safetensors").string();
  SafetensorsFile file = everyDType();
  ASSERT_TRUE(writeSafetensors(path, file).isOk());
  file.tensors["extra"] = Tensor::fromFloats(DType::BF16, {2}, {1.0f, 2.0f});
  Status second = writeSafetensors(path, file); // replaces the first file
  ASSERT_TRUE(second.isOk()) << second.message();
  auto read = readSafetensors(path);
  ASSERT_TRUE(read.isOk()) << read.message();
  EXPECT_EQ(read->tensors.size(), file.tensors.size());
  EXPECT_EQ(read->tensors.at("extra"), file.tensors.at("extra"));
  size_t entries = 0;
  for (const auto &e : fs::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u) << "a temporary file was left behind";
  fs::remove_all(dir);
}

TEST(Safetensors, ReadErrorNamesThePath) {
  auto read = readSafetensors("/nonexistent-kiln-dir/model.safetensors");
  ASSERT_FALSE(read.isOk());
  EXPECT_NE(read.message().find("/nonexistent-kiln-dir/model.safetensors"), std::string::npos);
}

TEST(Safetensors, RefusesToWriteWhatItCouldNotRead) {
  SafetensorsFile bad;
  bad.tensors[""] = Tensor::fromFloats(DType::F32, {1}, {1.0f});
  Status s = writeSafetensors("/tmp/kiln_never_written.safetensors", bad);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("empty name"), std::string::npos) << s.message();

  SafetensorsFile inconsistent;
  inconsistent.tensors["w"] = Tensor(); // f32[] type with no bytes
  s = writeSafetensors("/tmp/kiln_never_written.safetensors", inconsistent);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("tensor 'w'"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists("/tmp/kiln_never_written.safetensors"));
}

// --- malformed files ---------------------------------------------------------

const std::string kF32x2 = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

TEST(SafetensorsErrors, FileShorterThanTheLength) {
  expectRejected("", {"0 bytes", "shorter than the 8-byte header length"});
  expectRejected("abcdefg", {"7 bytes", "shorter than the 8-byte"});
}

TEST(SafetensorsErrors, HeaderLengthPastTheEnd) {
  expectRejected(lengthPrefix(100) + "{}", {"header length 100", "past the end of the file"});
  // The largest length must not wrap around when added to 8.
  expectRejected(lengthPrefix(UINT64_MAX) + "{}", {"header length"});
}

TEST(SafetensorsErrors, HeaderOver100MB) {
  expectRejected(lengthPrefix(100'000'001) + "{}", {"100000001", "100 MB"});
}

TEST(SafetensorsErrors, HeaderNotJson) {
  expectRejected(fileOf(R"({"w": )", ""), {"header is not valid JSON", "line 1, column"});
  expectRejected(fileOf("", ""), {"header is not valid JSON"});
  // Invalid UTF-8 in a name.
  expectRejected(fileOf("{\"\xff\": 1}", ""), {"header is not valid JSON"});
}

TEST(SafetensorsErrors, HeaderNotAnObject) {
  expectRejected(fileOf("[1, 2]", ""), {"header must be a JSON object", "array"});
  expectRejected(fileOf("\"text\"", ""), {"header must be a JSON object", "string"});
}

TEST(SafetensorsErrors, EntryNotAnObject) {
  expectRejected(fileOf(R"({"w": [1]})", ""), {"tensor 'w'", "expected an object"});
}

TEST(SafetensorsErrors, EntryMissingDType) {
  expectRejected(fileOf(R"({"w": {"shape":[2],"data_offsets":[0,8]}})", zeros(8)),
                 {"tensor 'w'", "missing field 'dtype'"});
}

TEST(SafetensorsErrors, EntryMissingShape) {
  expectRejected(fileOf(R"({"w": {"dtype":"F32","data_offsets":[0,8]}})", zeros(8)),
                 {"tensor 'w'", "missing field 'shape'"});
}

TEST(SafetensorsErrors, EntryMissingDataOffsets) {
  expectRejected(fileOf(R"({"w": {"dtype":"F32","shape":[2]}})", zeros(8)),
                 {"tensor 'w'", "missing field 'data_offsets'"});
}

TEST(SafetensorsErrors, UnknownDType) {
  expectRejected(fileOf(R"({"w": {"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", zeros(8)),
                 {"tensor 'w'", "F64 is not supported; kiln reads F32, F16, BF16, I32, I64, BOOL"});
  // The format's names are upper-case; kiln's own short names are not accepted here.
  expectRejected(fileOf(R"({"w": {"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", zeros(4)),
                 {"f32 is not supported"});
  expectRejected(fileOf(R"({"w": {"dtype":7,"shape":[1],"data_offsets":[0,4]}})", zeros(4)),
                 {"tensor 'w'", "dtype must be a string"});
}

TEST(SafetensorsErrors, NegativeDimension) {
  expectRejected(fileOf(R"({"w": {"dtype":"F32","shape":[2,-3],"data_offsets":[0,8]}})", zeros(8)),
                 {"tensor 'w'", "shape[1] is -3", "non-negative integers"});
}

TEST(SafetensorsErrors, NonIntegerDimension) {
  expectRejected(fileOf(R"({"w": {"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", zeros(8)),
                 {"tensor 'w'", "shape[0] is 2.5"});
  expectRejected(fileOf(R"({"w": {"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", zeros(8)),
                 {"tensor 'w'", "shape[0] is \"2\""});
  expectRejected(fileOf(R"({"w": {"dtype":"F32","shape":2,"data_offsets":[0,8]}})", zeros(8)),
                 {"tensor 'w'", "shape must be an array"});
  // 2^64 does not fit any integer type.
  expectRejected(
      fileOf(R"({"w": {"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,8]}})",
             zeros(8)),
      {"tensor 'w'", "shape[0]"});
}

TEST(SafetensorsErrors, ElementCountOverflow) {
  expectRejected(
      fileOf(R"({"w": {"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,8]}})",
             zeros(8)),
      {"tensor 'w'", "more elements than 2^64"});
  // 2^62 elements of 4 bytes overflow the byte count.
  expectRejected(
      fileOf(R"({"w": {"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}})",
             zeros(8)),
      {"tensor 'w'", "too large"});
  // Fits 2^64 as a count but not int64_t, which shapes use.
  expectRejected(
      fileOf(R"({"w": {"dtype":"BOOL","shape":[4294967296,2147483649],"data_offsets":[0,8]}})",
             zeros(8)),
      {"tensor 'w'", "too large"});
}

TEST(SafetensorsErrors, DataOffsetsNotTwoIncreasingIntegers) {
  for (const char *offsets :
       {"[8,0]", "[0]", "[0,4,8]", "[\"0\",\"8\"]", "[-1,7]", "[0.0,8.0]", "{}", "8"}) {
    SCOPED_TRACE(offsets);
    expectRejected(
        fileOf(std::string(R"({"w": {"dtype":"F32","shape":[2],"data_offsets":)") + offsets + "}}",
               zeros(8)),
        {"tensor 'w'", "data_offsets must be [begin, end]"});
  }
}

TEST(SafetensorsErrors, OffsetsPastTheBuffer) {
  expectRejected(fileOf("{\"w\": " + kF32x2 + "}", zeros(4)),
                 {"tensor 'w'", "past the end of the data buffer (4 bytes)"});
  expectRejected(
      fileOf(R"({"w": {"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})",
             zeros(8)),
      {"tensor 'w'", "past the end"});
}

TEST(SafetensorsErrors, ByteCountDiffersFromShape) {
  expectRejected(fileOf(R"({"w": {"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", zeros(20)),
                 {"tensor 'w'", "shape [2,3] of F32 needs 24 bytes, data_offsets cover 20"});
}

TEST(SafetensorsErrors, OverlappingTensors) {
  expectRejected(fileOf(R"({"a": {"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b": {"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        zeros(12)),
                 {"tensor 'b'", "overlap tensor 'a'"});
  // Two names for the same bytes.
  expectRejected(fileOf("{\"a\": " + kF32x2 + ", \"b\": " + kF32x2 + "}", zeros(8)), {"overlap"});
}

TEST(SafetensorsErrors, HoleInTheBuffer) {
  expectRejected(fileOf(R"({"a": {"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b": {"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                        zeros(12)),
                 {"bytes [4,8)", "belong to no tensor", "'b'"});
  expectRejected(fileOf(R"({"a": {"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", zeros(8)),
                 {"bytes [0,4)", "belong to no tensor"});
}

TEST(SafetensorsErrors, TrailingBytes) {
  expectRejected(fileOf(R"({"a": {"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", zeros(9)),
                 {"5 trailing bytes"});
  expectRejected(fileOf("{}", zeros(1)), {"1 trailing bytes"});
}

TEST(SafetensorsErrors, MetadataValuesMustBeStrings) {
  expectRejected(fileOf(R"({"__metadata__": {"format": "pt", "step": 3}})", ""),
                 {"__metadata__.step", "must be strings"});
  expectRejected(fileOf(R"({"__metadata__": ["pt"]})", ""),
                 {"__metadata__ must be an object of strings"});
}

TEST(SafetensorsErrors, BadTensorNames) {
  expectRejected(fileOf("{\"\": " + kF32x2 + "}", zeros(8)), {"empty name"});
  expectRejected(fileOf("{\"a\\u0000b\": " + kF32x2 + "}", zeros(8)),
                 {"tensor 'a\\x00b'", "NUL byte"});
  expectRejected(fileOf("{\"w\": " + kF32x2 + ", \"w\": " + kF32x2 + "}", zeros(8)),
                 {"'w' more than once"});
}

TEST(SafetensorsErrors, BoolBytesMustBeZeroOrOne) {
  expectRejected(fileOf(R"({"m": {"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})",
                        std::string("\x01\x02", 2)),
                 {"tensor 'm'", "element 1", "expected 0 or 1"});
}

// Every truncation and every single-byte corruption of a valid file parses or
// fails cleanly; none may read out of bounds (run under a sanitizer to see it).
// Resource limits: a header that claims a tensor of 10^12 elements is refused
// from the header, before any tensor is allocated.
TEST(SafetensorsErrors, AHugeTensorIsRefusedBeforeAllocating) {
  expectRejected(
      fileOf(R"({"w": {"dtype":"F32","shape":[1000000,1000000],"data_offsets":[0,4000000000000]}})",
             zeros(16)),
      {"tensor 'w'", "run past the end of the data buffer (16 bytes)"});
}

// Found by tests/fuzz: metadata nested 10^5 deep overflowed the stack when the
// error message printed it.
TEST(SafetensorsErrors, NestingDeeperThanTheLimit) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  expectRejected(fileOf(R"({"__metadata__": {"a": )" + deep + "}}", ""),
                 {"header nests arrays and objects deeper than 512 levels"});
  expectRejected(fileOf(R"({"w": )" + deep + "}", ""), {"deeper than 512 levels"});
}

TEST(SafetensorsErrors, TruncatedAndCorruptedFilesNeverCrash) {
  SafetensorsFile file;
  file.tensors["a"] = Tensor::fromFloats(DType::F16, {2}, {1.0f, 2.0f});
  file.tensors["b"] = Tensor::fromInts(DType::I64, {1}, {5});
  file.metadata["k"] = "v";
  const std::string bytes = serializeSafetensors(file);
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(parseSafetensors(bytes.substr(0, n), "cut").isOk()) << "length " << n;
  const size_t data_start = bytes.size() - 12; // 2 f16 + 1 i64
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned char flip : {0x01, 0x80, 0xff}) {
      std::string corrupt = bytes;
      corrupt[i] = static_cast<char>(corrupt[i] ^ flip);
      auto parsed = parseSafetensors(corrupt, "corrupt");
      // Tensor bytes are free-form for these dtypes, so corrupting them still parses.
      if (i >= data_start) {
        EXPECT_TRUE(parsed.isOk()) << "byte " << i << ": " << parsed.message();
      }
    }
  }
}

} // namespace
} // namespace kiln
