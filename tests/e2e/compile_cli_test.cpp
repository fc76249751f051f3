// kiln compile and kiln passes as a user meets them: per-job switches, CANN
// switch files, targets, the report and the instrumentation flags.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

class CompileCli : public Cli {
protected:
  // Runs the passes over the Qwen-14B training step (seq 2048, f16) with
  // `flags`; returns the report. (Kernels: tests/e2e/kernels_cli_test.cpp.)
  json compile14b(const std::string &flags) {
    Result r = run("compile " + k14b +
                   " --training --seq 2048 --batch 1 --dtype f16 --passes-only --report " +
                   path("report.json") + " " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(slurp(path("report.json")));
  }
  static const json &pass(const json &report, const std::string &name) {
    for (const json &p : report["passes"])
      if (p["name"] == name)
        return p;
    static const json none;
    ADD_FAILURE() << "no pass " << name << " in the report";
    return none;
  }
  static size_t groupsFormedBy(const json &report, const std::string &name) {
    size_t n = 0;
    for (const json &g : report["groups"])
      n += g["formed_by"] == name;
    return n;
  }
};

TEST_F(CompileCli, FixPipeFusionOnAscend910bAndItsSwitches) {
  const std::string fixpipe = "TbeMatmulFixPipeFusionPass";
  json on = compile14b("--target ascend910b");
  EXPECT_GT(pass(on, fixpipe)["effect_times"].get<int64_t>(), 0);
  EXPECT_EQ(groupsFormedBy(on, fixpipe),
            static_cast<size_t>(pass(on, fixpipe)["effect_times"].get<int64_t>()));
  for (const json &g : on["groups"]) {
    if (g["formed_by"] == fixpipe) {
      EXPECT_GE(g["members"].size(), 2u) << g.dump();
    }
  }

  json off = compile14b("--target ascend910b --disable-pass " + fixpipe);
  EXPECT_EQ(pass(off, fixpipe)["enabled"], false);
  EXPECT_EQ(pass(off, fixpipe)["effect_times"], 0);
  EXPECT_EQ(groupsFormedBy(off, fixpipe), 0u);

  write("switch.json",
        R"({"Switch": {"GraphFusion": {}, "UBFusion": {")" + fixpipe + R"(": "off"}}})");
  json cann = compile14b("--fusion-switch-file " + path("switch.json"));
  EXPECT_EQ(pass(cann, fixpipe)["effect_times"], 0);
  EXPECT_EQ(groupsFormedBy(cann, fixpipe), 0u);
  EXPECT_NE(pass(cann, fixpipe)["decided_by"].get<std::string>().find("switch.json"),
            std::string::npos);

  write("old.cfg", fixpipe + ":off\n");
  json old = compile14b("--fusion-switch-file " + path("old.cfg"));
  EXPECT_EQ(groupsFormedBy(old, fixpipe), 0u);

  json a910 = compile14b("--target ascend910");
  EXPECT_EQ(pass(a910, fixpipe)["effect_times"], 0);
  EXPECT_EQ(pass(a910, fixpipe)["applicable"], false);
  EXPECT_NE(pass(a910, fixpipe)["reason"].get<std::string>().find("FixPipe"), std::string::npos);
  EXPECT_EQ(groupsFormedBy(a910, fixpipe), 0u);
}

TEST_F(CompileCli, JobFileAndFlagPrecedence) {
  const std::string eltwise = "TbeEltwiseFusionPass";
  write("job.json", R"({"target": "ascend910b", "disable_passes": [")" + eltwise + R"("]})");
  json by_job = compile14b("--job " + path("job.json"));
  EXPECT_EQ(pass(by_job, eltwise)["enabled"], false);
  json by_flag = compile14b("--job " + path("job.json") + " --enable-pass " + eltwise);
  EXPECT_EQ(pass(by_flag, eltwise)["enabled"], true);
  EXPECT_GT(pass(by_flag, eltwise)["effect_times"].get<int64_t>(), 0);
}

TEST_F(CompileCli, WritesAGraphThatLoadsAgain) {
  Result r = run("compile " + kTiny + " --training -o " + path("g.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fused groups"), std::string::npos) << r.out;
  Result back = run("graph " + path("g.json") + " --format stats");
  ASSERT_EQ(back.exit_code, 0) << back.err;
  json g = json::parse(slurp(path("g.json")));
  EXPECT_FALSE(g["groups"].empty());
}

TEST_F(CompileCli, InstrumentationGoesToStderr) {
  Result r = run("compile " + kTiny +
                 " --training --print-ir-after=changed --pass-timing --pass-statistics");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("IR Dump After"), std::string::npos);
  EXPECT_NE(r.err.find("pass execution timing report"), std::string::npos);
  EXPECT_NE(r.err.find("effect_times"), std::string::npos);
  EXPECT_EQ(r.out.find("IR Dump"), std::string::npos) << "stdout carries only the summary";

