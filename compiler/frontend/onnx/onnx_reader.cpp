// Reading ONNX protobufs within limits, and their tensors.
#include "compiler/frontend/onnx/onnx_reader.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include "compiler/frontend/onnx/onnx_errors.h"

namespace kiln::frontend::onnx_import {

namespace {

namespace fs = std::filesystem;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

Error malformed(const std::string &source, const std::string &what) {
  return Error(source + ": " + what).withCode(kErrOnnxMalformed);
}

// Skips a field of wire type `tag`, false when the bytes end inside it.
bool skipField(CodedInputStream &in, uint32_t tag) { return WireFormatLite::SkipField(&in, tag); }

// Counts the `node` fields (field 1) of a GraphProto's bytes without
// parsing them; -1 when the bytes are not a well-formed message.
int64_t countNodes(const std::string &graph) {
  CodedInputStream in(reinterpret_cast<const uint8_t *>(graph.data()),
                      static_cast<int>(graph.size()));
  int64_t nodes = 0;
  while (uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == 1)
      ++nodes;
    if (!skipField(in, tag))
      return -1;
  }
  return in.ConsumedEntireMessage() ? nodes : -1;
}

// The node count of the model's graph (field 7 of ModelProto), counted on
// the wire before anything is parsed, so a file of a billion empty nodes
// is refused for its count, not after it has filled the memory.
Expected<int64_t> prescanNodes(const std::string &bytes, const std::string &source) {
  CodedInputStream in(reinterpret_cast<const uint8_t *>(bytes.data()),
                      static_cast<int>(bytes.size()));
  int64_t nodes = 0;
  while (uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == 7 &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      std::string graph;
      uint32_t size = 0;
      if (!in.ReadVarint32(&size) || !in.ReadString(&graph, static_cast<int>(size)))
        return malformed(source, "the file ends inside the model's graph (truncated?)");
      const int64_t n = countNodes(graph);
      if (n < 0)
        return malformed(source, "the model's graph is not a well-formed protobuf message "
                                 "(truncated or not an ONNX file)");
      nodes += n;
      continue;
    }
    if (!skipField(in, tag))
      break;
  }
  if (!in.ConsumedEntireMessage())
    return malformed(source, "not an ONNX model: the bytes are not a well-formed protobuf "
                             "message (truncated, or another kind of file)");
  return nodes;
}

} // namespace

Expected<std::unique_ptr<onnx::ModelProto>>
parseOnnxModel(const std::string &bytes, const std::string &source, const ReadLimits &limits) {
  if (static_cast<int64_t>(bytes.size()) > limits.max_file_bytes)
    return Error(source + ": " + std::to_string(bytes.size()) + " bytes, more than the " +
                 std::to_string(limits.max_file_bytes) +
                 " an ONNX protobuf may hold; keep the weights in external data files")
        .withCode(kErrOnnxLimit);
  if (bytes.empty())
    return malformed(source, "the file is empty (expected an ONNX ModelProto)");
  KILN_ASSIGN_OR_RETURN(int64_t nodes, prescanNodes(bytes, source));
  if (nodes > limits.max_nodes)
    return Error(source + ": the graph has " + std::to_string(nodes) + " nodes, more than the " +
                 std::to_string(limits.max_nodes) + " kiln reads")
        .withCode(kErrOnnxLimit);
  auto model = std::make_unique<onnx::ModelProto>();
  CodedInputStream in(reinterpret_cast<const uint8_t *>(bytes.data()),
                      static_cast<int>(bytes.size()));
  in.SetRecursionLimit(limits.max_depth);
  if (!model->ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    return malformed(source, "not an ONNX model: protobuf could not parse a ModelProto "
                             "(truncated, nested deeper than " +
                                 std::to_string(limits.max_depth) +
                                 " messages, or another kind of file)");
  if (!model->has_graph())
    return malformed(source, "the model has no graph");
  return model;
}

Expected<std::unique_ptr<onnx::ModelProto>> readOnnxModel(const std::string &path,
                                                          const ReadLimits &limits) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec)
    return Error(path + ": cannot read the ONNX model (" + ec.message() + ")")
        .withCode(kErrOnnxMalformed);
  if (static_cast<int64_t>(size) > limits.max_file_bytes)
    return Error(path + ": " + std::to_string(size) + " bytes, more than the " +
                 std::to_string(limits.max_file_bytes) +
                 " an ONNX protobuf may hold; keep the weights in external data files")
        .withCode(kErrOnnxLimit);
  std::ifstream file(path, std::ios::binary);
  std::string bytes(size, '\0');
  if (!file.read(bytes.data(), static_cast<std::streamsize>(size)))
    return Error(path + ": cannot read the ONNX model").withCode(kErrOnnxMalformed);
  return parseOnnxModel(bytes, path, limits);
}

