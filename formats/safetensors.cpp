// Safetensors reader and writer: validates the whole header and the buffer layout
// (safetensors_header.h) before touching tensor bytes, so a malformed file is an
// error, never a bad read.
#include "formats/safetensors.h"

#include <bit>
#include <cstring>

#include <nlohmann/json.hpp>

#include "formats/safetensors_header.h"
#include "formats/safetensors_reader.h"
#include "support/file_io.h"

namespace kiln {

static_assert(std::endian::native == std::endian::little,
              "safetensors tensor bytes are little-endian and are copied as they are");

using nlohmann::json;

namespace {

constexpr const char *kMetadataKey = "__metadata__";

} // namespace

Expected<SafetensorsFile> parseSafetensors(std::string_view bytes, std::string_view source) {
  KILN_ASSIGN_OR_RETURN(
      uint64_t header_size,
      safetensorsHeaderLength(bytes.substr(0, kSafetensorsLengthBytes), bytes.size(), source));
  KILN_ASSIGN_OR_RETURN(SafetensorsHeader header,
                        parseSafetensorsHeader(bytes.substr(kSafetensorsLengthBytes, header_size),
                                               bytes.size(), source));
  // Every range is now known to lie inside the buffer and to match its shape.
  const std::string_view buffer = bytes.substr(header.data_start);
  SafetensorsFile file;
  file.metadata = std::move(header.metadata);
  for (const SafetensorsEntry &e : header.entries) {
    Tensor t = Tensor::uninitialized(TensorType{e.dtype, e.shape}); // every byte copied below
    assert(t.byteSize() == e.end - e.begin);
    if (t.byteSize() > 0)
      std::memcpy(t.data(), buffer.data() + e.begin, t.byteSize());
    KILN_RETURN_IF_ERROR(checkSafetensorsBytes(e, t, source));
    file.tensors.emplace(e.name, std::move(t));
  }
  return file;
}

Expected<SafetensorsFile> readSafetensors(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(SafetensorsReader reader, SafetensorsReader::open(path));
  return reader.read();
}

std::string serializeSafetensors(const SafetensorsFile &file) {
  json header = json::object();
  uint64_t offset = 0;
  // std::map iterates in name order, which is also the buffer order.
  for (const auto &[name, tensor] : file.tensors) {
    const uint64_t end = offset + tensor.byteSize();
    header[name] = json{{"dtype", std::string(safetensorsDTypeName(tensor.dtype()))},
                        {"shape", tensor.shape()},
                        {"data_offsets", {offset, end}}};
    offset = end;
  }
  if (!file.metadata.empty())
    header[kMetadataKey] = file.metadata;
  // Replacing invalid UTF-8 keeps this non-throwing; writeSafetensors refuses such names.
  std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + text.size() + offset);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += text;
  for (const auto &[name, tensor] : file.tensors)
    out.append(static_cast<const char *>(tensor.data()), tensor.byteSize());
  return out;
}

namespace {

bool isValidUtf8(const std::string &s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::exception &) {
    return false;
  }
}

// What a reader would refuse, caught before the file is written.
Status checkWritable(const std::string &path, const SafetensorsFile &file) {
  for (const auto &[name, tensor] : file.tensors) {
    if (name.empty())
      return Error(path + ": a tensor has an empty name");
    if (name == kMetadataKey)
      return Error(path + ": '" + std::string(kMetadataKey) + "' is reserved, not a tensor name");
    if (name.find('\0') != std::string::npos)
      return Error(path + ": tensor " + quotedTensorName(name) + ": the name contains a NUL byte");
    if (!isValidUtf8(name))
      return Error(path + ": tensor " + quotedTensorName(name) + ": the name is not valid UTF-8");
    const uint64_t needed = static_cast<uint64_t>(tensor.numElements()) * dtypeSize(tensor.dtype());
    if (tensor.byteSize() != needed)
      return Error(path + ": tensor " + quotedTensorName(name) + ": holds " +
                   std::to_string(tensor.byteSize()) + " bytes but " + typeToString(tensor.type()) +
                   " needs " + std::to_string(needed));
  }
  for (const auto &[key, value] : file.metadata)
    if (!isValidUtf8(key) || !isValidUtf8(value))
      return Error(path + ": metadata " + quotedTensorName(key) + " is not valid UTF-8");
  return Status::ok();
}

} // namespace

Status writeSafetensors(const std::string &path, const SafetensorsFile &file) {
  KILN_RETURN_IF_ERROR(checkWritable(path, file));
  return writeFileAtomic(path, serializeSafetensors(file));
}

} // namespace kiln
