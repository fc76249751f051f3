#include "tokenizer/tokenizer.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "support/file_io.h"

namespace kiln::tokenizer {
namespace {

std::string typeOf(const nlohmann::json &j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : std::string();
}

// tokenizer_config.json names tokens as "text" or {"content": "text", ...}.
std::string tokenText(const nlohmann::json &j) {
  if (j.is_string())
    return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string())
    return j["content"].get<std::string>();
  return {};
}

// Hugging Face's clean_up_tokenization, replacement by replacement in its order.
std::string cleanUpTokenizationSpaces(std::string text) {
  static const std::pair<std::string_view, std::string_view> kReplacements[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto &[from, to] : kReplacements) {
    std::string out;
    size_t at = 0;
    for (size_t hit; (hit = text.find(from, at)) != std::string::npos; at = hit + from.size())
      out.append(text, at, hit - at).append(to);
    text = out.append(text, at, std::string::npos);
  }
  return text;
}

} // namespace

Expected<Tokenizer> Tokenizer::load(const std::string &path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file = path;
  if (fs::is_directory(file, ec)) {
    file /= "tokenizer.json";
    if (!fs::exists(file, ec)) {
      if (fs::exists(fs::path(path) / "tokenizer.model", ec))
        return Error(path + ": has a SentencePiece tokenizer.model and no tokenizer.json; kiln "
                            "reads tokenizer.json (Llama 2's model folders ship both)");
      return Error(path + ": no tokenizer.json in this folder");
    }
  } else if (file.filename() == "tokenizer.model") {
    return Error(path + ": a SentencePiece model; kiln reads tokenizer.json (Llama 2's model "
                        "folders ship both)");
  }
  // A vocabulary of a million entries is under 100 MB of JSON.
  KILN_ASSIGN_OR_RETURN(std::string json, readFile(file.string(), size_t{512} << 20));
  std::string config;
  const fs::path config_path = file.parent_path() / "tokenizer_config.json";
  if (fs::exists(config_path, ec)) {
    KILN_ASSIGN_OR_RETURN(config, readFile(config_path.string(), size_t{64} << 20));
  }
  return parse(json, config, file.string());
}

Expected<Tokenizer> Tokenizer::parse(std::string_view json_text, std::string_view config_text,
                                     const std::string &source) {
  // The readers check the types they read; what they leave to nlohmann's
  // typed accessors (a flag that is not a boolean, a pattern that is not an
  // object) ends here as an error naming the file.
  try {
    return parseUnchecked(json_text, config_text, source);
  } catch (const nlohmann::json::exception &e) {
    return Error(source + ": a value of the wrong type: " + e.what());
  }
}

Expected<Tokenizer> Tokenizer::parseUnchecked(std::string_view json_text,
                                              std::string_view config_text,
                                              const std::string &source) {
  KILN_ASSIGN_OR_RETURN(nlohmann::json json, parseJson(json_text, source));
  if (!json.is_object() || !json.contains("model"))
    return Error(source + ": not a tokenizer.json (no 'model')");
  // The model's kind first: it says most about a file kiln cannot read.
  if (const auto &model = json["model"]; !model.is_object() || model.value("type", "") != "BPE")
    return Error(source + ": model type '" + (typeOf(model).empty() ? "(none)" : typeOf(model)) +
                 "' is not supported; kiln reads BPE tokenizers (Qwen2, Qwen2.5, Qwen3, Llama 2 "
                 "and 3)");
  Tokenizer t;
  t.source_ = source;
  KILN_ASSIGN_OR_RETURN(
      t.added_, AddedTokens::fromJson(json.value("added_tokens", nlohmann::json()), source));
  KILN_ASSIGN_OR_RETURN(
      t.normalizer_,
      Normalizer::fromJson(json.value("normalizer", nlohmann::json()), source + ": normalizer"));
  KILN_ASSIGN_OR_RETURN(
      t.pre_tokenizer_,
      PreTokenizer::fromJson(json.value("pre_tokenizer", nlohmann::json()), source));
  const bool byte_level = t.pre_tokenizer_.byteLevel();
  KILN_ASSIGN_OR_RETURN(t.model_, BpeModel::fromJson(json["model"], source, byte_level));
  KILN_ASSIGN_OR_RETURN(
      t.decoder_, Decoder::fromJson(json.value("decoder", nlohmann::json()), source + ": decoder"));
  if (t.decoder_.byteLevel() != byte_level)
    return Error(source + (byte_level ? ": a byte-level pre-tokenizer needs the ByteLevel decoder"
                                      : ": the ByteLevel decoder needs a ByteLevel pre-tokenizer"));
  t.vocab_size_ = t.model_.idLimit();
  for (const auto &a : t.added_.tokens())
    t.vocab_size_ = std::max<int64_t>(t.vocab_size_, int64_t{a.id} + 1);
  KILN_RETURN_IF_ERROR(t.readPostProcessor(json.value("post_processor", nlohmann::json())));

  if (!config_text.empty()) {
    const std::string config_source =
        (std::filesystem::path(source).parent_path() / "tokenizer_config.json").string();
    KILN_ASSIGN_OR_RETURN(nlohmann::json config, parseJson(config_text, config_source));
    const std::string eos =
        config.is_object() ? tokenText(config.value("eos_token", nlohmann::json())) : std::string();
    if (config.is_object() && config.contains("clean_up_tokenization_spaces") &&
        config["clean_up_tokenization_spaces"].is_boolean())
      t.clean_up_spaces_ = config["clean_up_tokenization_spaces"].get<bool>();
    if (!eos.empty()) {
      auto id = t.tokenId(eos);
      if (!id)
        return Error(config_source + ": eos_token '" + eos + "' is not a token of " + source);
      t.eos_id_ = *id;
      t.eos_token_ = eos;
    }
  }
  return t;
}

