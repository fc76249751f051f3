// The whole-program cache through `kiln compile` and `kiln cache`: a warm
// compile reads the program back and writes the cold compile's artifact,
// graph and report; --explain-cache-misses says why a program missed; a
// tampered program entry is a warning and a recompile; the cache commands
// count, list, verify and clean program entries with the kernels'.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class ProgramCacheCli : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    ::setenv("SOURCE_DATE_EPOCH", "1800000000", 1); // artifacts comparable byte for byte
  }
  void TearDown() override {
    ::unsetenv("SOURCE_DATE_EPOCH");
    Cli::TearDown();
  }
  std::string compile(const std::string &model, const std::string &flags) {
    return "compile " + model + " --training --batch 2 --dtype f16 --cache-dir " + path("cache") +
           " " + flags;
  }
  Result ok(const std::string &args) {
    Result r = run(args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    return r;
  }
  json stats() {
    return json::parse(ok("cache stats --format json --cache-dir " + path("cache")).out);
  }
  std::vector<fs::path> programEntries() const {
    std::vector<fs::path> found;
    for (const auto &e : fs::recursive_directory_iterator(dir_ / "cache" / "entries"))
      if (e.path().extension() == ".kpe")
        found.push_back(e.path());
    return found;
  }
  // stdout without the lines that differ by design: the kernel counts and the program line.
  static std::string stableOut(const std::string &out) {
    std::string kept, line;
    std::istringstream in(out);
    while (std::getline(in, line))
      if (line.find("  kernels: ") != 0 && line.find("  program: ") != 0)
        kept += line + "\n";
    return kept;
  }
};

