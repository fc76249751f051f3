// Parsing and checking the safetensors header (the format is described in
// safetensors.h): every range is checked against the file before any tensor
// byte is read.
#include "formats/safetensors_header.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "support/file_io.h"

namespace kiln {

using nlohmann::json;

namespace {

// The Hugging Face reference implementation rejects larger headers too.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char *kMetadataKey = "__metadata__";

std::optional<DType> parseSafetensorsDType(std::string_view name) {
  for (DType d : kAllDTypes)
    if (safetensorsDTypeName(d) == name)
      return d;
  return std::nullopt;
}

// Compact text of a JSON value for messages, cut short if long.
std::string brief(const json &value) {
  std::string s = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60)
    s = s.substr(0, 57) + "...";
  return s;
}

// A JSON number that is an integer within [0, 2^64); floats like 2.0 are refused.
std::optional<uint64_t> asUnsigned(const json &value) {
  if (value.is_number_unsigned())
    return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0)
    return static_cast<uint64_t>(value.get<int64_t>());
  return std::nullopt;
}

class HeaderReader {
public:
  explicit HeaderReader(std::string_view source) : source_(source) {}

  Error error(const std::string &what) const { return Error(source_ + ": " + what); }
  Error tensorError(const std::string &name, const std::string &what) const {
    return error("tensor " + quotedTensorName(name) + ": " + what);
  }

  Expected<SafetensorsEntry> entry(const std::string &name, const json &value,
                                   uint64_t buffer_size) const {
    if (name.empty())
      return error("a tensor has an empty name");
    if (name.find('\0') != std::string::npos)
      return tensorError(name, "the name contains a NUL byte");
    if (!value.is_object())
      return tensorError(name, "expected an object with dtype, shape and data_offsets, got " +
                                   std::string(value.type_name()));
    for (const char *key : {"dtype", "shape", "data_offsets"})
      if (!value.contains(key))
        return tensorError(name, std::string("missing field '") + key + "'");

    SafetensorsEntry e{name, DType::F32, {}, 0, 0};
    const json &dtype = value["dtype"];
    if (!dtype.is_string())
      return tensorError(name, "dtype must be a string such as \"F32\", got " + brief(dtype));
    auto parsed = parseSafetensorsDType(dtype.get<std::string>());
    if (!parsed)
      return tensorError(name, "dtype " + dtype.get<std::string>() +
                                   " is not supported; kiln reads F32, F16, BF16, I32, I64, BOOL");
    e.dtype = *parsed;

    const json &shape = value["shape"];
    if (!shape.is_array())
      return tensorError(name, "shape must be an array of dimensions, got " + brief(shape));
    uint64_t elements = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      auto d = asUnsigned(shape[i]);
      if (!d || *d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return tensorError(name, "shape[" + std::to_string(i) + "] is " + brief(shape[i]) +
                                     "; dimensions must be non-negative integers");
      e.shape.push_back(static_cast<int64_t>(*d));
      if (__builtin_mul_overflow(elements, *d, &elements))
        return tensorError(name, "shape " + brief(shape) + " has more elements than 2^64");
    }
    uint64_t needed = 0;
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(dtypeSize(e.dtype)), &needed) ||
        elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return tensorError(name, "shape " + shapeToString(e.shape) + " of " +
                                   dtype.get<std::string>() + " is too large to address");

