// Eight kiln processes compiling the same model into one empty kernel cache
// at once: all succeed, their artifacts are byte-identical, and the cache
// they leave verifies, holds each kernel once and no temporary file.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;

class ConcurrentCompile : public Cli {};

TEST_F(ConcurrentCompile, EightProcessesShareOneEmptyCache) {
  constexpr int kProcesses = 8;
  const std::string cache = path("shared-cache");
  // One creation time, so that the artifacts may be compared byte for byte.
  ::setenv("SOURCE_DATE_EPOCH", "1800000000", 1);
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    const std::string cmd = "exec " + kiln_ + " compile " + kTiny + " --seq 8 --cache-dir " +
                            cache + " -o " + path("job" + std::to_string(i) + ".kiln") + " >" +
                            path("out" + std::to_string(i)) + " 2>" +
                            path("err" + std::to_string(i));
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char *>(nullptr));
      ::_exit(127);
    }
    children.push_back(pid);
  }
  for (int i = 0; i < kProcesses; ++i) {
    int status = 0;
    ASSERT_EQ(::waitpid(children[i], &status, 0), children[i]);
    EXPECT_TRUE(WIFEXITED(status)) << "process " << i << " died of a signal";
    EXPECT_EQ(WEXITSTATUS(status), 0)
        << "process " << i << ": " << slurp(path("err" + std::to_string(i)));
    EXPECT_EQ(slurp(path("err" + std::to_string(i))), "") << "process " << i;
  }
  ::unsetenv("SOURCE_DATE_EPOCH");

  const std::string first = slurp(path("job0.kiln"));
  ASSERT_GT(first.size(), 1000u);
  for (int i = 1; i < kProcesses; ++i)
    EXPECT_TRUE(slurp(path("job" + std::to_string(i) + ".kiln")) == first)
        << "job" << i << ".kiln differs from job0.kiln";

  Result verify = run("cache verify --cache-dir " + cache + " --format json");
  ASSERT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  const nlohmann::json report = nlohmann::json::parse(verify.out);
  EXPECT_EQ(report["ok"], true);

  // As many entries as one compile alone stores, and nothing half-written.
  Result alone = run("compile " + kTiny + " --seq 8 --cache-dir " + path("alone-cache") + " -o " +
                     path("alone.kiln"));
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  Result alone_verify = run("cache verify --cache-dir " + path("alone-cache") + " --format json");
  EXPECT_EQ(report["checked"], nlohmann::json::parse(alone_verify.out)["checked"]);
  for (const auto &f : fs::recursive_directory_iterator(cache))
    EXPECT_EQ(f.path().string().find(".tmp."), std::string::npos) << f.path();

  // Every process's counters were added, none lost to another's rewrite.
  Result stats = run("cache stats --cache-dir " + cache + " --format json");
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const nlohmann::json s = nlohmann::json::parse(stats.out);
  // Each process looks up its program and every kernel once, whether the
  // program hits (its kernels are read) or misses (they are compiled).
  EXPECT_EQ(s["hits"].get<uint64_t>() + s["misses"].get<uint64_t>() +
                s["program_hits"].get<uint64_t>() + s["program_misses"].get<uint64_t>(),
            uint64_t(kProcesses) * report["checked"].get<uint64_t>());
  EXPECT_EQ(s["program_hits"].get<uint64_t>() + s["program_misses"].get<uint64_t>(),
            uint64_t(kProcesses));
}

} // namespace
} // namespace kiln
