// Which kernel cache a process opens: the flag's folder or the
// environment's, the default under the user's cache folder, and the size
// cap (the cache itself: kernel_cache_test.cpp).
#include "compiler/cache/kernel_cache.h"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "tests/compiler/kernel_cache_test_util.h"

namespace kiln::cache {
namespace {

TEST_F(KernelCacheTest, TheConfiguredCacheIsTheFlagsOrTheEnvironmentsWithItsCap) {
  const char *old_dir = std::getenv("KILN_CACHE_DIR");
  const char *old_size = std::getenv("KILN_CACHE_MAX_SIZE");
  const std::optional<std::string> saved_dir =
      old_dir ? std::optional<std::string>(old_dir) : std::nullopt;
  const std::optional<std::string> saved_size =
      old_size ? std::optional<std::string>(old_size) : std::nullopt;
  ::setenv("KILN_CACHE_DIR", (dir_ / "env").c_str(), 1);
  ::setenv("KILN_CACHE_MAX_SIZE", "1M", 1);
  auto from_env = KernelCache::openConfigured(std::nullopt);
  ASSERT_TRUE(from_env.isOk()) << from_env.message();
  EXPECT_EQ((*from_env)->dir(), (dir_ / "env").string());
  auto stats = (*from_env)->stats();
  ASSERT_TRUE(stats.isOk()) << stats.message();
  EXPECT_EQ(stats->max_bytes, 1024u * 1024);
  auto from_flag = KernelCache::openConfigured(cacheDir());
  ASSERT_TRUE(from_flag.isOk()) << from_flag.message();
  EXPECT_EQ((*from_flag)->dir(), cacheDir()) << "the flag beats the environment";
  ::setenv("KILN_CACHE_MAX_SIZE", "lots", 1);
  EXPECT_FALSE(KernelCache::openConfigured(cacheDir()).isOk());
  for (auto [name, saved] :
       {std::pair{"KILN_CACHE_DIR", saved_dir}, std::pair{"KILN_CACHE_MAX_SIZE", saved_size}}) {
    if (saved)
      ::setenv(name, saved->c_str(), 1);
    else
      ::unsetenv(name);
  }
}

TEST(KernelCacheConfig, DirectoryPrecedenceAndSizeParsing) {
  auto restore = [](const char *name, const char *old) {
    if (old)
      ::setenv(name, old, 1);
    else
      ::unsetenv(name);
  };
  const char *names[] = {"KILN_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "KILN_CACHE_MAX_SIZE"};
  std::vector<std::optional<std::string>> saved;
  for (const char *n : names)
    saved.push_back(std::getenv(n) ? std::optional<std::string>(std::getenv(n)) : std::nullopt);

  ::setenv("KILN_CACHE_DIR", "/env/dir", 1);
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(resolveCacheDir(std::string("/flag")).value(), "/flag");
  EXPECT_EQ(resolveCacheDir(std::nullopt).value(), "/env/dir");
  ::unsetenv("KILN_CACHE_DIR");
  EXPECT_EQ(resolveCacheDir(std::nullopt).value(), "/xdg/kiln");
  ::setenv("XDG_CACHE_HOME", "relative", 1);
  EXPECT_EQ(resolveCacheDir(std::nullopt).value(), "/home/u/.cache/kiln");
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(resolveCacheDir(std::nullopt).value(), "/home/u/.cache/kiln");
  ::unsetenv("HOME");
  EXPECT_FALSE(resolveCacheDir(std::nullopt).isOk());
  EXPECT_FALSE(resolveCacheDir(std::string("")).isOk());

  ::unsetenv("KILN_CACHE_MAX_SIZE");
  EXPECT_EQ(maxSizeFromEnv().value(), kDefaultMaxBytes);
  ::setenv("KILN_CACHE_MAX_SIZE", "12345", 1);
  EXPECT_EQ(maxSizeFromEnv().value(), 12345u);
  ::setenv("KILN_CACHE_MAX_SIZE", "2M", 1);
  EXPECT_EQ(maxSizeFromEnv().value(), 2u * 1024 * 1024);
  ::setenv("KILN_CACHE_MAX_SIZE", "lots", 1);
  ASSERT_FALSE(maxSizeFromEnv().isOk());
  EXPECT_NE(maxSizeFromEnv().message().find("KILN_CACHE_MAX_SIZE"), std::string::npos);
  EXPECT_FALSE(parseSize("99999999999999999999").isOk());
  EXPECT_FALSE(parseSize("").isOk());
  EXPECT_FALSE(parseSize("5X").isOk());
  EXPECT_EQ(parseCacheMode("force").value(), CacheMode::Force);
  EXPECT_FALSE(parseCacheMode("on").isOk());

  for (size_t i = 0; i < saved.size(); ++i)
    restore(names[i], saved[i] ? saved[i]->c_str() : nullptr);
}

} // namespace
} // namespace kiln::cache