  Result before = run("compile " + kTiny + " --print-ir-before=DeadCodeEliminationPass");
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_NE(before.err.find("IR Dump Before DeadCodeEliminationPass"), std::string::npos);
}

TEST_F(CompileCli, SwitchErrorsAreOneLine) {
  expectUsageError(run("compile " + kTiny + " --disable-pass TbeMatmulFixpipeFusionPass"),
                   {"--disable-pass", "unknown pass 'TbeMatmulFixpipeFusionPass'",
                    "did you mean TbeMatmulFixPipeFusionPass"});
  write("unknown.json", R"({"Switch": {"UBFusion": {"TbeConvBnreluFusionPass": "off"}}})");
  expectRunError(run("compile " + kTiny + " --fusion-switch-file " + path("unknown.json")),
                 {"unknown.json", "TbeConvBnreluFusionPass", "--allow-unknown-passes"});
  Result allowed = run("compile " + kTiny + " --allow-unknown-passes --fusion-switch-file " +
                       path("unknown.json"));
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_NE(allowed.err.find("warning"), std::string::npos) << allowed.err;
  EXPECT_NE(allowed.err.find("TbeConvBnreluFusionPass"), std::string::npos);

  write("bad.json", R"({"Switch": {"UBFusion": {"TbeEltwiseFusionPass": "disabled"}}})");
  expectRunError(run("compile " + kTiny + " --fusion-switch-file " + path("bad.json")),
                 {"bad.json", "$.Switch.UBFusion.TbeEltwiseFusionPass", "\"on\" or \"off\""});
  write("bad.cfg", "TbeEltwiseFusionPass off\n");
  expectRunError(run("compile " + kTiny + " --fusion-switch-file " + path("bad.cfg")),
                 {"bad.cfg", "line 1"});
  expectRunError(run("compile " + kTiny + " --fusion-switch-file " + path("absent.json")),
                 {"absent.json"});
  expectUsageError(run("compile " + kTiny + " --target ascend910 --dtype bf16"),
                   {"ascend910", "bf16"});
  expectUsageError(run("compile " + kTiny + " --target ascend910 --overflow-mode infnan"),
                   {"ascend910", "infnan"});
  expectUsageError(run("compile " + kTiny + " --print-ir-after=NoSuchPass"),
                   {"--print-ir-after", "NoSuchPass"});
  write("job.json", R"({"disable_pass": []})");
  expectRunError(run("compile " + kTiny + " --job " + path("job.json")),
                 {"job.json", "$.disable_pass", "unknown field"});
}

TEST_F(CompileCli, FusionRuleFoldersFromTheCommandLine) {
  const std::string data = kSource + "/tests/passes/rules/data";
  Result listed = run("passes list --format json --fusion-rules " + data + "/good");
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  json list = json::parse(listed.out);
  size_t builtin_rules = 0, total = list.size();
  for (const json &p : list)
    builtin_rules += p["name"].get<std::string>().find("FusionRule") != std::string::npos;
  Result plain = run("passes list --format json");
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_GT(total, json::parse(plain.out).size()) << "the folder's rules are passes too";
  EXPECT_GT(builtin_rules, 0u);
  expectRunError(run("compile " + kTiny + " --fusion-rules " + data + "/bad"),
                 {data + "/bad/", "$."});
  expectRunError(run("compile " + kTiny + " --fusion-rules " + path("absent")), {"absent"});
}

