// `kiln cache stats|list|clean|verify|prune`: look after the kernel cache
// (kernel entries and whole-program entries alike).
#include <ctime>
#include <iomanip>
#include <iostream>
#include <memory>

#include "compiler/cache/kernel_cache.h"
#include "support/printable_text.h"
#include "support/text_table.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {
namespace {

struct CacheOptions {
  std::optional<std::string> dir;
  std::string format = "text";
  std::optional<std::string> max_size; // prune only
};

std::string isoTime(int64_t seconds) {
  std::time_t t = std::time_t(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int runStats(cache::KernelCache &c, const CacheOptions &opts) {
  auto s = c.stats();
  if (!s)
    return fail(s.error());
  nlohmann::json j = s->toJson();
  j["dir"] = c.dir();
  if (opts.format == "json") {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "cache directory: " << c.dir() << "\n";
  for (const char *name : {"entries", "programs", "bytes", "max_bytes", "hits", "misses", "stores",
                           "program_hits", "program_misses", "program_stores", "evictions"})
    std::cout << std::left << std::setw(16) << (std::string(name) + ":") << j[name] << "\n";
  return 0;
}

int runList(cache::KernelCache &c, const CacheOptions &opts) {
  auto entries = c.list();
  if (!entries)
    return fail(entries.error());
  if (opts.format == "json") {
    nlohmann::json list = nlohmann::json::array();
    for (const cache::EntryInfo &e : *entries)
      list.push_back({{"key", e.key},
                      {"kind", std::string(cache::entryKindName(e.kind))},
                      {"kernel", e.kernel_name},
                      {"bytes", e.bytes},
                      {"last_use", isoTime(e.last_use)}});
    std::cout << nlohmann::json{{"dir", c.dir()}, {"entries", list}}.dump(2) << "\n";
    return 0;
  }
  using Align = TextTable::Align;
  TextTable table({"KEY", "KIND", "KERNEL OR PROGRAM", "BYTES", "LAST USE"},
                  {Align::Left, Align::Left, Align::Left, Align::Right, Align::Left});
  for (const cache::EntryInfo &e : *entries)
    table.addRow({e.key.substr(0, 12), std::string(cache::entryKindName(e.kind)),
                  printableName(e.kernel_name), std::to_string(e.bytes), isoTime(e.last_use)});
  std::cout << table.toString();
  return 0;
}

int runClean(cache::KernelCache &c, const CacheOptions &opts) {
  auto removed = c.clean();
  if (!removed)
    return fail(removed.error());
  if (opts.format == "json")
    std::cout << nlohmann::json{{"dir", c.dir()}, {"removed", *removed}}.dump(2) << "\n";
  else
    std::cout << "removed " << *removed << " entries from " << c.dir() << "\n";
  return 0;
}

int runVerify(cache::KernelCache &c, const CacheOptions &opts) {
  auto report = c.verify();
  if (!report)
    return fail(report.error());
  if (opts.format == "json") {
    nlohmann::json bad = nlohmann::json::array();
    for (const auto &[path, reason] : report->bad)
      bad.push_back({{"path", path}, {"reason", reason}});
    std::cout << nlohmann::json{{"dir", c.dir()},
                                {"checked", report->checked},
                                {"authenticated_with", c.secretPath()},
                                {"ok", report->ok()},
                                {"bad", bad}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << "checked " << report->checked << " entries in " << c.dir() << ": "
              << (report->ok() ? "all good" : std::to_string(report->bad.size()) + " bad, evicted")
              << " (each entry's HMAC-SHA-256 checked under " << c.secretPath() << ")\n";
    for (const auto &[path, reason] : report->bad)
      printText("  " + path + ": " + reason + "\n");
  }
  return report->ok() ? 0 : 1;
}

int runPrune(cache::KernelCache &c, const CacheOptions &opts) {
  std::optional<uint64_t> cap;
  if (opts.max_size) {
    auto size = cache::parseSize(*opts.max_size);
    if (!size)
      return fail(size.error().withContext("--max-size"));
    cap = *size;
  }
  auto evicted = c.prune(cap);
  if (!evicted)
    return fail(evicted.error());
  auto s = c.stats();
  if (!s)
    return fail(s.error());
  if (opts.format == "json")
    std::cout << nlohmann::json{{"dir", c.dir()},
                                {"evicted", *evicted},
                                {"entries", s->entries},
                                {"bytes", s->bytes}}
                     .dump(2)
              << "\n";
  else
    std::cout << "evicted " << *evicted << " entries; " << s->entries << " entries, " << s->bytes
              << " bytes remain\n";
  return 0;
}

using Runner = int (*)(cache::KernelCache &, const CacheOptions &);

void addCacheSubcommand(CLI::App &cmd, Action &action, const std::string &name,
                        const std::string &help, Runner runner) {
  auto opts = std::make_shared<CacheOptions>();
  CLI::App *sub = cmd.add_subcommand(name, help);
  sub->add_option("--cache-dir", opts->dir,
                  "the cache (default: KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln, ~/.cache/kiln)");
  sub->add_option("--format", opts->format, "text or json")->check(OneOf({"text", "json"}));
  if (name == "prune")
    sub->add_option("--max-size", opts->max_size,
                    "evict down to this many bytes (K/M/G suffix; default KILN_CACHE_MAX_SIZE)")
        ->check(parsedBy(cache::parseSize, "SIZE"));
  sub->callback([opts, runner, &action] {
    action = [opts, runner] {
      auto c = cache::KernelCache::openConfigured(opts->dir);
      if (!c)
        return fail(c.error());
      return runner(**c, *opts);
    };
  });
}

} // namespace

void registerCacheCommand(CLI::App &app, Action &action) {
  CLI::App *cmd =
      app.add_subcommand("cache", "Look after the kernel cache (kernels and whole programs)");
  cmd->require_subcommand(1);
  addCacheSubcommand(*cmd, action, "stats", "Entries, bytes, hits, misses, evictions", runStats);
  addCacheSubcommand(*cmd, action, "list", "Every entry, least recently used first", runList);
  addCacheSubcommand(*cmd, action, "clean", "Remove every entry and reset the counters", runClean);
  addCacheSubcommand(*cmd, action, "verify", "Check every entry; evict the bad ones", runVerify);
  addCacheSubcommand(*cmd, action, "prune", "Evict least recently used entries down to the cap",
                     runPrune);
  suggestOnUnknownArguments(*cmd);
}

} // namespace kiln::cli
