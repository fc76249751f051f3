// Files of the cache: folders, scanning entries, reading them checked, the stats lock.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/cache/cache_entry.h"
#include "support/error.h"

namespace kiln::cache {

inline constexpr const char *kEntrySuffix = ".kce";        // a kernel's entry
inline constexpr const char *kProgramEntrySuffix = ".kpe"; // a whole program's
const char *entrySuffix(EntryKind kind);
// A temporary file older than this is left over from a writer that died.
inline constexpr int64_t kStaleTempSeconds = 3600;

struct DiskEntry {
  std::string path;
  std::string key;
  uint64_t bytes = 0;
  timespec mtime{};
  EntryKind kind = EntryKind::Kernel; // by its suffix
};

inline bool olderThan(const timespec &a, const timespec &b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec < b.tv_sec : a.tv_nsec < b.tv_nsec;
}

std::string errnoText();
// mkdir -p with mode 0700 for every folder it creates.
Status makeDirs(const std::string &dir);
// Every file under entries/ that is named like an entry, and the temporary
// files (of entries and of stats.json) that a killed writer left.
void scanEntries(const std::string &dir, std::vector<DiskEntry> &entries,
                 std::vector<DiskEntry> *temps = nullptr);
// Header and metadata of an entry, without its object and unchecked.
Expected<CacheEntry> readMeta(const std::string &path);
// stats.json's counters; zeros when it is missing or unreadable.
Expected<nlohmann::json> readCounters(const std::string &path);
// Opens, checks and decodes one entry, which must hold `expect_key` and be of
// `expect_kind`. On failure `bad` says why and `fd` is still open for the
// caller's eviction; a missing file is neither.
std::optional<CacheEntry> loadChecked(const std::string &path, const std::string &expect_key,
                                      EntryKind expect_kind, std::string_view secret, int &fd,
                                      std::string &bad);

// Holds flock(2) on `path` for its lifetime.
class FileLock {
public:
  explicit FileLock(const std::string &path);
  ~FileLock();
  FileLock(const FileLock &) = delete;
  FileLock &operator=(const FileLock &) = delete;
  bool held() const { return fd_ >= 0; }

private:
  int fd_;
};

} // namespace kiln::cache
