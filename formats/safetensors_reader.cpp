// The safetensors file reader: header by pread, tensors by pread into their
// own memory (see the header for why nothing is mapped).
#include "formats/safetensors_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/file_io.h"

namespace kiln {
namespace {

// Large reads go in pieces: Linux moves at most about 2 GiB per call.
constexpr uint64_t kMaxReadBytes = uint64_t{1} << 30;

// Reads exactly `size` bytes at `offset`; returns how many it got before the
// end of the file (fewer than `size` when the file is shorter), or -errno.
int64_t preadFully(int fd, char *to, uint64_t size, uint64_t offset) {
  uint64_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, to + done, std::min(size - done, kMaxReadBytes),
                                static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return -errno;
    if (got == 0)
      break;
    done += static_cast<uint64_t>(got);
  }
  return static_cast<int64_t>(done);
}

} // namespace

SafetensorsReader::SafetensorsReader(SafetensorsReader &&other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)),
      stream_bytes_(std::move(other.stream_bytes_)), file_size_(other.file_size_),
      header_(std::move(other.header_)) {}

SafetensorsReader &SafetensorsReader::operator=(SafetensorsReader &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    stream_bytes_ = std::move(other.stream_bytes_);
    file_size_ = other.file_size_;
    header_ = std::move(other.header_);
  }
  return *this;
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0)
    ::close(fd_);
}

Expected<SafetensorsReader> SafetensorsReader::open(const std::string &path) {
  SafetensorsReader reader;
  reader.path_ = path;
  reader.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (reader.fd_ < 0)
    return Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(reader.fd_, &st) != 0)
    return Error(path + ": cannot read: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    return Error(path + ": cannot read: is a directory, not a file");
  if (!S_ISREG(st.st_mode)) {
    // A stream has no size to check the header against: read it whole.
    KILN_ASSIGN_OR_RETURN(reader.stream_bytes_, readFd(reader.fd_, path, kMaxStreamBytes));
    ::close(std::exchange(reader.fd_, -1));
    const std::string_view bytes = reader.stream_bytes_;
    reader.file_size_ = bytes.size();
    KILN_ASSIGN_OR_RETURN(
        uint64_t json_size,
        safetensorsHeaderLength(bytes.substr(0, kSafetensorsLengthBytes), bytes.size(), path));
    KILN_ASSIGN_OR_RETURN(reader.header_,
                          parseSafetensorsHeader(bytes.substr(kSafetensorsLengthBytes, json_size),
                                                 bytes.size(), path));
    return reader;
  }
  reader.file_size_ = static_cast<uint64_t>(st.st_size);
  char length[kSafetensorsLengthBytes] = {};
  const int64_t got = preadFully(reader.fd_, length, sizeof(length), 0);
  if (got < 0)
    return Error(path + ": cannot read: " + std::strerror(static_cast<int>(-got)));
  KILN_ASSIGN_OR_RETURN(uint64_t json_size,
                        safetensorsHeaderLength(std::string_view(length, static_cast<size_t>(got)),
                                                reader.file_size_, path));
  std::string json_text(json_size, '\0');
  const int64_t json_got = preadFully(reader.fd_, json_text.data(), json_size, sizeof(length));
  if (json_got < 0)
    return Error(path + ": cannot read: " + std::strerror(static_cast<int>(-json_got)));
  if (static_cast<uint64_t>(json_got) != json_size)
    return Error(path + ": the file shrank while its header was read (it had " +
                 std::to_string(reader.file_size_) +
                 " bytes when opened): another process truncated it; read it again once it "
                 "is whole");
  KILN_ASSIGN_OR_RETURN(reader.header_, parseSafetensorsHeader(json_text, reader.file_size_, path));
  return reader;
}

Status SafetensorsReader::readAt(char *to, uint64_t size, uint64_t offset,
                                 const SafetensorsEntry &entry) const {
  if (fd_ < 0) {
    std::memcpy(to, stream_bytes_.data() + offset, size);
    return Status::ok();
  }
  const int64_t got = preadFully(fd_, to, size, offset);
  if (got < 0)
    return Error(path_ + ": tensor " + quotedTensorName(entry.name) +
                 ": cannot read: " + std::strerror(static_cast<int>(-got)));
  if (static_cast<uint64_t>(got) != size)
    return Error(path_ + ": tensor " + quotedTensorName(entry.name) + ": the file ends at byte " +
                 std::to_string(offset + static_cast<uint64_t>(got)) +
                 ", inside the tensor's bytes [" + std::to_string(offset) + ", " +
                 std::to_string(offset + size) + "); it had " + std::to_string(file_size_) +
                 " bytes when opened: another process truncated it while kiln read it; read it "
                 "again once it is whole");
  return Status::ok();
}

// A file truncated and grown again while it was read reads as whole but
// mixes old and new bytes: its size tells.
Status SafetensorsReader::checkSizeUnchanged() const {
  if (fd_ < 0)
    return Status::ok();
  struct stat st {};
  if (::fstat(fd_, &st) != 0)
    return Error(path_ + ": cannot read: " + std::strerror(errno));
  if (static_cast<uint64_t>(st.st_size) != file_size_)
    return Error(path_ + ": the file changed size while kiln read it (" +
                 std::to_string(file_size_) + " bytes when opened, " + std::to_string(st.st_size) +
                 " now): another process is writing it; read it again once it is whole");
  return Status::ok();
}

Expected<SafetensorsFile> SafetensorsReader::read() {
  if (fd_ >= 0)
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  SafetensorsFile file;
  file.metadata = header_.metadata;
  // Entries are in buffer order: the file is read front to back.
  for (const SafetensorsEntry &e : header_.entries) {
    // Every byte is read below, or the tensor is dropped with the error.
    Tensor t = Tensor::uninitialized(TensorType{e.dtype, e.shape});
    if (t.byteSize() > 0)
      KILN_RETURN_IF_ERROR(
          readAt(static_cast<char *>(t.data()), t.byteSize(), header_.data_start + e.begin, e));
    KILN_RETURN_IF_ERROR(checkSafetensorsBytes(e, t, path_));
    file.tensors.emplace(e.name, std::move(t));
  }
  KILN_RETURN_IF_ERROR(checkSizeUnchanged());
  return file;
}

} // namespace kiln
