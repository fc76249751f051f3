// tokenizer.json's "decoder": how token texts become text again. ByteLevel
// (the byte-level alphabet back to bytes) for byte-level BPE; for
// SentencePiece-style vocabularies (Llama 2) a Sequence of Replace ("▁" to a
// space), ByteFallback ("<0x0A>" tokens to their bytes), Fuse and Strip.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "support/error.h"

namespace kiln::tokenizer {

class Decoder {
public:
  static Expected<Decoder> fromJson(const nlohmann::json &config, const std::string &where);

  // ByteLevel: the tokenizer decodes raw bytes itself (tokenizer.cpp).
  bool byteLevel() const { return byte_level_; }

  // The text of `tokens` (their vocabulary texts, added tokens as written)
  // through the steps, joined.
  std::string decode(std::vector<std::string> tokens) const;

private:
  struct Step {
    enum Kind { Replace, ByteFallback, Fuse, Strip } kind = Fuse;
    std::string from, to; // Replace; Strip's `from` is the character stripped
    int start = 0, stop = 0;
  };
  Status add(const nlohmann::json &config, const std::string &where);
  bool byte_level_ = false;
  std::vector<Step> steps_;
};

} // namespace kiln::tokenizer
