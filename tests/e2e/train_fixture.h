// The fixture of the `kiln train` end-to-end tests: a learnable token file
// and the tiny Qwen's training command; the measured and planned device
// peaks a run prints.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "tests/e2e/cli_fixture.h"

namespace kiln::testing {

class TrainCli : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    writeLearnableTokens("train.bin");
  }

  std::string train(const std::string &flags) {
    return "train " + kTiny + " --data train.bin --batch 8 --seq 16 --lr 1e-3 " + flags;
  }

  // `command` for 20 steps, checkpointed at 10 and 20 into the folder
  // `name` and logged to name.jsonl.
  Result runCheckpointed(const std::string &command, const std::string &name) {
    Result r = run(command + " --steps 20 --checkpoint-every 10 --checkpoint-dir " + name +
                   " --log-json " + name + ".jsonl");
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    return r;
  }
};

// The run's last line: "measured device memory peak 2.2 MiB (planned 2.2 MiB)".
inline std::pair<std::string, std::string> measuredAndPlannedPeak(const std::string &out) {
  const size_t at = out.find("measured device memory peak ");
  char measured[32] = {}, planned[32] = {};
  if (at == std::string::npos ||
      std::sscanf(out.c_str() + at, "measured device memory peak %31[^(](planned %31[^)]", measured,
                  planned) != 2)
    return {"?", out};
  std::string m = measured;
  m.erase(m.find_last_not_of(' ') + 1);
  return {m, planned};
}

// The same line's exact counts: "...: 2306240 bytes measured, 2306240
// planned". {-1, -1} when it has none.
inline std::pair<int64_t, int64_t> measuredAndPlannedBytes(const std::string &out) {
  const size_t at = out.find("measured device memory peak ");
  const size_t colon = at == std::string::npos ? at : out.find("): ", at);
  long long measured = -1, planned = -1;
  if (colon == std::string::npos ||
      std::sscanf(out.c_str() + colon, "): %lld bytes measured, %lld planned", &measured,
                  &planned) != 2)
    return {-1, -1};
  return {measured, planned};
}

// Every device's measured peak is its plan, to the byte (the executor
// counts the plan's arena and the inputs the devices do not hold).
inline void expectMeasuredPeakIsPlan(const std::string &out, const std::string &what) {
  const auto [measured, planned] = measuredAndPlannedBytes(out);
  EXPECT_GT(measured, 0) << what << ": " << out;
  EXPECT_EQ(measured, planned) << what << ": " << out;
}

// formatBytes's text ("2.8 MiB") as bytes, to its one decimal; 0 when it
// is not such a text.
inline double formattedBytes(const std::string &text) {
  double value = 0;
  char unit[8] = {};
  if (std::sscanf(text.c_str(), "%lf %7s", &value, unit) != 2)
    return 0;
  const std::map<std::string, double> units = {
      {"B", 1}, {"KiB", 1024.0}, {"MiB", 1024.0 * 1024}, {"GiB", 1024.0 * 1024 * 1024}};
  auto u = units.find(unit);
  return u == units.end() ? 0 : value * u->second;
}

} // namespace kiln::testing
