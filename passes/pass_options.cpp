#include "passes/pass_options.h"

#include <algorithm>
#include <cassert>
#include <charconv>

#include "passes/pass_registry.h"
#include "support/name_suggest.h"

namespace kiln::passes {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ')
    s.remove_suffix(1);
  return s;
}

bool parseInt(std::string_view text, int64_t &out) {
  text = trim(text);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

Error badValue(const PassOptionInfo &option, std::string_view text) {
  return Error("option '" + option.name + "' takes " + option.typeText() + ", not '" +
               std::string(text) + "'")
      .withCode(kErrBadPassOptionValue);
}

} // namespace

std::string PassOptionInfo::typeText() const {
  switch (type) {
  case PassOptionType::Bool:
    return "bool";
  case PassOptionType::Int:
    return "int";
  case PassOptionType::IntSet:
    return "int list";
  case PassOptionType::Choice: {
    std::string s;
    for (const std::string &c : choices)
      s += (s.empty() ? "" : "|") + c;
    return s;
  }
  }
  return "?";
}

Expected<PassOptionValue> parsePassOption(const PassOptionInfo &option, std::string_view text) {
  switch (option.type) {
  case PassOptionType::Bool:
    if (trim(text) == "true")
      return PassOptionValue(true);
    if (trim(text) == "false")
      return PassOptionValue(false);
    return badValue(option, text);
  case PassOptionType::Int: {
    int64_t v = 0;
    if (!parseInt(text, v))
      return badValue(option, text);
    return PassOptionValue(v);
  }
  case PassOptionType::IntSet: {
    std::set<int64_t> values;
    if (trim(text).empty())
      return PassOptionValue(values);
    for (std::string_view rest = text;;) {
      const size_t comma = rest.find(',');
      int64_t v = 0;
      if (!parseInt(rest.substr(0, comma), v) || v < 0)
        return badValue(option, text);
      values.insert(v);
      if (comma == std::string_view::npos)
        return PassOptionValue(values);
      rest.remove_prefix(comma + 1);
    }
  }
  case PassOptionType::Choice:
    if (std::find(option.choices.begin(), option.choices.end(), trim(text)) == option.choices.end())
      return badValue(option, text);
    return PassOptionValue(std::string(trim(text)));
  }
  return badValue(option, text);
}

std::string passOptionText(const PassOptionValue &value) {
  if (const bool *b = std::get_if<bool>(&value))
    return *b ? "true" : "false";
  if (const int64_t *i = std::get_if<int64_t>(&value))
    return std::to_string(*i);
  if (const auto *set = std::get_if<std::set<int64_t>>(&value)) {
    std::string s;
    for (int64_t v : *set)
      s += (s.empty() ? "" : ",") + std::to_string(v);
    return s;
  }
  return std::get<std::string>(value);
}

PassOptions::PassOptions(const std::vector<PassOptionInfo> &declared) {
  for (const PassOptionInfo &option : declared) {
    Expected<PassOptionValue> v = parsePassOption(option, option.default_value);
    assert(v && "a pass declares a default its option's type refuses");
    values_[option.name] = {v ? std::move(*v) : PassOptionValue(false), "built-in default"};
  }
}

Status PassOptions::set(const PassOptionInfo &option, std::string_view text, std::string source) {
  Expected<PassOptionValue> v = parsePassOption(option, text);
  if (!v)
    return v.status();
  Entry &entry = values_[option.name];
  entry.value = *v;
  entry.source = std::move(source);
  return Status::ok();
}

const PassOptionValue &PassOptions::value(std::string_view name) const {
  auto it = values_.find(name);
  assert(it != values_.end() && "a pass reads an option it does not declare");
  return it->second.value;
}

bool PassOptions::getBool(std::string_view name) const { return std::get<bool>(value(name)); }
int64_t PassOptions::getInt(std::string_view name) const { return std::get<int64_t>(value(name)); }
std::set<int64_t> PassOptions::getInts(std::string_view name) const {
  return std::get<std::set<int64_t>>(value(name));
}
std::string PassOptions::getChoice(std::string_view name) const {
  return std::get<std::string>(value(name));
}

std::string PassOptions::source(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? "built-in default" : it->second.source;
}

Expected<PassOptionSetting> parsePassOptionSetting(std::string_view text, std::string source) {
  const size_t dot = text.find('.'), eq = text.find('=');
  if (dot == std::string_view::npos || eq == std::string_view::npos || dot == 0 || eq < dot + 2)
    return Error(source + ": '" + std::string(text) +
                 "' is not PASS.OPTION=VALUE (e.g. RecomputePass.mode=full)")
        .withCode(kErrBadPassOptionValue);
  return PassOptionSetting{std::string(text.substr(0, dot)),
                           std::string(text.substr(dot + 1, eq - dot - 1)),
                           std::string(text.substr(eq + 1)), std::move(source)};
}

Expected<std::map<std::string, PassOptions>>
resolvePassOptions(const PassRegistry &registry, const std::vector<PassOptionSetting> &settings) {
  std::map<std::string, PassOptions> options;
  for (const Pass *pass : registry.ordered())
    if (!pass->info().options.empty())
      options.emplace(pass->info().name, PassOptions(pass->info().options));
  for (const PassOptionSetting &s : settings) {
    const Pass *pass = registry.find(s.pass);
    if (!pass)
      return Error(s.source + ": " + registry.unknownPassMessage(s.pass))
          .withCode(kErrUnknownPassOption);
    const std::vector<PassOptionInfo> &declared = pass->info().options;
    auto option = std::find_if(declared.begin(), declared.end(),
                               [&](const PassOptionInfo &o) { return o.name == s.option; });
    if (option == declared.end()) {
      std::vector<std::string> names;
      for (const PassOptionInfo &o : declared)
        names.push_back(o.name);
      const std::vector<std::string> near = nearestNames(s.option, names);
      return Error(s.source + ": " + s.pass + " has no option '" + s.option + "' (" +
                   (names.empty()  ? std::string("it has none")
                    : near.empty() ? "its options: " + joinNames(names)
                                   : "did you mean " + joinNames(near) + "?") +
                   ")")
          .withCode(kErrUnknownPassOption);
    }
    Status set = options[s.pass].set(*option, s.value, s.source);
    if (!set)
      return set.error().withContext(s.source + ": " + s.pass);
  }
  return options;
}

} // namespace kiln::passes
