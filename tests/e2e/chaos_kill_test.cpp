// Chaos test (docs/reliability.md, "Kill it for a week"): kiln train with a
// checkpoint every step, killed with SIGKILL after a seeded random delay
// (landing in start-up and compile, a step, a checkpoint write, a PEFT
// adapter write, a cache entry write), resumed with --resume-if-exists and
// killed again until a run is left to finish. Each chain must end as an
// uninterrupted run does: every checkpoint and adapter byte for byte, the
// log's losses bit for bit, no temporary file, a clean kernel cache.
// fault_injection_test.cpp kills at each write's fixed points; this one at
// moments. KILN_CHAOS_KILLS (default 20) and KILN_CHAOS_SEED set the run;
// scripts/chaos.sh runs the long form.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/checkpoint.h"
#include "runtime/checkpoint_lock.h"
#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using Clock = std::chrono::steady_clock;

constexpr int kSteps = 8;
constexpr int kPointsPerWrite = 4; // support/file_io.cpp's kill points

long envOr(const char *name, long fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

bool isTemporary(const fs::path &p) {
  return p.filename().string().find(".tmp.") != std::string::npos;
}

class ChaosKill : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    std::vector<uint16_t> tokens;
    std::mt19937 rng(7);
    for (int i = 0; i < 4096; ++i)
      tokens.push_back(uint16_t(rng() % 512));
    write("train.bin", std::string(reinterpret_cast<const char *>(tokens.data()),
                                   tokens.size() * sizeof(uint16_t)));
  }

  // A full fine-tune with ZeRO-1 over two devices, or a LoRA run writing a
  // PEFT adapter folder beside each checkpoint.
  static std::string train(bool lora, const std::string &dir, int steps = kSteps) {
    return "train " + kTiny + " --data train.bin --batch 4 --seq 8 --lr 1e-3 --devices 2 " +
           (lora ? "--lora-rank 4" : "--zero 1") + " --steps " + std::to_string(steps) +
           " --checkpoint-every 1 --checkpoint-dir " + dir + " --log-json " + dir + ".jsonl";
  }

  // Runs `command` (kiln's arguments, with environment assignments before
  // them) in the test's folder and SIGKILLs it after `delay` unless it
  // ended first; true when it was killed.
  // `first_output`, when given, is set to when stdout was first written
  // (step 1's line flushes it).
  bool runKilledAfter(const std::string &command, Clock::duration delay, Result &r,
                      Clock::duration *first_output = nullptr) {
    const std::string line = "cd " + dir_.string() + " && exec env " + command + " >" +
                             path("stdout") + " 2>" + path("stderr");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char *>(nullptr));
      ::_exit(127);
    }
    EXPECT_GT(pid, 0);
    const Clock::time_point started = Clock::now(), deadline = started + delay;
    int status = 0;
    std::error_code ec;
    for (;;) {
      if (first_output && *first_output == Clock::duration::zero() &&
          fs::file_size(path("stdout"), ec) > 0 && !ec)
        *first_output = Clock::now() - started;
      if (::waitpid(pid, &status, WNOHANG) == pid)
        break;
      if (Clock::now() >= deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    r.signaled = WIFSIGNALED(status);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(path("stdout"));
    r.err = slurp(path("stderr"));
    const bool killed = r.signaled && WTERMSIG(status) == SIGKILL;
    EXPECT_TRUE(killed || r.exit_code == 0) << command << ": " << r.err;
    return killed;
  }

  // The regular files under `dir`, recursively.
  std::vector<fs::path> filesUnder(const std::string &dir) const {
    std::vector<fs::path> out;
    if (fs::exists(path(dir)))
      for (const auto &e : fs::recursive_directory_iterator(path(dir)))
        if (e.is_regular_file())
          out.push_back(e.path());
    return out;
  }

  // The kernel-cache entries under `cache` (published ones).
  size_t cacheEntries(const std::string &cache) const {
    size_t n = 0;
    for (const fs::path &p : filesUnder(cache))
      n += p.string().find("/entries/") != std::string::npos && !isTemporary(p);
    return n;
  }

  // The per-step values of a --log-json file: each step once (a resumed run
  // drops the lines of the steps it redoes).
  std::map<int64_t, nlohmann::json> stepsLogged(const std::string &log) {
    std::map<int64_t, nlohmann::json> steps;
    for (nlohmann::json line : logLines(log)) {
      line.erase("seconds"); // the only fields a rerun may change
      line.erase("tokens_per_s");
      const int64_t step = line["step"].get<int64_t>();
      if (steps.count(step))
        ++repeated_log_lines_;
      steps[step] = line;
    }
    EXPECT_EQ(repeated_log_lines_, 0) << log << ": a step logged twice";
    return steps;
  }

  // A chain ended: it holds what the uninterrupted run `whole` holds.
  void expectSameAsWhole(const std::string &whole, const std::string &dir, bool lora) {
    for (int step = 1; step <= kSteps; ++step) {
      const std::string want = runtime::checkpointPath(whole, step);
      const std::string got = runtime::checkpointPath(dir, step);
      ASSERT_TRUE(fs::exists(path(got))) << got;
      EXPECT_TRUE(slurp(path(got)) == slurp(path(want))) << got << " differs from " << want;
      if (lora)
        for (const char *file : {"adapter_config.json", "adapter_model.safetensors"}) {
          const fs::path a = fs::path(path(runtime::checkpointExportDir(want))) / file;
          const fs::path b = fs::path(path(runtime::checkpointExportDir(got))) / file;
          ASSERT_TRUE(fs::exists(b)) << b << " is missing";
          EXPECT_TRUE(slurp(a) == slurp(b)) << b << " differs from " << a;
        }
    }
    // The weights and Adam moments, tensor by tensor (a clearer failure).
    expectSameTensors(runtime::checkpointPath(whole, kSteps), runtime::checkpointPath(dir, kSteps));
    const auto want = stepsLogged(whole + ".jsonl"), got = stepsLogged(dir + ".jsonl");
    ASSERT_EQ(got.size(), size_t(kSteps)) << dir << ".jsonl";
    for (const auto &[step, line] : want) {
      EXPECT_EQ(got.at(step)["loss"].get<double>(), line["loss"].get<double>())
          << dir << ".jsonl: step " << step;
      EXPECT_EQ(got.at(step), line) << dir << ".jsonl: step " << step;
    }
    for (const fs::path &p : filesUnder(dir))
      EXPECT_FALSE(isTemporary(p)) << p << " was left";
  }

  // What a kill interrupted, from what it left: a temporary file of the
  // cache, a checkpoint or an adapter; else a step line printed or not.
  std::string killedDuring(const Result &r, const std::string &dir, const std::string &cache) {
    for (const fs::path &p : filesUnder(dir))
      if (isTemporary(p))
        return p.parent_path().filename().string().find("-adapter") != std::string::npos
                   ? "adapter write"
                   : "checkpoint write";
    for (const fs::path &p : filesUnder(cache))
      if (isTemporary(p))
        return "cache write";
    return r.out.find("step ") == std::string::npos ? "start-up, compile or step 1" : "a step";
  }

  int repeated_log_lines_ = 0;
};

