// The kernel compiler with the kernel cache: a warm cache compiles nothing,
// each key part that changes causes a miss that names it, an unrelated job
// setting still hits, and a corrupted entry is rebuilt.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "compiler/cache/kernel_cache.h"
#include "compiler/codegen/kernel_compiler.h"
#include "tests/support/pass_test_util.h"

namespace kiln {
std::string_view kilnSourceHash();
}

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

class KernelCompilerCache : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_kc_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<cache::KernelCache> openCache(cache::CacheMode mode = cache::CacheMode::Enable) {
    auto c = cache::KernelCache::open(dir_.string(), mode);
    EXPECT_TRUE(c.isOk()) << (c ? "" : c.message());
    return c ? std::move(*c) : nullptr;
  }

  // The tiny f16 training step after the default passes (or with `disabled` off).
  static Graph tinyGraph(const std::string &target = "ascend910b",
                         const std::string &disabled = "") {
    TinyTrainingStep step = tinyTrainingStep(DType::F16);
    std::vector<passes::SwitchLayer> layers;
    if (!disabled.empty())
      layers.push_back(switchPasses({{disabled, false}}));
    runPasses(step.graph, contextFor(target, layers));
    return std::move(step.graph);
  }

  codegen::CompiledKernels compile(const Graph &graph, cache::KernelCache *c,
                                   OverflowMode overflow = OverflowMode::InfNan,
                                   const std::string &target_name = "ascend910b") {
    auto target = target::loadTarget(target_name);
    EXPECT_TRUE(target.isOk());
    codegen::KernelCompileOptions options;
    options.object.overflow = overflow;
    options.cache = c;
    options.explain_misses = true;
    auto k = codegen::compileKernels(graph, *target, options);
    EXPECT_TRUE(k.isOk()) << (k ? "" : k.message());
    return k ? std::move(*k) : codegen::CompiledKernels{};
  }

  fs::path dir_;
};

TEST_F(KernelCompilerCache, WarmCacheCompilesNothingAndGivesTheSameObjects) {
  Graph g = tinyGraph();
  auto c = openCache();
  codegen::CompiledKernels cold = compile(g, c.get());
  EXPECT_EQ(cold.stats.compiled, cold.stats.unique);
  EXPECT_EQ(cold.stats.cache_hits, 0);
  codegen::CompiledKernels warm = compile(g, c.get());
  EXPECT_EQ(warm.stats.compiled, 0);
  EXPECT_EQ(warm.stats.cache_hits, warm.stats.unique);
  EXPECT_TRUE(warm.miss_explanations.empty());
  EXPECT_EQ(warm.objects, cold.objects);
}

TEST_F(KernelCompilerCache, OverflowModeChangesTheCodegenOptionsPart) {
  Graph g = tinyGraph();
  auto c = openCache();
  compile(g, c.get(), OverflowMode::InfNan);
  codegen::CompiledKernels other = compile(g, c.get(), OverflowMode::Saturation);
  EXPECT_EQ(other.stats.cache_hits, 0);
  ASSERT_FALSE(other.miss_explanations.empty());
  for (const std::string &why : other.miss_explanations)
    EXPECT_NE(why.find("codegen_options"), std::string::npos) << why;
}

TEST_F(KernelCompilerCache, TargetChangesTheTargetPart) {
  // Fused for ascend910 (no FixPipe), so both targets can hold every kernel.
  Graph g = tinyGraph("ascend910");
  auto c = openCache();
  compile(g, c.get(), OverflowMode::Saturation, "ascend910");
  codegen::CompiledKernels other = compile(g, c.get(), OverflowMode::Saturation, "ascend910b");
  EXPECT_EQ(other.stats.cache_hits, 0);
  ASSERT_FALSE(other.miss_explanations.empty());
  for (const std::string &why : other.miss_explanations)
    EXPECT_NE(why.find("target"), std::string::npos) << why;
}

// Switching FixPipe off changes the lm_head kernels only; every other kernel hits.
TEST_F(KernelCompilerCache, AnUnrelatedSwitchStillHits) {
  auto c = openCache();
  codegen::CompiledKernels first = compile(tinyGraph(), c.get());
  codegen::CompiledKernels second =
      compile(tinyGraph("ascend910b", "TbeMatmulFixPipeFusionPass"), c.get());
  EXPECT_GT(second.stats.cache_hits, 0);
  EXPECT_GT(second.stats.compiled, 0);
  EXPECT_LE(second.stats.compiled, 3); // the matmul and what FixPipe had absorbed
  for (const std::string &why : second.miss_explanations)
    EXPECT_NE(why.find("lm_head"), std::string::npos) << why;
}

TEST_F(KernelCompilerCache, KeyHoldsHostLlvmAndKilnVersions) {
  auto target = target::loadTarget("ascend910b");
  ASSERT_TRUE(target.isOk());
  const cache::CacheKeyInputs in = codegen::baseKeyInputs(*target, {});
  EXPECT_EQ(in.host_features, codegen::hostDescription().toString());
  EXPECT_NE(in.host_features.find(codegen::hostDescription().cpu), std::string::npos);
  EXPECT_EQ(in.llvm_version, codegen::llvmVersion());
  EXPECT_EQ(in.llvm_version.substr(0, 3), "19.");
  EXPECT_FALSE(in.kiln_version.empty());
  EXPECT_TRUE(cache::isKeyHex(in.kiln_source_hash)) << in.kiln_source_hash;
  EXPECT_EQ(in.kiln_source_hash, kilnSourceHash());
  EXPECT_NE(in.target.find("\"ub_bytes\":196608"), std::string::npos);
}

TEST_F(KernelCompilerCache, CorruptedEntryIsRebuilt) {
  Graph g = tinyGraph();
  auto c = openCache();
  codegen::CompiledKernels cold = compile(g, c.get());
  // Flip a byte in the middle of one entry.
  fs::path victim;
  for (const auto &e : fs::recursive_directory_iterator(dir_ / "entries"))
    if (e.is_regular_file()) {
      victim = e.path();
      break;
    }
  ASSERT_FALSE(victim.empty());
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(fs::file_size(victim) / 2));
    char b = 0;
    f.read(&b, 1);
    f.seekp(static_cast<std::streamoff>(fs::file_size(victim) / 2));
    b = static_cast<char>(b ^ 0x5a);
    f.write(&b, 1);
  }
  codegen::CompiledKernels again = compile(g, c.get());
  EXPECT_EQ(again.stats.compiled, 1);
  EXPECT_EQ(again.objects, cold.objects);
  auto verified = c->verify();
  ASSERT_TRUE(verified.isOk());
  EXPECT_TRUE(verified->ok());
}

TEST_F(KernelCompilerCache, DisableStoresNothingAndForceRecompiles) {
  Graph g = tinyGraph();
  {
    auto off = openCache(cache::CacheMode::Disable);
    compile(g, off.get());
  }
  EXPECT_FALSE(fs::exists(dir_ / "entries"));
  auto on = openCache();
  compile(g, on.get());
  auto force = openCache(cache::CacheMode::Force);
  codegen::CompiledKernels forced = compile(g, force.get());
  EXPECT_EQ(forced.stats.compiled, forced.stats.unique);
  EXPECT_EQ(forced.stats.cache_hits, 0);
}

} // namespace
} // namespace kiln::testing
