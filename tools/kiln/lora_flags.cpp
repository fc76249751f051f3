#include "tools/kiln/lora_flags.h"

#include "tools/kiln/cli_common.h"

namespace kiln::cli {

void addLoraFlags(CLI::App &cmd, LoraFlags &flags, bool new_adapters) {
  cmd.add_option("--lora", flags.dir,
                 "a PEFT LoRA adapter folder (adapter_config.json, adapter_model.safetensors): "
                 "the base weights are frozen and the adapters applied");
  if (!new_adapters)
    return;
  cmd.add_option("--lora-rank", flags.fresh.rank,
                 "train new LoRA adapters of this rank; the base weights are frozen")
      ->check(PositiveInteger);
  cmd.add_option("--lora-alpha", flags.fresh.alpha,
                 "LoRA's alpha: the update is scaled by "
                 "alpha / rank (default 16)")
      ->check(FinitePositive);
  cmd.add_option("--lora-dropout", flags.fresh.dropout,
                 "dropout on the adapters' input (default 0)")
      ->check(FiniteNonNegative);
  cmd.add_option("--lora-targets", flags.targets,
                 "comma-separated modules to adapt, matched as PEFT does by suffix (default "
                 "c_attn,c_proj,w1,w2)");
}

Expected<std::optional<frontend::LoraAdapter>>
resolveLoraFlags(LoraFlags flags, const frontend::QwenConfig &config, uint64_t seed) {
  const bool fresh = flags.fresh.rank > 0;
  if (!fresh && flags.dir.empty())
    return std::optional<frontend::LoraAdapter>();
  if (fresh && !flags.dir.empty())
    return Error("--lora " + flags.dir +
                 " starts from that adapter; --lora-rank starts new ones: give one of them");
  if (!flags.targets.empty()) {
    flags.fresh.targets.clear();
    size_t start = 0;
    while (start <= flags.targets.size()) {
      size_t comma = flags.targets.find(',', start);
      if (comma == std::string::npos)
        comma = flags.targets.size();
      flags.fresh.targets.push_back(flags.targets.substr(start, comma - start));
      start = comma + 1;
    }
  }
  if (fresh)
    KILN_RETURN_IF_ERROR(frontend::validateLoraConfig(flags.fresh, "--lora-*"));
  KILN_ASSIGN_OR_RETURN(frontend::LoraAdapter adapter,
                        frontend::startingAdapter(config, flags.dir, flags.fresh, seed));
  return std::optional<frontend::LoraAdapter>(std::move(adapter));
}

} // namespace kiln::cli
