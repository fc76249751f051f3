// A small byte-level BPE tokenizer.json for the tokenizer fuzzer and its
// seeds: the 256 bytes, a few merges, two added tokens, NFC and Qwen's
// pre-tokenizer pattern.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"

namespace kiln::fuzz {

inline std::string smallTokenizerJson() {
  auto mapped = [](const std::string &bytes) {
    std::string s;
    for (char c : bytes)
      s += tokenizer::byteLevelChar(static_cast<uint8_t>(c));
    return s;
  };
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b)
    vocab[mapped(std::string(1, static_cast<char>(b)))] = b;
  nlohmann::json merges = nlohmann::json::array();
  for (const auto &[a, b] : {std::pair<std::string, std::string>{"t", "h"},
                             {"th", "e"},
                             {" ", "the"},
                             {"\xE4", "\xB8"},
                             {"\xE4\xB8", "\x96"},
                             {"a", "a"},
                             {"aa", "aa"}}) {
    if (!vocab.contains(mapped(a + b)))
      vocab[mapped(a + b)] = vocab.size();
    merges.push_back(nlohmann::json::array({mapped(a), mapped(b)}));
  }
  const size_t n = vocab.size();
  return nlohmann::json{
      {"added_tokens",
       {{{"id", n}, {"content", "<|end|>"}, {"special", true}},
        {{"id", n + 1}, {"content", "<t>"}, {"lstrip", true}, {"rstrip", true}}}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern",
            {{"Regex", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                       "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
           {"behavior", "Isolated"}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}}
      .dump();
}

} // namespace kiln::fuzz
