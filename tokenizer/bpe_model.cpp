#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"

namespace kiln::tokenizer {
namespace {

// Pieces longer than this are not cached: long runs are rare and would
// crowd out the common words.
constexpr size_t kMaxCachedPiece = 256;
constexpr size_t kMaxCacheEntries = 1 << 16;

// A merge's two halves: "a b" (the older format) or ["a", "b"].
Expected<std::pair<std::string, std::string>> mergeHalves(const nlohmann::json &merge) {
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
    return std::make_pair(merge[0].get<std::string>(), merge[1].get<std::string>());
  if (merge.is_string()) {
    const std::string text = merge.get<std::string>();
    const size_t space = text.find(' ');
    if (space != std::string::npos && space > 0 && space + 1 < text.size() &&
        text.find(' ', space + 1) == std::string::npos)
      return std::make_pair(text.substr(0, space), text.substr(space + 1));
  }
  return Error("a merge must be \"a b\" or [\"a\", \"b\"], not " + merge.dump());
}

} // namespace

Expected<BpeModel> BpeModel::fromJson(const nlohmann::json &model, const std::string &source,
                                      bool byte_level) {
  const std::string where = source + ": model";
  const std::string type = model.is_object() ? model.value("type", "") : "";
  if (type != "BPE")
    return Error(where + ": model type '" + (type.empty() ? "(none)" : type) +
                 "' is not supported; kiln reads BPE tokenizers (Qwen2, Qwen2.5, Qwen3, Llama 2 "
                 "and 3)");
  for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      return Error(where + ": BPE with a " + key + " is not supported");
  if (model.contains("dropout") && !model["dropout"].is_null())
    return Error(where + ": BPE dropout is for training tokenizers; kiln encodes without it");
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return Error(where + ": 'vocab' must be an object of token -> id");
  if (!model.contains("merges") || !model["merges"].is_array())
    return Error(where + ": 'merges' must be a list");

  BpeModel m;
  m.ignore_merges_ = model.value("ignore_merges", false);
  m.byte_level_ = byte_level;
  m.byte_fallback_ = !byte_level && model.value("byte_fallback", false);
  m.fuse_unk_ = model.value("fuse_unk", false);
  // Written in the byte-level alphabet, or as the text itself.
  auto textOf = [byte_level](const std::string &written) -> Expected<std::string> {
    if (byte_level)
      return byteLevelDecode(written);
    return written;
  };
  const auto &vocab = model["vocab"];
  m.ids_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() >= (uint64_t{1} << 31))
      return Error(where + ".vocab: the id of '" + it.key() + "' is not an id");
    const auto id = it.value().get<uint32_t>();
    auto bytes = textOf(it.key());
    if (!bytes)
      return Error(where + ".vocab: " + bytes.message());
    if (id >= m.bytes_of_.size())
      m.bytes_of_.resize(id + 1);
    if (!m.bytes_of_[id].empty() || !m.ids_.emplace(*bytes, id).second)
      return Error(where + ".vocab: id " + std::to_string(id) + " or token '" + it.key() +
                   "' appears twice");
    m.bytes_of_[id] = std::move(*bytes);
  }
  if (!byte_level && model.contains("unk_token") && model["unk_token"].is_string()) {
    m.unk_id_ = m.idOf(model["unk_token"].get<std::string>());
    if (m.unk_id_ < 0)
      return Error(where + ": unk_token '" + model["unk_token"].get<std::string>() +
                   "' is not in the vocabulary");
  }
  // Every text must be encodable: each byte a token (byte-level), or else
  // each byte's "<0xNN>" token (byte_fallback) or the unknown token.
  if (byte_level || m.byte_fallback_) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      const std::string token = byte_level ? std::string(1, static_cast<char>(b)) : name;
      auto it = m.ids_.find(token);
      if (it == m.ids_.end())
        return Error(where + ".vocab: no token for byte " + std::to_string(b) +
                     (byte_level ? "" : " ('" + token + "')") +
                     ", so not every text can be encoded");
      m.byte_ids_[b] = it->second;
    }
  } else if (m.unk_id_ < 0) {
    return Error(where + ": a vocabulary that is neither byte-level nor has byte_fallback needs "
                         "an unk_token, or a character outside it cannot be encoded");
  }
  const auto &merges = model["merges"];
  m.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string at = where + ".merges[" + std::to_string(rank) + "]";
    auto halves = mergeHalves(merges[rank]);
    if (!halves)
      return Error(at + ": " + halves.message());
    auto a = textOf(halves->first), b = textOf(halves->second);
    if (!a || !b)
      return Error(at + ": " + (a ? b.message() : a.message()));
    const int64_t ia = m.idOf(*a), ib = m.idOf(*b), ij = m.idOf(*a + *b);
    if (ia < 0 || ib < 0 || ij < 0)
      return Error(at + ": '" + halves->first + "', '" + halves->second +
                   "' or their join is not in the vocabulary");
    // The first (lowest) rank of a pair counts, as in HF tokenizers.
    m.merges_.emplace(pairKey(ia, ib),
                      Merge{static_cast<uint32_t>(rank), static_cast<uint32_t>(ij)});
  }
  return m;
}

