// The LoRA flags of `kiln train` (--lora-rank, --lora-alpha, --lora-dropout,
// --lora-targets to start new adapters; --lora DIR to start from a PEFT
// adapter folder) and of `kiln run` and `kiln merge` (--lora DIR).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "compiler/frontend/lora_adapter.h"

namespace kiln::cli {

struct LoraFlags {
  std::string dir;
  frontend::LoraConfig fresh; // rank 0: no new adapters
  std::string targets;        // comma-separated; empty: Qwen's recipe
};

// --lora DIR, and with `new_adapters` the flags that start fresh ones.
void addLoraFlags(CLI::App &cmd, LoraFlags &flags, bool new_adapters);

// The adapters the command starts from, or nothing when no LoRA flag is
// given; a folder and a rank together are an error.
Expected<std::optional<frontend::LoraAdapter>>
resolveLoraFlags(LoraFlags flags, const frontend::QwenConfig &config, uint64_t seed);

} // namespace kiln::cli