const char *onnxTypeName(int32_t t) {
  switch (t) {
  case onnx::TensorProto::FLOAT:
    return "float";
  case onnx::TensorProto::UINT8:
    return "uint8";
  case onnx::TensorProto::INT8:
    return "int8";
  case onnx::TensorProto::UINT16:
    return "uint16";
  case onnx::TensorProto::INT16:
    return "int16";
  case onnx::TensorProto::INT32:
    return "int32";
  case onnx::TensorProto::INT64:
    return "int64";
  case onnx::TensorProto::STRING:
    return "string";
  case onnx::TensorProto::BOOL:
    return "bool";
  case onnx::TensorProto::FLOAT16:
    return "float16";
  case onnx::TensorProto::DOUBLE:
    return "double";
  case onnx::TensorProto::UINT32:
    return "uint32";
  case onnx::TensorProto::UINT64:
    return "uint64";
  case onnx::TensorProto::COMPLEX64:
    return "complex64";
  case onnx::TensorProto::COMPLEX128:
    return "complex128";
  case onnx::TensorProto::BFLOAT16:
    return "bfloat16";
  default:
    return "undefined";
  }
}

Expected<DType> dtypeOfOnnx(int32_t t) {
  switch (t) {
  case onnx::TensorProto::FLOAT:
    return DType::F32;
  case onnx::TensorProto::FLOAT16:
    return DType::F16;
  case onnx::TensorProto::BFLOAT16:
    return DType::BF16;
  case onnx::TensorProto::INT32:
    return DType::I32;
  case onnx::TensorProto::INT64:
    return DType::I64;
  case onnx::TensorProto::BOOL:
    return DType::Bool;
  default:
    return Error(std::string("element type ") + onnxTypeName(t) +
                 " is not supported (kiln has float, float16, bfloat16, int32, int64 and bool)")
        .withCode(kErrOnnxUnsupportedType);
  }
}

namespace {

// The bytes of external data `proto` names, read from below `model_dir`.
Expected<std::string> readExternal(const onnx::TensorProto &proto, const std::string &model_dir,
                                   const std::string &what, int64_t want_bytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &entry : proto.external_data()) {
    try {
      if (entry.key() == "location")
        location = entry.value();
      else if (entry.key() == "offset")
        offset = std::stoll(entry.value());
      else if (entry.key() == "length")
        length = std::stoll(entry.value());
    } catch (const std::exception &) {
      return Error(what + ": external data field '" + entry.key() + "' is not a number: '" +
                   entry.value() + "'")
          .withCode(kErrOnnxExternalData);
    }
  }
  auto refuse = [&](const std::string &why) {
    return Error(what + ": external data '" + location + "' " + why).withCode(kErrOnnxExternalData);
  };
  if (location.empty())
    return refuse("has no location");
  const fs::path rel(location);
  if (rel.is_absolute())
    return refuse("is an absolute path; ONNX external data must lie in the model's folder");
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(fs::path(model_dir.empty() ? "." : model_dir), ec);
  const fs::path file = fs::weakly_canonical(dir / rel, ec);
  const std::string dir_s = dir.string() + "/", file_s = file.string();
  if (ec || file_s.compare(0, dir_s.size(), dir_s) != 0)
    return refuse("leaves the model's folder; ONNX external data must lie in it");
  if (!fs::is_regular_file(file, ec))
    return refuse("is missing (looked for " + file_s + ")");
  const auto size = static_cast<int64_t>(fs::file_size(file, ec));
  if (length < 0)
    length = want_bytes;
  if (offset < 0 || length != want_bytes || offset > size || size - offset < length)
    return refuse(
        "holds " + std::to_string(size) + " bytes; the tensor needs " + std::to_string(want_bytes) +
        " at offset " + std::to_string(offset) +
        (length != want_bytes ? " (its length field says " + std::to_string(length) + ")" : ""));
  std::ifstream in(file, std::ios::binary);
  std::string bytes(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  if (!in.read(bytes.data(), length))
    return refuse("could not be read");
  return bytes;
}

} // namespace

