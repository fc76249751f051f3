// A corpus a model can learn, for smoke runs (`kiln make-inputs --tokens`):
// each token follows from the one before (times `multiplier` plus
// `offset`, modulo the vocabulary) with a little noise (0 to 3 added), so
// the loss falls well below log(vocab); another rule makes another task to
// fine-tune on. The file is in the format `kiln train --data` reads
// (nanoGPT's flat uint16 ids, uint32 when the vocabulary passes 65536).
#pragma once

#include <cstdint>
#include <string>

#include "support/error.h"

namespace kiln::tokenizer {

struct TokenRule {
  int64_t multiplier = 5;
  int64_t offset = 3;
};

// The file's bytes: `count` tokens below `vocab`, the noise drawn from `seed`.
std::string learnableTokenBytes(int64_t vocab, int64_t count, uint64_t seed, TokenRule rule);
// The bytes of one token: 2, or 4 past 65536 ids.
int tokenWidth(int64_t vocab);
// Writes them to `path` atomically.
Status writeLearnableTokens(const std::string &path, int64_t vocab, int64_t count, uint64_t seed,
                            TokenRule rule);

} // namespace kiln::tokenizer