Status Tokenizer::readPostProcessor(const nlohmann::json &config) {
  const std::string type = typeOf(config);
  if (config.is_null() || type == "ByteLevel") // ByteLevel only adjusts offsets
    return Status::ok();
  if (type == "Sequence") {
    for (const auto &p : config.value("processors", nlohmann::json::array()))
      KILN_RETURN_IF_ERROR(readPostProcessor(p));
    return Status::ok();
  }
  if (type != "TemplateProcessing")
    return Error(source_ + ": post-processor type '" + (type.empty() ? "(none)" : type) +
                 "' is not supported (ByteLevel, TemplateProcessing, Sequence)");
  // The single-sequence template: special tokens around $A.
  const auto &single = config.value("single", nlohmann::json::array());
  const auto &specials = config.value("special_tokens", nlohmann::json::object());
  bool seen_sequence = false;
  for (const auto &item : single) {
    if (item.contains("Sequence")) {
      if (item["Sequence"].value("id", "") != "A")
        return Error(source_ + ": post_processor.single may hold sequence A only");
      seen_sequence = true;
      continue;
    }
    const std::string name =
        item.contains("SpecialToken") ? item["SpecialToken"].value("id", "") : std::string();
    if (name.empty() || !specials.contains(name) || !specials[name].contains("ids"))
      return Error(source_ +
                   ": post_processor.single has an item kiln cannot read: " + item.dump());
    for (const auto &id : specials[name]["ids"]) {
      // An id of the vocabulary or of an added token (ids may skip numbers).
      if (!id.is_number_unsigned() || id.get<uint64_t>() >= uint64_t(vocab_size_) ||
          (!added_.byId(id.get<uint32_t>()) && model_.bytesOf(id.get<uint32_t>()).empty()))
        return Error(source_ + ": post_processor's token '" + name + "' has id " + id.dump() +
                     ", which is not a token of the vocabulary");
      (seen_sequence ? suffix_ : prefix_).push_back(id.get<uint32_t>());
    }
  }
  if (!seen_sequence)
    return Error(source_ + ": post_processor.single has no $A");
  return Status::ok();
}

Tokenizer::Session Tokenizer::session() const {
  Session s;
  s.normalizer = normalizer_.scratch();
  s.pre = pre_tokenizer_.scratch();
  return s;
}

Expected<std::vector<uint32_t>> Tokenizer::encode(std::string_view raw, bool add_special_tokens,
                                                  Session &session) const {
  std::vector<uint32_t> ids;
  if (add_special_tokens)
    ids = prefix_;
  const std::string text = toValidUtf8(raw);
  session.segments.clear();
  added_.split(text, session.segments);
  for (const Segment &segment : session.segments) {
    if (segment.id >= 0) {
      ids.push_back(static_cast<uint32_t>(segment.id));
      continue;
    }
    KILN_ASSIGN_OR_RETURN(std::string normalized,
                          normalizer_.apply(std::string(segment.text), session.normalizer));
    session.pieces.clear();
    KILN_RETURN_IF_ERROR(pre_tokenizer_.split(normalized, session.pre, session.pieces));
    for (const Span &piece : session.pieces)
      model_.encode(std::string_view(normalized).substr(piece.begin, piece.end - piece.begin),
                    session.cache, ids);
  }
  if (add_special_tokens)
    ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  return ids;
}

Expected<std::vector<uint32_t>> Tokenizer::encode(std::string_view text,
                                                  bool add_special_tokens) const {
  Session s = session();
  return encode(text, add_special_tokens, s);
}

Expected<std::string> Tokenizer::decode(std::span<const uint32_t> ids,
                                        bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  for (uint32_t id : ids) {
    if (const AddedToken *added = added_.byId(id)) {
      if (!(skip_special_tokens && added->special))
        tokens.push_back(added->content);
      continue;
    }
    const std::string_view token = model_.bytesOf(id);
    if (token.empty())
      return Error("token id " + std::to_string(id) + " is not in the vocabulary of " + source_);
    tokens.emplace_back(token);
  }
  std::string text;
  if (decoder_.byteLevel()) {
    // The tokens are raw bytes: bytes that do not make UTF-8 (a token cut
    // mid-character) read as U+FFFD, as HF's decode(errors="replace").
    for (const std::string &t : tokens)
      text += t;
    text = toValidUtf8(text);
  } else {
    text = decoder_.decode(std::move(tokens));
  }
  return clean_up_spaces_ ? cleanUpTokenizationSpaces(std::move(text)) : text;
}

std::optional<uint32_t> Tokenizer::tokenId(std::string_view content) const {
  if (const AddedToken *added = added_.find(content))
    return added->id;
  const int64_t id = model_.idOf(content);
  if (id < 0)
    return std::nullopt;
  return static_cast<uint32_t>(id);
}

} // namespace kiln::tokenizer
