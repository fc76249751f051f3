#include "tokenizer/byte_level.h"

#include <array>
#include <unordered_map>

#include <unicode/utf8.h>

namespace kiln::tokenizer {
namespace {

// Byte b's code point: the bytes GPT-2 calls printable ('!'..'~',
// '¡'..'¬', '®'..'ÿ') stand for themselves, the other 68 take U+0100 on in
// byte order.
std::array<UChar32, 256> codePoints() {
  std::array<UChar32, 256> cp{};
  UChar32 next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    cp[b] = printable ? b : next++;
  }
  return cp;
}

struct Alphabet {
  std::array<std::string, 256> utf8;
  std::unordered_map<UChar32, uint8_t> byte_of;
  Alphabet() {
    const auto cp = codePoints();
    for (int b = 0; b < 256; ++b) {
      char buf[4];
      int32_t n = 0;
      U8_APPEND_UNSAFE(reinterpret_cast<uint8_t *>(buf), n, cp[b]);
      utf8[b].assign(buf, n);
      byte_of[cp[b]] = static_cast<uint8_t>(b);
    }
  }
};

const Alphabet &alphabet() {
  static const Alphabet a;
  return a;
}

} // namespace

const std::string &byteLevelChar(uint8_t b) { return alphabet().utf8[b]; }

Expected<std::string> byteLevelDecode(std::string_view text) {
  const auto &byte_of = alphabet().byte_of;
  const auto *s = reinterpret_cast<const uint8_t *>(text.data());
  const int32_t length = static_cast<int32_t>(text.size());
  std::string out;
  out.reserve(text.size());
  for (int32_t i = 0; i < length;) {
    UChar32 c;
    U8_NEXT(s, i, length, c);
    auto it = c < 0 ? byte_of.end() : byte_of.find(c);
    if (it == byte_of.end())
      return Error("'" + std::string(text) + "' is not written in the byte-level alphabet");
    out.push_back(static_cast<char>(it->second));
  }
  return out;
}

} // namespace kiln::tokenizer
