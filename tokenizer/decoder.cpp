#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "tokenizer/unicode_text.h"

namespace kiln::tokenizer {
namespace {

std::string typeOf(const nlohmann::json &j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : std::string();
}

// "<0x0A>" -> 0x0A; -1 for any other token.
int fallbackByte(const std::string &token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>')
    return -1;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = token[i];
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                             : -1;
    if (digit < 0)
      return -1;
    value = value * 16 + digit;
  }
  return value;
}

void replaceAll(std::string &text, const std::string &from, const std::string &to) {
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = text.find(from, at)) != std::string::npos; at = hit + from.size())
    out.append(text, at, hit - at).append(to);
  text = out.append(text, at, std::string::npos);
}

} // namespace

Expected<Decoder> Decoder::fromJson(const nlohmann::json &config, const std::string &where) {
  Decoder d;
  if (typeOf(config) == "ByteLevel") {
    d.byte_level_ = true;
    return d;
  }
  KILN_RETURN_IF_ERROR(d.add(config, where));
  return d;
}

Status Decoder::add(const nlohmann::json &config, const std::string &where) {
  const std::string type = typeOf(config);
  Step step;
  if (type == "Sequence") {
    const auto &list = config.value("decoders", nlohmann::json::array());
    for (size_t i = 0; i < list.size(); ++i)
      KILN_RETURN_IF_ERROR(add(list[i], where + ".decoders[" + std::to_string(i) + "]"));
    return Status::ok();
  } else if (type == "Replace" && config.contains("pattern") &&
             config["pattern"].contains("String") && config["pattern"]["String"].is_string() &&
             config.contains("content") && config["content"].is_string()) {
    step.kind = Step::Replace;
    step.from = config["pattern"]["String"].get<std::string>();
    step.to = config["content"].get<std::string>();
    if (step.from.empty())
      return Error(where + ": Replace of an empty pattern");
  } else if (type == "ByteFallback") {
    step.kind = Step::ByteFallback;
  } else if (type == "Fuse") {
    step.kind = Step::Fuse;
  } else if (type == "Strip" && config.contains("content") && config["content"].is_string() &&
             config["content"].get<std::string>().size() == 1) {
    step.kind = Step::Strip;
    step.from = config["content"].get<std::string>();
    step.start = config.value("start", 0);
    step.stop = config.value("stop", 0);
  } else {
    return Error(where + ": decoder type '" + (type.empty() ? "(none)" : type) +
                 "' is not supported (ByteLevel; or Replace of a string, ByteFallback, Fuse, "
                 "Strip of one character, in a Sequence)");
  }
  steps_.push_back(std::move(step));
  return Status::ok();
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  for (const Step &step : steps_) {
    switch (step.kind) {
    case Step::Replace:
      for (std::string &t : tokens)
        replaceAll(t, step.from, step.to);
      break;
    case Step::ByteFallback: {
      // Runs of byte tokens become their bytes, read as UTF-8 (U+FFFD for
      // what is not), each run on its own.
      std::vector<std::string> out;
      std::string bytes;
      bool in_run = false;
      for (std::string &t : tokens) {
        const int b = fallbackByte(t);
        if (b >= 0) {
          bytes.push_back(static_cast<char>(b));
          in_run = true;
          continue;
        }
        if (in_run)
          out.push_back(toValidUtf8(bytes));
        bytes.clear();
        in_run = false;
        out.push_back(std::move(t));
      }
      if (in_run)
        out.push_back(toValidUtf8(bytes));
      tokens = std::move(out);
      break;
    }
    case Step::Fuse: {
      std::string all;
      for (const std::string &t : tokens)
        all += t;
      tokens.assign(1, std::move(all));
      break;
    }
    case Step::Strip:
      for (std::string &t : tokens) {
        size_t begin = 0, end = t.size();
        for (int i = 0; i < step.start && begin < end && t[begin] == step.from[0]; ++i)
          ++begin;
        for (int i = 0; i < step.stop && end > begin && t[end - 1] == step.from[0]; ++i)
          --end;
        t = t.substr(begin, end - begin);
      }
      break;
    }
  }
  std::string text;
  for (const std::string &t : tokens)
    text += t;
  return text;
}

} // namespace kiln::tokenizer
