// Shared pieces of the kernel-cache tests: sample key inputs, a log
// capture and a fixture with a scratch cache folder per test.
#pragma once

#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <unistd.h>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "compiler/cache/kernel_cache.h"

namespace kiln::cache {

namespace fs = std::filesystem;

inline CacheKeyInputs sampleInputs(const std::string &name = "fused_rmsnorm_0") {
  CacheKeyInputs in;
  in.kernel_name = name;
  in.kernel_ir = "kernel " + name + "(%x: f16[2048,5120]) { rmsnorm }";
  in.target = R"({"name":"ascend910b","ub_bytes":196608})";
  in.host_features = "+avx2,+fma,+f16c";
  in.kiln_version = "0.1.0";
  in.kiln_source_hash = "abc123";
  in.llvm_version = "19.1.7";
  in.codegen_options = "opt=3;overflow=infnan";
  return in;
}

inline std::string &partOf(CacheKeyInputs &in, std::string_view part) {
  if (part == "kernel_ir")
    return in.kernel_ir;
  if (part == "target")
    return in.target;
  if (part == "host_features")
    return in.host_features;
  if (part == "kiln_version")
    return in.kiln_version;
  if (part == "kiln_source_hash")
    return in.kiln_source_hash;
  if (part == "llvm_version")
    return in.llvm_version;
  return in.codegen_options;
}

// Captures spdlog output for the test's lifetime.
class LogCapture {
public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return out_.str(); }

private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

class KernelCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_cache_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<KernelCache> open(CacheMode mode = CacheMode::Enable,
                                    uint64_t max_bytes = kDefaultMaxBytes) {
    auto c = KernelCache::open(cacheDir(), mode, max_bytes);
    EXPECT_TRUE(c.isOk()) << (c ? "" : c.message());
    return c ? std::move(c).value() : nullptr;
  }
  std::string cacheDir() const { return (dir_ / "cache").string(); }

  fs::path dir_;
};

} // namespace kiln::cache