// Chains of kills over a full ZeRO-1 run and a LoRA run in turn, each chain
// in a fresh checkpoint folder and a cold kernel cache (so the first kill
// may land in the compile), until KILN_CHAOS_KILLS kills in all.
TEST_F(ChaosKill, TwentyRandomKillsLoseNothing) {
  const long kills_wanted = std::max(1L, envOr("KILN_CHAOS_KILLS", 20));
  const uint32_t seed = uint32_t(envOr("KILN_CHAOS_SEED", 20261204));
  const Clock::time_point start = Clock::now();

  // The uninterrupted runs, timed cold and warm: the kill delays' range.
  Clock::duration cold[2], warm[2], first_step[2] = {};
  for (int lora = 0; lora < 2; ++lora) {
    const std::string whole = lora ? "whole-lora" : "whole";
    Clock::time_point t0 = Clock::now();
    Result r;
    ASSERT_FALSE(runKilledAfter("KILN_CACHE_DIR=whole-cache-" + whole + " " + kiln_ + " " +
                                    train(lora, whole),
                                std::chrono::minutes(5), r));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    cold[lora] = Clock::now() - t0;
    t0 = Clock::now();
    ASSERT_FALSE(runKilledAfter("KILN_CACHE_DIR=whole-cache-" + whole + " " + kiln_ + " " +
                                    train(lora, whole + "-warm"),
                                std::chrono::minutes(5), r, &first_step[lora]));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    warm[lora] = Clock::now() - t0;
    expectSameAsWhole(whole, whole + "-warm", lora);
  }

  std::mt19937_64 rng(seed);
  std::map<std::string, int> during;
  long kills = 0;
  int chains = 0;
  while (kills < kills_wanted && !HasFatalFailure()) {
    const bool lora = chains % 2 == 1;
    const std::string whole = lora ? "whole-lora" : "whole";
    const std::string dir = "chain" + std::to_string(chains);
    const std::string cache = dir + "-cache";
    const std::string command =
        "KILN_CACHE_DIR=" + cache + " " + kiln_ + " " + train(lora, dir) + " --resume-if-exists";
    for (int attempt = 0;; ++attempt) {
      // A chain ends when a run outlives its delay; past 50 kills it is left
      // alone. Until its kernels are all cached a run compiles them.
      const bool compiled = cacheEntries(cache) >= cacheEntries("whole-cache-" + whole);
      // Half the kills of a compiled run fall after its first step, where
      // the checkpoint and adapter writes are.
      const Clock::duration range = (compiled ? warm[lora] : cold[lora]) * 6 / 5;
      const Clock::duration from = compiled && rng() % 2 ? first_step[lora] : Clock::duration();
      const auto delay = attempt >= 50 ? Clock::duration(std::chrono::minutes(5))
                                       : Clock::duration(std::uniform_int_distribution<int64_t>(
                                             from.count(), range.count())(rng));
      SCOPED_TRACE(
          "seed " + std::to_string(seed) + ", chain " + std::to_string(chains) + ", run " +
          std::to_string(attempt) + ", killed after " +
          std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(delay).count()) +
          " us");
      Result r;
      if (!runKilledAfter(command, delay, r)) {
        ASSERT_EQ(r.exit_code, 0) << r.err;
        break;
      }
      ++kills;
      ++during[killedDuring(r, dir, cache)];
      // What the kill left is never taken for a checkpoint.
      for (const fs::path &p : filesUnder(dir))
        if (p.extension() == ".safetensors" && !isTemporary(p) &&
            p.parent_path() == fs::path(path(dir))) {
          auto state = runtime::readCheckpoint(p.string());
          EXPECT_TRUE(state.isOk()) << state.message();
        }
    }
    SCOPED_TRACE("seed " + std::to_string(seed) + ", chain " + std::to_string(chains));
    expectSameAsWhole(whole, dir, lora);
    Result verify = run("cache verify --cache-dir " + path(cache));
    EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
    EXPECT_NE(verify.out.find("all good"), std::string::npos) << verify.out;
    if (!HasFailure()) // keep a failing chain's folder for the report
      fs::remove_all(path(dir)), fs::remove_all(path(cache)), fs::remove(path(dir + ".jsonl"));
    ++chains;
  }
  std::string summary;
  for (const auto &[what, n] : during)
    summary += (summary.empty() ? "" : ", ") + what + " " + std::to_string(n);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("chaos: %ld kills in %d chains (%s), %d log lines repeated by redone steps, "
              "seed %u, %.1f s\n",
              kills, chains, summary.c_str(), repeated_log_lines_, seed, seconds);
  EXPECT_GE(kills, kills_wanted);
}

