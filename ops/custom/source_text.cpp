#include "ops/custom/source_text.h"

#include <algorithm>
#include <cstdint>

namespace kiln::ops::custom {
namespace {

// Moves a position over one byte; UTF-8 continuation bytes take no column.
void advance(SourceLoc &loc, char c) {
  if (c == '\n') {
    ++loc.line;
    loc.column = 1;
  } else if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) {
    ++loc.column;
  }
}

SourceLoc locOf(std::string_view xml, size_t offset) {
  SourceLoc loc{1, 1};
  for (size_t i = 0; i < offset && i < xml.size(); ++i)
    advance(loc, xml[i]);
  return loc;
}

void appendUtf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The text an entity reference "&name;" stands for; none when unknown.
std::optional<std::string> decodeEntity(std::string_view name) {
  if (name == "lt")
    return "<";
  if (name == "gt")
    return ">";
  if (name == "amp")
    return "&";
  if (name == "quot")
    return "\"";
  if (name == "apos")
    return "'";
  if (name.size() > 1 && name[0] == '#') {
    const bool hex = name[1] == 'x' || name[1] == 'X';
    std::string_view digits = name.substr(hex ? 2 : 1);
    if (digits.empty() || digits.size() > 8)
      return std::nullopt;
    uint32_t cp = 0;
    for (char c : digits) {
      int d = c >= '0' && c <= '9'          ? c - '0'
              : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
              : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                            : -1;
      if (d < 0)
        return std::nullopt;
      cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(d);
    }
    std::string out;
    appendUtf8(out, cp);
    return out;
  }
  return std::nullopt;
}

bool startsWith(std::string_view s, size_t at, std::string_view prefix) {
  return s.substr(at, prefix.size()) == prefix;
}

} // namespace

std::string locString(const SourceLoc &loc) {
  return std::to_string(loc.line) + ":" + std::to_string(loc.column);
}

SourceLoc SourceText::at(size_t offset) const {
  if (locs.empty())
    return {};
  return locs[std::min(offset, locs.size() - 1)];
}

Error Where::error(const SourceLoc &loc, const std::string &message) const {
  std::string pos = file;
  if (loc.line > 0)
    pos += ":" + locString(loc);
  return Error(pos + ": op " + op + ": " + message);
}

Error Where::error(const std::string &message) const {
  return Error(file + ": op " + op + ": " + message);
}

size_t lineOffset(std::string_view xml, int line) {
  size_t offset = 0;
  for (int l = 1; l < line; ++l) {
    size_t nl = xml.find('\n', offset);
    if (nl == std::string_view::npos)
      return xml.size();
    offset = nl + 1;
  }
  return offset;
}

std::optional<SourceText> elementText(std::string_view xml, std::string_view tag, size_t &from) {
  const std::string open = "<" + std::string(tag);
  size_t p = from;
  for (;;) {
    p = xml.find(open, p);
    if (p == std::string_view::npos)
      return std::nullopt;
    const size_t after = p + open.size();
    if (after < xml.size() && (xml[after] == '>' || xml[after] == '/' || xml[after] == ' ' ||
                               xml[after] == '\t' || xml[after] == '\n' || xml[after] == '\r'))
      break;
    p = after;
  }
  // The end of the start tag, skipping quoted attribute values.
  size_t q = p + open.size();
  char quote = 0;
  for (; q < xml.size(); ++q) {
    const char c = xml[q];
    if (quote) {
      if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '>') {
      break;
    }
  }
  if (q >= xml.size())
    return std::nullopt;
  size_t start = q + 1;
  SourceLoc loc = locOf(xml, start);
  SourceText out;
  if (xml[q - 1] == '/') { // <compute/>: no text
    out.locs.push_back(loc);
    from = start;
    return out;
  }
  const std::string close = "</" + std::string(tag);
  size_t end = xml.find(close, start);
  if (end == std::string_view::npos)
    return std::nullopt;
  auto skip = [&](size_t &i, size_t n) {
    for (size_t k = 0; k < n && i < end; ++k, ++i)
      advance(loc, xml[i]);
  };
  for (size_t i = start; i < end;) {
    if (startsWith(xml, i, "<![CDATA[")) {
      skip(i, 9);
      size_t stop = std::min(xml.find("]]>", i), end);
      while (i < stop) {
        out.text += xml[i];
        out.locs.push_back(loc);
        skip(i, 1);
      }
      skip(i, 3);
    } else if (startsWith(xml, i, "<!--")) {
      size_t stop = xml.find("-->", i);
      skip(i, (stop == std::string_view::npos ? end : stop + 3) - i);
    } else if (xml[i] == '&') {
      size_t semi = xml.find(';', i);
      std::optional<std::string> decoded;
      if (semi != std::string_view::npos && semi < end && semi - i <= 12)
        decoded = decodeEntity(xml.substr(i + 1, semi - i - 1));
      if (decoded) {
        for (char c : *decoded) {
          out.text += c;
          out.locs.push_back(loc);
        }
        skip(i, semi + 1 - i);
      } else {
        out.text += '&';
        out.locs.push_back(loc);
        skip(i, 1);
      }
    } else {
      out.text += xml[i];
      out.locs.push_back(loc);
      skip(i, 1);
    }
  }
  out.locs.push_back(loc);
  from = end + close.size();
  return out;
}

SourceText positionedText(std::string_view text, SourceLoc first) {
  SourceText out;
  SourceLoc loc = first;
  for (char c : text) {
    out.text += c;
    out.locs.push_back(loc);
    advance(loc, c);
  }
  out.locs.push_back(loc);
  return out;
}

} // namespace kiln::ops::custom
