// The kernel cache: keys, entries, checks on read, modes, LRU capping and
// stats (concurrent writers: kernel_cache_concurrency_test.cpp; which cache
// a process opens: kernel_cache_config_test.cpp).
#include "compiler/cache/kernel_cache.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "compiler/cache/cache_entry.h"
#include "compiler/cache/sha256.h"
#include "support/file_io.h"
#include "tests/compiler/kernel_cache_test_util.h"

namespace kiln::cache {
namespace {

TEST(KernelCacheSha256, MatchesFips180Vectors) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(KernelCacheSha256, IncrementalEqualsOneShot) {
  std::string data;
  for (int i = 0; i < 1000; ++i)
    data.push_back(char(i * 37));
  for (size_t chunk : {1, 3, 55, 56, 63, 64, 65, 200}) {
    Sha256 h;
    for (size_t pos = 0; pos < data.size(); pos += chunk)
      h.update(std::string_view(data).substr(pos, chunk));
    EXPECT_EQ(toHex(h.finish()), sha256Hex(data)) << "chunk " << chunk;
  }
}

const std::string kSecret = "a test's cache secret, 32 bytes.";

// An entry of the given meta text, with a valid header and HMAC.
std::string entryWithMeta(const std::string &meta) {
  std::string out("KILNKCE\0", 8);
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
      out.push_back(char(uint8_t(v >> (8 * i))));
  };
  put(kEntryFormatVersion, 4);
  put(0, 4);
  put(meta.size(), 8);
  put(1, 8);
  out += meta + "o";
  Sha256::Digest mac = hmacSha256(kSecret, out);
  return out + std::string(reinterpret_cast<const char *>(mac.data()), mac.size());
}

// Found by tests/fuzz: metadata nested 10^5 deep overflowed the stack when
// the entry was decoded (copying the value recurses).
TEST(KernelCacheEntry, DeeplyNestedMetadataIsMalformed) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  const std::string meta = R"({"key":"ab","kernel":"k","parts":[],"metadata":)" + deep + "}";
  auto entry = decodeEntry(entryWithMeta(meta), kSecret);
  ASSERT_FALSE(entry.isOk());
  EXPECT_EQ(entry.message().rfind("malformed metadata: invalid JSON: ", 0), 0u) << entry.message();
  EXPECT_NE(entry.message().find("deeper than 512 levels"), std::string::npos);
  EXPECT_FALSE(decodeEntryMeta(entryWithMeta(meta), entryWithMeta(meta).size()).isOk());
  // The same entry without the nesting decodes.
  auto plain = decodeEntry(entryWithMeta(R"({"key":"ab","kernel":"k","parts":[]})"), kSecret);
  ASSERT_TRUE(plain.isOk()) << plain.message();
  EXPECT_EQ(plain->object, "o");
}

