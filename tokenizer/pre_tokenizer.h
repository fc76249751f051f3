// tokenizer.json's "pre_tokenizer": how normalized text is cut into the
// pieces BPE encodes one at a time. Byte-level BPE needs these steps:
//   Split {pattern, behavior}   cut at a regular expression's matches
//   ByteLevel {use_regex}       the byte-level alphabet (with use_regex,
//                               GPT-2's own pattern first)
//   Sequence [...]              the steps in order
// Pieces stay raw bytes: the vocabulary was mapped out of the byte-level
// alphabet when it was read (bpe_model.h), so the ByteLevel step has no
// mapping of its own to do. None at all (Llama 2's tokenizer.json): the
// text is one piece.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "support/error.h"
#include "tokenizer/split_pattern.h"

namespace kiln::tokenizer {

// HF tokenizers' SplitDelimiterBehavior: what becomes of a match.
enum class SplitBehavior { Isolated, Removed, MergedWithPrevious, MergedWithNext };

class PreTokenizer {
public:
  // `source` names the file in errors; null is no pre-tokenizer.
  static Expected<PreTokenizer> fromJson(const nlohmann::json &config, const std::string &source);

  // Whether a ByteLevel step is among the steps: the vocabulary is written
  // in the byte-level alphabet.
  bool byteLevel() const { return byte_level_; }

  struct Scratch {
    std::vector<SplitPattern::Scratch> patterns; // one per Split step
    std::vector<Span> matches, pieces, next;
  };
  Scratch scratch() const;

  // The pieces of `text` as byte ranges, in order, appended to `out`.
  Status split(std::string_view text, Scratch &scratch, std::vector<Span> &out) const;

private:
  struct Step {
    SplitPattern pattern;
    SplitBehavior behavior = SplitBehavior::Isolated;
  };
  Status addStep(const nlohmann::json &step, const std::string &where);
  std::vector<Step> steps_;
  bool byte_level_ = false;
};

} // namespace kiln::tokenizer
