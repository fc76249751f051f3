// Kernels as a user meets them through kiln compile and kiln run: the cache
// warm and cold, explained misses, coded target errors, compiled runs that
// agree with the reference interpreter, and concurrent compiles into one cache.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "tests/e2e/cli_fixture.h"
#include "tests/support/codegen_test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class KernelsCli : public Cli {
protected:
  json compileTiny(const std::string &flags, Result *result = nullptr) {
    Result r = run("compile " + kTiny + " --training --seq 8 --batch 2 --report " +
                   path("report.json") + " " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (result)
      *result = r;
    return json::parse(slurp(path("report.json")));
  }
};

TEST_F(KernelsCli, SecondCompileOfQwen14bComesFromTheCache) {
  const std::string args = "compile " + k14b + " --training --seq 2048 --dtype f16 --report " +
                           path("r.json") + " --cache-dir " + path("cache");
  Result cold = run(args);
  ASSERT_EQ(cold.exit_code, 0) << cold.err;
  json c = json::parse(slurp(path("r.json")))["kernels"];
  EXPECT_GT(c["total"].get<int64_t>(), 3000); // about 83 a layer, attention fused in BSND
  EXPECT_LT(c["unique"].get<int64_t>(), c["total"].get<int64_t>() / 20); // 40 identical layers
  EXPECT_EQ(c["compiled"], c["unique"]);
  Result warm = run(args);
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  json w = json::parse(slurp(path("r.json")))["kernels"];
  EXPECT_EQ(w["compiled"], 0);
  EXPECT_EQ(w["cache_hits"], c["unique"]);
  EXPECT_NE(warm.out.find(" 0 compiled, "), std::string::npos) << warm.out;
  Result stats = run("cache stats --format json --cache-dir " + path("cache"));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  json s = json::parse(stats.out);
  // The kernels, and the whole program that names them.
  EXPECT_EQ(s["entries"], c["unique"].get<int64_t>() + 1);
  EXPECT_EQ(s["programs"], 1);
  EXPECT_EQ(s["hits"], c["unique"]);
  EXPECT_EQ(s["misses"], c["unique"]);
  EXPECT_EQ(s["program_hits"], 1);
  EXPECT_EQ(s["program_misses"], 1);
}

