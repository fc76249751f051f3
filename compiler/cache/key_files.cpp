#include "compiler/cache/key_files.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "support/file_io.h"

namespace kiln::cache {
namespace {

std::string errnoText() { return std::strerror(errno); }

Status writeNewFile(const std::string &path, const std::string &bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return Error(path + ": cannot create: " + errnoText());
  if (Status written = writeAll(fd, bytes.data(), bytes.size()); !written) {
    ::close(fd);
    ::unlink(path.c_str());
    return Error(path + ": cannot write: " + written.message());
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced) {
    ::unlink(path.c_str());
    return Error(path + ": cannot write: " + errnoText());
  }
  return Status::ok();
}

} // namespace

Expected<std::string> kilnConfigDir() {
  std::filesystem::path dir;
  if (const char *own = std::getenv("KILN_CONFIG_DIR"); own && *own)
    dir = own;
  else if (const char *xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg)
    dir = std::filesystem::path(xdg) / "kiln";
  else if (const char *home = std::getenv("HOME"); home && *home)
    dir = std::filesystem::path(home) / ".config" / "kiln";
  else
    return Error("no folder for kiln's keys: set KILN_CONFIG_DIR, XDG_CONFIG_HOME or HOME");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Error(dir.string() + ": cannot create kiln's key folder: " + ec.message());
  ::chmod(dir.c_str(), 0700);
  return dir.string();
}

Expected<std::string> randomBytes(size_t bytes) {
  std::string out(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char *>(out.data()), static_cast<int>(bytes)) != 1)
    return Error("OpenSSL's random generator failed");
  return out;
}

Expected<std::string> readOrCreateKeyFile(const std::string &path, size_t max_bytes,
                                          const std::function<Expected<std::string>()> &create) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT || !create)
      return Error(path + ": cannot read the key file: " + errnoText());
    KILN_ASSIGN_OR_RETURN(std::string bytes, create());
    const std::string temporary = path + ".new." + std::to_string(::getpid());
    KILN_RETURN_IF_ERROR(writeNewFile(temporary, bytes));
    // link(2) publishes it only if no other process was first.
    const bool linked = ::link(temporary.c_str(), path.c_str()) == 0;
    const int link_errno = errno;
    ::unlink(temporary.c_str());
    if (!linked && link_errno != EEXIST)
      return Error(path + ": cannot create the key file: " + std::strerror(link_errno));
    return readOrCreateKeyFile(path, max_bytes, nullptr);
  }
  if (!S_ISREG(st.st_mode))
    return Error(path + ": the key file is not a regular file");
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return Error(path + ": the key file is writable by group or others; whoever can replace it "
                        "can make kiln trust their code (chmod go-w)");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return Error(path + ": the key file has " + std::to_string(st.st_size) +
                 " bytes, more than a key (" + std::to_string(max_bytes) + ")");
  return readFile(path, max_bytes);
}

} // namespace kiln::cache
