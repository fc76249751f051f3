#include "tools/kiln/lora_flags.h"

#include "compiler/frontend/decoder_model.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {

void addLoraShapeFlags(CLI::App &cmd, frontend::LoraConfig &lora) {
  cmd.add_option("--lora-rank", lora.rank,
                 "LoRA adapters of this rank on the targeted linears; the base weights frozen")
      ->check(PositiveInteger);
  cmd.add_option("--lora-alpha", lora.alpha,
                 "LoRA's alpha: the update is scaled by alpha / rank (default 16)")
      ->check(FinitePositive);
  cmd.add_option("--lora-targets", lora.targets,
                 "comma-separated modules to adapt, matched as PEFT does by suffix, or all-linear "
                 "(default: the family's recipe: c_attn,c_proj,w1,w2 for Qwen v1, q_proj,v_proj "
                 "for the others)")
      ->delimiter(',');
}

void addLoraFlags(CLI::App &cmd, LoraFlags &flags, bool new_adapters) {
  cmd.add_option("--lora", flags.dir,
                 "a PEFT LoRA adapter folder (adapter_config.json, adapter_model.safetensors): "
                 "the base weights are frozen and the adapters applied");
  if (!new_adapters)
    return;
  addLoraShapeFlags(cmd, flags.fresh);
  cmd.add_option("--lora-dropout", flags.fresh.dropout,
                 "dropout on the adapters' input (default 0)")
      ->check(FiniteNonNegative);
}

Expected<std::optional<frontend::LoraAdapter>>
resolveLoraFlags(const LoraFlags &flags, const frontend::DecoderConfig &config, uint64_t seed,
                 bool initialise) {
  const bool fresh = flags.fresh.rank > 0;
  if (!fresh && flags.dir.empty())
    return std::optional<frontend::LoraAdapter>();
  if (fresh && !flags.dir.empty())
    return usageError("--lora " + flags.dir +
                      " starts from that adapter; --lora-rank starts new ones: give one of them");
  if (fresh) {
    if (Status valid = frontend::validateLoraConfig(flags.fresh, "--lora-*"); !valid)
      return usageError(valid.error());
    if (!initialise) {
      return std::optional<frontend::LoraAdapter>(
          frontend::LoraAdapter{frontend::withDefaultTargets(config, flags.fresh), {}});
    }
  }
  KILN_ASSIGN_OR_RETURN(frontend::LoraAdapter adapter,
                        frontend::startingAdapter(config, flags.dir, flags.fresh, seed));
  return std::optional<frontend::LoraAdapter>(std::move(adapter));
}

} // namespace kiln::cli