// RFC 4231, test case 2.
TEST(KernelCacheHmac, MatchesRfc4231) {
  EXPECT_EQ(toHex(hmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

// The trailer authenticates: an entry whose SHA-256 anyone could recompute,
// or one written under another user's secret, is refused.
TEST(KernelCacheEntry, OnlyTheSecretsHolderWritesAnEntryThatDecodes) {
  const std::string good = entryWithMeta(R"({"key":"ab","kernel":"k","parts":[]})");
  ASSERT_TRUE(decodeEntry(good, kSecret).isOk());
  auto other = decodeEntry(good, "another user's secret, 32 bytes!");
  ASSERT_FALSE(other.isOk());
  EXPECT_NE(other.message().find("authentication failed"), std::string::npos) << other.message();
  std::string rehashed = good.substr(0, good.size() - 32);
  const Sha256::Digest sum = sha256(rehashed);
  rehashed.append(reinterpret_cast<const char *>(sum.data()), sum.size());
  EXPECT_FALSE(decodeEntry(rehashed, kSecret).isOk());
}

TEST(KernelCacheKey, IdenticalInputsGiveTheSameKeyAndTheNameIsNotPartOfIt) {
  CacheKey a = makeCacheKey(sampleInputs("layer0.rmsnorm"));
  CacheKeyInputs renamed = sampleInputs("layer0.rmsnorm");
  renamed.kernel_name = "layer1.rmsnorm";
  EXPECT_EQ(a.hex, makeCacheKey(sampleInputs("layer0.rmsnorm")).hex);
  EXPECT_EQ(a.hex, makeCacheKey(renamed).hex);
  EXPECT_TRUE(isKeyHex(a.hex));
  EXPECT_EQ(a.parts.size(), kKeyPartNames.size());
}

TEST(KernelCacheKey, EveryPartChangesTheKey) {
  const std::string base = makeCacheKey(sampleInputs()).hex;
  for (std::string_view part : kKeyPartNames) {
    CacheKeyInputs in = sampleInputs();
    partOf(in, part) += "x";
    EXPECT_NE(makeCacheKey(in).hex, base) << part;
  }
  // Moving text from one part to the next must not give the same key.
  CacheKeyInputs a = sampleInputs(), b = sampleInputs();
  a.kiln_version = "0.1";
  a.kiln_source_hash = "0abc";
  b.kiln_version = "0.10";
  b.kiln_source_hash = "abc";
  EXPECT_NE(makeCacheKey(a).hex, makeCacheKey(b).hex);
}

TEST_F(KernelCacheTest, StoreThenLookupRoundTripsBytesAndMetadata) {
  auto c = open();
  CacheKey key = makeCacheKey(sampleInputs());
  std::string object("\x7f"
                     "ELF\0\1\2\xff binary",
                     16);
  EXPECT_FALSE(c->lookup(key));
  ASSERT_TRUE(c->store(key, object, {{"symbol", "k0"}}).isOk());
  auto hit = c->lookup(key);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->object, object);
  EXPECT_EQ(hit->kernel_name, "fused_rmsnorm_0");
  EXPECT_EQ(hit->metadata["symbol"], "k0");
  EXPECT_EQ(hit->parts, key.parts);
  // A second instance (another process, later) sees it too.
  EXPECT_TRUE(open()->lookup(key));
}

TEST_F(KernelCacheTest, EachPartChangedAloneMissesAndIsNamed) {
  auto c = open();
  ASSERT_TRUE(c->store(makeCacheKey(sampleInputs()), "obj").isOk());
  ASSERT_TRUE(c->store(makeCacheKey(sampleInputs("other_kernel")), "obj2").isOk());
  EXPECT_TRUE(c->lookup(makeCacheKey(sampleInputs())));
  for (std::string_view part : kKeyPartNames) {
    CacheKeyInputs in = sampleInputs();
    partOf(in, part) += " changed";
    CacheKey key = makeCacheKey(in);
    EXPECT_FALSE(c->lookup(key)) << part;
    MissExplanation why = c->explainMiss(key);
    EXPECT_FALSE(why.hit);
    EXPECT_TRUE(why.same_kernel) << part;
    EXPECT_EQ(why.changed, std::vector<std::string>{std::string(part)});
    EXPECT_NE(why.message().find(std::string(part) + " changed"), std::string::npos)
        << why.message();
  }
}

TEST_F(KernelCacheTest, ExplainMissWithoutASameNamedEntry) {
  auto c = open();
  CacheKeyInputs in = sampleInputs("softmax_3");
  EXPECT_NE(c->explainMiss(makeCacheKey(in)).message().find("no entry to compare with"),
            std::string::npos);
  ASSERT_TRUE(c->store(makeCacheKey(in), "obj").isOk());
  EXPECT_TRUE(c->explainMiss(makeCacheKey(in)).hit);
  CacheKeyInputs other = in;
  other.kernel_name = "gelu_1";
  other.kernel_ir = "kernel gelu_1";
  other.llvm_version = "20.0";
  MissExplanation why = c->explainMiss(makeCacheKey(other));
  EXPECT_FALSE(why.same_kernel);
  EXPECT_EQ(why.changed, (std::vector<std::string>{"kernel_ir", "llvm_version"}));
  EXPECT_NE(why.message().find("another kernel"), std::string::npos);
}

// Each way an entry goes bad: not returned, evicted with a warning, counted, rebuilt.
TEST_F(KernelCacheTest, BadEntriesAreEvictedWithAWarningAndRebuilt) {
  struct Damage {
    const char *name;
    std::function<void(std::string &)> apply;
    const char *reason;
  };
  const std::vector<Damage> damages = {
      {"flipped object byte", [](std::string &b) { b[b.size() - 40] ^= 0x01; },
       "authentication failed"},
      {"wrong HMAC", [](std::string &b) { b.back() ^= 0x80; }, "authentication failed"},
      {"truncated", [](std::string &b) { b.resize(b.size() - 7); }, "truncated"},
      {"truncated to a stub", [](std::string &b) { b.resize(10); }, "truncated"},
      {"empty", [](std::string &b) { b.clear(); }, "truncated"},
      {"trailing bytes", [](std::string &b) { b += "xx"; }, "trailing bytes"},
      {"bad magic", [](std::string &b) { b[0] = 'X'; }, "bad magic"},
      {"future version", [](std::string &b) { b[8] = 9; }, "unknown entry format version 9"},
  };
  for (const Damage &d : damages) {
    SCOPED_TRACE(d.name);
    fs::remove_all(dir_);
    auto c = open();
    CacheKey key = makeCacheKey(sampleInputs());
    const std::string object(300, 'o');
    ASSERT_TRUE(c->store(key, object).isOk());
    const std::string path = c->entryPath(key.hex);
    auto bytes = readFile(path);
    ASSERT_TRUE(bytes.isOk());
    d.apply(*bytes);
    ASSERT_TRUE(writeFileAtomic(path, *bytes).isOk());
    {
      LogCapture log;
      EXPECT_FALSE(c->lookup(key));
      EXPECT_NE(log.text().find("evicting bad entry"), std::string::npos) << log.text();
      EXPECT_NE(log.text().find(d.reason), std::string::npos) << log.text();
    }
    EXPECT_FALSE(fs::exists(path));
    auto s = c->stats();
    ASSERT_TRUE(s.isOk());
    EXPECT_EQ(s->evictions, 1u);
    EXPECT_EQ(s->misses, 1u);
    ASSERT_TRUE(c->store(key, object).isOk());
    auto hit = c->lookup(key);
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->object, object);
  }
}

TEST_F(KernelCacheTest, AnEntryUnderAnotherKeysNameIsNotReturned) {
  auto c = open();
  CacheKey a = makeCacheKey(sampleInputs("a")), b = makeCacheKey(sampleInputs("b"));
  ASSERT_TRUE(c->store(a, "object of a").isOk());
  ASSERT_TRUE(c->store(b, "object of b").isOk());
  fs::copy_file(c->entryPath(a.hex), c->entryPath(b.hex), fs::copy_options::overwrite_existing);
  LogCapture log;
  EXPECT_FALSE(c->lookup(b));
  EXPECT_NE(log.text().find("holds key " + a.hex), std::string::npos) << log.text();
}

TEST_F(KernelCacheTest, AnEntryNotOwnedByTheUserIsNeverLoaded) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to give a file to another user";
  auto c = open();
  CacheKey key = makeCacheKey(sampleInputs());
  ASSERT_TRUE(c->store(key, "native code").isOk());
  ASSERT_EQ(::chown(c->entryPath(key.hex).c_str(), 12345, 12345), 0);
  LogCapture log;
  EXPECT_FALSE(c->lookup(key));
  EXPECT_NE(log.text().find("owned by uid 12345"), std::string::npos) << log.text();
  EXPECT_FALSE(fs::exists(c->entryPath(key.hex)));
}

