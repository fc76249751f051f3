#include "tokenizer/pre_tokenizer.h"

#include <nlohmann/json.hpp>

namespace kiln::tokenizer {
namespace {

// GPT-2's pattern, which ByteLevel applies itself when use_regex is true.
constexpr const char *kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Expected<SplitBehavior> parseBehavior(const std::string &name) {
  if (name == "Isolated")
    return SplitBehavior::Isolated;
  if (name == "Removed")
    return SplitBehavior::Removed;
  if (name == "MergedWithPrevious")
    return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext")
    return SplitBehavior::MergedWithNext;
  return Error("split behavior '" + name +
               "' is not supported (Isolated, Removed, MergedWithPrevious, MergedWithNext)");
}

std::string typeOf(const nlohmann::json &step) {
  return step.is_object() && step.contains("type") && step["type"].is_string()
             ? step["type"].get<std::string>()
             : std::string();
}

// Cuts `whole` at `matches` (inside it, in order) the way HF tokenizers'
// split does for `behavior`, appending the pieces to `out`.
void cut(Span whole, const std::vector<Span> &matches, SplitBehavior behavior,
         std::vector<Span> &out) {
  struct Part {
    Span span;
    bool match;
  };
  std::vector<Part> parts;
  size_t at = whole.begin;
  for (const Span &m : matches) {
    if (m.begin > at)
      parts.push_back({{at, m.begin}, false});
    parts.push_back({m, true});
    at = m.end;
  }
  if (at < whole.end)
    parts.push_back({{at, whole.end}, false});

  switch (behavior) {
  case SplitBehavior::Isolated:
    for (const Part &p : parts)
      out.push_back(p.span);
    return;
  case SplitBehavior::Removed:
    for (const Part &p : parts)
      if (!p.match)
        out.push_back(p.span);
    return;
  case SplitBehavior::MergedWithPrevious: {
    // A match joins the part before it, unless that is a match too.
    const size_t first = out.size();
    bool previous_match = false;
    for (const Part &p : parts) {
      if (p.match && !previous_match && out.size() > first)
        out.back().end = p.span.end;
      else
        out.push_back(p.span);
      previous_match = p.match;
    }
    return;
  }
  case SplitBehavior::MergedWithNext: {
    // A match joins the part after it, unless that is a match too.
    std::vector<Span> merged;
    bool next_match = false;
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
      if (it->match && !next_match && !merged.empty())
        merged.back().begin = it->span.begin;
      else
        merged.push_back(it->span);
      next_match = it->match;
    }
    out.insert(out.end(), merged.rbegin(), merged.rend());
    return;
  }
  }
}

} // namespace

Expected<PreTokenizer> PreTokenizer::fromJson(const nlohmann::json &config,
                                              const std::string &source) {
  PreTokenizer p;
  if (!config.is_null())
    KILN_RETURN_IF_ERROR(p.addStep(config, source + ": pre_tokenizer"));
  return p;
}

Status PreTokenizer::addStep(const nlohmann::json &step, const std::string &where) {
  const std::string type = typeOf(step);
  if (type == "Sequence") {
    if (!step.contains("pretokenizers") || !step["pretokenizers"].is_array())
      return Error(where + ": a Sequence needs a list 'pretokenizers'");
    for (size_t i = 0; i < step["pretokenizers"].size(); ++i)
      KILN_RETURN_IF_ERROR(
          addStep(step["pretokenizers"][i], where + ".pretokenizers[" + std::to_string(i) + "]"));
    return Status::ok();
  }
  if (type == "Split") {
    const auto &pattern = step.value("pattern", nlohmann::json());
    const bool literal = pattern.contains("String");
    const auto &text = literal ? pattern["String"] : pattern.value("Regex", nlohmann::json());
    if (!text.is_string())
      return Error(where + ": a Split needs a pattern {\"Regex\": ...} or {\"String\": ...}");
    if (step.value("invert", false))
      return Error(where + ": an inverted Split is not supported");
    auto behavior = parseBehavior(step.value("behavior", "Isolated"));
    if (!behavior)
      return Error(where + ": " + behavior.message());
    auto compiled = SplitPattern::compile(text.get<std::string>(), literal);
    if (!compiled)
      return Error(where + ": " + compiled.message());
    steps_.push_back({std::move(*compiled), *behavior});
    return Status::ok();
  }
  if (type == "ByteLevel") {
    if (step.value("add_prefix_space", false))
      return Error(where + ": ByteLevel with add_prefix_space is not supported");
    if (step.value("use_regex", true)) {
      KILN_ASSIGN_OR_RETURN(auto gpt2, SplitPattern::compile(kGpt2Pattern, false));
      steps_.push_back({std::move(gpt2), SplitBehavior::Isolated});
    }
    byte_level_ = true;
    return Status::ok();
  }
  return Error(where + ": pre-tokenizer type '" + (type.empty() ? "(none)" : type) +
               "' is not supported (Sequence, Split, ByteLevel)");
}

PreTokenizer::Scratch PreTokenizer::scratch() const {
  Scratch s;
  s.patterns.resize(steps_.size());
  return s;
}

Status PreTokenizer::split(std::string_view text, Scratch &scratch, std::vector<Span> &out) const {
  auto &pieces = scratch.pieces;
  pieces.assign(1, Span{0, text.size()});
  for (size_t i = 0; i < steps_.size(); ++i) {
    scratch.next.clear();
    for (const Span &piece : pieces) {
      scratch.matches.clear();
      KILN_RETURN_IF_ERROR(steps_[i].pattern.matches(
          text.substr(piece.begin, piece.end - piece.begin), scratch.patterns[i], scratch.matches));
      for (Span &m : scratch.matches) {
        m.begin += piece.begin;
        m.end += piece.begin;
      }
      cut(piece, scratch.matches, steps_[i].behavior, scratch.next);
    }
    std::swap(pieces, scratch.next);
  }
  for (const Span &piece : pieces)
    if (piece.end > piece.begin)
      out.push_back(piece);
  return Status::ok();
}

} // namespace kiln::tokenizer