// The PEFT adapter folder beside each checkpoint of a LoRA run, with a kill
// at every point of its writes: the resumed run leaves every checkpoint
// with its whole adapter and no temporary file. (The adapter was written
// after its step file: a kill between left a checkpoint whose adapter
// folder held a temporary file, or nothing, for good.)
// A run killed after logging a step and before checkpointing it redoes the
// step when resumed: the log keeps each step once (here the last checkpoint
// is removed, as such a kill leaves it unwritten).
TEST_F(ChaosKill, AResumedRunLogsEachStepOnce) {
  writeLearnableTokens("train.bin");
  const std::string train = "train " + kTiny +
                            " --data train.bin --batch 4 --seq 8 --devices 1 --steps 4 "
                            "--checkpoint-dir ckpt --checkpoint-every 2 --log-json log.jsonl";
  ASSERT_EQ(run(train).exit_code, 0);
  ASSERT_EQ(logLines("log.jsonl").size(), 4u);
  fs::remove(runtime::checkpointPath(path("ckpt"), 4));
  write("log.jsonl", slurp(path("log.jsonl")) + "{\"step\": 4, \"lo"); // cut short by a kill
  Result resumed = run(train + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  std::vector<int64_t> steps;
  for (const nlohmann::json &line : logLines("log.jsonl"))
    steps.push_back(line["step"].get<int64_t>());
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4}));
}

