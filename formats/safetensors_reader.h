// Reading a safetensors file: the header first (checked against the file's
// size), then each tensor's bytes with pread straight into the tensor.
//
// The file is never mapped. A mapped file that another process truncates
// kills the reader with SIGBUS at the first page past the new end; a pread
// there returns short, and the reader reports that the file shrank, naming
// it and the tensor. pread copies each byte once, page cache to tensor, as
// the copy out of a mapping did, so a 28 GB checkpoint still costs its
// tensors and nothing more.
#pragma once

#include <cstdint>
#include <string>

#include "formats/safetensors.h"
#include "formats/safetensors_header.h"
#include "support/error.h"

namespace kiln {

class SafetensorsReader {
public:
  // Opens `path` and reads and checks its header. A stream (a pipe, a
  // device) is read whole first, up to readFile's cap for streams.
  static Expected<SafetensorsReader> open(const std::string &path);

  SafetensorsReader(SafetensorsReader &&other) noexcept;
  SafetensorsReader &operator=(SafetensorsReader &&other) noexcept;
  SafetensorsReader(const SafetensorsReader &) = delete;
  SafetensorsReader &operator=(const SafetensorsReader &) = delete;
  ~SafetensorsReader();

  const SafetensorsHeader &header() const { return header_; }
  // Every tensor, read in file order. A file that is shorter now than when it
  // was opened (or whose size changed while it was read) is an error naming
  // it and the tensor being read.
  Expected<SafetensorsFile> read();

private:
  SafetensorsReader() = default;
  Status readAt(char *to, uint64_t size, uint64_t offset, const SafetensorsEntry &entry) const;
  Status checkSizeUnchanged() const;

  std::string path_;
  int fd_ = -1;              // a regular file's descriptor; -1 for a stream
  std::string stream_bytes_; // a stream's bytes, read whole
  uint64_t file_size_ = 0;   // when opened
  SafetensorsHeader header_;
};

} // namespace kiln
