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
};

// --lora-rank, --lora-alpha and --lora-targets: the adapters' shape, for
// commands that build a LoRA graph without weights (kiln compile).
void addLoraShapeFlags(CLI::App &cmd, frontend::LoraConfig &lora);
// --lora DIR, and with `new_adapters` the flags that start fresh ones (the
// shape flags and --lora-dropout).
void addLoraFlags(CLI::App &cmd, LoraFlags &flags, bool new_adapters);

// The adapters the command starts from, or nothing when no LoRA flag is
// given; a folder and a rank together are an error. Without `initialise`,
// new adapters come without tensors (a plan needs only their shapes).
Expected<std::optional<frontend::LoraAdapter>>
resolveLoraFlags(const LoraFlags &flags, const frontend::DecoderConfig &config, uint64_t seed,
                 bool initialise = true);

} // namespace kiln::cli
