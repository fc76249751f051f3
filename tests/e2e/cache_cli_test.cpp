// `kiln cache ...` end to end: stats, list, verify, prune, clean, and bad cache folders.
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "compiler/cache/kernel_cache.h"
#include "support/file_io.h"
#include "tests/e2e/cli_fixture.h"

namespace kiln::testing {
namespace {

class CacheCli : public Cli {
protected:
  std::string cacheDir() const { return path("cache"); }

  void fill(int n) {
    auto c = cache::KernelCache::open(cacheDir());
    ASSERT_TRUE(c.isOk()) << c.message();
    for (int i = 0; i < n; ++i) {
      cache::CacheKeyInputs in;
      in.kernel_name = "kernel_" + std::to_string(i);
      in.kernel_ir = "ir " + std::to_string(i);
      cache::CacheKey key = cache::makeCacheKey(in);
      ASSERT_TRUE((*c)->store(key, std::string(200, char('a' + i))).isOk());
      keys_.push_back(key.hex);
      EXPECT_TRUE((*c)->lookup(key));
    }
  }

  nlohmann::json runJson(const std::string &args, int expect_exit = 0) {
    Result r = run(args + " --cache-dir " + cacheDir() + " --format json");
    EXPECT_EQ(r.exit_code, expect_exit) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }

  std::vector<std::string> keys_;
};

// A kernel name longer than any column widens its column: every row's
// later columns start where the header's do.
TEST_F(CacheCli, ListKeepsItsColumnsAlignedWhateverTheNames) {
  auto c = cache::KernelCache::open(cacheDir());
  ASSERT_TRUE(c.isOk()) << c.message();
  for (const std::string name : {"a", "model.layers.0.input_layernorm.eps.and.a.longer.tail"}) {
    cache::CacheKeyInputs in;
    in.kernel_name = name;
    in.kernel_ir = "ir " + name;
    ASSERT_TRUE((*c)->store(cache::makeCacheKey(in), std::string(100, 'x')).isOk());
  }
  Result r = run("cache list --cache-dir " + cacheDir());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header, row;
  ASSERT_TRUE(std::getline(lines, header));
  const size_t last_use = header.find("LAST USE");
  const size_t bytes_end = header.find("BYTES") + 5;
  int rows = 0;
  while (std::getline(lines, row)) {
    ++rows;
    ASSERT_GT(row.size(), last_use) << r.out;
    EXPECT_EQ(row[last_use - 1], ' ') << r.out;
    EXPECT_NE(row[last_use], ' ') << r.out;
    EXPECT_NE(row[bytes_end - 1], ' ') << r.out; // numbers right-aligned under BYTES
    EXPECT_EQ(row[bytes_end], ' ') << r.out;
  }
  EXPECT_EQ(rows, 2) << r.out;
}

TEST_F(CacheCli, StatsOfAFreshCacheCreatesItEmpty) {
  nlohmann::json s = runJson("cache stats");
  for (const char *field : {"entries", "bytes", "hits", "misses"})
    EXPECT_EQ(s[field], 0) << field;
  EXPECT_EQ(s["dir"], cacheDir());
  EXPECT_TRUE(fs::is_directory(cacheDir()));
}

TEST_F(CacheCli, StatsListVerifyCleanSeeWhatTheLibraryStored) {
  fill(3);
  nlohmann::json s = runJson("cache stats");
  EXPECT_EQ(s["entries"], 3);
  EXPECT_EQ(s["hits"], 3);
  EXPECT_EQ(s["misses"], 0);
  EXPECT_GT(s["bytes"].get<uint64_t>(), 600u);

  nlohmann::json list = runJson("cache list");
  ASSERT_EQ(list["entries"].size(), 3u);
  std::set<std::string> kernels;
  for (const auto &e : list["entries"]) {
    kernels.insert(e["kernel"].get<std::string>());
    EXPECT_EQ(e["key"].get<std::string>().size(), 64u);
  }
  EXPECT_EQ(kernels, (std::set<std::string>{"kernel_0", "kernel_1", "kernel_2"}));

  nlohmann::json ok = runJson("cache verify");
  EXPECT_EQ(ok["checked"], 3);
  EXPECT_EQ(ok["ok"], true);

  // Flip a byte of one entry: verify fails, names it, and evicts it.
  auto c = cache::KernelCache::open(cacheDir());
  ASSERT_TRUE(c.isOk());
  const std::string entry = (*c)->entryPath(keys_[1]);
  std::string bytes = readFile(entry).value();
  bytes[100] ^= 0x01;
  ASSERT_TRUE(writeFileAtomic(entry, bytes).isOk());
  Result bad = run("cache verify --cache-dir " + cacheDir());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("1 bad, evicted"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find(entry), std::string::npos) << bad.out;
  EXPECT_NE(bad.err.find("kiln: warning: kernel cache: evicting bad entry"), std::string::npos)
      << bad.err;
  EXPECT_EQ(runJson("cache stats")["entries"], 2);
  EXPECT_EQ(runJson("cache verify")["ok"], true);

  nlohmann::json pruned = runJson("cache prune --max-size 0");
  EXPECT_EQ(pruned["evicted"], 2);
  EXPECT_EQ(pruned["entries"], 0);

  fill(2);
  EXPECT_EQ(runJson("cache clean")["removed"], 2);
  s = runJson("cache stats");
  EXPECT_EQ(s["entries"], 0);
  EXPECT_EQ(s["hits"], 0);
}

TEST_F(CacheCli, TextOutput) {
  fill(1);
  Result r = run("cache list --cache-dir " + cacheDir());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kernel_0"), std::string::npos) << r.out;
  r = run("cache stats --cache-dir " + cacheDir());
  EXPECT_NE(r.out.find("entries:        1"), std::string::npos) << r.out;
  r = run("cache verify --cache-dir " + cacheDir());
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("all good"), std::string::npos) << r.out;
}

TEST_F(CacheCli, CacheDirComesFromTheEnvironment) {
  fill(1);
  ::setenv("KILN_CACHE_DIR", cacheDir().c_str(), 1);
  Result r = run("cache stats --format json");
  ::unsetenv("KILN_CACHE_DIR");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["entries"], 1);
}

