// Crash tests: kiln killed with SIGKILL at seeded points of its atomic
// writes (KILN_FAULT_KILL_AT=N kills it at the N-th of the four points each
// write passes, support/file_io.cpp) while it writes kernel-cache entries, an
// artifact and checkpoints. After every kill nothing torn is ever loaded:
// the cache verifies, the published files read back whole, the half-written
// temporary files a kill leaves are refused with a clear error when given
// by name, the next compile succeeds with the same artifact, and training
// resumed after any number of kills ends with an unbroken run's weights.
// Each kill prints its seed and point, so a failure reruns exactly.
#include <random>

#include <gtest/gtest.h>

#include "formats/safetensors.h"
#include "runtime/checkpoint.h"
#include "runtime/checkpoint_lock.h"
#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;

constexpr uint32_t kSeed = 20261203;
constexpr int kPointsPerWrite = 4;

class FaultInjection : public Cli {
protected:
  // kiln with its kill point set; true when it died at it.
  bool runKilledAt(long point, const std::string &args, Result *result = nullptr) {
    Result r = shell("KILN_FAULT_KILL_AT=" + std::to_string(point) + " exec " + kiln_ + " " + args);
    if (result)
      *result = r;
    // The shell reports a child killed by a signal as 128 + the signal.
    const bool killed = r.signaled || r.exit_code == 128 + SIGKILL;
    EXPECT_TRUE(killed || r.exit_code == 0) << "point " << point << ": " << r.err;
    return killed;
  }

  // Regular files under `dir`, by kind.
  struct Files {
    std::vector<fs::path> published, temporary;
  };
  static Files filesUnder(const fs::path &dir) {
    Files f;
    if (!fs::exists(dir))
      return f;
    for (const auto &e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file())
        (e.path().filename().string().find(".tmp.") != std::string::npos ? f.temporary
                                                                         : f.published)
            .push_back(e.path());
    return f;
  }

  std::string compile(const std::string &cache, const std::string &out) {
    return "compile " + kTiny + " --seq 8 --cache-dir " + path(cache) + " -o " + path(out);
  }

  void checkAfterKill(const std::string &cache, const std::string &out, const std::string &want);

  int torn_artifacts_ = 0, torn_entries_ = 0;
};

// After a kill: what was published is whole, what was not is at most one
// temporary file that, given by name, is refused (or, when the kill came
// after its last byte, is whole); the next compile succeeds with the same
// artifact. Counts the torn files it saw.
void FaultInjection::checkAfterKill(const std::string &cache, const std::string &out,
                                    const std::string &want) {
  Result verify = run("cache verify --cache-dir " + path(cache));
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("all good"), std::string::npos) << verify.out;
  if (fs::exists(path(out))) {
    Result inspect = run("inspect " + path(out));
    EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
    EXPECT_TRUE(slurp(path(out)) == want) << "the artifact differs";
  }

  std::vector<fs::path> temps = filesUnder(path(cache)).temporary;
  for (const auto &e : fs::directory_iterator(dir_))
    if (e.path().filename().string().rfind(out + ".tmp.", 0) == 0)
      temps.push_back(e.path());
  EXPECT_LE(temps.size(), 1u);
  for (const fs::path &t : temps) {
    const std::string torn = slurp(t);
    if (t.filename().string().rfind(out, 0) == 0) {
      Result r = run("inspect " + t.string());
      EXPECT_FALSE(r.signaled);
      if (torn.size() < want.size()) {
        EXPECT_EQ(r.exit_code, 1) << "a torn artifact was loaded";
        EXPECT_NE(r.err.find(t.string()), std::string::npos) << r.err;
        ++torn_artifacts_;
      } else {
        EXPECT_TRUE(torn == want) << "a whole temporary artifact differs";
      }
    } else if (t.string().find("/entries/") != std::string::npos) {
      // Put in place of its entry, a torn entry is evicted, never loaded.
      const std::string name = t.filename().string();
      const fs::path entry = t.parent_path() / name.substr(0, name.find(".tmp."));
      const fs::path whole = path("whole-cache") / fs::relative(entry, path(cache));
      fs::rename(t, entry);
      Result r = run("cache verify --cache-dir " + path(cache));
      EXPECT_FALSE(r.signaled);
      if (torn.size() < fs::file_size(whole)) {
        EXPECT_EQ(r.exit_code, 1) << "a torn cache entry passed: " << r.out;
        EXPECT_NE(r.err.find("evicting bad entry " + entry.string()), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(entry));
        ++torn_entries_;
      } else {
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
      }
    }
  }

  Result again = run(compile(cache, out));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(slurp(path(out)) == want) << "the artifact differs";
  EXPECT_EQ(run("cache verify --cache-dir " + path(cache)).exit_code, 0);
  // The compile rewrote the artifact and the counters, and with them
  // removed what the killed one left (a torn entry was moved into place above).
  EXPECT_TRUE(filesUnder(path(cache)).temporary.empty());
  for (const auto &e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().rfind(out + ".tmp.", 0), std::string::npos)
        << e.path() << " was left";
}

