#include "ir/file_io.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace kiln {

Expected<std::string> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return Error(path + ": read failed");
  return ss.str();
}

Status writeFileAtomic(const std::string &path, std::string_view contents) {
  static std::atomic<int> counter{0};
  const std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return Error(path + ": cannot create temporary file: " + std::strerror(errno));
  const char *p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return Error(path + ": write failed: " + why);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Error(path + ": write failed: " + why);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Error(path + ": cannot publish file: " + why);
  }
  return Status::ok();
}

Expected<nlohmann::json> parseJson(std::string_view text, std::string_view source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error &e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 2: ...".
    std::string what = e.what();
    auto pos = what.find("] ");
    return Error(std::string(source) + ": invalid JSON: " +
                 (pos == std::string::npos ? what : what.substr(pos + 2)));
  }
}

Expected<nlohmann::json> readJsonFile(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(std::string text, readFile(path));
  return parseJson(text, path);
}

} // namespace kiln