TEST_F(ChaosKill, EveryCheckpointKeepsItsWholeAdapterAfterAKillAtAnyPoint) {
  constexpr int steps = 2;
  ASSERT_EQ(run(train(true, "whole", steps)).exit_code, 0);
  // Per step: the adapter's config and weights, then the step file; and
  // the cache's counters once.
  const long points = steps * 3 * kPointsPerWrite + kPointsPerWrite;
  int killed = 0;
  for (long point = 1; point <= points; ++point) {
    SCOPED_TRACE("KILN_FAULT_KILL_AT=" + std::to_string(point));
    const std::string dir = "ck" + std::to_string(point);
    Result r = shell("KILN_FAULT_KILL_AT=" + std::to_string(point) + " exec " + kiln_ + " " +
                     train(true, dir, steps));
    killed += r.signaled || r.exit_code == 128 + SIGKILL;
    Result resumed = run(train(true, dir, steps) + " --resume-if-exists");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    for (int step = 1; step <= steps; ++step) {
      const fs::path adapter =
          path(runtime::checkpointExportDir(runtime::checkpointPath(dir, step)));
      const fs::path want =
          path(runtime::checkpointExportDir(runtime::checkpointPath("whole", step)));
      for (const char *file : {"adapter_config.json", "adapter_model.safetensors"})
        EXPECT_TRUE(fs::exists(adapter / file) && slurp(adapter / file) == slurp(want / file))
            << adapter / file << " is missing or differs";
    }
    for (const fs::path &p : filesUnder(dir))
      EXPECT_FALSE(isTemporary(p)) << p << " was left";
  }
  EXPECT_GE(killed, int(points) - kPointsPerWrite);
}

// `kiln merge` killed at each point of its writes and at seeded moments,
// each time into a new folder. Its guarantee: config.json is written last,
// so a folder that holds one holds the whole merge and one without it does
// not load as a model; run again, the merge finishes the folder and leaves
// no temporary file. (Merging again over an older merge's folder is not
// covered: a kill there leaves the older config.json beside a mix of old
// and new shards; docs/reliability.md.)
TEST_F(ChaosKill, AKilledMergeLeavesNoFolderThatLoadsAndARerunFinishesIt) {
  ASSERT_EQ(run(train(true, "lora", 1)).exit_code, 0);
  ASSERT_EQ(run("init " + kTiny + " -o base.safetensors").exit_code, 0);
  const std::string adapter = runtime::checkpointExportDir(runtime::checkpointPath("lora", 1));
  auto merge = [&](const std::string &out) {
    return kiln_ + " merge " + kTiny + " --weights base.safetensors --lora " + adapter + " -o " +
           out + " --shard-size 100KB";
  };
  Result r;
  const Clock::time_point t0 = Clock::now();
  ASSERT_FALSE(runKilledAfter(merge("whole"), std::chrono::minutes(5), r));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Clock::duration took = Clock::now() - t0;
  std::map<std::string, std::string> want;
  for (const fs::path &p : filesUnder("whole"))
    want[p.filename().string()] = slurp(p);
  ASSERT_GE(want.size(), 4u) << "shards, their index and config.json";

  auto check = [&](const std::string &out, bool finished) {
    std::map<std::string, std::string> got;
    for (const fs::path &p : filesUnder(out))
      if (!isTemporary(p) || !finished)
        got[p.filename().string()] = slurp(p);
      else
        ADD_FAILURE() << p << " was left";
    if (finished || got.count("config.json")) {
      EXPECT_EQ(got.size(), want.size()) << out;
      for (const auto &[name, bytes] : want)
        EXPECT_TRUE(got.count(name) && got[name] == bytes) << out << "/" << name;
    }
  };
  // Every file is written atomically, config.json last (a copy of it was
  // once cut short by a kill, leaving a folder that claimed to be whole).
  const long points = long(want.size()) * kPointsPerWrite;
  std::mt19937_64 rng(envOr("KILN_CHAOS_SEED", 20261204));
  int killed = 0;
  for (long k = 1; k <= points + 10; ++k) {
    const std::string out = "m" + std::to_string(k);
    const bool at_point = k <= points;
    const Clock::duration delay = at_point ? Clock::duration(std::chrono::minutes(5))
                                           : Clock::duration(std::uniform_int_distribution<int64_t>(
                                                 0, (took * 6 / 5).count())(rng));
    SCOPED_TRACE(
        at_point ? "KILN_FAULT_KILL_AT=" + std::to_string(k)
                 : "killed after " +
                       std::to_string(
                           std::chrono::duration_cast<std::chrono::microseconds>(delay).count()) +
                       " us");
    killed += runKilledAfter(
        (at_point ? "KILN_FAULT_KILL_AT=" + std::to_string(k) + " " : "") + merge(out), delay, r);
    check(out, false);
    ASSERT_FALSE(runKilledAfter(merge(out), std::chrono::minutes(5), r));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    check(out, true);
  }
  EXPECT_GE(killed, int(points));
}

} // namespace
} // namespace kiln