TEST_F(ProgramCacheCli, WarmCompileWritesTheColdArtifactGraphAndReport) {
  const std::string args = compile(kTiny, "--seq 16,8 --report " + path("r.json") + " -o ");
  Result cold = ok(args + path("cold.kiln"));
  json cold_report = json::parse(slurp(path("r.json")));
  EXPECT_EQ(cold.out.find("program: from the cache"), std::string::npos) << cold.out;
  Result warm = ok(args + path("warm.kiln"));
  json warm_report = json::parse(slurp(path("r.json")));
  EXPECT_NE(warm.out.find("  program: from the cache (key "), std::string::npos) << warm.out;
  EXPECT_NE(warm.out.find(" 0 compiled, "), std::string::npos) << warm.out;
  std::string warm_out = stableOut(warm.out);
  warm_out.replace(warm_out.find("warm.kiln"), 9, "cold.kiln");
  EXPECT_EQ(warm_out, stableOut(cold.out));
  // Two buckets: the second's object indices are renumbered the same way both times.
  EXPECT_TRUE(slurp(path("warm.kiln")) == slurp(path("cold.kiln"))) << "the artifacts differ";
  Result inspect = ok("inspect " + path("warm.kiln") + " --format json");
  EXPECT_EQ(json::parse(inspect.out)["buckets"].size(), 2u);

  ASSERT_EQ(cold_report["buckets"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    json c = cold_report["buckets"][i], w = warm_report["buckets"][i];
    EXPECT_EQ(c["program_cache"]["hit"], false);
    EXPECT_EQ(w["program_cache"]["hit"], true);
    EXPECT_EQ(w["program_cache"]["key"], c["program_cache"]["key"]);
    EXPECT_EQ(w["kernels"]["compiled"], 0);
    EXPECT_EQ(w["kernels"]["cache_hits"], c["kernels"]["unique"]);
    for (json *r : {&c, &w}) {
      r->erase("program_cache");
      for (const char *counter : {"compiled", "cache_hits", "seconds"})
        (*r)["kernels"].erase(counter);
    }
    EXPECT_EQ(w, c) << "bucket " << i;
  }

  // The rewritten graph, cold (fresh cache) and warm.
  const std::string graph = "compile " + kTiny + " --seq 8 --cache-dir " + path("graphs") + " -o ";
  ok(graph + path("cold.json"));
  Result again = ok(graph + path("warm.json"));
  EXPECT_NE(again.out.find("program: from the cache"), std::string::npos) << again.out;
  EXPECT_TRUE(slurp(path("warm.json")) == slurp(path("cold.json"))) << "the graphs differ";
}

// A program stored by a compile that wrote no artifact (so did not re-derive
// its kernels) writes, when read back, the artifact a cold compile writes.
TEST_F(ProgramCacheCli, AProgramStoredWithoutAnArtifactWritesTheSameArtifactLater) {
  ok(compile(kTiny, "--seq 8"));
  Result warm = ok(compile(kTiny, "--seq 8 -o " + path("warm.kiln")));
  EXPECT_NE(warm.out.find("program: from the cache"), std::string::npos) << warm.out;
  ok("compile " + kTiny + " --training --batch 2 --seq 8 --dtype f16 --cache-dir " + path("fresh") +
     " -o " + path("cold.kiln"));
  EXPECT_TRUE(slurp(path("warm.kiln")) == slurp(path("cold.kiln"))) << "the artifacts differ";
}

TEST_F(ProgramCacheCli, ExplainCacheMissesSaysWhyTheProgramMissed) {
  fs::copy_file(kTiny, dir_ / "config.json");
  const std::string model = path("config.json");
  ok(compile(model, "--seq 8"));
  const std::string explain = "--seq 8 --explain-cache-misses";
  Result hit = ok(compile(model, explain));
  EXPECT_EQ(hit.err.find("cache miss"), std::string::npos) << hit.err;

  Result setting = ok(compile(model, explain + " --disable-pass RmsNormFusionPass"));
  EXPECT_NE(setting.err.find("kiln: cache miss: program '" + model +
                             " (training step)': job changed (nearest entry "),
            std::string::npos)
      << setting.err;
  EXPECT_NE(setting.err.find(", same model and step)"), std::string::npos) << setting.err;

  Result target = ok(compile(model, explain + " --target ascend910"));
  EXPECT_NE(target.err.find("kiln: cache miss: program '"), std::string::npos) << target.err;
  EXPECT_NE(target.err.find("target"), std::string::npos) << target.err;

  std::string text = slurp(model);
  text.replace(text.find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": 1");
  write("config.json", text);
  Result model_changed = ok(compile(model, explain));
  EXPECT_NE(model_changed.err.find("': model changed (nearest entry "), std::string::npos)
      << model_changed.err;
}

TEST_F(ProgramCacheCli, ATamperedProgramEntryIsAWarningAndARecompile) {
  const std::string args = compile(kTiny, "--seq 8 -o ");
  ok(args + path("first.kiln"));
  const std::vector<fs::path> programs = programEntries();
  ASSERT_EQ(programs.size(), 1u);
  std::string bytes = slurp(programs[0]);
  bytes[bytes.size() / 3] ^= 0x20;
  std::ofstream(programs[0], std::ios::binary | std::ios::trunc) << bytes;

  Result r = ok(args + path("again.kiln"));
  EXPECT_NE(r.err.find("kiln: warning: kernel cache: evicting bad entry " + programs[0].string() +
                       ": authentication failed"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("program: from the cache"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", 0 compiled,"), std::string::npos) << "kernels untouched: " << r.out;
  EXPECT_TRUE(slurp(path("again.kiln")) == slurp(path("first.kiln"))) << "the artifact differs";
  Result warm = ok(args + path("warm.kiln"));
  EXPECT_NE(warm.out.find("program: from the cache"), std::string::npos) << "stored again";

  // kiln cache verify finds a tampered program entry and evicts it.
  std::string spoiled = slurp(programs[0]);
  spoiled[spoiled.size() / 3] ^= 0x20;
  std::ofstream(programs[0], std::ios::binary | std::ios::trunc) << spoiled;
  Result verify = run("cache verify --cache-dir " + path("cache"));
  EXPECT_EQ(verify.exit_code, 1) << verify.out;
  EXPECT_NE(verify.out.find(programs[0].string() + ": authentication failed"), std::string::npos)
      << verify.out;
  EXPECT_FALSE(fs::exists(programs[0]));
}

TEST_F(ProgramCacheCli, CacheCommandsCountListVerifyAndCleanProgramEntries) {
  ok(compile(kTiny, "--seq 8"));
  ok(compile(kTiny, "--seq 8"));
  json s = stats();
  EXPECT_EQ(s["programs"], 1);
  EXPECT_EQ(s["program_hits"], 1);
  EXPECT_EQ(s["program_misses"], 1);
  EXPECT_EQ(s["program_stores"], 1);
  const int64_t entries = s["entries"].get<int64_t>();
  EXPECT_GT(entries, 1);
  EXPECT_EQ(s["hits"].get<int64_t>(), entries - 1) << "the hit read every kernel";

  json list = json::parse(ok("cache list --format json --cache-dir " + path("cache")).out);
  int programs = 0;
  for (const json &e : list["entries"])
    if (e["kind"] == "program") {
      ++programs;
      EXPECT_EQ(e["kernel"], kTiny + " (training step)");
    } else {
      EXPECT_EQ(e["kind"], "kernel");
    }
  EXPECT_EQ(programs, 1);
  Result text = ok("cache list --cache-dir " + path("cache"));
  EXPECT_NE(text.out.find(" program "), std::string::npos) << text.out;
  Result stats_text = ok("cache stats --cache-dir " + path("cache"));
  EXPECT_NE(stats_text.out.find("program_hits:"), std::string::npos) << stats_text.out;

  json verified = json::parse(ok("cache verify --format json --cache-dir " + path("cache")).out);
  EXPECT_EQ(verified["checked"], entries);
  EXPECT_EQ(verified["ok"], true);
  json cleaned = json::parse(ok("cache clean --format json --cache-dir " + path("cache")).out);
  EXPECT_EQ(cleaned["removed"], entries);
  EXPECT_EQ(stats()["programs"], 0);
}

} // namespace
} // namespace kiln
