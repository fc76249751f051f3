// Reading and writing Hugging Face safetensors files.
//
// File layout: u64 little-endian header length N, N bytes of UTF-8 JSON, then
// the data buffer. The header maps tensor names to
// {"dtype": "F32"|"F16"|"BF16"|"I32"|"I64"|"BOOL", "shape": [...],
//  "data_offsets": [begin, end]} (offsets relative to the buffer start) and may
// hold "__metadata__": {string: string}. Every malformed file is an error that
// names the file and the tensor or field, never an out-of-bounds read.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "ir/tensor.h"
#include "support/error.h"

namespace kiln {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// `source` names the file in error messages.
Expected<SafetensorsFile> parseSafetensors(std::string_view bytes, std::string_view source);
// Reads a file with SafetensorsReader: pread, never a mapping, so a file
// truncated while it is read is an error naming it, not a SIGBUS.
Expected<SafetensorsFile> readSafetensors(const std::string &path);

std::string serializeSafetensors(const SafetensorsFile &file);
// Atomic: a crash leaves the old file or the new one.
Status writeSafetensors(const std::string &path, const SafetensorsFile &file);

} // namespace kiln
