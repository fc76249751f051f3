#include "compiler/frontend/lora_config.h"

#include <cmath>
#include <cstdio>

#include "support/json_reader.h"
#include "support/name_suggest.h"

namespace kiln::frontend {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

} // namespace

std::string LoraConfig::toString() const {
  return "r " + std::to_string(rank) + ", alpha " + number(alpha) + ", dropout " + number(dropout) +
         ", targets " + (targets.empty() ? std::string("the model's default") : joinNames(targets));
}

Status validateLoraConfig(const LoraConfig &config, std::string_view source) {
  const std::string where(source);
  if (config.rank < 1 || config.rank > kMaxLoraRank)
    return Error(where + ": LoRA rank " + std::to_string(config.rank) + ": expected 1 to " +
                 std::to_string(kMaxLoraRank));
  if (!std::isfinite(config.alpha) || config.alpha <= 0)
    return Error(where + ": LoRA alpha " + number(config.alpha) + ": expected a number above 0");
  if (!(config.dropout >= 0 && config.dropout < 1))
    return Error(where + ": LoRA dropout " + number(config.dropout) +
                 ": expected a probability in [0, 1)");
  for (const std::string &t : config.targets)
    if (t.empty() || t.front() == '.' || t.back() == '.')
      return Error(where + ": LoRA target '" + t +
                   "': expected a module name or a dotted suffix of one (c_attn, mlp.c_proj)");
  return Status::ok();
}

bool isLoraTarget(const LoraConfig &config, std::string_view module) {
  for (const std::string &t : config.targets)
    if (module == t || (module.size() > t.size() && module.ends_with(t) &&
                        module[module.size() - t.size() - 1] == '.'))
      return true;
  return false;
}

std::string loraAName(std::string_view module) {
  return std::string(kPeftPrefix) + std::string(module) + ".lora_A.weight";
}
std::string loraBName(std::string_view module) {
  return std::string(kPeftPrefix) + std::string(module) + ".lora_B.weight";
}

nlohmann::json adapterConfigJson(const LoraConfig &config) {
  return {{"peft_type", "LORA"},
          {"task_type", "CAUSAL_LM"},
          {"r", config.rank},
          {"lora_alpha", config.alpha},
          {"lora_dropout", config.dropout},
          {"target_modules", config.targets},
          {"bias", "none"},
          {"fan_in_fan_out", false},
          {"inference_mode", false},
          {"base_model_name_or_path", config.base_model}};
}

Expected<LoraConfig> parseAdapterConfig(const nlohmann::json &doc, std::string_view source) {
  JsonReader r(source);
  if (!doc.is_object())
    return r.error("$", "expected a PEFT adapter config (a JSON object)");
  KILN_ASSIGN_OR_RETURN(std::string type, r.string(doc, "$", "peft_type"));
  if (type != "LORA")
    return r.error("$.peft_type", "'" + type + "': kiln reads LORA adapters only");
  LoraConfig config;
  KILN_ASSIGN_OR_RETURN(const nlohmann::json *rank, r.member(doc, "$", "r"));
  KILN_ASSIGN_OR_RETURN(config.rank, r.integer(*rank, "$.r"));
  KILN_ASSIGN_OR_RETURN(const nlohmann::json *alpha, r.member(doc, "$", "lora_alpha"));
  KILN_ASSIGN_OR_RETURN(config.alpha, r.number(*alpha, "$.lora_alpha"));
  KILN_ASSIGN_OR_RETURN(const nlohmann::json *dropout, r.optionalMember(doc, "$", "lora_dropout"));
  if (dropout) {
    KILN_ASSIGN_OR_RETURN(config.dropout, r.number(*dropout, "$.lora_dropout"));
  }
  KILN_ASSIGN_OR_RETURN(const nlohmann::json *targets, r.member(doc, "$", "target_modules"));
  if (targets->is_string())
    return r.error("$.target_modules", "a string is a regular expression in PEFT; kiln reads "
                                       "a list of module names");
  KILN_ASSIGN_OR_RETURN(config.targets, r.stringList(*targets, "$.target_modules"));
  KILN_ASSIGN_OR_RETURN(const nlohmann::json *bias, r.optionalMember(doc, "$", "bias"));
  if (bias && *bias != "none")
    return r.error("$.bias", bias->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                                 ": kiln trains LoRA with bias \"none\" only");
  KILN_ASSIGN_OR_RETURN(const nlohmann::json *fan_in_fan_out,
                        r.optionalMember(doc, "$", "fan_in_fan_out"));
  if (fan_in_fan_out && *fan_in_fan_out == true)
    return r.error("$.fan_in_fan_out", "true is for Conv1D layers (GPT-2); Qwen's are nn.Linear");
  KILN_ASSIGN_OR_RETURN(const nlohmann::json *base,
                        r.optionalMember(doc, "$", "base_model_name_or_path"));
  if (base && base->is_string())
    config.base_model = base->get<std::string>();
  KILN_RETURN_IF_ERROR(validateLoraConfig(config, source));
  return config;
}

} // namespace kiln::frontend
