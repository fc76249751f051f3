// The tokenizer against small tokenizer.json files written here: BPE against
// a brute-force merger (every pair rescanned after each merge), the
// pre-tokenizer's split behaviors, added tokens, the post-processor, and a
// clear error for each thing kiln does not read.
#include <map>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_text.h"

namespace kiln::tokenizer {
namespace {

using nlohmann::json;

std::string mapped(std::string_view bytes) {
  std::string s;
  for (char c : bytes)
    s += byteLevelChar(static_cast<uint8_t>(c));
  return s;
}

// A byte-level tokenizer: the 256 bytes, then each merge's join, in order.
json tokenizerJson(const std::vector<std::pair<std::string, std::string>> &merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b)
    vocab[mapped(std::string(1, static_cast<char>(b)))] = b;
  json merge_list = json::array();
  for (const auto &[a, b] : merges) {
    if (!vocab.contains(mapped(a + b)))
      vocab[mapped(a + b)] = vocab.size();
    merge_list.push_back(json::array({mapped(a), mapped(b)}));
  }
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             json::array(
                 {{{"type", "Split"},
                   {"pattern", {{"Regex", R"( ?\p{L}+| ?\p{N}|\s+|[^\s\p{L}\p{N}]+)"}}},
                   {"behavior", "Isolated"}},
                  {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
          {"post_processor", {{"type", "ByteLevel"}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
}

Tokenizer parsed(const json &j, const json &config = json()) {
  auto t = Tokenizer::parse(j.dump(), config.is_null() ? "" : config.dump(), "tok/tokenizer.json");
  EXPECT_TRUE(t) << t.message();
  return std::move(*t);
}

std::string errorOf(const json &j) {
  auto t = Tokenizer::parse(j.dump(), "", "tok/tokenizer.json");
  return t ? "(no error)" : t.message();
}

// The brute force: find the lowest-ranked adjacent pair anywhere, merge its
// leftmost occurrence, repeat.
std::vector<std::string>
bruteForce(const std::string &piece,
           const std::vector<std::pair<std::string, std::string>> &merges) {
  std::map<std::pair<std::string, std::string>, size_t> rank;
  for (size_t i = 0; i < merges.size(); ++i)
    rank.emplace(merges[i], i);
  std::vector<std::string> symbols;
  for (char c : piece)
    symbols.emplace_back(1, c);
  for (;;) {
    size_t best = SIZE_MAX, at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = rank.find({symbols[i], symbols[i + 1]});
      if (it != rank.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == SIZE_MAX)
      return symbols;
    symbols[at] += symbols[at + 1];
    symbols.erase(symbols.begin() + at + 1);
  }
}

TEST(Tokenizer, BpeMergesLikeTheBruteForceOnRandomText) {
  // Merges over a small alphabet, so long random words merge deeply.
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"},    {"b", "a"},   {"ab", "a"},  {"a", "a"},  {"aa", "b"},
      {"c", "ab"},   {"b", "c"},   {"ab", "ab"}, {"c", "c"},  {"bc", "a"},
      {"abab", "c"}, {"cc", "cc"}, {"aa", "aa"}, {"ba", "c"}, {"c", "abab"}};
  Tokenizer t = parsed(tokenizerJson(merges));
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string word;
    const int length = 1 + static_cast<int>(rng() % (trial < 280 ? 24 : 3000));
    for (int i = 0; i < length; ++i)
      word.push_back("abc"[rng() % 3]);
    auto ids = t.encode(word, false);
    ASSERT_TRUE(ids) << ids.message();
    std::vector<std::string> got;
    for (uint32_t id : *ids) {
      auto text = t.decode(std::vector<uint32_t>{id}, false);
      ASSERT_TRUE(text);
      got.push_back(*text);
    }
    ASSERT_EQ(got, bruteForce(word, merges)) << word;
  }
}

TEST(Tokenizer, DecodesWhatItEncodes) {
  Tokenizer t = parsed(tokenizerJson({{"t", "h"}, {"th", "e"}, {" ", "the"}}));
  const std::string text = "the cat, the 42 dogs\n\n\t über 你好 😀";
  auto ids = t.encode(text, false);
  ASSERT_TRUE(ids);
  auto back = t.decode(*ids, false);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, text);
  EXPECT_FALSE(t.decode(std::vector<uint32_t>{100000}, false)) << "an id past the vocabulary";
}

TEST(Tokenizer, IllFormedUtf8ReadsAsReplacementCharacters) {
  // One U+FFFD per maximal subpart: a lone continuation byte, a sequence cut
  // short, an encoded surrogate (each byte), a byte that never starts one.
  size_t replaced = 0;
  EXPECT_EQ(toValidUtf8("a\x80"
                        "b\xE4\xBD"
                        "c\xED\xA0\x80"
                        "d\xFF",
                        &replaced),
            "a\uFFFD"
            "b\uFFFD"
            "c\uFFFD\uFFFD\uFFFD"
            "d\uFFFD");
  EXPECT_EQ(replaced, 6u);
  EXPECT_EQ(illFormedUtf8Sequences("a\x80"
                                   "b\xE4\xBD"
                                   "c"),
            2u);
  Tokenizer t = parsed(tokenizerJson({}));
  auto bad = t.encode("x\xC3", false), good = t.encode("x\uFFFD", false);
  ASSERT_TRUE(bad && good);
  EXPECT_EQ(*bad, *good);
}

TEST(Tokenizer, NormalizesBeforeSplitting) {
  json j = tokenizerJson({});
  j["normalizer"] = {{"type", "NFC"}};
  Tokenizer t = parsed(j);
  auto decomposed = t.encode("e\u0301", false), composed = t.encode("\u00e9", false);
  ASSERT_TRUE(decomposed && composed);
  EXPECT_EQ(*decomposed, *composed);
  j["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(errorOf(j).find("normalizer type 'Lowercase' is not supported"), std::string::npos);
}

TEST(Tokenizer, AddedTokensAreFoundLeftmostLongestBeforeAnythingElse) {
  json j = tokenizerJson({});
  const int64_t base = j["model"]["vocab"].size();
  j["added_tokens"] = json::array({
      {{"id", base}, {"content", "<|end|>"}, {"special", true}},
      {{"id", base + 1}, {"content", "<|end|>x"}, {"special", true}},
      {{"id", base + 2},
       {"content", "<tag>"},
       {"special", false},
       {"lstrip", true},
       {"rstrip", true}},
  });
  json config = {{"eos_token", {{"content", "<|end|>"}}}};
  Tokenizer t = parsed(j, config);
  EXPECT_EQ(t.vocabSize(), base + 3);
  EXPECT_EQ(t.eosId(), std::optional<uint32_t>(base));
  auto ids = t.encode("a<|end|>x<|end|>b  <tag>  c", false);
  ASSERT_TRUE(ids);
  const std::vector<uint32_t> want = {'a', uint32_t(base + 1), uint32_t(base),
                                      'b', uint32_t(base + 2), 'c'};
  EXPECT_EQ(*ids, want);
  auto text = t.decode(*ids, true);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "ab<tag>c") << "special tokens skipped, the others kept";
}

TEST(Tokenizer, TemplatePostProcessorAddsBosLikeLlama3) {
  json j = tokenizerJson({});
  const int64_t bos = j["model"]["vocab"].size();
  j["added_tokens"] =
      json::array({{{"id", bos}, {"content", "<|begin_of_text|>"}, {"special", true}}});
  j["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       json::array({{{"type", "ByteLevel"}},
                    {{"type", "TemplateProcessing"},
                     {"single", json::array({{{"SpecialToken", {{"id", "<|begin_of_text|>"}}}},
                                             {{"Sequence", {{"id", "A"}}}}})},
                     {"special_tokens",
                      {{"<|begin_of_text|>", {{"id", "<|begin_of_text|>"}, {"ids", {bos}}}}}}}})}};
  j["model"]["ignore_merges"] = true;
  Tokenizer t = parsed(j);
  auto with = t.encode("hi", true), without = t.encode("hi", false);
  ASSERT_TRUE(with && without);
  EXPECT_EQ(*with, (std::vector<uint32_t>{uint32_t(bos), 'h', 'i'}));
  EXPECT_EQ(*without, (std::vector<uint32_t>{'h', 'i'}));
}

