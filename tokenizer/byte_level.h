// GPT-2's byte-level alphabet, which byte-level BPE vocabularies (Qwen2,
// Qwen3, Llama 3) are written in: every byte is one printable code point
// (the printable Latin-1 bytes themselves, the others shifted past U+0100),
// so a vocabulary entry's text spells the raw bytes of the token.
#pragma once

#include <string>
#include <string_view>

#include "support/error.h"

namespace kiln::tokenizer {

// The UTF-8 of the code point that stands for byte `b`.
const std::string &byteLevelChar(uint8_t b);

// The raw bytes a vocabulary entry written in the alphabet spells; an error
// for a code point outside it.
Expected<std::string> byteLevelDecode(std::string_view text);

} // namespace kiln::tokenizer
