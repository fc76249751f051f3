// tokenizer.json's "model" of type BPE, byte-level: the vocabulary (read
// out of the byte-level alphabet into raw bytes) and the ranked merges.
// A piece is encoded by merging, again and again, the adjacent pair of
// lowest rank (the leftmost among equals), as Hugging Face's tokenizers do;
// a heap keeps that O(n log n) for pieces of any length.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ir/error.h"

namespace kiln::tokenizer {

class BpeModel {
public:
  // `source` names the file in errors.
  static Expected<BpeModel> fromJson(const nlohmann::json &model, const std::string &source);

  // Recently encoded pieces, per thread.
  struct Cache {
    std::unordered_map<std::string, std::vector<uint32_t>> pieces;
  };

  // Appends the ids of `piece` (raw bytes) to `out`.
  void encode(std::string_view piece, Cache &cache, std::vector<uint32_t> &out) const;

  // One past the largest id in the vocabulary.
  int64_t idLimit() const { return static_cast<int64_t>(bytes_of_.size()); }
  // The raw bytes of token `id`; empty for an id the vocabulary skips.
  std::string_view bytesOf(uint32_t id) const {
    return id < bytes_of_.size() ? std::string_view(bytes_of_[id]) : std::string_view();
  }
  // The id of a token's raw bytes, or -1.
  int64_t idOf(std::string_view bytes) const;

private:
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
};

} // namespace kiln::tokenizer
