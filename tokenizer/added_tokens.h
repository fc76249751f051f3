// tokenizer.json's "added_tokens" (<|endoftext|>, <|im_start|>, <think>,
// ...): found in the raw text before anything else runs, leftmost and
// longest first, as Hugging Face's tokenizers do; the text between them is
// normalized, pre-tokenized and BPE-encoded.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "support/error.h"

namespace kiln::tokenizer {

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = false;
  bool lstrip = false, rstrip = false; // swallows the whitespace on that side
};

// A stretch of text: an added token (id >= 0) or text to encode (id < 0).
struct Segment {
  std::string_view text;
  int64_t id = -1;
};

class AddedTokens {
public:
  static Expected<AddedTokens> fromJson(const nlohmann::json &tokens, const std::string &source);

  // Cuts `text` at every added token, appending the segments to `out`.
  void split(std::string_view text, std::vector<Segment> &out) const;

  const std::vector<AddedToken> &tokens() const { return tokens_; }
  const AddedToken *find(std::string_view content) const;
  const AddedToken *byId(uint32_t id) const;

private:
  std::vector<AddedToken> tokens_;
  // Per first byte, the tokens starting with it, longest first.
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
};

} // namespace kiln::tokenizer
