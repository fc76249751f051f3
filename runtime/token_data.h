// Training data: a pre-tokenised corpus, as nanoGPT's prepare.py writes it
// (a flat file of uint16 token ids, or uint32 for vocabularies past 65535),
// or a safetensors file with an integer tensor "input_ids" (flattened).
// Step k's sequences are drawn at offsets that depend only on the seed, k and
// the sequence's index in the global batch, so a resumed run reads exactly
// what an unbroken one would, whatever the device count. An evaluation reads
// the file in order instead, as consecutive windows that do not overlap.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/tensor.h"
#include "support/error.h"

namespace kiln::runtime {

enum class TokenDType { U16, U32 };
// "uint16", "uint32", or "auto": uint32 when the vocabulary passes 65536,
// the rule kiln tokenize and kiln make-inputs write by (`vocab_size` <= 0:
// "auto" is only checked).
Expected<TokenDType> parseTokenDType(const std::string &text, int64_t vocab_size = 0);
const char *tokenDTypeName(TokenDType dtype);

class TokenData {
public:
  // Every token must be below `vocab_size`; the file must hold more than
  // one sequence of `seq` tokens.
  static Expected<TokenData> open(const std::string &path, TokenDType dtype, int64_t vocab_size,
                                  int64_t seq);
  // The same from the file's bytes; `path` names it in errors and tells a
  // safetensors file (by its extension) from a flat token file.
  static Expected<TokenData> parse(std::string_view bytes, const std::string &path,
                                   TokenDType dtype, int64_t vocab_size, int64_t seq);

  int64_t tokens() const { return static_cast<int64_t>(tokens_.size()); }
  // Sequences [first, first + count) of step `step`'s global batch, as
  // input_ids i64 [count, seq] (the model's labels are the same ids: it
  // shifts them itself).
  Tensor batch(uint64_t seed, int64_t step, int64_t first, int64_t count) const;

  int64_t seq() const { return seq_; }
  // The whole windows of `seq` tokens the file holds end to end: window i is
  // tokens [i seq, (i + 1) seq).
  int64_t windows() const { return tokens() / seq_; }
  // Windows [first, first + count) as input_ids i64 [count, seq].
  Tensor windows(int64_t first, int64_t count) const;

private:
  std::vector<uint32_t> tokens_;
  int64_t seq_ = 0;
};

} // namespace kiln::runtime
