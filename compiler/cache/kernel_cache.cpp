// The kernel cache: lookups that check every entry, atomic stores, LRU capping, counters.
#include "compiler/cache/kernel_cache.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "compiler/cache/cache_files.h"
#include "support/file_io.h"

namespace kiln::cache {

nlohmann::json CacheStats::toJson() const {
  return {{"entries", entries},
          {"programs", programs},
          {"bytes", bytes},
          {"hits", hits},
          {"misses", misses},
          {"stores", stores},
          {"program_hits", program_hits},
          {"program_misses", program_misses},
          {"program_stores", program_stores},
          {"evictions", evictions},
          {"max_bytes", max_bytes}};
}

std::string MissExplanation::message() const {
  const std::string who = std::string(entryKindName(kind)) + " '" + kernel_name + "'";
  if (hit)
    return who + ": the key is in the cache";
  if (!nearest)
    return who + ": the cache has no entry to compare with";
  std::string parts;
  for (const std::string &p : changed)
    parts += (parts.empty() ? "" : ", ") + p;
  const std::string ref =
      kind == EntryKind::Program
          ? " (nearest entry " + nearest->substr(0, 12) +
                (same_kernel ? ", same model and step)" : ", another model or step)")
          : " (nearest entry " + nearest->substr(0, 12) +
                (same_kernel ? ", same kernel name)" : ", another kernel)");
  if (changed.empty())
    return who + ": no key part differs from an entry; the key format changed" + ref;
  return who + ": " + parts + " changed" + ref;
}

KernelCache::KernelCache(std::string dir, CacheMode mode, uint64_t max_bytes)
    : dir_(std::move(dir)), mode_(mode), max_bytes_(max_bytes) {}

KernelCache::~KernelCache() {
  if (Status s = flushStats(); !s)
    spdlog::warn("kernel cache: {}", s.message());
}

Expected<std::unique_ptr<KernelCache>>
KernelCache::openConfigured(const std::optional<std::string> &dir, CacheMode mode) {
  KILN_ASSIGN_OR_RETURN(std::string resolved, resolveCacheDir(dir));
  KILN_ASSIGN_OR_RETURN(uint64_t max_bytes, maxSizeFromEnv());
  return open(resolved, mode, max_bytes);
}

Expected<std::unique_ptr<KernelCache>> KernelCache::open(std::string dir, CacheMode mode,
                                                         uint64_t max_bytes) {
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  std::unique_ptr<KernelCache> cache(new KernelCache(dir, mode, max_bytes));
  cache->delta_.max_bytes = max_bytes;
  if (mode == CacheMode::Disable)
    return cache;
  KILN_ASSIGN_OR_RETURN(cache->secret_, loadCacheSecret());
  KILN_RETURN_IF_ERROR(makeDirs(dir));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return Error("cache directory '" + dir + "': " + errnoText());
  // Whoever can write the cache can make kiln run their code (JAX's warning).
  if (st.st_uid != ::geteuid())
    return Error("cache directory '" + dir + "': owned by uid " + std::to_string(st.st_uid) +
                 ", not by the current user");
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return Error("cache directory '" + dir + "': writable by group or others (chmod 700 it)");
  const std::string entries = dir + "/entries";
  if (::mkdir(entries.c_str(), 0700) != 0 && errno != EEXIST)
    return Error("cache directory '" + dir + "': cannot create entries/: " + errnoText());
  return cache;
}

std::string KernelCache::entryPath(const std::string &key_hex, EntryKind kind) const {
  return dir_ + "/entries/" + key_hex.substr(0, 2) + "/" + key_hex + entrySuffix(kind);
}

void KernelCache::evictBad(const std::string &path, int fd, const std::string &reason) {
  spdlog::warn("kernel cache: evicting bad entry {}: {}", path, reason);
  // Unlink only the file that was read: a writer may have renamed a good one over it.
  struct stat now {};
  struct stat opened {};
  if (::lstat(path.c_str(), &now) != 0)
    return;
  if (fd >= 0 && ::fstat(fd, &opened) == 0 &&
      (opened.st_ino != now.st_ino || opened.st_dev != now.st_dev))
    return;
  if (::unlink(path.c_str()) == 0) {
    ++delta_.evictions;
    if (tracked_bytes_)
      tracked_bytes_ = *tracked_bytes_ - std::min<uint64_t>(*tracked_bytes_, now.st_size);
  }
}

void KernelCache::countLookup(EntryKind kind, bool hit) {
  if (mode_ == CacheMode::Disable)
    return;
  if (kind == EntryKind::Program)
    ++(hit ? delta_.program_hits : delta_.program_misses);
  else
    ++(hit ? delta_.hits : delta_.misses);
}

std::optional<CacheEntry> KernelCache::lookup(const CacheKey &key, bool count) {
  if (mode_ == CacheMode::Disable)
    return std::nullopt;
  if (mode_ == CacheMode::Force) {
    if (count)
      countLookup(key.kind, false);
    return std::nullopt;
  }
  const std::string path = entryPath(key.hex, key.kind);
  int fd = -1;
  std::string bad;
  std::optional<CacheEntry> entry = loadChecked(path, key.hex, key.kind, secret_.key, fd, bad);
  if (!entry) {
    if (!bad.empty())
      evictBad(path, fd, bad);
    if (fd >= 0)
      ::close(fd);
    if (count)
      countLookup(key.kind, false);
    return std::nullopt;
  }
  // The mtime is the last use, for LRU eviction.
  const timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  ::futimens(fd, times);
  ::close(fd);
  if (count)
    countLookup(key.kind, true);
  return entry;
}

void KernelCache::evict(const CacheKey &key, const std::string &reason) {
  if (mode_ == CacheMode::Disable)
    return;
  evictBad(entryPath(key.hex, key.kind), -1, reason);
}

Status KernelCache::store(const CacheKey &key, std::string_view object,
                          const nlohmann::json &metadata) {
  if (mode_ == CacheMode::Disable)
    return Status::ok();
  CacheEntry entry;
  entry.kind = key.kind;
  entry.key = key.hex;
  entry.kernel_name = key.kernel_name;
  entry.parts = key.parts;
  entry.metadata = metadata;
  entry.created = int64_t(std::time(nullptr));
  entry.object = std::string(object);
  const std::string bytes = encodeEntry(entry, secret_.key);
  if (bytes.size() > max_bytes_) {
    spdlog::debug("kernel cache: {} ({} bytes) is larger than the cap, not stored", key.kernel_name,
                  bytes.size());
    return Status::ok();
  }
  const std::string path = entryPath(key.hex, key.kind);
  const std::string subdir = path.substr(0, path.rfind('/'));
  if (::mkdir(subdir.c_str(), 0700) != 0 && errno != EEXIST)
    return Error("kernel cache: cannot create " + subdir + ": " + errnoText());
  if (!tracked_bytes_) {
    std::vector<DiskEntry> all;
    scanEntries(dir_, all);
    uint64_t total = 0;
    for (const DiskEntry &e : all)
      total += e.bytes;
    tracked_bytes_ = total;
  }
  KILN_RETURN_IF_ERROR(writeFileAtomic(path, bytes));
  ++(key.kind == EntryKind::Program ? delta_.program_stores : delta_.stores);
  *tracked_bytes_ += bytes.size();
  if (*tracked_bytes_ > max_bytes_)
    return enforceCap(max_bytes_);
  return Status::ok();
}

Status KernelCache::enforceCap(uint64_t cap) {
  std::vector<DiskEntry> all;
  scanEntries(dir_, all);
  std::sort(all.begin(), all.end(), [](const DiskEntry &a, const DiskEntry &b) {
    return olderThan(a.mtime, b.mtime) || (!olderThan(b.mtime, a.mtime) && a.key < b.key);
  });
  uint64_t total = 0;
  for (const DiskEntry &e : all)
    total += e.bytes;
  for (const DiskEntry &e : all) {
    if (total <= cap)
      break;
    if (::unlink(e.path.c_str()) == 0) {
      ++delta_.evictions;
      spdlog::debug("kernel cache: evicted {} (least recently used)", e.path);
    }
    total -= e.bytes; // gone either way: another process may have removed it
  }
  tracked_bytes_ = total;
  return Status::ok();
}

MissExplanation KernelCache::explainMiss(const CacheKey &key) const {
  MissExplanation out;
  out.kind = key.kind;
  out.kernel_name = key.kernel_name;
  if (mode_ == CacheMode::Disable)
    return out;
  std::vector<DiskEntry> all;
  scanEntries(dir_, all);
  size_t best_diff = SIZE_MAX;
  for (const DiskEntry &e : all) {
    if (e.kind != key.kind)
      continue;
    auto meta = readMeta(e.path);
    if (!meta || meta->kind != key.kind)
      continue;
    if (meta->key == key.hex) {
      out.hit = true;
      return out;
    }
    std::vector<std::string> changed;
    for (const auto &[name, hex] : key.parts) {
      auto it = std::find_if(meta->parts.begin(), meta->parts.end(),
                             [&](const auto &p) { return p.first == name; });
      if (it == meta->parts.end() || it->second != hex)
        changed.push_back(name);
    }
    const bool same = meta->kernel_name == key.kernel_name;
    // A same-named entry beats any other; then the fewest differing parts.
    if ((same && !out.same_kernel) || (same == out.same_kernel && changed.size() < best_diff)) {
      best_diff = changed.size();
      out.nearest = meta->key;
      out.same_kernel = same;
      out.changed = std::move(changed);
    }
  }
  return out;
}

Expected<std::vector<EntryInfo>> KernelCache::list() const {
  std::vector<DiskEntry> all;
  scanEntries(dir_, all);
  std::sort(all.begin(), all.end(),
            [](const DiskEntry &a, const DiskEntry &b) { return olderThan(a.mtime, b.mtime); });
  std::vector<EntryInfo> out;
  for (const DiskEntry &e : all) {
    auto meta = readMeta(e.path);
    if (!meta)
      continue;
    out.push_back({e.key, e.kind, meta->kernel_name, e.bytes, int64_t(e.mtime.tv_sec), e.path});
  }
  return out;
}

Expected<VerifyReport> KernelCache::verify() {
  VerifyReport report;
  if (mode_ == CacheMode::Disable)
    return report;
  std::vector<DiskEntry> all;
  scanEntries(dir_, all);
  for (const DiskEntry &e : all) {
    int fd = -1;
    std::string bad;
    std::optional<CacheEntry> entry = loadChecked(e.path, e.key, e.kind, secret_.key, fd, bad);
    ++report.checked;
    if (!entry && !bad.empty()) {
      report.bad.emplace_back(e.path, bad);
      evictBad(e.path, fd, bad);
    }
    if (fd >= 0)
      ::close(fd);
  }
  return report;
}

Expected<uint64_t> KernelCache::prune(std::optional<uint64_t> max_bytes) {
  if (mode_ == CacheMode::Disable)
    return uint64_t(0);
  std::vector<DiskEntry> all, temps;
  scanEntries(dir_, all, &temps);
  const int64_t now = int64_t(std::time(nullptr));
  for (const DiskEntry &t : temps)
    if (now - int64_t(t.mtime.tv_sec) > kStaleTempSeconds)
      ::unlink(t.path.c_str());
  const uint64_t before = delta_.evictions;
  KILN_RETURN_IF_ERROR(enforceCap(max_bytes.value_or(max_bytes_)));
  return delta_.evictions - before;
}

Expected<uint64_t> KernelCache::clean() {
  if (mode_ == CacheMode::Disable)
    return uint64_t(0);
  std::vector<DiskEntry> all, temps;
  scanEntries(dir_, all, &temps);
  uint64_t removed = 0;
  for (const DiskEntry &e : all)
    if (::unlink(e.path.c_str()) == 0)
      ++removed;
  for (const DiskEntry &t : temps)
    ::unlink(t.path.c_str());
  tracked_bytes_ = 0;
  FileLock lock(dir_ + "/stats.lock");
  if (!lock.held())
    return Error("kernel cache: cannot lock " + dir_ + "/stats.lock: " + errnoText());
  const std::string stats_path = dir_ + "/stats.json";
  if (::unlink(stats_path.c_str()) != 0 && errno != ENOENT)
    return Error(stats_path + ": cannot remove: " + errnoText());
  delta_ = CacheStats{};
  delta_.max_bytes = max_bytes_;
  return removed;
}

Expected<CacheStats> KernelCache::stats() const {
  CacheStats s = delta_;
  s.max_bytes = max_bytes_;
  if (mode_ == CacheMode::Disable)
    return s;
  KILN_ASSIGN_OR_RETURN(nlohmann::json counters, readCounters(dir_ + "/stats.json"));
  s.hits += counters["hits"].get<uint64_t>();
  s.misses += counters["misses"].get<uint64_t>();
  s.stores += counters["stores"].get<uint64_t>();
  s.program_hits += counters["program_hits"].get<uint64_t>();
  s.program_misses += counters["program_misses"].get<uint64_t>();
  s.program_stores += counters["program_stores"].get<uint64_t>();
  s.evictions += counters["evictions"].get<uint64_t>();
  std::vector<DiskEntry> all;
  scanEntries(dir_, all);
  for (const DiskEntry &e : all) {
    ++s.entries;
    s.programs += e.kind == EntryKind::Program;
    s.bytes += e.bytes;
  }
  return s;
}

Status KernelCache::flushStats() {
  if (mode_ == CacheMode::Disable ||
      (delta_.hits | delta_.misses | delta_.stores | delta_.program_hits | delta_.program_misses |
       delta_.program_stores | delta_.evictions) == 0)
    return Status::ok();
  FileLock lock(dir_ + "/stats.lock");
  if (!lock.held())
    return Error("cannot lock " + dir_ + "/stats.lock: " + errnoText());
  const std::string path = dir_ + "/stats.json";
  KILN_ASSIGN_OR_RETURN(nlohmann::json counters, readCounters(path));
  counters["hits"] = counters["hits"].get<uint64_t>() + delta_.hits;
  counters["misses"] = counters["misses"].get<uint64_t>() + delta_.misses;
  counters["stores"] = counters["stores"].get<uint64_t>() + delta_.stores;
  counters["program_hits"] = counters["program_hits"].get<uint64_t>() + delta_.program_hits;
  counters["program_misses"] = counters["program_misses"].get<uint64_t>() + delta_.program_misses;
  counters["program_stores"] = counters["program_stores"].get<uint64_t>() + delta_.program_stores;
  counters["evictions"] = counters["evictions"].get<uint64_t>() + delta_.evictions;
  KILN_RETURN_IF_ERROR(writeFileAtomic(path, counters.dump(2) + "\n"));
  delta_.hits = delta_.misses = delta_.stores = delta_.evictions = 0;
  delta_.program_hits = delta_.program_misses = delta_.program_stores = 0;
  return Status::ok();
}

} // namespace kiln::cache