TEST_F(KernelCacheTest, AnEntryWritableByOthersIsNeverLoaded) {
  auto c = open();
  for (fs::perms extra : {fs::perms::group_write, fs::perms::others_write}) {
    CacheKey key = makeCacheKey(sampleInputs());
    ASSERT_TRUE(c->store(key, "native code").isOk());
    ASSERT_TRUE(c->lookup(key));
    fs::permissions(c->entryPath(key.hex), extra, fs::perm_options::add);
    LogCapture log;
    EXPECT_FALSE(c->lookup(key));
    EXPECT_NE(log.text().find("writable by group or others"), std::string::npos) << log.text();
    EXPECT_FALSE(fs::exists(c->entryPath(key.hex)));
  }
}

TEST_F(KernelCacheTest, ASymlinkedEntryIsNotFollowed) {
  auto c = open();
  CacheKey a = makeCacheKey(sampleInputs("a")), b = makeCacheKey(sampleInputs("b"));
  ASSERT_TRUE(c->store(a, "x").isOk());
  ASSERT_TRUE(c->store(b, "y").isOk());
  fs::remove(c->entryPath(b.hex));
  fs::create_symlink(c->entryPath(a.hex), c->entryPath(b.hex));
  LogCapture log;
  EXPECT_FALSE(c->lookup(b));
  EXPECT_NE(log.text().find("symbolic link"), std::string::npos) << log.text();
  EXPECT_TRUE(c->lookup(a)); // the target itself is untouched
}

