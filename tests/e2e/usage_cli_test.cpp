// docs/cli.md's exit-code contract, command by command: every flag that
// takes a value refuses a bad one with exit code 2 and one line in kiln's
// words; a flag given twice, flags that do not go together and `kiln` alone
// are usage errors too. Each command's --help is read, so a new flag that
// the table below does not classify fails the test.
#include <map>
#include <set>
#include <sstream>

#include "tests/e2e/cli_fixture.h"

namespace kiln::testing {
namespace {

using UsageCli = Cli;

// A usage error: exit code 2, one "kiln: error:" line naming `fragment`.
void expectUsage(const Result &r, const std::string &fragment) {
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  EXPECT_EQ(r.err.rfind("kiln: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << "missing '" << fragment << "': " << r.err;
}

// Every subcommand, with the arguments it requires (files that need not
// exist: a bad flag value is refused before anything is read).
const std::vector<std::pair<std::string, std::string>> kCommands = {
    {"graph", kTiny},
    {"init", kTiny + " -o w.safetensors"},
    {"make-inputs", kTiny + " -o i.safetensors"},
    {"ops", ""},
    {"compile", kTiny},
    {"passes list", ""},
    {"passes show", "TbeEltwiseFusionPass"},
    {"cache stats", ""},
    {"cache list", ""},
    {"cache clean", ""},
    {"cache verify", ""},
    {"cache prune", ""},
    {"debug overflow", kTiny + " --weights w.safetensors --inputs i.safetensors"},
    {"debug compare", kTiny + " --weights w.safetensors --inputs i.safetensors"},
    {"debug bisect", kTiny},
    {"debug reduce", kTiny + " -o repro"},
    {"inspect", "a.kiln"},
    {"run", kTiny + " --weights w.safetensors --inputs i.safetensors --outputs o.safetensors"},
    {"train", kTiny},
    {"eval", kTiny + " --weights w.safetensors --data held.bin"},
    {"tokenize", "--tokenizer tok in.txt -o t.bin"},
    {"keys show", ""},
    {"keys export", ""},
    {"keys trust", "00"},
    {"merge", kTiny + " --weights w.safetensors --lora adapter -o merged"},
    {"plan", kTiny + " --global-batch 8"},
    {"report", "log.jsonl -o report.html"},
};

// A bad value for every flag that takes one a command line can judge.
const std::map<std::string, std::string> kBadValues = {
    {"--against", "bogus"},
    {"--attention-fp32-layers", "-1"},
    {"--batch", "0"},
    {"--cache-mode", "bogus"},
    {"--check", "bogus"},
    {"--checkpoint-every", "-1"},
    {"--clip-grad-norm", "inf"},
    {"--data-dtype", "int8"},
    {"--device-memory", "1x"},
    {"--devices", "0"},
    {"--devices-per-process", "0"},
    {"--disable-pass", "TbeMatmulFixpipeFusionPass"},
    {"--dp", "0"},
    {"--dtype", "f64"},
    {"--enable-pass", "Bogus"},
    {"--input-shape", "x:1,a"},
    {"--eval-every", "0"},
    {"--eval-tokens", "-1"},
    {"--eval-split", "1.5"},
    {"--fix-tolerance", "0"},
    {"--format", "html"},
    {"--global-batch", "0"},
    {"--grad-accum", "0"},
    {"--keep-checkpoints", "0"},
    {"--kernels", "-1"},
    {"--largest", "-1"},
    {"--lora-alpha", "nan"},
    {"--lora-dropout", "-1"},
    {"--lora-rank", "0"},
    {"--loss-scale", "dynamic:0,2,10"},
    {"--lr", "nan"},
    {"--max-size", "zz"},
    {"--max-tokens", "0"},
    {"--max-trials", "0"},
    {"--micro-batches", "0"},
    {"--min-lr", "-1"},
    {"--nodes", "0"},
    {"--on-compile-error", "bogus"},
    {"--overflow-mode", "bogus"},
    {"--pass-option", "RecomputePass"},
    {"--pp", "0"},
    {"--pp-layers", "9,,10"},
    {"--precision-mode", "bogus"},
    {"--precision-mode-v2", "bogus"},
    {"--print-ir-after", "Bogus"},
    {"--print-ir-before", "Bogus"},
    {"--recompute", "bogus"},
    {"--recompute-layers", "x"},
    {"--scale", "foo"},
    {"--schedule", "bogus"},
    {"--seed", "-1"},
    {"--seq", "0"},
    {"--shard-size", "0"},
    {"--std", "nan"},
    {"--steps", "0"},
    {"--target", "ascend999"},
    {"--tokens", "0"},
    {"--token-rule", "1"},
    {"--tol", "-1"},
    {"--top", "-1"},
    {"--threads", "0"},
    {"--tp", "0"},
    {"--virtual-stages", "0"},
    {"--warmup", "-1"},
    {"--zero", "5"},
};

// Flags whose value is a file, a folder or a name the command looks for
// (an error when it is not there is about that input, exit code 1), and
// switches, which take no value.
const std::set<std::string> kAnyValue = {"--cache-dir",    "--checkpoint-dir",
                                         "--custom-ops",   "--data",
                                         "--dump-dir",     "--eval-data",
                                         "--eval-output",  "--field",
                                         "--fusion-rules", "--fusion-switch-file",
                                         "--inputs",       "--job",
                                         "--keep-dtype",   "--kernel-dump-dir",
                                         "--log-json",     "--lora",
                                         "--loss",         "--lora-targets",
                                         "--model",        "--modify-mixlist",
                                         "--name",         "--output",
                                         "--outputs",      "--profile",
                                         "--report",       "--separator",
                                         "--title",        "--tokenizer",
                                         "--trace",        "--weights"};
const std::set<std::string> kSwitches = {"--allow-unknown-passes",
                                         "--compile-only",
                                         "--explain-cache-misses",
                                         "--help",
                                         "--no-verify",
                                         "--no-weight-copies",
                                         "--pass-statistics",
                                         "--pass-timing",
                                         "--passes-only",
                                         "--provenance",
                                         "--reference",
                                         "--resume",
                                         "--resume-any-settings",
                                         "--resume-if-exists",
                                         "--sequence-parallel",
                                         "--training",
                                         "--trust-artifact"};

// The long flags `kiln COMMAND --help` lists ("  -o,--output TEXT ...").
std::vector<std::string> flagsOf(const std::string &help) {
  std::vector<std::string> flags;
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) {
    if (line.size() < 4 || line.compare(0, 2, "  ") != 0 || line[2] != '-')
      continue;
    std::string names = line.substr(2, line.find(' ', 2) - 2);
    const size_t long_name = names.find("--");
    if (long_name != std::string::npos) // "--no-verify{false}": the flag's name
      flags.push_back(names.substr(long_name, names.find('{') - long_name));
  }
  return flags;
}

TEST_F(UsageCli, EveryFlagRefusesABadValueWithExitCode2AndOneLine) {
  size_t checked = 0;
  for (const auto &[command, args] : kCommands) {
    Result help = run(command + " --help");
    ASSERT_EQ(help.exit_code, 0) << command << ": " << help.err;
    const std::vector<std::string> flags = flagsOf(help.out);
    ASSERT_FALSE(flags.empty()) << command << ": " << help.out;
    for (const std::string &flag : flags) {
      SCOPED_TRACE("kiln " + command + " " + flag);
      auto bad = kBadValues.find(flag);
      if (bad == kBadValues.end()) {
        EXPECT_TRUE(kAnyValue.count(flag) || kSwitches.count(flag))
            << "a flag this test does not know: give it a bad value in kBadValues, or list it "
               "as taking any value or as a switch";
        continue;
      }
      expectUsage(run(command + " " + args + " " + flag + " " + bad->second), flag);
      ++checked;
    }
  }
  EXPECT_GT(checked, 200u);
}

TEST_F(UsageCli, TheCommandsTheIssueNamedExit2) {
  expectUsage(run("train " + kTiny + " --compile-only --zero 5"), "--zero: must be 0, 1, 2 or 3");
  expectUsage(run("train " + kTiny + " --compile-only --device-memory 1x"), "'1x'");
  expectUsage(run("train " + kTiny + " --compile-only --loss-scale dynamic:0,2,10"),
              "--loss-scale 'dynamic:0,2,10'");
  expectUsage(run("train " + kTiny + " --compile-only --target ascend999"),
              "unknown target 'ascend999'");
  expectUsage(run("train " + kTiny + " --compile-only --disable-pass TbeMatmulFixpipeFusionPass"),
              "did you mean TbeMatmulFixPipeFusionPass?");
  expectUsage(run("compile " + kTiny + " --seq 16,32 -o g.json"), "only an artifact holds");
  expectUsage(run("train " + kTiny + " --compile-only --tp 0"), "--tp");
  expectUsage(run("compile " + kTiny +
                  " --enable-pass TbeEltwiseFusionPass --disable-pass "
                  "TbeEltwiseFusionPass"),
              "both enabled and disabled");
  expectUsage(run("compile " + kTiny + " --target ascend910 --overflow-mode infnan"),
              "does not support overflow mode infnan");
}

TEST_F(UsageCli, AFlagGivenTwiceIsSaidInKilnsWords) {
  Result r = run("train " + kTiny + " --steps 3 --steps 4");
  expectUsage(r, "--steps given 2 times: give it once");
  EXPECT_EQ(r.err.find("At Most"), std::string::npos) << r.err;
  expectUsage(run("compile " + kTiny + " -o a.json -o b.json"), "--output given 2 times");
  expectUsage(run("train " + kTiny + " --lr"), "--lr needs a value");
  expectUsage(run("init " + kTiny + " -o w.safetensors --seed abc"), "got 'abc'");
}

TEST_F(UsageCli, KilnAloneShowsItsCommands) {
  for (const std::string group : {"", "debug", "passes", "cache", "keys"}) {
    SCOPED_TRACE("kiln " + group);
    Result r = run(group);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("Subcommands:"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("A subcommand is required"), std::string::npos) << r.err;
  }
  Result r = run("");
  for (const char *command : {"train", "plan", "compile", "run", "inspect"})
    EXPECT_NE(r.err.find(std::string("\n  ") + command + " "), std::string::npos) << r.err;
  EXPECT_NE(run("debug").err.find("bisect"), std::string::npos);
}

TEST_F(UsageCli, FlagsThatDoNotGoTogetherAreRefusedWithWhy) {
  expectUsage(run("run " + kTiny + " --weights w --inputs i --outputs o --reference --profile p"),
              "--reference runs the reference interpreter");
  expectUsage(run("train " + kTiny + " --data d --steps 1 --resume"), "needs --checkpoint-dir");
  expectUsage(run("train " + kTiny + " --compile-only --lr 1e-4 --min-lr 1e-3"), "--min-lr");
  expectUsage(run("train " + kTiny + " --steps 1"), "--data is required");
  expectUsage(run("train " + kTiny + " --data d --steps 1 --eval-every 5"),
              "--eval-every needs --eval-data");
  expectUsage(run("train " + kTiny + " --data d --steps 1 --eval-tokens 500"),
              "--eval-tokens needs --eval-data");
  expectUsage(run("inspect a.kiln --format json --kernels 3"), "--kernels");
  expectUsage(run("passes show TbeMatmulFixpipeFusionPass"), "unknown pass");
}

} // namespace
} // namespace kiln::testing
