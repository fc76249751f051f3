// Shared pieces of the custom-op tests: the example folder and a fixture
// with a scratch folder per test in which to write op definition files.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

namespace kiln::testing {

inline const std::string kCustomOpExamples = std::string(KILN_SOURCE_DIR) + "/examples/custom-ops";

class CustomOpFolders : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln_custom_op_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A folder under the test's own with these files.
  std::string folder(const std::string &name, const std::map<std::string, std::string> &files) {
    std::filesystem::path d = dir_ / name;
    std::filesystem::create_directories(d);
    for (const auto &[file, text] : files)
      std::ofstream(d / file) << text;
    return d.string();
  }

  std::filesystem::path dir_;
};

} // namespace kiln::testing
