// tokenizer.json's "normalizer": what is done to the text between added
// tokens before it is cut into pieces. Unicode normal forms (ICU: NFC, NFD,
// NFKC, NFKD), Prepend and Replace (Llama 2's "▁" for spaces), in a
// Sequence or alone.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "support/error.h"
#include "tokenizer/split_pattern.h"
#include "tokenizer/unicode_text.h"

namespace kiln::tokenizer {

class Normalizer {
public:
  // `where` names the file and key in errors; null is no normalizer.
  static Expected<Normalizer> fromJson(const nlohmann::json &config, const std::string &where);

  struct Scratch {
    std::vector<SplitPattern::Scratch> patterns; // one per step
    std::vector<Span> matches;
  };
  Scratch scratch() const;

  // `text` (valid UTF-8) normalized.
  Expected<std::string> apply(std::string text, Scratch &scratch) const;

private:
  struct Step {
    enum Kind { Form, Prepend, Replace } kind = Form;
    NormalForm form = NormalForm::NFC;
    std::string text; // Prepend's prefix, Replace's content
    SplitPattern pattern;
  };
  Status add(const nlohmann::json &config, const std::string &where);
  std::vector<Step> steps_;
};

} // namespace kiln::tokenizer
