// What tests of runs on the tiny Qwen share: its config, a token file of
// uint16 ids, and the job with every default.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/driver/job.h"
#include "compiler/frontend/decoder_config.h"

namespace kiln::testing {

inline const std::string kTinyQwen = KILN_SOURCE_DIR "/examples/qwen-tiny/config.json";

inline frontend::DecoderConfig tinyQwenConfig() {
  auto config = frontend::readDecoderConfig(kTinyQwen);
  EXPECT_TRUE(config.isOk()) << config.message();
  return config.isOk() ? *config : frontend::DecoderConfig{};
}

// nanoGPT's flat format, as kiln train --data reads it.
inline void writeTokenFile(const std::filesystem::path &path, const std::vector<uint16_t> &tokens) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(tokens.data()),
             static_cast<std::streamsize>(tokens.size() * sizeof(uint16_t)));
}

inline driver::ResolvedJob defaultJob(driver::JobSettings settings = {}) {
  auto job = driver::resolveJob(std::nullopt, settings, driver::kDefaultModelDType);
  EXPECT_TRUE(job.isOk()) << job.message();
  return std::move(job).value();
}

} // namespace kiln::testing
