// Files of the cache: folders, scanning entries, reading them checked.
#include "compiler/cache/cache_files.h"

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "support/file_io.h"

namespace kiln::cache {
namespace {

template <typename F> void forEachName(const std::string &dir, F &&f) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return;
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..")
      f(name);
  }
  ::closedir(d);
}

} // namespace

std::string errnoText() { return std::strerror(errno); }

const char *entrySuffix(EntryKind kind) {
  return kind == EntryKind::Program ? kProgramEntrySuffix : kEntrySuffix;
}

Status makeDirs(const std::string &dir) {
  for (size_t pos = 1;; ++pos) {
    pos = dir.find('/', pos);
    std::string prefix = dir.substr(0, pos);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST)
      return Error("cache directory '" + dir + "': cannot create '" + prefix + "': " + errnoText());
    if (pos == std::string::npos)
      break;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return Error("cache directory '" + dir + "': " + errnoText());
  if (!S_ISDIR(st.st_mode))
    return Error("cache directory '" + dir + "': not a directory");
  return Status::ok();
}

void scanEntries(const std::string &dir, std::vector<DiskEntry> &entries,
                 std::vector<DiskEntry> *temps) {
  // stats.json's temporary files, left by a process killed while writing it.
  if (temps)
    forEachName(dir, [&](const std::string &name) {
      struct stat st {};
      const std::string path = dir + "/" + name;
      if (name.rfind("stats.json.tmp.", 0) == 0 && ::lstat(path.c_str(), &st) == 0)
        temps->push_back(DiskEntry{path, "", uint64_t(st.st_size), st.st_mtim});
    });
  const std::string root = dir + "/entries";
  forEachName(root, [&](const std::string &sub) {
    const std::string subdir = root + "/" + sub;
    forEachName(subdir, [&](const std::string &name) {
      DiskEntry e;
      e.path = subdir + "/" + name;
      struct stat st {};
      if (::lstat(e.path.c_str(), &st) != 0)
        return;
      e.bytes = uint64_t(st.st_size);
      e.mtime = st.st_mtim;
      const size_t suffix = name.size() >= 4 ? name.size() - 4 : 0;
      if (name.find(".tmp.") != std::string::npos) {
        if (temps)
          temps->push_back(e);
        return;
      }
      for (EntryKind kind : {EntryKind::Kernel, EntryKind::Program})
        if (name.compare(suffix, std::string::npos, entrySuffix(kind)) == 0 &&
            isKeyHex(name.substr(0, suffix))) {
          e.key = name.substr(0, suffix);
          e.kind = kind;
          entries.push_back(e);
        }
    });
  });
}

Expected<CacheEntry> readMeta(const std::string &path) {
  // O_NONBLOCK: a FIFO planted where an entry belongs must not block the open.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return Error(path + ": cannot open: " + errnoText());
  struct stat check {};
  if (::fstat(fd, &check) != 0 || !S_ISREG(check.st_mode)) {
    ::close(fd);
    return Error(path + ": not a regular file");
  }
  struct stat st {};
  std::string prefix(kEntryHeaderSize, '\0');
  ssize_t n = ::fstat(fd, &st) == 0 ? ::pread(fd, prefix.data(), prefix.size(), 0) : -1;
  if (n == ssize_t(kEntryHeaderSize)) {
    uint64_t meta_size = 0;
    for (int i = 0; i < 8; ++i)
      meta_size |= uint64_t(uint8_t(prefix[16 + i])) << (8 * i);
    if (meta_size <= uint64_t(st.st_size)) {
      prefix.resize(kEntryHeaderSize + meta_size);
      n = ::pread(fd, prefix.data(), prefix.size(), 0);
    }
  }
  ::close(fd);
  if (n < 0)
    return Error(path + ": read failed: " + errnoText());
  prefix.resize(size_t(n));
  auto entry = decodeEntryMeta(prefix, uint64_t(st.st_size));
  if (!entry)
    return entry.error().withContext(path);
  return entry;
}

Expected<nlohmann::json> readCounters(const std::string &path) {
  nlohmann::json zero = {{"hits", 0},         {"misses", 0},         {"stores", 0},
                         {"program_hits", 0}, {"program_misses", 0}, {"program_stores", 0},
                         {"evictions", 0}};
  if (::access(path.c_str(), F_OK) != 0)
    return zero;
  auto j = readJsonFile(path);
  if (!j || !j->is_object()) {
    spdlog::warn("kernel cache: {}: unreadable counters, starting from zero", path);
    return zero;
  }
  for (auto &[name, value] : zero.items())
    if (j->contains(name) && (*j)[name].is_number_unsigned())
      value = (*j)[name];
  return zero;
}

std::optional<CacheEntry> loadChecked(const std::string &path, const std::string &expect_key,
                                      EntryKind expect_kind, std::string_view secret, int &fd,
                                      std::string &bad) {
  fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP)
      bad = "is a symbolic link";
    else if (errno != ENOENT)
      bad = "cannot open: " + errnoText();
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    bad = "cannot stat: " + errnoText();
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    bad = "not a regular file";
    return std::nullopt;
  }
  if (st.st_uid != ::geteuid()) {
    bad = "owned by uid " + std::to_string(st.st_uid) + ", not by the current user";
    return std::nullopt;
  }
  // Whoever could have written it could have put their code in it.
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    bad = "writable by group or others";
    return std::nullopt;
  }
  auto bytes = readFd(fd, path);
  if (!bytes) {
    bad = bytes.message();
    return std::nullopt;
  }
  auto entry = decodeEntry(*bytes, secret);
  if (!entry) {
    bad = entry.message();
    return std::nullopt;
  }
  if (entry->key != expect_key) {
    bad = "holds key " + entry->key;
    return std::nullopt;
  }
  if (entry->kind != expect_kind) {
    bad = "holds a " + std::string(entryKindName(entry->kind)) + " entry where a " +
          std::string(entryKindName(expect_kind)) + " entry belongs";
    return std::nullopt;
  }
  return std::move(entry).value();
}

FileLock::FileLock(const std::string &path)
    : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
  if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0)
    ::close(fd_); // closing releases the lock
}

} // namespace kiln::cache