TEST_F(CacheCli, BadCacheDirIsAOneLineErrorNamingIt) {
  write("plain_file", "x");
  expectRunError(run("cache stats --cache-dir " + path("plain_file")),
                 {path("plain_file"), "not a directory"});
  expectRunError(run("cache list --cache-dir " + path("plain_file") + "/sub"),
                 {path("plain_file") + "/sub", "cannot create"});
  fs::create_directories(path("shared"));
  fs::permissions(path("shared"), fs::perms::all);
  expectRunError(run("cache verify --cache-dir " + path("shared")),
                 {path("shared"), "writable by group or others"});
}

// For a compile, the cache only saves time: one that cannot be created,
// locked or written, or a bad size setting, is a warning; the kernels are
// compiled and the artifact is written. (Tests run as root, where a
// read-only folder is still writable: the cache's files are made folders
// instead, which no one can open as files.)
TEST_F(CacheCli, ACacheThatCannotBeUsedIsAWarningNeverAnError) {
  const std::string compile = "compile " + kTiny + " --seq 8 -o " + path("a.kiln") + " ";
  write("plain_file", "x");
  Result r = run(compile + "--cache-dir " + path("plain_file") + "/cache");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("kiln: warning: kernel cache: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("compiling without it"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(path("a.kiln")));

  ASSERT_EQ(run(compile + "--cache-dir " + cacheDir()).exit_code, 0);
  fs::remove(path("a.kiln"));
  fs::remove(fs::path(cacheDir()) / "stats.lock");
  fs::create_directories(fs::path(cacheDir()) / "stats.lock");
  r = run(compile + "--cache-dir " + cacheDir());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("kiln: warning: kernel cache: "), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(path("a.kiln")));

  ::setenv("KILN_CACHE_MAX_SIZE", "abc", 1);
  r = run(compile + "--cache-dir " + cacheDir());
  ::unsetenv("KILN_CACHE_MAX_SIZE");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("KILN_CACHE_MAX_SIZE"), std::string::npos) << r.err;
}

TEST_F(CacheCli, BadSizesAndFormatsAreErrors) {
  expectUsageError(run("cache prune --cache-dir " + cacheDir() + " --max-size lots"),
                   {"--max-size", "lots"});
  ::setenv("KILN_CACHE_MAX_SIZE", "-5", 1);
  Result r = run("cache stats --cache-dir " + cacheDir());
  ::unsetenv("KILN_CACHE_MAX_SIZE");
  expectRunError(r, {"KILN_CACHE_MAX_SIZE", "-5"});
  ::setenv("KILN_CACHE_MAX_SIZE", "abc", 1);
  r = run("cache stats --cache-dir " + cacheDir());
  ::unsetenv("KILN_CACHE_MAX_SIZE");
  expectRunError(r, {"KILN_CACHE_MAX_SIZE", "abc"});
  Result f = run("cache stats --cache-dir " + cacheDir() + " --format xml");
  EXPECT_NE(f.exit_code, 0);
  EXPECT_EQ(f.err.rfind("kiln: error: ", 0), 0u) << f.err;
}

} // namespace
} // namespace kiln::testing
