#include "support/printable_text.h"

#include <cstdint>

namespace kiln {
namespace {

// The length of the valid UTF-8 sequence at the start of `s` (1 to 4), or 0
// when it does not start one: overlong forms, surrogates and code points past
// U+10FFFF are invalid too.
size_t utf8Length(std::string_view s, uint32_t &code_point) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  size_t n = 0;
  uint32_t min = 0;
  if (lead < 0x80) {
    code_point = lead;
    return 1;
  } else if ((lead & 0xe0) == 0xc0) {
    n = 2, min = 0x80, code_point = lead & 0x1f;
  } else if ((lead & 0xf0) == 0xe0) {
    n = 3, min = 0x800, code_point = lead & 0x0f;
  } else if ((lead & 0xf8) == 0xf0) {
    n = 4, min = 0x10000, code_point = lead & 0x07;
  } else {
    return 0;
  }
  if (s.size() < n)
    return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xc0) != 0x80)
      return 0;
    code_point = code_point << 6 | (byte(i) & 0x3f);
  }
  if (code_point < min || code_point > 0x10ffff || (code_point >= 0xd800 && code_point <= 0xdfff))
    return 0;
  return n;
}

std::string escapeControls(std::string_view text, bool keep_lines) {
  static const char *kHex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  auto escape = [&](unsigned char u) {
    out += "\\x";
    out += kHex[u >> 4];
    out += kHex[u & 15];
  };
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = utf8Length(text.substr(i), cp);
    const bool control = cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
    if (n == 0) {
      escape(static_cast<unsigned char>(text[i]));
      ++i;
    } else if (control && !(keep_lines && (cp == '\n' || cp == '\t'))) {
      for (size_t k = 0; k < n; ++k)
        escape(static_cast<unsigned char>(text[i + k]));
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

} // namespace

std::string printableName(std::string_view name) { return escapeControls(name, false); }

std::string printableText(std::string_view text) { return escapeControls(text, true); }

} // namespace kiln