TEST_F(KernelsCli, ExplainedMissesNameTheChangedPart) {
  compileTiny("");
  Result r;
  json report = compileTiny("--overflow-mode saturation --explain-cache-misses", &r);
  EXPECT_EQ(report["kernels"]["cache_hits"], 0);
  EXPECT_NE(r.err.find("kiln: cache miss: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("codegen_options"), std::string::npos) << r.err;
  // Back to the first settings: everything hits.
  EXPECT_EQ(compileTiny("")["kernels"]["compiled"], 0);
}

TEST_F(KernelsCli, CacheModeDisableWritesNothing) {
  json report = compileTiny("--cache-mode disable --cache-dir " + path("off"));
  EXPECT_EQ(report["kernels"]["compiled"], report["kernels"]["unique"]);
  EXPECT_FALSE(fs::exists(path("off")));
  Result bad = run("compile " + kTiny + " --cache-mode sometimes");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("expected enable, disable or force"), std::string::npos) << bad.err;
}

TEST_F(KernelsCli, AKernelTheTargetCannotHoldIsACodedErrorInTheReport) {
  // ascend910b with a 16 KiB Unified Buffer: Qwen-14B's fused RMSNorm holds a
  // 5120-wide f32 row (20 KiB), as does its gradient, and no longer fit;
  // softmax rows (8 KiB) do.
  std::string target = slurp(kSource + "/target/data/ascend910b.json");
  target.replace(target.find("196608"), 6, "16384");
  write("small_ub.json", target);
  const std::string args = "compile " + k14b + " --training --seq 2048 --dtype f16 --target " +
                           path("small_ub.json") + " --report " + path("report.json");
  Result r = run(args);
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("kiln: error: 162 kernels cannot be built for the target:"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("E40001 kernel 'fused.transformer.h.0.ln_1.mean' (rms_norm, formed by "
                       "RmsNormFusionPass): needs 23.0 KiB of UB"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("ascend910b has 16.0 KiB"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("transformer.h.0.ln_1.rsqrt (Rsqrt)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("and 80 more kernels like it:"), std::string::npos) << r.err;
  json report = json::parse(slurp(path("report.json")));
  ASSERT_TRUE(report.contains("errors"));
  EXPECT_EQ(report["errors"].size(), 162u); // forward and backward RMSNorm
  EXPECT_EQ(report["errors"][0]["code"], "E40001");
  EXPECT_EQ(report["errors"][0]["formed_by"], "RmsNormFusionPass");
  // The error itself, coded, for a script that reads only that.
  EXPECT_EQ(report["error"]["code"], "E40001");
  EXPECT_EQ(report["error"]["message"].get<std::string>().rfind("162 kernels cannot be built", 0),
            0u);
  // Switching the pass off for this job compiles.
  Result off = run(args + " --disable-pass RmsNormFusionPass");
  EXPECT_EQ(off.exit_code, 0) << off.err;
}

TEST_F(KernelsCli, AFailedCompileStillWritesItsErrorToTheReport) {
  write("job.json", R"({"precision": {"dtype": "f64"}})");
  Result r =
      run("compile " + kTiny + " --job " + path("job.json") + " --report " + path("report.json"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json report = json::parse(slurp(path("report.json")));
  EXPECT_EQ(report["error"]["location"], path("job.json") + ": $.precision.dtype");
  EXPECT_NE(report["error"]["message"].get<std::string>().find("expected f32, f16 or bf16"),
            std::string::npos)
      << report.dump();
  EXPECT_FALSE(report["error"].contains("code")) << "only kernel failures are coded";
}

TEST_F(KernelsCli, CompiledRunAgreesWithTheReference) {
  ASSERT_EQ(run("init " + kTiny + " -o " + path("w.st") + " --seed 0").exit_code, 0);
  ASSERT_EQ(
      run("make-inputs " + kTiny + " --batch 2 --seq 16 --seed 1 -o " + path("i.st")).exit_code, 0);
  for (std::string dtype : {"f32", "f16", "bf16"}) {
    const std::string common = "run " + kTiny + " --weights " + path("w.st") + " --inputs " +
                               path("i.st") + " --training --dtype " + dtype;
    Result compiled = run(common + " --outputs " + path("c.st"));
    ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
    Result reference = run(common + " --reference --outputs " + path("r.st"));
    ASSERT_EQ(reference.exit_code, 0) << reference.err;
    auto c = readSafetensors(path("c.st"));
    auto r = readSafetensors(path("r.st"));
    ASSERT_TRUE(c.isOk() && r.isOk());
    ASSERT_EQ(c->tensors.size(), r->tensors.size());
    const double rtol = dtype == "f32" ? 1e-4 : (dtype == "f16" ? 1e-2 : 5e-2);
    for (const auto &[name, want] : r->tensors) {
      std::string mismatch = compareTensors(c->tensors.at(name), want, rtol, rtol);
      EXPECT_TRUE(mismatch.empty()) << dtype << " " << name << ": " << mismatch;
    }
  }
}

TEST_F(KernelsCli, ConcurrentCompilesLeaveAVerifiedCache) {
  const std::string cache = path("shared-cache");
  std::string script;
  for (int i = 0; i < 4; ++i)
    script += kiln_ + " compile " + kTiny + " --training --seq 8 --batch 2 --cache-dir " + cache +
              " --report " + path("r" + std::to_string(i) + ".json") + " >/dev/null 2>" +
              path("e" + std::to_string(i)) + " & ";
  script += "wait";
  ASSERT_EQ(std::system(("bash -c '" + script + "'").c_str()), 0);
  int64_t unique = -1;
  for (int i = 0; i < 4; ++i) {
    json report = json::parse(slurp(path("r" + std::to_string(i) + ".json")));
    EXPECT_EQ(slurp(path("e" + std::to_string(i))), "");
    if (unique < 0)
      unique = report["kernels"]["unique"];
    EXPECT_EQ(report["kernels"]["unique"], unique);
  }
  Result verify = run("cache verify --cache-dir " + cache);
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  json after = compileTiny("--cache-dir " + cache);
  EXPECT_EQ(after["kernels"]["compiled"], 0);
}

} // namespace
} // namespace kiln
