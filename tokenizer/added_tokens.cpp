#include "tokenizer/added_tokens.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace kiln::tokenizer {
namespace {

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

} // namespace

Expected<AddedTokens> AddedTokens::fromJson(const nlohmann::json &tokens,
                                            const std::string &source) {
  AddedTokens a;
  if (tokens.is_null())
    return a;
  if (!tokens.is_array())
    return Error(source + ": added_tokens must be a list");
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto &t = tokens[i];
    const std::string where = source + ": added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string() ||
        t["content"].get<std::string>().empty() || !t.contains("id") ||
        !t["id"].is_number_unsigned())
      return Error(where + ": needs a non-empty 'content' and an 'id'");
    if (t.value("single_word", false))
      return Error(where + ": single_word added tokens are not supported");
    AddedToken token;
    token.content = t["content"].get<std::string>();
    token.id = t["id"].get<uint32_t>();
    token.special = t.value("special", false);
    token.lstrip = t.value("lstrip", false);
    token.rstrip = t.value("rstrip", false);
    a.tokens_.push_back(std::move(token));
  }
  for (uint32_t i = 0; i < a.tokens_.size(); ++i)
    a.by_first_byte_[static_cast<uint8_t>(a.tokens_[i].content[0])].push_back(i);
  for (auto &list : a.by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [&](uint32_t x, uint32_t y) {
      return a.tokens_[x].content.size() > a.tokens_[y].content.size();
    });
  return a;
}

void AddedTokens::split(std::string_view text, std::vector<Segment> &out) const {
  size_t plain = 0; // where the current stretch of plain text began
  size_t i = 0;
  while (i < text.size()) {
    const auto &candidates = by_first_byte_[static_cast<uint8_t>(text[i])];
    const AddedToken *match = nullptr;
    for (uint32_t c : candidates)
      if (text.compare(i, tokens_[c].content.size(), tokens_[c].content) == 0) {
        match = &tokens_[c];
        break;
      }
    if (!match) {
      ++i;
      continue;
    }
    size_t before_end = i;
    if (match->lstrip)
      while (before_end > plain && isSpace(text[before_end - 1]))
        --before_end;
    if (before_end > plain)
      out.push_back({text.substr(plain, before_end - plain), -1});
    out.push_back({text.substr(i, match->content.size()), match->id});
    i += match->content.size();
    if (match->rstrip)
      while (i < text.size() && isSpace(text[i]))
        ++i;
    plain = i;
  }
  if (plain < text.size())
    out.push_back({text.substr(plain), -1});
}

const AddedToken *AddedTokens::find(std::string_view content) const {
  for (const auto &t : tokens_)
    if (t.content == content)
      return &t;
  return nullptr;
}

const AddedToken *AddedTokens::byId(uint32_t id) const {
  for (const auto &t : tokens_)
    if (t.id == id)
      return &t;
  return nullptr;
}

} // namespace kiln::tokenizer
