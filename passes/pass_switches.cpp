#include "passes/pass_switches.h"

#include "support/file_io.h"
#include "support/json_reader.h"
#include "support/text_lines.h"

namespace kiln::passes {

using nlohmann::json;

namespace {

Expected<bool> onOff(const JsonReader &r, const json &v, const std::string &path) {
  if (v.is_string() && v.get<std::string>() == "on")
    return true;
  if (v.is_string() && v.get<std::string>() == "off")
    return false;
  return r.error(path, "expected \"on\" or \"off\", got " + v.dump());
}

} // namespace

Expected<SwitchLayer> parseSwitchObject(const json &doc, std::string_view source,
                                        const std::string &path) {
  JsonReader r(source);
  KILN_RETURN_IF_ERROR(r.checkKeys(doc, path, {"Switch"}));
  KILN_ASSIGN_OR_RETURN(const json *sw, r.object(doc, path, "Switch"));
  return parseSwitchGroups(*sw, source, JsonReader::child(path, "Switch"));
}

Expected<SwitchLayer> parseSwitchGroups(const json &groups, std::string_view source,
                                        const std::string &sw_path) {
  JsonReader r(source);
  if (!groups.is_object())
    return r.error(sw_path, "expected an object of pass groups");
  const json *sw = &groups;
  SwitchLayer layer;
  layer.source = std::string(source);
  for (auto g = sw->begin(); g != sw->end(); ++g) {
    const std::string g_path = JsonReader::child(sw_path, g.key());
    auto group = parsePassGroup(g.key());
    if (!group)
      return r.error(g_path, "unknown pass group (expected GraphFusion, UBFusion, Cleanup, "
                             "Precision or StepRewrite)");
    if (!g->is_object())
      return r.error(g_path, "expected an object of \"PassName\": \"on\" | \"off\"");
    for (auto p = g->begin(); p != g->end(); ++p) {
      const std::string p_path = JsonReader::child(g_path, p.key());
      KILN_ASSIGN_OR_RETURN(bool on, onOff(r, p.value(), p_path));
      if (p.key() == "ALL") {
        layer.all[*group] = on;
        continue;
      }
      layer.passes.push_back({p.key(), on});
      layer.locations.push_back(p_path);
      layer.listed_groups.push_back(*group);
    }
  }
  return layer;
}

Expected<SwitchLayer> parseSwitchLines(std::string_view text, std::string_view source) {
  SwitchLayer layer;
  layer.source = std::string(source);
  for (const ContentLine &line : contentLines(text)) {
    const int number = line.number;
    const std::string &content = line.text;
    const std::string where = std::string(source) + ": line " + std::to_string(number);
    size_t colon = content.rfind(':');
    if (colon == std::string::npos)
      return Error(where + ": expected 'PassName:off' or 'PassName:on', got '" + content + "'");
    std::string name = trim(content.substr(0, colon));
    std::string state = trim(content.substr(colon + 1));
    if (name.empty())
      return Error(where + ": the pass name is empty");
    if (state != "on" && state != "off")
      return Error(where + ": expected 'on' or 'off' after the colon, got '" + state + "'");
    if (name == "ALL")
      return Error(where + ": 'ALL' needs a group; use the JSON format "
                           "{\"Switch\": {\"UBFusion\": {\"ALL\": \"off\"}}}");
    layer.passes.push_back({name, state == "on"});
    layer.locations.push_back("line " + std::to_string(number));
    layer.listed_groups.push_back(std::nullopt);
  }
  return layer;
}

Expected<SwitchLayer> parseSwitchText(std::string_view text, std::string_view source) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') {
    KILN_ASSIGN_OR_RETURN(json doc, parseJson(text, source));
    return parseSwitchObject(doc, source);
  }
  return parseSwitchLines(text, source);
}

Expected<SwitchLayer> readSwitchFile(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(std::string text, readFile(path, kMaxJsonFileBytes));
  return parseSwitchText(text, path);
}

Expected<SwitchResolution> resolveSwitches(const PassRegistry &registry,
                                           const std::vector<SwitchLayer> &layers,
                                           bool allow_unknown) {
  SwitchResolution res;
  for (const Pass *p : registry.ordered()) {
    res.enabled[p->info().name] = p->info().default_on;
    res.decided_by[p->info().name] = "built-in default";
  }
  for (const SwitchLayer &layer : layers) {
    // "ALL" first, so that single passes of the same layer beat it.
    for (const auto &[group, on] : layer.all) {
      for (const Pass *p : registry.ordered()) {
        const PassInfo &info = p->info();
        // A step rewrite is switched by its own flag or by name, never by a group.
        if (info.group != group || info.group == PassGroup::StepRewrite ||
            (!on && !info.may_disable))
          continue;
        res.enabled[info.name] = on ? info.default_on : false;
        res.decided_by[info.name] = layer.source + " (" + std::string(passGroupName(group)) +
                                    " ALL " + (on ? "on" : "off") + ")";
      }
    }
    for (size_t i = 0; i < layer.passes.size(); ++i) {
      const auto &[name, on] = layer.passes[i];
      const std::string where = layer.source + ": " + layer.locations[i];
      const Pass *p = registry.find(name);
      if (!p) {
        if (allow_unknown && layer.cann_format) {
          res.warnings.push_back(where + ": kiln has no pass '" + name + "'; setting ignored");
          continue;
        }
        return Error(
            where + ": " + registry.unknownPassMessage(name) +
            (layer.cann_format ? "; --allow-unknown-passes accepts it with a warning" : ""));
      }
      const PassInfo &info = p->info();
      // CANN versions (and kiln) file some passes under the other fusion
      // group: the name decides, the group it is listed under does not.
      if (layer.listed_groups[i] && *layer.listed_groups[i] != info.group)
        res.notes.push_back(
            where + ": " + name + " is a " + std::string(passGroupName(info.group)) +
            " pass in kiln, listed under " + std::string(passGroupName(*layer.listed_groups[i])) +
            "; the setting applies to it");
      if (!on && !info.may_disable)
        return Error(where + ": pass '" + name + "' may not be disabled: " + info.required_because);
      res.enabled[name] = on;
      res.decided_by[name] = where;
    }
  }
  return res;
}

} // namespace kiln::passes