TEST(Tokenizer, IgnoreMergesTakesAWholeWordThatIsAToken) {
  // "abc" is in the vocabulary, but no merge path leads to it from "bc".
  json j = tokenizerJson({{"b", "c"}, {"a", "b"}, {"ab", "c"}});
  j["model"]["merges"] = json::array({json::array({"b", "c"})});
  auto plain = Tokenizer::parse(j.dump(), "", "t");
  ASSERT_TRUE(plain);
  auto merged = plain->encode("abc", false);
  ASSERT_TRUE(merged);
  EXPECT_EQ(merged->size(), 2u) << "a + bc";
  j["model"]["ignore_merges"] = true;
  auto whole = Tokenizer::parse(j.dump(), "", "t");
  ASSERT_TRUE(whole);
  auto ids = whole->encode("abc", false);
  ASSERT_TRUE(ids);
  EXPECT_EQ(ids->size(), 1u);
}

TEST(Tokenizer, SplitBehaviorsCutLikeHuggingFace) {
  auto piecesOf = [](const std::string &behavior, const std::string &text) {
    json j = tokenizerJson({});
    j["pre_tokenizer"]["pretokenizers"][0] = {
        {"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}};
    Tokenizer t = parsed(j);
    auto ids = t.encode(text, false);
    EXPECT_TRUE(ids);
    // With no merges each byte is its own id: read the pieces back from a
    // second encoding with a separator between pieces instead.
    return ids ? ids->size() : 0;
  };
  EXPECT_EQ(piecesOf("Isolated", "a-b--c"), 6u);
  EXPECT_EQ(piecesOf("Removed", "a-b--c"), 3u) << "the dashes dropped";
  json j = tokenizerJson({});
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Contiguous";
  EXPECT_NE(errorOf(j).find("split behavior 'Contiguous' is not supported"), std::string::npos);
  EXPECT_EQ(errorOf(j).rfind("tok/tokenizer.json: pre_tokenizer.pretokenizers[0]: ", 0), 0u)
      << "names the file and the step (found by the fuzzer): " << errorOf(j);
}

TEST(Tokenizer, MergedBehaviorsKeepMatchesWithTheirNeighbours) {
  // A merge of "-" with a letter exists only as a piece of its own: if the
  // dash is merged with its neighbour, "a-" is one piece and BPE can join it.
  for (const auto &[behavior, text, count] :
       std::vector<std::tuple<std::string, std::string, size_t>>{{"MergedWithPrevious", "a-b-", 2},
                                                                 {"MergedWithNext", "-a-b", 2},
                                                                 {"Isolated", "a-b-", 4}}) {
    json j = tokenizerJson({{"a", "-"}, {"b", "-"}, {"-", "a"}, {"-", "b"}});
    j["pre_tokenizer"]["pretokenizers"][0] = {
        {"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}};
    Tokenizer t = parsed(j);
    auto ids = t.encode(text, false);
    ASSERT_TRUE(ids);
    EXPECT_EQ(ids->size(), count) << behavior;
  }
}

TEST(Tokenizer, LongRunsEncodeInLinearishTime) {
  // 4 MB of one letter: one piece, merged by the heap, not rescanned per merge.
  Tokenizer t = parsed(tokenizerJson({{"a", "a"}, {"aa", "aa"}, {"aaaa", "aaaa"}}));
  auto ids = t.encode(std::string(size_t{4} << 20, 'a'), false);
  ASSERT_TRUE(ids);
  EXPECT_EQ(ids->size(), (size_t{4} << 20) / 8);
}

// Llama 2's kind: characters, "▁" for spaces, a character outside the
// vocabulary as its "<0xNN>" tokens, and the decoder chain back.
json sentencePieceJson(bool byte_fallback) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  for (const char *t : {"\u2581", "a", "b", "c", "\u2581a", "ab", "\u2581ab", "\u00e9"})
    vocab[t] = vocab.size();
  return {
      {"added_tokens", json::array({{{"id", 0}, {"content", "<unk>"}, {"special", true}},
                                    {{"id", 1}, {"content", "<s>"}, {"special", true}},
                                    {{"id", 2}, {"content", "</s>"}, {"special", true}}})},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         json::array(
             {{{"type", "Prepend"}, {"prepend", "\u2581"}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}})}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         json::array({{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}})},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}},
                      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", json::array({"\u2581 a", "a b", "\u2581a b", "\u2581 ab"})},
        {"unk_token", "<unk>"},
        {"fuse_unk", true},
        {"byte_fallback", byte_fallback}}}};
}

