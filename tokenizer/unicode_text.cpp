#include "tokenizer/unicode_text.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/utf8.h>

namespace kiln::tokenizer {

std::string toValidUtf8(std::string_view text, size_t *replaced) {
  // ICU's U8_NEXT stops an ill-formed sequence after its maximal subpart,
  // the boundary WHATWG's decoder uses, so the two replace alike.
  const auto *bytes = reinterpret_cast<const uint8_t *>(text.data());
  const int32_t length = static_cast<int32_t>(text.size());
  size_t count = 0;
  std::string out;
  int32_t copied = 0; // bytes of `text` already in `out`
  for (int32_t i = 0; i < length;) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(bytes, i, length, c);
    if (c >= 0)
      continue;
    if (out.empty())
      out.reserve(text.size() + 16);
    out.append(text.substr(copied, start - copied));
    out.append("\xEF\xBF\xBD");
    copied = i;
    ++count;
  }
  if (replaced)
    *replaced = count;
  if (count == 0)
    return std::string(text);
  out.append(text.substr(copied));
  return out;
}

size_t illFormedUtf8Sequences(std::string_view text) {
  const auto *bytes = reinterpret_cast<const uint8_t *>(text.data());
  const int32_t length = static_cast<int32_t>(text.size());
  size_t count = 0;
  for (int32_t i = 0; i < length;) {
    UChar32 c;
    U8_NEXT(bytes, i, length, c);
    count += c < 0;
  }
  return count;
}

Expected<NormalForm> parseNormalForm(std::string_view name) {
  if (name == "NFC")
    return NormalForm::NFC;
  if (name == "NFD")
    return NormalForm::NFD;
  if (name == "NFKC")
    return NormalForm::NFKC;
  if (name == "NFKD")
    return NormalForm::NFKD;
  return Error("unknown Unicode normal form '" + std::string(name) + "' (NFC, NFD, NFKC or NFKD)");
}

Expected<std::string> normalize(std::string_view text, NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2 *normalizer = nullptr;
  switch (form) {
  case NormalForm::NFC:
    normalizer = icu::Normalizer2::getNFCInstance(status);
    break;
  case NormalForm::NFD:
    normalizer = icu::Normalizer2::getNFDInstance(status);
    break;
  case NormalForm::NFKC:
    normalizer = icu::Normalizer2::getNFKCInstance(status);
    break;
  case NormalForm::NFKD:
    normalizer = icu::Normalizer2::getNFKDInstance(status);
    break;
  }
  if (U_FAILURE(status))
    return Error(std::string("ICU has no Unicode normalizer: ") + u_errorName(status));
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  // Most text is already normalized: check before copying.
  if (normalizer->isNormalizedUTF8(piece, status) && U_SUCCESS(status))
    return std::string(text);
  status = U_ZERO_ERROR;
  std::string out;
  out.reserve(text.size());
  icu::StringByteSink<std::string> sink(&out);
  normalizer->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status))
    return Error(std::string("Unicode normalization failed: ") + u_errorName(status));
  return out;
}

} // namespace kiln::tokenizer