TEST_F(KernelCacheTest, DisableNeverReadsOrWrites) {
  CacheKey key = makeCacheKey(sampleInputs());
  {
    auto off = open(CacheMode::Disable);
    ASSERT_TRUE(off->store(key, "obj").isOk());
    EXPECT_FALSE(off->lookup(key));
  }
  EXPECT_FALSE(fs::exists(cacheDir())); // not even created
  ASSERT_TRUE(open()->store(key, "obj").isOk());
  const auto stats_before = readFile(cacheDir() + "/stats.json");
  const auto mtime_before = fs::last_write_time(open()->entryPath(key.hex));
  {
    auto off = open(CacheMode::Disable);
    EXPECT_FALSE(off->lookup(key));
    ASSERT_TRUE(off->store(key, "other").isOk());
  }
  EXPECT_EQ(readFile(cacheDir() + "/stats.json").value(), stats_before.value());
  EXPECT_EQ(fs::last_write_time(open()->entryPath(key.hex)), mtime_before);
  EXPECT_EQ(open()->lookup(key)->object, "obj");
}

TEST_F(KernelCacheTest, ForceIgnoresEntriesAndOverwrites) {
  CacheKey key = makeCacheKey(sampleInputs());
  ASSERT_TRUE(open()->store(key, "old object").isOk());
  {
    auto force = open(CacheMode::Force);
    EXPECT_FALSE(force->lookup(key));
    ASSERT_TRUE(force->store(key, "new object").isOk());
    EXPECT_FALSE(force->lookup(key));
  }
  EXPECT_EQ(open()->lookup(key)->object, "new object");
}

TEST_F(KernelCacheTest, LruEvictionKeepsRecentlyUsedEntriesUnderTheCap) {
  auto key = [](const std::string &n) { return makeCacheKey(sampleInputs(n)); };
  const std::string object(1000, 'z');
  CacheEntry probe;
  probe.key = key("a").hex;
  probe.kernel_name = "a";
  probe.parts = key("a").parts;
  probe.created = int64_t(std::time(nullptr));
  probe.object = object;
  const uint64_t entry_bytes = encodeEntry(probe, kSecret).size();
  auto c = open(CacheMode::Enable, 3 * entry_bytes);
  // File times come from a coarse clock; space the uses apart.
  auto tick = [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  for (const char *n : {"a", "b", "c"}) {
    ASSERT_TRUE(c->store(key(n), object).isOk());
    tick();
  }
  EXPECT_TRUE(c->lookup(key("a"))); // a is now the most recently used
  tick();
  ASSERT_TRUE(c->store(key("d"), object).isOk());
  EXPECT_FALSE(fs::exists(c->entryPath(key("b").hex)));
  for (const char *n : {"a", "c", "d"})
    EXPECT_TRUE(fs::exists(c->entryPath(key(n).hex))) << n;
  auto s = c->stats();
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->entries, 3u);
  EXPECT_LE(s->bytes, 3 * entry_bytes);
  EXPECT_EQ(s->evictions, 1u);
  // prune to one entry keeps the newest.
  auto evicted = c->prune(entry_bytes);
  ASSERT_TRUE(evicted.isOk());
  EXPECT_EQ(*evicted, 2u);
  EXPECT_TRUE(fs::exists(c->entryPath(key("d").hex)));
}