    const json &offsets = value["data_offsets"];
    std::optional<uint64_t> begin, end;
    if (offsets.is_array() && offsets.size() == 2) {
      begin = asUnsigned(offsets[0]);
      end = asUnsigned(offsets[1]);
    }
    if (!begin || !end || *begin > *end)
      return tensorError(name, "data_offsets must be [begin, end] with non-negative integers "
                               "begin <= end, got " +
                                   brief(offsets));
    e.begin = *begin;
    e.end = *end;
    if (e.end > buffer_size)
      return tensorError(name, "data_offsets " + brief(offsets) +
                                   " run past the end of the data buffer (" +
                                   std::to_string(buffer_size) + " bytes)");
    if (e.end - e.begin != needed)
      return tensorError(name, "shape " + shapeToString(e.shape) + " of " +
                                   dtype.get<std::string>() + " needs " + std::to_string(needed) +
                                   " bytes, data_offsets cover " + std::to_string(e.end - e.begin));
    return e;
  }

  Status metadata(const json &value, std::map<std::string, std::string> &out) const {
    if (!value.is_object())
      return error(std::string(kMetadataKey) + " must be an object of strings, got " +
                   std::string(value.type_name()));
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!it.value().is_string())
        return error(std::string(kMetadataKey) + "." + it.key() +
                     ": metadata values must be strings, got " + brief(it.value()));
      out[it.key()] = it.value().get<std::string>();
    }
    return Status::ok();
  }

  // The format requires the buffer to be exactly the tensors, back to back in some order.
  Status layout(std::vector<SafetensorsEntry> &entries, uint64_t buffer_size) const {
    std::sort(entries.begin(), entries.end(),
              [](const SafetensorsEntry &a, const SafetensorsEntry &b) {
                return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
              });
    uint64_t covered = 0;
    const SafetensorsEntry *previous = nullptr;
    for (const SafetensorsEntry &e : entries) {
      if (e.begin < covered)
        return tensorError(e.name, "data_offsets [" + std::to_string(e.begin) + "," +
                                       std::to_string(e.end) + "] overlap tensor " +
                                       quotedTensorName(previous->name) + " (ends at " +
                                       std::to_string(covered) + ")");
      if (e.begin > covered)
        return error("bytes [" + std::to_string(covered) + "," + std::to_string(e.begin) +
                     ") of the data buffer belong to no tensor (a hole before tensor " +
                     quotedTensorName(e.name) + ")");
      covered = e.end;
      previous = &e;
    }
    if (covered != buffer_size)
      return error("the data buffer has " + std::to_string(buffer_size - covered) +
                   " trailing bytes after the last tensor (tensors cover " +
                   std::to_string(covered) + " of " + std::to_string(buffer_size) + " bytes)");
    return Status::ok();
  }

  // Parses the header text, also refusing duplicate top-level keys, which a
  // JSON object would otherwise silently merge, and nesting deeper than
  // kMaxJsonDepth, which messages would print recursively.
  Expected<json> parse(std::string_view text) const {
    std::string duplicate;
    std::set<std::string> keys;
    bool too_deep = false;
    auto callback = [&](int depth, json::parse_event_t event, json &parsed) {
      if (depth == 1 && event == json::parse_event_t::key && parsed.is_string() &&
          !keys.insert(parsed.get<std::string>()).second && duplicate.empty())
        duplicate = parsed.get<std::string>();
      if ((event == json::parse_event_t::object_start ||
           event == json::parse_event_t::array_start) &&
          depth >= kMaxJsonDepth)
        too_deep = true;
      return !too_deep;
    };
    json header;
    try {
      header = json::parse(text, callback);
    } catch (const json::exception &e) {
      std::string what = e.what();
      auto pos = what.find("] ");
      return error("header is not valid JSON: " +
                   (pos == std::string::npos ? what : what.substr(pos + 2)));
    }
    if (too_deep)
      return error("header nests arrays and objects deeper than " + std::to_string(kMaxJsonDepth) +
                   " levels");
    if (!header.is_object())
      return error("header must be a JSON object, got " + std::string(header.type_name()));
    if (!duplicate.empty())
      return error("header names " + quotedTensorName(duplicate) + " more than once");
    return header;
  }

private:
  std::string source_;
};

uint64_t readU64LittleEndian(const char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

} // namespace

std::string_view safetensorsDTypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  case DType::Bool:
    return "BOOL";
  }
  return "?";
}

// Tensor names may hold control bytes; show them escaped so messages stay on one line.
std::string quotedTensorName(std::string_view name) {
  std::string s = "'";
  for (char c : name) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20) {
      static const char *kHex = "0123456789abcdef";
      s += "\\x";
      s += kHex[u >> 4];
      s += kHex[u & 15];
    } else {
      s += c;
    }
  }
  return s + "'";
}

Expected<uint64_t> safetensorsHeaderLength(std::string_view first_bytes, uint64_t file_size,
                                           std::string_view source) {
  HeaderReader r(source);
  if (file_size < kSafetensorsLengthBytes || first_bytes.size() < kSafetensorsLengthBytes)
    return r.error("file is " + std::to_string(file_size) +
                   " bytes, shorter than the 8-byte header length of a safetensors file");
  const uint64_t header_size = readU64LittleEndian(first_bytes.data());
  if (header_size > kMaxHeaderBytes)
    return r.error("header length " + std::to_string(header_size) +
                   " exceeds the 100 MB limit (not a safetensors file, or corrupt)");
  if (header_size > file_size - kSafetensorsLengthBytes)
    return r.error(
        "header length " + std::to_string(header_size) + " runs past the end of the file (" +
        std::to_string(file_size - kSafetensorsLengthBytes) + " bytes follow the length)");
  return header_size;
}

Expected<SafetensorsHeader> parseSafetensorsHeader(std::string_view json_text, uint64_t file_size,
                                                   std::string_view source) {
  HeaderReader r(source);
  SafetensorsHeader parsed;
  parsed.data_start = kSafetensorsLengthBytes + json_text.size();
  assert(parsed.data_start <= file_size);
  const uint64_t buffer_size = file_size - parsed.data_start;
  KILN_ASSIGN_OR_RETURN(json header, r.parse(json_text));
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == kMetadataKey) {
      KILN_RETURN_IF_ERROR(r.metadata(it.value(), parsed.metadata));
      continue;
    }
    KILN_ASSIGN_OR_RETURN(SafetensorsEntry e, r.entry(it.key(), it.value(), buffer_size));
    parsed.entries.push_back(std::move(e));
  }
  KILN_RETURN_IF_ERROR(r.layout(parsed.entries, buffer_size));
  return parsed;
}

Status checkSafetensorsBytes(const SafetensorsEntry &entry, const Tensor &tensor,
                             std::string_view source) {
  if (entry.dtype != DType::Bool)
    return Status::ok();
  const auto *bytes = tensor.dataAs<uint8_t>();
  for (int64_t i = 0; i < tensor.numElements(); ++i)
    if (bytes[i] > 1)
      return HeaderReader(source).tensorError(entry.name,
                                              "BOOL element " + std::to_string(i) + " is byte " +
                                                  std::to_string(bytes[i]) + "; expected 0 or 1");
  return Status::ok();
}

} // namespace kiln
