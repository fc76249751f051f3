#include "tokenizer/normalizer.h"

#include <nlohmann/json.hpp>

namespace kiln::tokenizer {
namespace {

std::string typeOf(const nlohmann::json &j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : std::string();
}

} // namespace

Expected<Normalizer> Normalizer::fromJson(const nlohmann::json &config, const std::string &where) {
  Normalizer n;
  if (!config.is_null())
    KILN_RETURN_IF_ERROR(n.add(config, where));
  return n;
}

Status Normalizer::add(const nlohmann::json &config, const std::string &where) {
  const std::string type = typeOf(config);
  if (type == "Sequence") {
    const auto &list = config.value("normalizers", nlohmann::json::array());
    for (size_t i = 0; i < list.size(); ++i)
      KILN_RETURN_IF_ERROR(add(list[i], where + ".normalizers[" + std::to_string(i) + "]"));
    return Status::ok();
  }
  Step step;
  if (auto form = parseNormalForm(type)) {
    step.form = *form;
  } else if (type == "Prepend" && config.contains("prepend") && config["prepend"].is_string()) {
    step.kind = Step::Prepend;
    step.text = config["prepend"].get<std::string>();
  } else if (type == "Replace" && config.contains("content") && config["content"].is_string()) {
    step.kind = Step::Replace;
    step.text = config["content"].get<std::string>();
    const auto &pattern = config.value("pattern", nlohmann::json());
    const bool literal = pattern.contains("String");
    const auto &text = literal ? pattern["String"] : pattern.value("Regex", nlohmann::json());
    if (!text.is_string() || text.get<std::string>().empty())
      return Error(where + ": Replace needs a pattern {\"String\": ...} or {\"Regex\": ...}");
    auto compiled = SplitPattern::compile(text.get<std::string>(), literal);
    if (!compiled)
      return Error(where + ": " + compiled.message());
    step.pattern = std::move(*compiled);
  } else {
    return Error(where + ": normalizer type '" + (type.empty() ? "(none)" : type) +
                 "' is not supported (NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence)");
  }
  steps_.push_back(std::move(step));
  return Status::ok();
}

Normalizer::Scratch Normalizer::scratch() const {
  Scratch s;
  s.patterns.resize(steps_.size());
  return s;
}

Expected<std::string> Normalizer::apply(std::string text, Scratch &scratch) const {
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step &step = steps_[i];
    switch (step.kind) {
    case Step::Form: {
      KILN_ASSIGN_OR_RETURN(text, normalize(text, step.form));
      break;
    }
    case Step::Prepend:
      text.insert(0, step.text);
      break;
    case Step::Replace: {
      scratch.matches.clear();
      KILN_RETURN_IF_ERROR(step.pattern.matches(text, scratch.patterns[i], scratch.matches));
      if (scratch.matches.empty())
        break;
      std::string out;
      out.reserve(text.size());
      size_t at = 0;
      for (const Span &m : scratch.matches) {
        out.append(text, at, m.begin - at).append(step.text);
        at = m.end;
      }
      text = out.append(text, at, std::string::npos);
      break;
    }
    }
  }
  return text;
}

} // namespace kiln::tokenizer