TEST_F(KernelCacheTest, DirectoryIsCreated0700AndUnsafeOnesAreRefused) {
  const std::string nested = (dir_ / "a" / "b" / "kiln").string();
  auto c = KernelCache::open(nested);
  ASSERT_TRUE(c.isOk()) << c.message();
  struct stat st {};
  ASSERT_EQ(::stat(nested.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((dir_ / "a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  fs::create_directories(dir_ / "open");
  fs::permissions(dir_ / "open", fs::perms::all);
  auto loose = KernelCache::open((dir_ / "open").string());
  ASSERT_FALSE(loose.isOk());
  EXPECT_NE(loose.message().find("writable by group or others"), std::string::npos);

  std::ofstream(dir_ / "file") << "x";
  auto file = KernelCache::open((dir_ / "file").string());
  ASSERT_FALSE(file.isOk());
  EXPECT_NE(file.message().find((dir_ / "file").string()), std::string::npos) << file.message();
  auto under_file = KernelCache::open((dir_ / "file" / "sub").string());
  ASSERT_FALSE(under_file.isOk());
  EXPECT_NE(under_file.message().find("cannot create"), std::string::npos) << under_file.message();
}

TEST_F(KernelCacheTest, StatsArePersistedAcrossInstances) {
  CacheKey a = makeCacheKey(sampleInputs("a")), b = makeCacheKey(sampleInputs("b"));
  {
    auto c = open();
    EXPECT_FALSE(c->lookup(a));
    ASSERT_TRUE(c->store(a, "obj").isOk());
    EXPECT_TRUE(c->lookup(a));
    EXPECT_TRUE(c->lookup(a));
  }
  {
    auto c = open();
    EXPECT_FALSE(c->lookup(b));
  }
  auto s = open()->stats();
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->entries, 1u);
  EXPECT_GT(s->bytes, 3u);
  EXPECT_EQ(s->hits, 2u);
  EXPECT_EQ(s->misses, 2u);
  EXPECT_EQ(s->stores, 1u);
  nlohmann::json j = s->toJson();
  for (const char *field : {"entries", "bytes", "hits", "misses", "evictions"})
    EXPECT_TRUE(j.contains(field)) << field;
}

TEST_F(KernelCacheTest, ListVerifyPruneAndClean) {
  auto c = open();
  for (const char *n : {"k2", "k1", "k3"}) {
    ASSERT_TRUE(c->store(makeCacheKey(sampleInputs(n)), std::string(100, 'q')).isOk());
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // coarse file times
  }
  auto entries = c->list();
  ASSERT_TRUE(entries.isOk());
  ASSERT_EQ(entries->size(), 3u); // least recently used first
  EXPECT_EQ((*entries)[0].kernel_name, "k2");
  EXPECT_EQ((*entries)[2].kernel_name, "k3");

  auto report = c->verify();
  ASSERT_TRUE(report.isOk());
  EXPECT_EQ(report->checked, 3u);
  EXPECT_TRUE(report->ok());

  // A stale temporary file from a writer that died goes on prune; a fresh one stays.
  const std::string entry = (*entries)[0].path;
  const std::string stale = entry + ".tmp.99999.0", fresh = entry + ".tmp.99999.1";
  const std::string stale_stats = c->dir() + "/stats.json.tmp.99999.2";
  std::ofstream(stale) << "half";
  std::ofstream(fresh) << "half";
  std::ofstream(stale_stats) << "{";
  for (const std::string &old : {stale, stale_stats})
    fs::last_write_time(old, fs::file_time_type::clock::now() - std::chrono::hours(2));
  std::string bytes = readFile(entry).value();
  bytes[bytes.size() / 2] ^= 0x10;
  ASSERT_TRUE(writeFileAtomic(entry, bytes).isOk());
  {
    LogCapture log;
    report = c->verify();
  }
  ASSERT_TRUE(report.isOk());
  EXPECT_EQ(report->checked, 3u);
  ASSERT_EQ(report->bad.size(), 1u);
  EXPECT_EQ(report->bad[0].first, entry);
  auto evicted = c->prune();
  ASSERT_TRUE(evicted.isOk());
  EXPECT_EQ(*evicted, 0u);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale_stats));
  EXPECT_TRUE(fs::exists(fresh));

  auto removed = c->clean();
  ASSERT_TRUE(removed.isOk());
  EXPECT_EQ(*removed, 2u);
  EXPECT_FALSE(fs::exists(fresh));
  auto s = c->stats();
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->entries, 0u);
  EXPECT_EQ(s->stores, 0u);
}

} // namespace
} // namespace kiln::cache