// A compile into an empty cache writes every kernel's entry, the artifact
// and the cache's counters: killed at seeded points among all of them, each
// time into a fresh cache. Into a warm cache it writes only the artifact and
// the counters: killed at each of their eight points.
TEST_F(FaultInjection, KilledWhileWritingCacheEntriesAndTheArtifact) {
  ::setenv("SOURCE_DATE_EPOCH", "1800000000", 1); // the same artifact bytes every time
  Result whole = run(compile("whole-cache", "whole.kiln"));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const std::string want = slurp(path("whole.kiln"));
  // The entries, then the artifact and stats.json (stats.lock is no write).
  const long entries = long(filesUnder(path("whole-cache")).published.size()) - 2;
  ASSERT_GT(entries, 10) << "the tiny model has more kernels than that";
  const long points = (entries + 2) * kPointsPerWrite;

  // A seeded entry write for each of the four points a write passes.
  std::mt19937 rng(kSeed);
  std::vector<long> cold;
  for (int p = 1; p <= kPointsPerWrite; ++p)
    cold.push_back(std::uniform_int_distribution<long>(0, entries - 1)(rng) * kPointsPerWrite + p);
  for (long point : cold) {
    SCOPED_TRACE("cold cache, seed " + std::to_string(kSeed) +
                 ", KILN_FAULT_KILL_AT=" + std::to_string(point) + " of " + std::to_string(points));
    const std::string cache = "cold" + std::to_string(point);
    const std::string out = "cold" + std::to_string(point) + ".kiln";
    EXPECT_TRUE(runKilledAt(point, compile(cache, out)));
    checkAfterKill(cache, out, want);
  }
  const int torn_entries_cold = torn_entries_;

  for (long point = 1; point <= 2 * kPointsPerWrite; ++point) {
    SCOPED_TRACE("warm cache, KILN_FAULT_KILL_AT=" + std::to_string(point));
    const std::string cache = "warm" + std::to_string(point);
    const std::string out = "warm" + std::to_string(point) + ".kiln";
    fs::copy(path("whole-cache"), path(cache), fs::copy_options::recursive);
    EXPECT_TRUE(runKilledAt(point, compile(cache, out)));
    checkAfterKill(cache, out, want);
  }
  ::unsetenv("SOURCE_DATE_EPOCH");
  // Killed with an empty and with a half-written temporary entry.
  EXPECT_GE(torn_entries_cold, 2);
  EXPECT_GE(torn_artifacts_, 2) << "the kills at the artifact's first two points";
}

class TrainingFaults : public FaultInjection {
protected:
  void SetUp() override {
    FaultInjection::SetUp();
    std::vector<uint16_t> tokens;
    std::mt19937 rng(kSeed);
    for (int i = 0; i < 4096; ++i)
      tokens.push_back(uint16_t(rng() % 512));
    write("train.bin", std::string(reinterpret_cast<const char *>(tokens.data()),
                                   tokens.size() * sizeof(uint16_t)));
  }

  static constexpr int kSteps = 4;
  std::string train(const std::string &dir, const std::string &extra = "") {
    return "train " + kTiny + " --data train.bin --batch 4 --seq 8 --lr 1e-3 --devices 2 --steps " +
           std::to_string(kSteps) + " --checkpoint-dir " + dir + " --checkpoint-every 1 " + extra;
  }

