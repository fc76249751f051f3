// The safetensors header: the 8-byte length and the JSON after it, parsed and
// checked against the file's size before any tensor byte is read, so that
// every tensor's bytes are known to lie in the file and to match its shape.
// Shared by the reader of bytes in memory (safetensors.h) and the reader of
// files (safetensors_reader.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/tensor.h"
#include "support/error.h"

namespace kiln {

// One tensor of the header: its bytes are [begin, end) of the data buffer.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsHeader {
  uint64_t data_start = 0; // where the data buffer begins in the file: 8 + the JSON's length
  std::vector<SafetensorsEntry> entries; // in buffer order, back to back, covering it exactly
  std::map<std::string, std::string> metadata;
};

inline constexpr uint64_t kSafetensorsLengthBytes = 8;

// The JSON's length from the file's first bytes (`first_bytes`, up to 8) in a
// file of `file_size` bytes; an error when the file is shorter than 8 bytes
// or the length is over 100 MB or runs past the end.
Expected<uint64_t> safetensorsHeaderLength(std::string_view first_bytes, uint64_t file_size,
                                           std::string_view source);

// The header whose JSON is `json_text` (of the length safetensorsHeaderLength
// gave) in a file of `file_size` bytes. `source` names the file in errors.
Expected<SafetensorsHeader> parseSafetensorsHeader(std::string_view json_text, uint64_t file_size,
                                                   std::string_view source);

// What a tensor's bytes must hold once read: a BOOL tensor's bytes are 0 or 1.
Status checkSafetensorsBytes(const SafetensorsEntry &entry, const Tensor &tensor,
                             std::string_view source);

// "F32", "BF16", ...: the dtype's name in a header.
std::string_view safetensorsDTypeName(DType dtype);
// A tensor name in quotes for messages, control bytes shown as \xNN so the
// message stays on one line.
std::string quotedTensorName(std::string_view name);

} // namespace kiln