int64_t BpeModel::idOf(std::string_view bytes) const {
  auto it = ids_.find(std::string(bytes));
  return it == ids_.end() ? int64_t{-1} : int64_t{it->second};
}

void BpeModel::encode(std::string_view piece, Cache &cache, std::vector<uint32_t> &out) const {
  if (piece.size() == 1 && byte_level_) {
    out.push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    // Llama 3: a piece that is a token as a whole is that token.
    if (const int64_t id = idOf(piece); id >= 0) {
      out.push_back(static_cast<uint32_t>(id));
      return;
    }
  }
  if (piece.size() > kMaxCachedPiece) {
    merge(piece, out);
    return;
  }
  auto it = cache.pieces.find(std::string(piece));
  if (it == cache.pieces.end()) {
    if (cache.pieces.size() >= kMaxCacheEntries)
      cache.pieces.clear();
    std::vector<uint32_t> ids;
    merge(piece, ids);
    it = cache.pieces.emplace(std::string(piece), std::move(ids)).first;
  }
  out.insert(out.end(), it->second.begin(), it->second.end());
}

void BpeModel::initialSymbols(std::string_view piece, std::vector<uint32_t> &out) const {
  if (byte_level_) {
    for (char c : piece)
      out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
    return;
  }
  // Characters (the text is valid UTF-8); one outside the vocabulary as its
  // bytes' tokens, or the unknown token (consecutive ones fused with fuse_unk).
  bool last_unknown = false;
  for (size_t i = 0; i < piece.size();) {
    size_t n = 1;
    const auto lead = static_cast<uint8_t>(piece[i]);
    n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    n = std::min(n, piece.size() - i);
    const int64_t id = idOf(piece.substr(i, n));
    if (id >= 0) {
      out.push_back(static_cast<uint32_t>(id));
      last_unknown = false;
    } else if (byte_fallback_) {
      for (size_t k = 0; k < n; ++k)
        out.push_back(byte_ids_[static_cast<uint8_t>(piece[i + k])]);
      last_unknown = false;
    } else if (!(fuse_unk_ && last_unknown)) {
      out.push_back(static_cast<uint32_t>(unk_id_));
      last_unknown = true;
    }
    i += n;
  }
}

void BpeModel::merge(std::string_view piece, std::vector<uint32_t> &out) const {
  // Symbols in a linked list; a merged symbol keeps the index of its left half.
  struct Symbol {
    uint32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<uint32_t> initial;
  initialSymbols(piece, initial);
  const int32_t n = static_cast<int32_t>(initial.size());
  if (n == 0)
    return;
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i)
    symbols[i] = {initial[i], i - 1, i + 1 < n ? i + 1 : -1, true};

  struct Candidate {
    uint32_t rank;
    int32_t left;
    uint32_t left_id, right_id; // the pair as it was when queued
    bool operator>(const Candidate &o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto offer = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0)
      return;
    const uint32_t a = symbols[left].id, b = symbols[symbols[left].next].id;
    auto it = merges_.find(pairKey(a, b));
    if (it != merges_.end())
      queue.push({it->second.rank, left, a, b});
  };
  for (int32_t i = 0; i + 1 < n; ++i)
    offer(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol &left = symbols[c.left];
    // Skip a pair that an earlier merge changed.
    if (!left.alive || left.next < 0 || left.id != c.left_id || symbols[left.next].id != c.right_id)
      continue;
    Symbol &right = symbols[left.next];
    left.id = merges_.at(pairKey(c.left_id, c.right_id)).id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0)
      symbols[right.next].prev = c.left;
    offer(left.prev);
    offer(c.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next)
    out.push_back(symbols[i].id);
}

} // namespace kiln::tokenizer
