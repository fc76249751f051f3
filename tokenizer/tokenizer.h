// A model's tokenizer as its Hugging Face folder ships it: tokenizer.json
// (BPE: byte-level as Qwen2, Qwen2.5, Qwen3 and Llama 3 have it, or
// SentencePiece-style with byte fallback as Llama 2 has it) and, beside it,
// tokenizer_config.json (which token ends a document). Encoding runs
//   added tokens -> normalizer (ICU) -> pre-tokenizer (PCRE2) -> BPE
// -> post-processor, decoding the way back through the decoder; what kiln
// does not implement is refused by name when the file is read.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "support/error.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace kiln::tokenizer {

class Tokenizer {
public:
  // `path`: a model folder (its tokenizer.json) or a tokenizer.json file.
  static Expected<Tokenizer> load(const std::string &path);
  // From the files' text; `source` names tokenizer.json in errors, and
  // `config` (tokenizer_config.json's text, may be empty) is read beside it.
  static Expected<Tokenizer> parse(std::string_view json, std::string_view config,
                                   const std::string &source);

  // What one thread needs to encode: match state and a piece cache.
  struct Session {
    Normalizer::Scratch normalizer;
    PreTokenizer::Scratch pre;
    BpeModel::Cache cache;
    std::vector<Segment> segments;
    std::vector<Span> pieces;
  };
  Session session() const;

  // The ids of `text` (any bytes: ill-formed UTF-8 is read as U+FFFD);
  // `add_special_tokens` applies the post-processor (Llama 3's BOS).
  Expected<std::vector<uint32_t>> encode(std::string_view text, bool add_special_tokens,
                                         Session &session) const;
  Expected<std::vector<uint32_t>> encode(std::string_view text, bool add_special_tokens) const;

  // Back to text; special tokens are left out with `skip_special_tokens`;
  // with tokenizer_config.json's clean_up_tokenization_spaces, the spaces
  // before punctuation and English contractions go, as Hugging Face's
  // decode does. Ids past the vocabulary are an error.
  Expected<std::string> decode(std::span<const uint32_t> ids, bool skip_special_tokens) const;

  // Ids are below this: the vocabulary and the added tokens.
  int64_t vocabSize() const { return vocab_size_; }
  // The token that ends a document (tokenizer_config.json's eos_token).
  std::optional<uint32_t> eosId() const { return eos_id_; }
  const std::string &eosToken() const { return eos_token_; }
  // The id of a token given by its text (an added token or a vocabulary entry).
  std::optional<uint32_t> tokenId(std::string_view content) const;
  const std::string &source() const { return source_; }

private:
  static Expected<Tokenizer> parseUnchecked(std::string_view json, std::string_view config,
                                            const std::string &source);
  Status readPostProcessor(const nlohmann::json &config);

  std::string source_;
  AddedTokens added_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  BpeModel model_;
  Decoder decoder_;
  std::vector<uint32_t> prefix_, suffix_; // the post-processor's special tokens
  int64_t vocab_size_ = 0;
  std::optional<uint32_t> eos_id_;
  std::string eos_token_;
  bool clean_up_spaces_ = false;
};

} // namespace kiln::tokenizer