// Pass options: the listing gives each declared option with this job's
// value and who set it; --pass-option and the flag of the same option agree.
TEST_F(CompileCli, PassOptionsAreListedWithTheirValues) {
  const auto option = [](const json &list, const std::string &pass, const std::string &name) {
    for (const json &p : list)
      if (p["name"] == pass)
        for (const json &o : p.value("options", json::array()))
          if (o["name"] == name)
            return o;
    return json();
  };
  Result flag = run("passes list --format json --recompute full");
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  const json by_flag = option(json::parse(flag.out), "RecomputePass", "mode");
  ASSERT_FALSE(by_flag.is_null());
  EXPECT_EQ(by_flag["value"], "full");
  EXPECT_EQ(by_flag["default"], "none");
  EXPECT_EQ(by_flag["set_by"], "--recompute");

  Result generic = run("passes list --format json --pass-option RecomputePass.mode=full "
                       "--pass-option AttentionFp32CastPass.layers=1");
  ASSERT_EQ(generic.exit_code, 0) << generic.err;
  const json list = json::parse(generic.out);
  EXPECT_EQ(option(list, "RecomputePass", "mode")["value"], "full");
  EXPECT_EQ(option(list, "AttentionFp32CastPass", "layers")["value"], "1");

  // A name or value the pass refuses fails the job; a malformed setting is
  // a usage error.
  EXPECT_EQ(run("passes list --pass-option RecomputePass.depth=2").exit_code, 1);
  EXPECT_EQ(run("passes list --pass-option RecomputePass.mode=fulll").exit_code, 1);
  EXPECT_EQ(run("passes list --pass-option RecomputePass").exit_code, 2);
}

TEST_F(CompileCli, PassesListAndShow) {
  Result table = run("passes list --target ascend910");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const char *name : {"TbeMatmulFixPipeFusionPass", "MatMulBiasAddFusionPass",
                           "DeadCodeEliminationPass", "TbeEltwiseFusionPass"})
    EXPECT_NE(table.out.find(name), std::string::npos) << name;
  EXPECT_NE(table.out.find("does not apply"), std::string::npos) << table.out;

  Result listing = run("passes list --format json --disable-pass TbeEltwiseFusionPass");
  ASSERT_EQ(listing.exit_code, 0) << listing.err;
  json list = json::parse(listing.out);
  bool found = false;
  for (const json &p : list) {
    for (const char *key :
         {"name", "group", "default", "enabled", "decided_by", "applicable", "description"})
      EXPECT_TRUE(p.contains(key)) << key;
    if (p["name"] == "TbeEltwiseFusionPass") {
      found = true;
      EXPECT_EQ(p["enabled"], false);
      EXPECT_EQ(p["decided_by"], "command line: --disable-pass");
    }
  }
  EXPECT_TRUE(found);

  Result show = run("passes show TbeMatmulFixPipeFusionPass --target ascend910");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("UBFusion"), std::string::npos);
  EXPECT_NE(show.out.find("FixPipe"), std::string::npos);
  expectUsageError(run("passes show TbeMatmulFixPipe"),
                   {"did you mean TbeMatmulFixPipeFusionPass"});
}

TEST_F(CompileCli, RunTakesTheSameJobFlags) {
  ASSERT_EQ(run("init " + kTiny + " -o " + path("w.safetensors")).exit_code, 0);
  ASSERT_EQ(
      run("make-inputs " + kTiny + " --batch 2 --seq 8 -o " + path("i.safetensors")).exit_code, 0);
  const std::string base = "run " + kTiny + " --weights " + path("w.safetensors") + " --inputs " +
                           path("i.safetensors") + " --training --dtype f16 --outputs ";
  Result fused = run(base + path("fused.safetensors"));
  ASSERT_EQ(fused.exit_code, 0) << fused.err;
  write("all_off.json",
        R"({"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}})");
  Result unfused =
      run(base + path("unfused.safetensors") + " --fusion-switch-file " + path("all_off.json"));
  ASSERT_EQ(unfused.exit_code, 0) << unfused.err;
  auto loss = [](const std::string &out) { return std::stod(out.substr(out.find("loss ") + 5)); };
  EXPECT_NEAR(loss(fused.out), loss(unfused.out), 2e-2 * loss(unfused.out));
  expectUsageError(run(base + path("x.safetensors") + " --disable-pass Nope"),
                   {"unknown pass 'Nope'"});
}

} // namespace
} // namespace kiln
