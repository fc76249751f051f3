#include "tokenizer/learnable_tokens.h"

#include <random>

#include "support/file_io.h"

namespace kiln::tokenizer {

int tokenWidth(int64_t vocab) { return vocab > 65536 ? 4 : 2; }

std::string learnableTokenBytes(int64_t vocab, int64_t count, uint64_t seed, TokenRule rule) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> noise(0, 3);
  const size_t width = static_cast<size_t>(tokenWidth(vocab));
  std::string bytes;
  bytes.reserve(static_cast<size_t>(count) * width);
  int64_t token = 0;
  for (int64_t i = 0; i < count; ++i) {
    for (size_t b = 0; b < width; ++b)
      bytes.push_back(static_cast<char>((token >> (8 * b)) & 0xff));
    token = (token * rule.multiplier + rule.offset + noise(rng)) % vocab;
  }
  return bytes;
}

Status writeLearnableTokens(const std::string &path, int64_t vocab, int64_t count, uint64_t seed,
                            TokenRule rule) {
  return writeFileAtomic(path, learnableTokenBytes(vocab, count, seed, rule));
}

} // namespace kiln::tokenizer
