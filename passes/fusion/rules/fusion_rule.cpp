#include "passes/fusion/rules/fusion_rule.h"

#include <algorithm>
#include <cctype>

#include "passes/fusion/rules/pattern_parser.h"
#include "support/file_io.h"
#include "support/json_reader.h"

namespace kiln::passes::rules {

using nlohmann::json;

namespace {

bool isPassName(const std::string &name) {
  if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0])))
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return true;
}

// The first sentence without its full stop, for PassInfo::summary (one
// line, as the built-in passes write theirs).
std::string firstSentence(const std::string &text) {
  size_t end = std::min(text.find('\n'), text.size());
  for (size_t i = 0; i + 1 < text.size() && i < end; ++i)
    if (text[i] == '.' && text[i + 1] == ' ') {
      end = i;
      break;
    }
  if (end > 0 && end == text.size() && text[end - 1] == '.')
    --end;
  return text.substr(0, end);
}

Expected<bool> onOff(const JsonReader &r, const json &doc, std::string_view key) {
  KILN_ASSIGN_OR_RETURN(std::string s, r.string(doc, "$", key));
  if (s != "on" && s != "off")
    return r.error(JsonReader::child("$", key), "expected \"on\" or \"off\", got \"" + s + "\"");
  return s == "on";
}

} // namespace

Expected<FusionRule> parseFusionRule(const json &doc, std::string_view source,
                                     const PassRegistry &builtin, const ops::OpRegistry &ops) {
  JsonReader r(source);
  const std::string root = "$";
  KILN_RETURN_IF_ERROR(
      r.checkKeys(doc, root,
                  {"format", "version", "name", "group", "priority", "default", "may_disable",
                   "required_because", "description", "kernel", "intermediates", "pattern"}));
  KILN_ASSIGN_OR_RETURN(std::string format, r.string(doc, root, "format"));
  if (format != "kiln.fusion-rule")
    return r.error("$.format", "expected \"kiln.fusion-rule\", got \"" + format + "\"");
  KILN_ASSIGN_OR_RETURN(const json *version, r.member(doc, root, "version"));
  if (*version != kFusionRuleVersion)
    return r.error("$.version", "unsupported version " + version->dump() + " (this kiln reads " +
                                    std::to_string(kFusionRuleVersion) + ")");

  FusionRule rule;
  rule.source = std::string(source);
  PassInfo &info = rule.info;
  KILN_ASSIGN_OR_RETURN(info.name, r.string(doc, root, "name"));
  if (!isPassName(info.name))
    return r.error("$.name", "'" + info.name +
                                 "' is not a pass name (a letter, then letters, digits or '_')");
  if (builtin.find(info.name))
    return r.error("$.name", "'" + info.name +
                                 "' is the name of a built-in pass; give the rule its own name");

  KILN_ASSIGN_OR_RETURN(std::string group, r.string(doc, root, "group"));
  auto g = parsePassGroup(group);
  if (!g || (*g != PassGroup::GraphFusion && *g != PassGroup::UBFusion))
    return r.error("$.group", "expected \"UBFusion\" or \"GraphFusion\", got \"" + group + "\"");
  info.group = *g;
  KILN_ASSIGN_OR_RETURN(const json *priority, r.member(doc, root, "priority"));
  KILN_ASSIGN_OR_RETURN(int64_t p, r.integer(*priority, "$.priority"));
  if (p < 0 || p > 1'000'000)
    return r.error("$.priority", "expected 0 to 1000000 (built-in rules use 4200-4290)");
  info.priority = static_cast<int>(p);
  KILN_ASSIGN_OR_RETURN(info.default_on, onOff(r, doc, "default"));
  if (doc.contains("may_disable")) {
    KILN_ASSIGN_OR_RETURN(info.may_disable, r.boolean(doc, root, "may_disable"));
  }
  if (!info.may_disable) {
    KILN_ASSIGN_OR_RETURN(info.required_because, r.string(doc, root, "required_because"));
  } else if (doc.contains("required_because")) {
    return r.error("$.required_because", "only a rule with \"may_disable\": false says why");
  }
  KILN_ASSIGN_OR_RETURN(info.description, r.string(doc, root, "description"));
  if (info.description.empty())
    return r.error("$.description", "say what the rule fuses and why");
  info.summary = firstSentence(info.description);

  KILN_ASSIGN_OR_RETURN(rule.kernel, r.string(doc, root, "kernel"));
  if (rule.kernel.empty())
    return r.error("$.kernel", "name the fused kernel");
  KILN_ASSIGN_OR_RETURN(std::string inter, r.string(doc, root, "intermediates"));
  auto i = parseIntermediates(inter);
  if (!i)
    return r.error("$.intermediates", "expected \"f32\" or \"storage\", got \"" + inter + "\"");
  rule.intermediates = *i;

  KILN_ASSIGN_OR_RETURN(const json *pattern, r.object(doc, root, "pattern"));
  KILN_ASSIGN_OR_RETURN(rule.pattern, parsePattern(r, *pattern, "$.pattern", ops));
  return rule;
}

Expected<FusionRule> parseFusionRuleText(std::string_view text, std::string_view source,
                                         const PassRegistry &builtin, const ops::OpRegistry &ops) {
  KILN_ASSIGN_OR_RETURN(json doc, parseJson(text, source));
  return parseFusionRule(doc, source, builtin, ops);
}

} // namespace kiln::passes::rules
