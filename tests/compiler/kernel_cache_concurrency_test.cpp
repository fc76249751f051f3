// The kernel cache under concurrent writers and pruners: processes and
// threads storing at once never leave a corrupt cache.
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "tests/compiler/kernel_cache_test_util.h"

namespace kiln::cache {
namespace {

// The object a writer stores: large enough that a torn write could not pass
// as whole, different per writer so readers can tell whose it is.
std::string writerObject(int writer, int i) {
  std::string s = "writer " + std::to_string(writer) + " object " + std::to_string(i) + ";";
  while (s.size() < 48 * 1024)
    s += s;
  return s;
}

constexpr int kWriters = 6, kKeysEach = 15;

// One writer's work: the shared keys (all writers) and its own keys, with reads between.
bool writerWork(const std::string &dir, int writer) {
  auto c = KernelCache::open(dir);
  if (!c)
    return false;
  for (int i = 0; i < kKeysEach; ++i) {
    CacheKey shared = makeCacheKey(sampleInputs("shared_" + std::to_string(i)));
    CacheKey own =
        makeCacheKey(sampleInputs("own_" + std::to_string(writer) + "_" + std::to_string(i)));
    if (!(*c)->store(shared, writerObject(writer, i)) || !(*c)->store(own, writerObject(writer, i)))
      return false;
    auto back = (*c)->lookup(shared);
    if (back && back->object.find(" object " + std::to_string(i) + ";") == std::string::npos)
      return false;
  }
  return true;
}

void checkAfterWriters(const std::string &dir) {
  auto c = KernelCache::open(dir);
  ASSERT_TRUE(c.isOk());
  auto report = (*c)->verify();
  ASSERT_TRUE(report.isOk());
  EXPECT_TRUE(report->ok()) << report->bad.size() << " bad, first: "
                            << (report->bad.empty() ? "" : report->bad[0].second);
  EXPECT_EQ(report->checked, uint64_t(kKeysEach + kWriters * kKeysEach));
  for (int i = 0; i < kKeysEach; ++i) {
    auto shared = (*c)->lookup(makeCacheKey(sampleInputs("shared_" + std::to_string(i))));
    ASSERT_TRUE(shared);
    bool from_a_writer = false;
    for (int w = 0; w < kWriters; ++w)
      from_a_writer |= shared->object == writerObject(w, i);
    EXPECT_TRUE(from_a_writer) << "shared " << i;
    for (int w = 0; w < kWriters; ++w) {
      auto own = (*c)->lookup(
          makeCacheKey(sampleInputs("own_" + std::to_string(w) + "_" + std::to_string(i))));
      ASSERT_TRUE(own);
      EXPECT_EQ(own->object, writerObject(w, i));
    }
  }
  // No temporary file is left behind.
  for (const auto &f : fs::recursive_directory_iterator(dir))
    EXPECT_EQ(f.path().string().find(".tmp."), std::string::npos) << f.path();
}

TEST_F(KernelCacheTest, ConcurrentProcessesNeverCorruptTheCache) {
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0)
      ::_exit(writerWork(cacheDir(), w) ? 0 : 1);
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  checkAfterWriters(cacheDir());
  // Every process's counters reached stats.json (the check above added its own reads).
  auto s = open()->stats();
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->stores, uint64_t(2 * kWriters * kKeysEach));
  EXPECT_EQ(s->hits, uint64_t(2 * kWriters * kKeysEach + kKeysEach));
  EXPECT_EQ(s->misses, 0u);
}

TEST_F(KernelCacheTest, EvictionWhileOthersWriteNeverCorruptsTheCache) {
  std::vector<pid_t> children;
  for (int w = 0; w <= kWriters; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0 && w == kWriters) {
      // The last child keeps pruning to a few entries while the others write.
      bool ok = false;
      {
        auto c = KernelCache::open(cacheDir());
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
        ok = c.isOk();
        while (ok && std::chrono::steady_clock::now() < until)
          ok = (*c)->prune(200 * 1024).isOk();
      } // flushes its counters
      ::_exit(ok ? 0 : 1);
    }
    if (pid == 0)
      ::_exit(writerWork(cacheDir(), w) ? 0 : 1);
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto c = open();
  auto s = c->stats();
  ASSERT_TRUE(s.isOk());
  EXPECT_GT(s->evictions, 0u); // the pruner did run against the writers
  auto report = c->verify();
  ASSERT_TRUE(report.isOk());
  EXPECT_TRUE(report->ok());
  auto entries = c->list();
  ASSERT_TRUE(entries.isOk());
  EXPECT_EQ(entries->size(), report->checked);
  for (const EntryInfo &e : *entries) {
    CacheKey key = makeCacheKey(sampleInputs(e.kernel_name));
    auto hit = c->lookup(key);
    ASSERT_TRUE(hit) << e.kernel_name;
    const int i = std::stoi(e.kernel_name.substr(e.kernel_name.rfind('_') + 1));
    bool from_a_writer = false;
    for (int w = 0; w < kWriters; ++w)
      from_a_writer |= hit->object == writerObject(w, i);
    EXPECT_TRUE(from_a_writer) << e.kernel_name;
  }
}

TEST_F(KernelCacheTest, ConcurrentInstancesInThreadsNeverCorruptTheCache) {
  std::vector<std::thread> threads;
  std::vector<int> ok(kWriters, 0);
  for (int w = 0; w < kWriters; ++w)
    threads.emplace_back([&, w] { ok[w] = writerWork(cacheDir(), w); });
  for (auto &t : threads)
    t.join();
  for (int w = 0; w < kWriters; ++w)
    EXPECT_TRUE(ok[w]) << "writer " << w;
  checkAfterWriters(cacheDir());
}

} // namespace
} // namespace kiln::cache
