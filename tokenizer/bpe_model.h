// tokenizer.json's "model" of type BPE: the vocabulary and the ranked
// merges. Two kinds: byte-level (Qwen2/2.5/3, Llama 3: the vocabulary is
// read out of the byte-level alphabet into raw bytes, a piece starts as its
// bytes) and SentencePiece-style (Llama 2: a piece starts as its characters,
// a character outside the vocabulary as its "<0xNN>" byte tokens with
// byte_fallback, or as the unknown token). A piece is encoded by merging,
// again and again, the adjacent pair of lowest rank (the leftmost among
// equals), as Hugging Face's tokenizers do; a heap keeps that O(n log n) for
// pieces of any length.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "support/error.h"

namespace kiln::tokenizer {

class BpeModel {
public:
  // `source` names the file in errors; `byte_level`: the vocabulary is
  // written in the byte-level alphabet (the pre-tokenizer has a ByteLevel step).
  static Expected<BpeModel> fromJson(const nlohmann::json &model, const std::string &source,
                                     bool byte_level);

  // Recently encoded pieces, per thread.
  struct Cache {
    std::unordered_map<std::string, std::vector<uint32_t>> pieces;
  };

  // Appends the ids of `piece` (raw bytes) to `out`.
  void encode(std::string_view piece, Cache &cache, std::vector<uint32_t> &out) const;

  // One past the largest id in the vocabulary.
  int64_t idLimit() const { return static_cast<int64_t>(bytes_of_.size()); }
  // The text of token `id` (byte-level: its raw bytes); empty for an id the
  // vocabulary skips.
  std::string_view bytesOf(uint32_t id) const {
    return id < bytes_of_.size() ? std::string_view(bytes_of_[id]) : std::string_view();
  }
  // The id of a token's text (byte-level: its raw bytes), or -1.
  int64_t idOf(std::string_view bytes) const;

private:
  // The symbols a piece starts as, before any merge.
  void initialSymbols(std::string_view piece, std::vector<uint32_t> &out) const;
  void merge(std::string_view piece, std::vector<uint32_t> &out) const;

  struct Merge {
    uint32_t rank, id;
  };
  static uint64_t pairKey(uint32_t a, uint32_t b) { return uint64_t{a} << 32 | b; }

  std::unordered_map<std::string, uint32_t> ids_; // raw bytes -> id
  std::vector<std::string> bytes_of_;             // id -> raw bytes
  uint32_t byte_ids_[256] = {};
  std::unordered_map<uint64_t, Merge> merges_;
  bool ignore_merges_ = false;
  bool byte_level_ = true;
  bool byte_fallback_ = false; // SentencePiece-style: byte_ids_ are the "<0xNN>" tokens
  int64_t unk_id_ = -1;
  bool fuse_unk_ = false;
};

} // namespace kiln::tokenizer