  // The last checkpoint of `dir` equals the unbroken run's, tensors and counters.
  void expectSameAsWhole(const std::string &dir) {
    char name[48];
    std::snprintf(name, sizeof(name), "/step-%06d.safetensors", kSteps);
    auto want = readSafetensors(path("whole") + name);
    auto got = readSafetensors(path(dir) + name);
    ASSERT_TRUE(want.isOk()) << want.message();
    ASSERT_TRUE(got.isOk()) << got.message();
    ASSERT_EQ(got->tensors.size(), want->tensors.size());
    for (const auto &[tensor, t] : want->tensors)
      EXPECT_TRUE(got->tensors.at(tensor) == t) << tensor << " differs from the unbroken run";
    EXPECT_EQ(got->metadata, want->metadata);
  }

  // Every published checkpoint reads back; a temporary one left by a kill
  // does not pass for a checkpoint, neither read by name nor as the latest.
  void checkCheckpoints(const std::string &dir) {
    Files files = filesUnder(path(dir));
    EXPECT_LE(files.temporary.size(), 1u);
    for (const fs::path &p : files.published) {
      if (p.filename() == runtime::kCheckpointLockName)
        continue; // the folder's lock (checkpoint_lock.h), not a checkpoint
      auto state = runtime::readCheckpoint(p.string());
      EXPECT_TRUE(state.isOk()) << state.message();
    }
    for (const fs::path &t : files.temporary) {
      auto latest = runtime::latestCheckpoint(path(dir));
      ASSERT_TRUE(latest.isOk());
      EXPECT_TRUE(!*latest || **latest != t.string());
      if (fs::file_size(t) < fs::file_size(path("whole/step-000001.safetensors"))) {
        auto torn = runtime::readCheckpoint(t.string());
        ASSERT_FALSE(torn.isOk()) << "a torn checkpoint was read: " << t;
        EXPECT_NE(torn.message().find(t.string()), std::string::npos) << torn.message();
        ++torn_checkpoints_;
      }
    }
  }

  int torn_checkpoints_ = 0;
};

// Every kill point of a run with a warm kernel cache, each followed by one
// --resume-if-exists (a kill before the first checkpoint leaves none): the
// writes are the checkpoints of the four steps and the cache's counters.
TEST_F(TrainingFaults, ResumeAfterAKillAtEveryPointOfTheCheckpointWrites) {
  Result whole = run(train("whole"));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const long points = (kSteps + 1) * kPointsPerWrite; // checkpoints and stats.json
  int killed = 0;
  for (long point = 1; point <= points; ++point) {
    SCOPED_TRACE("KILN_FAULT_KILL_AT=" + std::to_string(point));
    const std::string dir = "ck" + std::to_string(point);
    killed += runKilledAt(point, train(dir));
    checkCheckpoints(dir);
    Result resumed = run(train(dir, "--resume-if-exists"));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    expectSameAsWhole(dir);
    EXPECT_TRUE(filesUnder(path(dir)).temporary.empty()) << "the resumed run left a temporary";
  }
  // The last points fall in the counters' write after the last checkpoint.
  EXPECT_GE(killed, int(points) - 1);
  EXPECT_GE(torn_checkpoints_, kSteps) << "kills in the middle of checkpoint writes";
}

// Kills at seeded points, one run after the other, each resuming the last,
// then a run left alone: it still ends where the unbroken one did.
TEST_F(TrainingFaults, ResumeAfterAChainOfKills) {
  Result whole = run(train("whole"));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  std::mt19937 rng(kSeed + 1);
  int kills = 0;
  for (int attempt = 0; attempt < 6; ++attempt) {
    const long point = std::uniform_int_distribution<long>(1, 2 * kPointsPerWrite)(rng);
    SCOPED_TRACE("seed " + std::to_string(kSeed + 1) + ", run " + std::to_string(attempt) +
                 ", KILN_FAULT_KILL_AT=" + std::to_string(point));
    kills += runKilledAt(point, train("chain", attempt ? "--resume-if-exists" : ""));
    checkCheckpoints("chain");
  }
  EXPECT_GE(kills, 3);
  Result last = run(train("chain", "--resume-if-exists"));
  ASSERT_EQ(last.exit_code, 0) << last.err;
  expectSameAsWhole("chain");
  EXPECT_TRUE(filesUnder(path("chain")).temporary.empty()) << "the last run left a temporary";
}

} // namespace
} // namespace kiln
