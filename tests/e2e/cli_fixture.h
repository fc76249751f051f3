// The fixture of the command-line tests: runs the real kiln binary in a
// scratch folder (its working directory) and checks its one-line errors.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/safetensors.h"

namespace kiln::testing {

namespace fs = std::filesystem;

inline const std::string kSource = KILN_SOURCE_DIR;
// kiln's exit codes (docs/cli.md, "Exit codes"; tools/kiln/cli_common.h).
inline constexpr int kExitError = 1; // an error in what the files hold or in the run
inline constexpr int kExitUsage = 2; // a usage error, code E10001

inline const std::string kTiny = kSource + "/examples/qwen-tiny/config.json";
inline const std::string k14b = kSource + "/examples/qwen-14b/config.json";

struct Result {
  int exit_code = -1;
  bool signaled = false;
  std::string out; // stdout
  std::string err; // stderr
};

inline std::string slurp(const fs::path &p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class Cli : public ::testing::Test {
protected:
  void SetUp() override {
    kiln_ = KILN_CLI;
    dir_ = fs::temp_directory_path() /
           ("kiln_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    // Kernels compile into a cache of the test's own, never the user's.
    ::setenv("KILN_CACHE_DIR", (dir_ / "kernel-cache").c_str(), 1);
    // And keys of its own: a cache secret, a signing key, trusted keys.
    ::setenv("KILN_CONFIG_DIR", (dir_ / "config").c_str(), 1);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result run(const std::string &args) { return shell(kiln_ + " " + args); }

  // Any command line, in the test's folder (where default outputs such as
  // kiln_dump/ land).
  Result shell(const std::string &command) {
    const std::string out = (dir_ / "stdout").string(), err = (dir_ / "stderr").string();
    int status =
        std::system(("cd " + dir_.string() + " && " + command + " >" + out + " 2>" + err).c_str());
    Result r;
    r.signaled = WIFSIGNALED(status);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  std::string path(const std::string &name) const { return (dir_ / name).string(); }

  void write(const std::string &name, const std::string &contents) {
    std::ofstream(dir_ / name, std::ios::binary) << contents;
  }

  // A one-line "kiln: error:" message containing every fragment, exit code 1.
  static void expectError(const Result &r, std::initializer_list<std::string> fragments) {
    EXPECT_FALSE(r.signaled);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.err.rfind("kiln: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    for (const std::string &f : fragments)
      EXPECT_NE(r.err.find(f), std::string::npos) << "missing '" << f << "' in: " << r.err;
  }
  // The same, of the error's kind by its code, kiln's exit status
  // (docs/cli.md, "Exit codes"): a usage error (the command line itself is
  // wrong, code E10001) exits with 2; an error in what the files hold or
  // in the run, with 1. The fragments say which flag, file or value.
  static void expectUsageError(const Result &r, std::initializer_list<std::string> fragments) {
    expectError(r, fragments);
    EXPECT_EQ(r.exit_code, kExitUsage) << "not a usage error: " << r.err;
  }
  static void expectRunError(const Result &r, std::initializer_list<std::string> fragments) {
    expectError(r, fragments);
    EXPECT_EQ(r.exit_code, kExitError) << "not an error of the files or the run: " << r.err;
  }

  // A learnable token file (uint16 ids below 512): each token follows from
  // the one before, times 5 plus 3, with noise.
  void writeLearnableTokens(const std::string &name) {
    std::vector<uint16_t> tokens{0};
    uint64_t state = 1;
    for (int i = 0; i < 20000; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      tokens.push_back(static_cast<uint16_t>((tokens.back() * 5 + 3 + (state >> 62)) % 512));
    }
    write(name, std::string(reinterpret_cast<const char *>(tokens.data()),
                            tokens.size() * sizeof(uint16_t)));
  }

  // The lines of a --log-json file.
  std::vector<nlohmann::json> logLines(const std::string &name) const {
    std::vector<nlohmann::json> lines;
    std::istringstream in(slurp(path(name)));
    for (std::string line; std::getline(in, line);)
      lines.push_back(nlohmann::json::parse(line));
    return lines;
  }

  // The losses of a `kiln train ARGS` run, logged to `log` (--log-json);
  // the run must succeed.
  std::vector<double> trainLosses(const std::string &args, const std::string &log) {
    Result r = run("train " + args + " --log-json " + log);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
    std::vector<double> out;
    for (const nlohmann::json &line : logLines(log))
      out.push_back(line["loss"].get<double>());
    return out;
  }

  // The losses and gradient norms of a --log-json run, step by step, each
  // within `rtol` of `want`'s: a layout that must train as one device does.
  static void expectNearLog(const std::vector<nlohmann::json> &want,
                            const std::vector<nlohmann::json> &got, double rtol,
                            const std::string &name) {
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < want.size(); ++i)
      for (const char *field : {"loss", "grad_norm"}) {
        const double w = want[i][field];
        EXPECT_NEAR(got[i][field].get<double>(), w, rtol * w)
            << name << " step " << i + 1 << " " << field;
      }
  }

  // The same losses and gradient norms, bit for bit: what MPI must give.
  static void expectSameLog(const std::vector<nlohmann::json> &want,
                            const std::vector<nlohmann::json> &got) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i]["loss"], want[i]["loss"]) << "step " << i + 1;
      EXPECT_EQ(got[i]["grad_norm"], want[i]["grad_norm"]) << "step " << i + 1;
    }
  }

  // Two checkpoints (safetensors files in the test's folder) hold the same
  // tensors, bit for bit: what a resumed run must end with.
  void expectSameTensors(const std::string &want, const std::string &got) const {
    auto a = readSafetensors(path(want));
    auto b = readSafetensors(path(got));
    ASSERT_TRUE(a.isOk() && b.isOk()) << want << ", " << got;
    for (const auto &[tensor, t] : a->tensors) {
      auto it = b->tensors.find(tensor);
      ASSERT_NE(it, b->tensors.end()) << got << " has no " << tensor;
      EXPECT_TRUE(it->second == t) << tensor << " differs between " << want << " and " << got;
    }
  }

  // Two checkpoints hold the same tensors, of the same types, each element
  // within `tolerance`: a layout that must train as one device does.
  void expectNearTensors(const std::string &want, const std::string &got, double tolerance) const {
    auto a = readSafetensors(path(want));
    auto b = readSafetensors(path(got));
    ASSERT_TRUE(a.isOk() && b.isOk()) << want << ", " << got;
    ASSERT_EQ(b->tensors.size(), a->tensors.size()) << got;
    for (const auto &[tensor, w] : a->tensors) {
      ASSERT_TRUE(b->tensors.count(tensor)) << got << ": no " << tensor;
      const Tensor &g = b->tensors.at(tensor);
      ASSERT_EQ(g.type(), w.type()) << got << ": " << tensor;
      double worst = 0;
      for (int64_t k = 0; k < w.numElements(); ++k)
        worst = std::max(worst, std::abs(double(g.getFloat(k)) - w.getFloat(k)));
      EXPECT_LT(worst, tolerance) << got << ": " << tensor;
    }
  }

  std::string kiln_;
  fs::path dir_;
};

} // namespace kiln::testing
