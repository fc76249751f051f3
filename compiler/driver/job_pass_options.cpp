#include "compiler/driver/job_pass_options.h"

#include <nlohmann/json.hpp>

#include "passes/memory/recompute_settings.h"
#include "passes/precision/precision_settings.h"

namespace kiln::driver {
namespace {

using nlohmann::json;

std::string layerText(const std::set<int64_t> &layers) {
  std::string s;
  for (int64_t l : layers)
    s += (s.empty() ? "" : ",") + std::to_string(l);
  return s;
}

// A JSON value as an option would be written on the command line.
Expected<std::string> valueText(const JsonReader &r, const json &v, const std::string &path) {
  if (v.is_string())
    return v.get<std::string>();
  if (v.is_boolean())
    return std::string(v.get<bool>() ? "true" : "false");
  if (v.is_number_integer())
    return v.dump();
  if (v.is_array()) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(int64_t x, r.integer(v[i], r.index(path, i)));
      s += (i ? "," : "") + std::to_string(x);
    }
    return s;
  }
  return r.error(path, "expected a string, an integer, a boolean or an array of integers");
}

// The flags of `s` that are one pass's option, written at `where`(field).
void flagSettings(const JobSettings &s, bool command_line,
                  std::vector<passes::PassOptionSetting> &out) {
  const auto at = [&](const char *flag, const char *field) {
    return command_line ? std::string(flag) : s.source + ": " + field;
  };
  if (s.recompute)
    out.push_back({passes::kRecomputePassName, "mode",
                   std::string(passes::recomputeModeName(*s.recompute)),
                   at("--recompute", "$.recompute")});
  if (s.recompute_layers)
    out.push_back({passes::kRecomputePassName, "layers", layerText(*s.recompute_layers),
                   at("--recompute-layers", "$.recompute")});
  if (s.attention_fp32_layers)
    out.push_back({passes::kAttentionFp32CastPassName, "layers",
                   layerText(*s.attention_fp32_layers),
                   at("--attention-fp32-layers", "$.precision.attention_fp32_layers")});
}

} // namespace

Expected<std::vector<passes::PassOptionSetting>>
parsePassOptions(const JsonReader &r, const json &doc, const std::string &source) {
  std::vector<passes::PassOptionSetting> settings;
  if (!doc.contains("pass_options"))
    return settings;
  KILN_ASSIGN_OR_RETURN(const json *passes, r.object(doc, "$", "pass_options"));
  for (const auto &[pass, options] : passes->items()) {
    const std::string path = JsonReader::child("$.pass_options", pass);
    if (!options.is_object())
      return r.error(path, "expected an object of the pass's options");
    for (const auto &[option, value] : options.items()) {
      const std::string at = JsonReader::child(path, option);
      KILN_ASSIGN_OR_RETURN(std::string text, valueText(r, value, at));
      settings.push_back({pass, option, std::move(text), source + ": " + at});
    }
  }
  return settings;
}

std::vector<passes::PassOptionSetting> passOptionSettings(const JobSettings &job,
                                                          const JobSettings &command_line) {
  std::vector<passes::PassOptionSetting> settings;
  flagSettings(job, false, settings);
  settings.insert(settings.end(), job.pass_options.begin(), job.pass_options.end());
  flagSettings(command_line, true, settings);
  settings.insert(settings.end(), command_line.pass_options.begin(),
                  command_line.pass_options.end());
  return settings;
}

} // namespace kiln::driver
