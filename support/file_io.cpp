#include "support/file_io.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln {
namespace {

// Fault injection for the crash tests (tests/e2e/fault_injection_test.cpp,
// docs/reliability.md): KILN_FAULT_KILL_AT=N makes the process SIGKILL
// itself at the N-th kill point of its atomic writes, counted across threads.
// Each write has four: temporary file created, half written, written and
// synced but not renamed, renamed but its folder not synced.
void killPoint() {
  static const long kill_at = [] {
    const char *v = std::getenv("KILN_FAULT_KILL_AT");
    return v ? std::strtol(v, nullptr, 10) : 0L;
  }();
  if (kill_at <= 0)
    return;
  static std::atomic<long> reached{0};
  if (++reached == kill_at)
    ::kill(::getpid(), SIGKILL);
}

// Who wrote a temporary file, as it goes into its name: this host's name and
// the pid namespace (two containers of one host may share a folder and a
// host name, each with its own pids), so that a pid read back from a name is
// checked only where it means the same process. Letters, digits and '-'
// only, so that the '.'-separated fields of the name parse back.
const std::string &hostTag() {
  static const std::string tag = [] {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0')
      std::strcpy(name, "localhost");
    std::string out;
    for (const char *c = name; *c != '\0' && out.size() < 64; ++c)
      out += std::isalnum(static_cast<unsigned char>(*c)) || *c == '-' ? *c : '-';
    struct stat ns {};
    if (::stat("/proc/self/ns/pid", &ns) == 0)
      out += "-" + std::to_string(ns.st_ino);
    return out;
  }();
  return tag;
}

bool allDigits(std::string_view s) {
  return !s.empty() && s.size() <= 18 &&
         s.find_first_not_of("0123456789") == std::string_view::npos;
}

// The pid of a temporary file name "<target>.tmp.<host>.<pid>.<n>" written on
// this host, with its <target>; 0 for any other name.
pid_t temporaryOfThisHost(std::string_view name, std::string_view &target) {
  const size_t tmp = name.rfind(".tmp.");
  if (tmp == std::string_view::npos)
    return 0;
  target = name.substr(0, tmp);
  std::string_view rest = name.substr(tmp + 5);
  const size_t dot_n = rest.rfind('.');
  if (dot_n == std::string_view::npos || !allDigits(rest.substr(dot_n + 1)))
    return 0;
  rest = rest.substr(0, dot_n);
  const size_t dot_pid = rest.rfind('.');
  if (dot_pid == std::string_view::npos || rest.substr(0, dot_pid) != hostTag() ||
      !allDigits(rest.substr(dot_pid + 1)))
    return 0;
  const long long pid = std::stoll(std::string(rest.substr(dot_pid + 1)));
  return pid > 0 && pid <= INT32_MAX ? static_cast<pid_t>(pid) : 0;
}

bool processRuns(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

std::string folderOf(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

Status writeAll(int fd, const char *p, size_t left) {
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return Error(std::strerror(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return Status::ok();
}

std::string temporaryPath(const std::string &path, long pid, long n) {
  return path + ".tmp." + hostTag() + "." + std::to_string(pid) + "." + std::to_string(n);
}

size_t removeStaleTemporaries(const std::string &dir,
                              const std::function<bool(std::string_view)> &is_target) {
  DIR *d = ::opendir(dir.c_str());
  if (d == nullptr)
    return 0;
  std::vector<std::string> stale;
  while (const dirent *e = ::readdir(d)) {
    std::string_view target;
    const pid_t pid = temporaryOfThisHost(e->d_name, target);
    if (pid != 0 && is_target(target) && !processRuns(pid))
      stale.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  size_t removed = 0;
  for (const std::string &path : stale)
    removed += ::unlink(path.c_str()) == 0;
  return removed;
}

Expected<std::string> readFile(const std::string &path, size_t max_bytes) {
  // POSIX calls rather than iostreams: a stream reads a folder as an empty file
  // and hides read errors.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return Error(path + ": cannot read: " + why);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Error(path + ": cannot read: is a directory, not a file");
  }
  // A stream (a pipe, /dev/zero) has no size to check first: it is read up
  // to a cap, so that one that never ends is an error, not all of memory.
  if (!S_ISREG(st.st_mode))
    max_bytes = std::min(max_bytes, kMaxStreamBytes);
  const uint64_t size_hint = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  Expected<std::string> out = readFd(fd, path, max_bytes, size_hint);
  ::close(fd);
  return out;
}

Expected<std::string> readFd(int fd, const std::string &path, size_t max_bytes,
                             uint64_t size_hint) {
  auto tooLarge = [&] {
    return Error(path + ": cannot read: larger than " + std::to_string(max_bytes) +
                 " bytes, the most kiln reads from such a file");
  };
  if (size_hint > max_bytes)
    return tooLarge();
  std::string out;
  try {
    out.reserve(static_cast<size_t>(size_hint));
    char buf[1 << 16];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR)
          continue;
        return Error(path + ": read failed: " + std::strerror(errno));
      }
      if (n == 0)
        break;
      if (static_cast<size_t>(n) > max_bytes - out.size())
        return tooLarge();
      out.append(buf, static_cast<size_t>(n));
    }
  } catch (const std::bad_alloc &) {
    return Error(path + ": cannot read: its " +
                 std::to_string(std::max<uint64_t>(size_hint, out.size())) +
                 " bytes do not fit in this machine's memory");
  }
  return out;
}

Status writeFileAtomic(const std::string &path, std::string_view contents) {
  static std::atomic<int> counter{0};
  const std::string dir = folderOf(path);
  const std::string name = path.substr(path.rfind('/') + 1);
  removeStaleTemporaries(dir, [&](std::string_view target) { return target == name; });
  const std::string tmp = temporaryPath(path, ::getpid(), counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return Error(path + ": cannot create temporary file: " + std::strerror(errno));
  killPoint();
  const size_t half = contents.size() / 2;
  Status written = writeAll(fd, contents.data(), half);
  if (written) {
    killPoint();
    written = writeAll(fd, contents.data() + half, contents.size() - half);
  }
  if (!written) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return Error(path + ": write failed: " + written.message());
  }
  // Close even when fsync fails, or the descriptor leaks.
  int sync_errno = ::fsync(fd) != 0 ? errno : 0;
  int close_errno = ::close(fd) != 0 ? errno : 0;
  if (sync_errno != 0 || close_errno != 0) {
    std::string why = std::strerror(sync_errno != 0 ? sync_errno : close_errno);
    ::unlink(tmp.c_str());
    return Error(path + ": write failed: " + why);
  }
  killPoint();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Error(path + ": cannot publish file: " + why);
  }
  killPoint();
  // The rename is durable once the folder is synced; a folder that cannot
  // be opened for reading still holds the whole new file.
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    int dir_errno = ::fsync(dir_fd) != 0 ? errno : 0;
    ::close(dir_fd);
    if (dir_errno != 0 && dir_errno != EINVAL)
      return Error(path + ": cannot sync its folder: " + std::strerror(dir_errno));
  }
  return Status::ok();
}

