// Safetensors reader and writer: validates the whole header and the buffer layout
// before touching tensor bytes, so a malformed file is an error, never a bad read.
#include "ir/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "ir/file_io.h"

namespace kiln {

static_assert(std::endian::native == std::endian::little,
              "safetensors tensor bytes are little-endian and are copied as they are");

using nlohmann::json;

namespace {

// The Hugging Face reference implementation rejects larger headers too.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char *kMetadataKey = "__metadata__";

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

std::optional<DType> parseSafetensorsDType(std::string_view name) {
  for (DType d : kAllDTypes)
    if (safetensorsDTypeName(d) == name)
      return d;
  return std::nullopt;
}

// Tensor names may hold control bytes; show them escaped so messages stay on one line.
std::string quotedName(std::string_view name) {
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

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin;
  uint64_t end;
};

class HeaderReader {
public:
  explicit HeaderReader(std::string_view source) : source_(source) {}

  Error error(const std::string &what) const { return Error(source_ + ": " + what); }
  Error tensorError(const std::string &name, const std::string &what) const {
    return error("tensor " + quotedName(name) + ": " + what);
  }

  Expected<Entry> entry(const std::string &name, const json &value, uint64_t buffer_size) const {
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

    Entry e{name, DType::F32, {}, 0, 0};
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
  Status layout(std::vector<Entry> &entries, uint64_t buffer_size) const {
    std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t covered = 0;
    const Entry *previous = nullptr;
    for (const Entry &e : entries) {
      if (e.begin < covered)
        return tensorError(e.name, "data_offsets [" + std::to_string(e.begin) + "," +
                                       std::to_string(e.end) + "] overlap tensor " +
                                       quotedName(previous->name) + " (ends at " +
                                       std::to_string(covered) + ")");
      if (e.begin > covered)
        return error("bytes [" + std::to_string(covered) + "," + std::to_string(e.begin) +
                     ") of the data buffer belong to no tensor (a hole before tensor " +
                     quotedName(e.name) + ")");
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
      return error("header names " + quotedName(duplicate) + " more than once");
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

Expected<SafetensorsFile> parseSafetensors(std::string_view bytes, std::string_view source) {
  HeaderReader r(source);
  if (bytes.size() < 8)
    return r.error("file is " + std::to_string(bytes.size()) +
                   " bytes, shorter than the 8-byte header length of a safetensors file");
  const uint64_t header_size = readU64LittleEndian(bytes.data());
  if (header_size > kMaxHeaderBytes)
    return r.error("header length " + std::to_string(header_size) +
                   " exceeds the 100 MB limit (not a safetensors file, or corrupt)");
  if (header_size > bytes.size() - 8)
    return r.error("header length " + std::to_string(header_size) +
                   " runs past the end of the file (" + std::to_string(bytes.size() - 8) +
                   " bytes follow the length)");
  const std::string_view buffer = bytes.substr(8 + header_size);

  KILN_ASSIGN_OR_RETURN(json header, r.parse(bytes.substr(8, header_size)));
  SafetensorsFile file;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == kMetadataKey) {
      KILN_RETURN_IF_ERROR(r.metadata(it.value(), file.metadata));
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Entry e, r.entry(it.key(), it.value(), buffer.size()));
    entries.push_back(std::move(e));
  }
  KILN_RETURN_IF_ERROR(r.layout(entries, buffer.size()));

  // Every range is now known to lie inside the buffer and to match its shape.
  for (const Entry &e : entries) {
    Tensor t(TensorType{e.dtype, e.shape});
    assert(t.byteSize() == e.end - e.begin);
    if (t.byteSize() > 0)
      std::memcpy(t.data(), buffer.data() + e.begin, t.byteSize());
    if (e.dtype == DType::Bool)
      for (int64_t i = 0; i < t.numElements(); ++i)
        if (t.dataAs<uint8_t>()[i] > 1)
          return r.tensorError(e.name, "BOOL element " + std::to_string(i) + " is byte " +
                                           std::to_string(t.dataAs<uint8_t>()[i]) +
                                           "; expected 0 or 1");
    file.tensors.emplace(e.name, std::move(t));
  }
  return file;
}

Expected<SafetensorsFile> readSafetensors(const std::string &path) {
  // A regular file is mapped, so a 28 GB checkpoint costs its tensors once,
  // not a second copy of the whole file; anything else (a pipe, a device) is
  // read up to readFile's cap for streams.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
  if (!regular) {
    ::close(fd);
    KILN_ASSIGN_OR_RETURN(std::string bytes, readFile(path));
    return parseSafetensors(bytes, path);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void *mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (mapped == MAP_FAILED)
    return Error(path + ": cannot map: " + std::strerror(map_errno));
  ::madvise(mapped, size, MADV_SEQUENTIAL);
  Expected<SafetensorsFile> file =
      parseSafetensors(std::string_view(static_cast<const char *>(mapped), size), path);
  ::munmap(mapped, size);
  return file;
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
      return Error(path + ": tensor " + quotedName(name) + ": the name contains a NUL byte");
    if (!isValidUtf8(name))
      return Error(path + ": tensor " + quotedName(name) + ": the name is not valid UTF-8");
    const uint64_t needed = static_cast<uint64_t>(tensor.numElements()) * dtypeSize(tensor.dtype());
    if (tensor.byteSize() != needed)
      return Error(path + ": tensor " + quotedName(name) + ": holds " +
                   std::to_string(tensor.byteSize()) + " bytes but " + typeToString(tensor.type()) +
                   " needs " + std::to_string(needed));
  }
  for (const auto &[key, value] : file.metadata)
    if (!isValidUtf8(key) || !isValidUtf8(value))
      return Error(path + ": metadata " + quotedName(key) + " is not valid UTF-8");
  return Status::ok();
}

} // namespace

Status writeSafetensors(const std::string &path, const SafetensorsFile &file) {
  KILN_RETURN_IF_ERROR(checkWritable(path, file));
  return writeFileAtomic(path, serializeSafetensors(file));
}

} // namespace kiln
