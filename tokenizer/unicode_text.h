// Unicode steps of a tokenizer, done by ICU: ill-formed UTF-8 replaced by
// U+FFFD (one per maximal subpart, as the WHATWG decoder every browser and
// Node.js use does), and the Unicode normalization forms tokenizer.json's
// normalizers name.
#pragma once

#include <string>
#include <string_view>

#include "support/error.h"

namespace kiln::tokenizer {

// `text` with every ill-formed UTF-8 sequence replaced by U+FFFD; the
// count of replacements goes to `replaced` when given.
std::string toValidUtf8(std::string_view text, size_t *replaced = nullptr);
// How many ill-formed sequences toValidUtf8 would replace.
size_t illFormedUtf8Sequences(std::string_view text);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
// Parses "NFC", "NFD", "NFKC" or "NFKD" (tokenizer.json's normalizer types).
Expected<NormalForm> parseNormalForm(std::string_view name);

// `text` (valid UTF-8) in normal form `form`.
Expected<std::string> normalize(std::string_view text, NormalForm form);

} // namespace kiln::tokenizer