Expected<Tensor> tensorFromOnnx(const onnx::TensorProto &proto, const std::string &model_dir,
                                const std::string &what) {
  auto dtype = dtypeOfOnnx(proto.data_type());
  if (!dtype)
    return dtype.error().withContext(what);
  Shape shape(proto.dims().begin(), proto.dims().end());
  for (int64_t d : shape)
    if (d < 0)
      return malformed(what, "dimension " + std::to_string(d) + " is negative");
  auto count = checkedNumElements(shape);
  const size_t elem = dtypeSize(*dtype);
  if (!count || *count > (int64_t{1} << 40) / static_cast<int64_t>(elem))
    return Error(what + ": shape " + shapeToString(shape) + " is too large")
        .withCode(kErrOnnxLimit);
  const int64_t n = *count;
  const int64_t bytes = n * static_cast<int64_t>(elem);
  auto mismatch = [&](int64_t got, const char *field) {
    return malformed(what, "holds " + std::to_string(got) + " values in " + field + ", but its " +
                               "shape " + shapeToString(shape) + " needs " + std::to_string(n));
  };
  std::string raw;
  const bool external = proto.data_location() == onnx::TensorProto::EXTERNAL;
  if (external) {
    KILN_ASSIGN_OR_RETURN(raw, readExternal(proto, model_dir, what, bytes));
  } else if (proto.has_raw_data()) {
    if (static_cast<int64_t>(proto.raw_data().size()) != bytes)
      return malformed(what, "holds " + std::to_string(proto.raw_data().size()) +
                                 " bytes of raw data, but its shape " + shapeToString(shape) +
                                 " of " + onnxTypeName(proto.data_type()) + " needs " +
                                 std::to_string(bytes));
    raw = proto.raw_data();
  }
  Tensor t(TensorType{*dtype, shape});
  if (external || proto.has_raw_data()) {
    if (bytes > 0) // ONNX's raw data is little-endian, as the host
      std::memcpy(t.data(), raw.data(), static_cast<size_t>(bytes));
    return t;
  }
  switch (*dtype) {
  case DType::F32:
    if (proto.float_data_size() != n)
      return mismatch(proto.float_data_size(), "float_data");
    for (int64_t i = 0; i < n; ++i)
      t.dataAs<float>()[i] = proto.float_data(static_cast<int>(i));
    break;
  case DType::F16:
  case DType::BF16: // the bits, one per int32_data entry
    if (proto.int32_data_size() != n)
      return mismatch(proto.int32_data_size(), "int32_data");
    for (int64_t i = 0; i < n; ++i)
      t.dataAs<uint16_t>()[i] = static_cast<uint16_t>(proto.int32_data(static_cast<int>(i)));
    break;
  case DType::I32:
  case DType::Bool:
    if (proto.int32_data_size() != n)
      return mismatch(proto.int32_data_size(), "int32_data");
    for (int64_t i = 0; i < n; ++i)
      t.setInt(i, proto.int32_data(static_cast<int>(i)));
    break;
  case DType::I64:
    if (proto.int64_data_size() != n)
      return mismatch(proto.int64_data_size(), "int64_data");
    for (int64_t i = 0; i < n; ++i)
      t.setInt(i, proto.int64_data(static_cast<int>(i)));
    break;
  }
  return t;
}

Expected<Tensor> readOnnxTensorFile(const std::string &path, std::string *name) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return Error(path + ": cannot read the tensor file").withCode(kErrOnnxMalformed);
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes))
    return malformed(path, "not a serialized ONNX TensorProto");
  if (name)
    *name = proto.name();
  return tensorFromOnnx(proto, fs::path(path).parent_path().string(), path);
}

} // namespace kiln::frontend::onnx_import