TEST(Tokenizer, SentencePieceStyleVocabulariesFallBackToBytes) {
  Tokenizer t = parsed(sentencePieceJson(true));
  const uint32_t space_ab = t.tokenId("\u2581ab").value(), c = t.tokenId("c").value(),
                 e_acute = t.tokenId("\u00e9").value(), space = t.tokenId("\u2581").value();
  // "ab" merges with its "▁"; "ç" (C3 A7) is not in the vocabulary: its bytes.
  auto ids = t.encode("ab c\u00e9\u00e7", true);
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, (std::vector<uint32_t>{1, space_ab, space, c, e_acute, 3 + 0xC3, 3 + 0xA7}));
  auto text = t.decode(*ids, true);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "ab c\u00e9\u00e7") << "the leading space stripped, the bytes read back";
  // Without byte_fallback an unknown character is <unk>, runs of them one.
  Tokenizer unk = parsed(sentencePieceJson(false));
  auto unknown = unk.encode("a\u00e7\u00e7b", false);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(*unknown,
            (std::vector<uint32_t>{unk.tokenId("\u2581a").value(), 0, unk.tokenId("b").value()}));
}

TEST(Tokenizer, RefusesWhatItDoesNotReadByName) {
  struct Case {
    std::function<void(json &)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](json &j) { j["model"]["type"] = "WordPiece"; },
       "model type 'WordPiece' is not supported"},
      {[](json &j) { j["model"]["type"] = "Unigram"; }, "model type 'Unigram' is not supported"},
      {[](json &j) {
         j["decoder"] = {{"type", "Fuse"}};
       },
       "a byte-level pre-tokenizer needs the ByteLevel decoder"},
      {[](json &j) { j["model"]["dropout"] = 0.1; }, "dropout"},
      {[](json &j) { j["model"]["vocab"].erase(mapped("\x07")); }, "no token for byte 7"},
      {[](json &j) { j["model"]["merges"].push_back("a"); }, "merges[0]"},
      {[](json &j) {
         j["model"]["merges"].push_back(json::array({"x", "y"}));
       },
       "not in the vocabulary"},
      {[](json &j) { j["model"]["vocab"]["\xE2\x82\xAC"] = 999; }, "byte-level alphabet"},
      {[](json &j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}};
       },
       "pre-tokenizer type 'Metaspace' is not supported"},
      {[](json &j) { j["pre_tokenizer"]["pretokenizers"].erase(1); },
       "neither byte-level nor has byte_fallback needs an unk_token"},
      {[](json &j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(a"; },
       "does not compile"},
      {[](json &j) {
         j["decoder"] = {{"type", "Metaspace"}};
       },
       "decoder type 'Metaspace'"},
      {[](json &j) {
         j["post_processor"] = {{"type", "BertProcessing"}};
       },
       "post-processor type 'BertProcessing'"},
      {[](json &j) {
         j["added_tokens"] = json::array({{{"id", 300}, {"content", "x"}, {"single_word", true}}});
       },
       "single_word"},
      {[](json &j) { j.erase("model"); }, "not a tokenizer.json"},
      // Values of the wrong type (found by the fuzzer: nlohmann's typed
      // accessors throw on them).
      {[](json &j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = 5; }, "wrong type"},
      {[](json &j) { j["model"]["ignore_merges"] = "yes"; }, "wrong type"},
      // An id the vocabulary skips (found by the fuzzer: decoding what the
      // post-processor added failed).
      {[](json &j) {
         j["added_tokens"] = json::array({{{"id", 500}, {"content", "<e>"}, {"special", true}}});
         j["post_processor"] = {{"type", "TemplateProcessing"},
                                {"single", json::array({{{"SpecialToken", {{"id", "<s>"}}}},
                                                        {{"Sequence", {{"id", "A"}}}}})},
                                {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {400}}}}}}};
       },
       "has id 400, which is not a token of the vocabulary"},
      {[](json &j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = 1; }, "wrong type"},
  };
  for (const Case &c : cases) {
    json j = tokenizerJson({});
    c.edit(j);
    const std::string message = errorOf(j);
    EXPECT_NE(message.find(c.message), std::string::npos) << c.message << " | " << message;
    EXPECT_EQ(message.rfind("tok/tokenizer.json", 0), 0u) << "names the file: " << message;
  }
  auto garbage = Tokenizer::parse("{not json", "", "tok/tokenizer.json");
  ASSERT_FALSE(garbage);
  EXPECT_NE(garbage.message().find("tok/tokenizer.json"), std::string::npos);
  auto bad_eos = Tokenizer::parse(tokenizerJson({}).dump(), R"({"eos_token": "<none>"})",
                                  "tok/tokenizer.json");
  ASSERT_FALSE(bad_eos);
  EXPECT_NE(bad_eos.message().find("eos_token '<none>'"), std::string::npos);
}

} // namespace
} // namespace kiln::tokenizer
