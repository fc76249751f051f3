// Fuzzes the tokenizer. The first byte picks what the rest is: 0, a
// tokenizer.json to read (and, when accepted, to encode a fixed text with);
// otherwise text to encode with a small tokenizer (tests/fuzz/small_tokenizer.h).
// Whatever is accepted encodes to ids inside the vocabulary that decode to
// well-formed UTF-8.
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/small_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_text.h"

namespace {

void encodeAndDecode(const kiln::tokenizer::Tokenizer &tok, std::string_view text) {
  using namespace kiln;
  auto ids = tok.encode(text, true);
  fuzz::require(ids.isOk(), "a valid tokenizer failed to encode", ids ? "" : ids.message());
  for (uint32_t id : *ids)
    fuzz::require(id < tok.vocabSize(), "an id outside the vocabulary");
  auto back = tok.decode(*ids, false);
  fuzz::require(back.isOk(), "decoding the ids it made failed", back ? "" : back.message());
  fuzz::require(tokenizer::illFormedUtf8Sequences(*back) == 0, "decoded text is not UTF-8");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  if (size == 0)
    return 0;
  const std::string_view rest = fuzz::asText(data + 1, size - 1);
  if (data[0] == 0) {
    auto tok = tokenizer::Tokenizer::parse(rest, "", "tok/tokenizer.json");
    fuzz::requireNamesSource(tok, "tok/tokenizer.json");
    if (tok)
      encodeAndDecode(*tok, "The cat's 12 \xE4\xB8\x96 e\xCC\x81 <|end|>  x\xFF\n\n");
    return 0;
  }
  static const tokenizer::Tokenizer small = [] {
    auto t = tokenizer::Tokenizer::parse(fuzz::smallTokenizerJson(), "", "small/tokenizer.json");
    fuzz::require(t.isOk(), "the small tokenizer does not load", t ? "" : t.message());
    return std::move(*t);
  }();
  encodeAndDecode(small, rest);
  return 0;
}
