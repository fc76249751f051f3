#include "runtime/token_data.h"

#include <cstring>

#include "formats/safetensors.h"
#include "support/file_io.h"
#include "support/splitmix.h"

namespace kiln::runtime {
namespace {

bool isSafetensors(const std::string &path) {
  return path.size() > 12 && path.substr(path.size() - 12) == ".safetensors";
}

} // namespace

Expected<TokenDType> parseTokenDType(const std::string &text, int64_t vocab_size) {
  if (text == "auto")
    return vocab_size > 65536 ? TokenDType::U32 : TokenDType::U16;
  if (text == "uint16")
    return TokenDType::U16;
  if (text == "uint32")
    return TokenDType::U32;
  return Error("--data-dtype '" + text + "': expected auto, uint16 or uint32");
}

const char *tokenDTypeName(TokenDType dtype) {
  return dtype == TokenDType::U16 ? "uint16" : "uint32";
}

Expected<TokenData> TokenData::open(const std::string &path, TokenDType dtype, int64_t vocab_size,
                                    int64_t seq) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, readFile(path));
  return parse(bytes, path, dtype, vocab_size, seq);
}

Expected<TokenData> TokenData::parse(std::string_view bytes, const std::string &path,
                                     TokenDType dtype, int64_t vocab_size, int64_t seq) {
  TokenData data;
  data.seq_ = seq;
  if (isSafetensors(path)) {
    KILN_ASSIGN_OR_RETURN(SafetensorsFile file, parseSafetensors(bytes, path));
    auto it = file.tensors.find("input_ids");
    if (it == file.tensors.end())
      return Error(path + ": no tensor 'input_ids' (the token ids to train on)");
    const Tensor &ids = it->second;
    if (isFloat(ids.dtype()))
      return Error(path + ": 'input_ids' is " + std::string(dtypeName(ids.dtype())) +
                   ", expected an integer dtype");
    for (int64_t i = 0; i < ids.numElements(); ++i) {
      const int64_t id = ids.getInt(i);
      if (id < 0 || id >= vocab_size)
        return Error(path + ": token " + std::to_string(id) + " at position " + std::to_string(i) +
                     " is outside the model's vocabulary of " + std::to_string(vocab_size));
      data.tokens_.push_back(static_cast<uint32_t>(id));
    }
  } else {
    const size_t width = dtype == TokenDType::U16 ? 2 : 4;
    if (bytes.size() % width != 0)
      return Error(path + ": " + std::to_string(bytes.size()) + " bytes is not a whole number of " +
                   (width == 2 ? "uint16" : "uint32") + " tokens (--data-dtype)");
    data.tokens_.resize(bytes.size() / width);
    for (size_t i = 0; i < data.tokens_.size(); ++i) {
      uint32_t id = 0;
      for (size_t b = 0; b < width; ++b)
        id |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i * width + b])) << (8 * b);
      if (id >= static_cast<uint64_t>(vocab_size))
        return Error(path + ": token " + std::to_string(id) + " at position " + std::to_string(i) +
                     " is outside the model's vocabulary of " + std::to_string(vocab_size) +
                     (width == 2 ? " (is the file uint32? --data-dtype uint32)" : ""));
      data.tokens_[i] = id;
    }
  }
  if (data.tokens() <= seq)
    return Error(path + ": " + std::to_string(data.tokens()) +
                 " tokens, fewer than one sequence of " + std::to_string(seq) + " and one more");
  return data;
}

Tensor TokenData::batch(uint64_t seed, int64_t step, int64_t first, int64_t count) const {
  Tensor ids(TensorType{DType::I64, {count, seq_}});
  int64_t *out = ids.dataAs<int64_t>();
  const uint64_t starts = static_cast<uint64_t>(tokens() - seq_);
  for (int64_t s = 0; s < count; ++s) {
    const uint64_t at =
        splitmix64(seed ^ splitmix64(static_cast<uint64_t>(step) * 1000003ull + (first + s))) %
        starts;
    for (int64_t t = 0; t < seq_; ++t)
      out[s * seq_ + t] = tokens_[at + t];
  }
  return ids;
}

Tensor TokenData::windows(int64_t first, int64_t count) const {
  Tensor ids(TensorType{DType::I64, {count, seq_}});
  int64_t *out = ids.dataAs<int64_t>();
  for (int64_t i = 0; i < count * seq_; ++i)
    out[i] = tokens_[static_cast<size_t>(first * seq_ + i)];
  return ids;
}

} // namespace kiln::runtime
