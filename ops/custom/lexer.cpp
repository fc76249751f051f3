#include "ops/custom/lexer.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace kiln::ops::custom {

std::string Token::describe() const {
  switch (kind) {
  case TokenKind::Name:
  case TokenKind::Punct:
    return "'" + text + "'";
  case TokenKind::Number:
    return "the number " + text;
  case TokenKind::End:
    return "the end of the compute";
  }
  return "?";
}

Expected<std::vector<Token>> lex(const SourceText &source, const Where &where) {
  const std::string &s = source.text;
  std::vector<Token> tokens;
  bool line_start = true;
  size_t i = 0;
  auto isDigit = [&](size_t k) {
    return k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]));
  };
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    Token t;
    t.loc = source.at(i);
    t.line_start = line_start;
    line_start = false;
    const size_t begin = i;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_'))
        ++i;
      t.kind = TokenKind::Name;
    } else if (isDigit(i) || (c == '.' && isDigit(i + 1))) {
      while (isDigit(i))
        ++i;
      if (i < s.size() && s[i] == '.') {
        ++i;
        while (isDigit(i))
          ++i;
      }
      if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        size_t k = i + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-'))
          ++k;
        if (!isDigit(k))
          return where.error(source.at(i), "malformed number '" + s.substr(begin, k - begin) +
                                               "': expected digits after the exponent");
        i = k;
        while (isDigit(i))
          ++i;
      }
      t.kind = TokenKind::Number;
      t.number = std::strtod(s.substr(begin, i - begin).c_str(), nullptr);
    } else {
      const std::string two = s.substr(i, 2);
      if (two == "<=" || two == ">=" || two == "==" || two == "!=") {
        i += 2;
      } else if (std::string_view("[](),;=+-*/<>").find(c) != std::string_view::npos) {
        ++i;
      } else {
        char shown[8];
        std::snprintf(shown, sizeof(shown),
                      std::isprint(static_cast<unsigned char>(c)) ? "%c" : "\\x%02x",
                      static_cast<unsigned char>(c));
        std::string hint = c == '&' || c == '|' ? " (combine conditions with nested select)" : "";
        return where.error(t.loc, "unexpected character '" + std::string(shown) +
                                      "': expected a name, a number, an operator or a bracket" +
                                      hint);
      }
      t.kind = TokenKind::Punct;
    }
    t.text = s.substr(begin, i - begin);
    tokens.push_back(std::move(t));
  }
  Token end;
  end.kind = TokenKind::End;
  end.loc = source.at(s.size());
  end.line_start = true;
  tokens.push_back(std::move(end));
  return tokens;
}

} // namespace kiln::ops::custom