Expected<std::string> jsonText(const nlohmann::json &value, std::string_view what, int indent) {
  try {
    return value.dump(indent);
  } catch (const nlohmann::json::type_error &) {
    return Error(std::string(what) +
                 ": holds a name that is not valid UTF-8 (from a file or a path with bytes of "
                 "another encoding); rename it in UTF-8");
  }
}

Expected<nlohmann::json> parseJson(std::string_view text, std::string_view source) {
  using nlohmann::json;
  // Returning false at a container's start drops it unbuilt; the parser
  // itself keeps its nesting on the heap.
  bool too_deep = false;
  auto limit_depth = [&](int depth, json::parse_event_t event, json &) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      too_deep = true;
    return !too_deep;
  };
  try {
    json doc = json::parse(text, limit_depth);
    if (too_deep)
      return Error(std::string(source) + ": invalid JSON: arrays and objects nest deeper than " +
                   std::to_string(kMaxJsonDepth) + " levels (kiln's files nest a few)");
    return doc;
  } catch (const nlohmann::json::exception &e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 2: ...".
    std::string what = e.what();
    auto pos = what.find("] ");
    return Error(std::string(source) +
                 ": invalid JSON: " + (pos == std::string::npos ? what : what.substr(pos + 2)));
  }
}

Expected<nlohmann::json> readJsonFile(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(std::string text, readFile(path, kMaxJsonFileBytes));
  return parseJson(text, path);
}

} // namespace kiln
