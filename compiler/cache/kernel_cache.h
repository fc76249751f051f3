// The on-disk kernel cache: content-addressed entries, checked on every read, LRU-capped.
// It holds two kinds of entry in one container format (cache_entry.h): each
// distinct kernel's object, and whole compiled programs (the graph after the
// passes and the kernel plan of one `kiln compile`, naming its kernels'
// entries by key: compiler/driver/program_cache.h).
//
// Layout of the cache directory (created 0700; entries are native code):
//   entries/<k0k1>/<key>.kce   one kernel entry per key (format in cache_entry.h)
//   entries/<k0k1>/<key>.kpe   one program entry per key (the same format)
//   stats.json                 persisted counters: hits, misses, stores (of kernels),
//                              program_hits, program_misses, program_stores, evictions
//   stats.lock                 flock(2) held while stats.json is rewritten
//
// Concurrency: an entry is written to a temporary file in its own folder and
// renamed over the final name, so readers see a whole entry or none; two
// writers of one key both publish whole entries and the last rename wins.
// Readers verify the HMAC anyway. Counters are kept in memory and added to
// stats.json under the lock when the cache is flushed or destroyed.
//
// Eviction: an entry's mtime is its last use (set on store and on every hit).
// When the bytes stored exceed the cap, the oldest entries go until the total
// fits, programs and kernels alike (a program whose kernel is gone misses).
// The total is scanned once per instance and then tracked, so a store
// does not walk the directory.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/cache/cache_config.h"
#include "compiler/cache/cache_entry.h"
#include "compiler/cache/cache_key.h"
#include "compiler/cache/cache_secret.h"
#include "support/error.h"

namespace kiln::cache {

struct CacheStats {
  uint64_t entries = 0;  // of both kinds
  uint64_t programs = 0; // of them, whole-program entries
  uint64_t bytes = 0;
  uint64_t hits = 0; // kernel lookups
  uint64_t misses = 0;
  uint64_t stores = 0;
  uint64_t program_hits = 0;
  uint64_t program_misses = 0;
  uint64_t program_stores = 0;
  uint64_t evictions = 0; // bad entries and LRU victims, of both kinds
  uint64_t max_bytes = 0;
  nlohmann::json toJson() const;
};

struct EntryInfo {
  std::string key;
  EntryKind kind = EntryKind::Kernel;
  std::string kernel_name; // or the program's name
  uint64_t bytes = 0;
  int64_t last_use = 0; // unix seconds
  std::string path;
};

struct VerifyReport {
  uint64_t checked = 0;
  // (path, reason) of each entry that failed; those were evicted.
  std::vector<std::pair<std::string, std::string>> bad;
  bool ok() const { return bad.empty(); }
};

// Why a key missed, against the nearest entry of its kind (fewest differing
// parts), one with the same kernel (or program) name when there is one.
struct MissExplanation {
  EntryKind kind = EntryKind::Kernel;
  std::string kernel_name;
  bool hit = false;                   // the key is in the cache after all
  std::optional<std::string> nearest; // key of the nearest entry
  bool same_kernel = false;           // the nearest entry has the same name
  std::vector<std::string> changed;   // key parts that differ from it
  std::string message() const;
};

class KernelCache {
public:
  // Creates `dir` 0700 if needed (not in Disable mode) and refuses a folder
  // owned by someone else or writable by group or others. Loads (or creates)
  // the cache secret that authenticates entries (cache_secret.h).
  static Expected<std::unique_ptr<KernelCache>>
  open(std::string dir, CacheMode mode = CacheMode::Enable, uint64_t max_bytes = kDefaultMaxBytes);
  // The user's cache: in `dir` when given, else where the environment says
  // (resolveCacheDir), capped by KILN_CACHE_MAX_SIZE (maxSizeFromEnv).
  static Expected<std::unique_ptr<KernelCache>>
  openConfigured(const std::optional<std::string> &dir, CacheMode mode = CacheMode::Enable);
  ~KernelCache();
  KernelCache(const KernelCache &) = delete;
  KernelCache &operator=(const KernelCache &) = delete;

  const std::string &dir() const { return dir_; }
  const std::string &secretPath() const { return secret_.path; }
  CacheMode mode() const { return mode_; }

  // The entry of `key` (of key.kind), checked; nullopt on a miss. Any problem
  // reading the cache is a miss, never an error: compiling again is always
  // correct. A bad entry (truncated, corrupt, failing its HMAC, not the
  // user's, writable by group or others) is evicted with a warning. With
  // `count` false the caller counts the lookup (countLookup) once it knows
  // whether the entry served: a program whose kernels are gone is a miss.
  std::optional<CacheEntry> lookup(const CacheKey &key, bool count = true);
  void countLookup(EntryKind kind, bool hit);
  Status store(const CacheKey &key, std::string_view object,
               const nlohmann::json &metadata = nlohmann::json::object());
  // Evicts the entry of `key` with a warning: one that authenticated but
  // whose payload its reader refuses.
  void evict(const CacheKey &key, const std::string &reason);
  MissExplanation explainMiss(const CacheKey &key) const;

  // Entries, oldest use first; unreadable headers are skipped (verify finds them).
  Expected<std::vector<EntryInfo>> list() const;
  // Reads and checks every entry, evicting the bad ones.
  Expected<VerifyReport> verify();
  // Evicts least recently used entries until at most `max_bytes` remain (the
  // cap when not given) and removes stale temporary files; returns the count evicted.
  Expected<uint64_t> prune(std::optional<uint64_t> max_bytes = std::nullopt);
  // Removes every entry and resets the counters; returns the count removed.
  Expected<uint64_t> clean();
  // Persisted counters plus this instance's, and the entries on disk now.
  Expected<CacheStats> stats() const;
  // Adds this instance's counters to stats.json.
  Status flushStats();

  std::string entryPath(const std::string &key_hex, EntryKind kind = EntryKind::Kernel) const;

private:
  KernelCache(std::string dir, CacheMode mode, uint64_t max_bytes);
  void evictBad(const std::string &path, int fd, const std::string &reason);
  Status enforceCap(uint64_t cap);

  std::string dir_;
  CacheSecret secret_;
  CacheMode mode_;
  uint64_t max_bytes_;
  std::optional<uint64_t> tracked_bytes_; // estimate of bytes on disk
  CacheStats delta_;                      // counters not yet in stats.json
};

} // namespace kiln::cache
