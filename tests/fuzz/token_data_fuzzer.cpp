// Fuzzes the training-data reader. The first byte picks the format (a flat
// uint16 or uint32 token file, or safetensors with input_ids); the rest is
// the file. Anything accepted yields batches of in-vocabulary tokens.
#include "runtime/token_data.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  if (size == 0)
    return 0;
  constexpr int64_t kVocab = 512, kSeq = 4;
  const int format = data[0] % 3;
  const std::string source = format == 2 ? "train.safetensors" : "train.bin";
  const runtime::TokenDType dtype =
      format == 1 ? runtime::TokenDType::U32 : runtime::TokenDType::U16;
  auto tokens =
      runtime::TokenData::parse(fuzz::asText(data + 1, size - 1), source, dtype, kVocab, kSeq);
  fuzz::requireNamesSource(tokens, source);
  if (!tokens)
    return 0;
  fuzz::require(tokens->tokens() > kSeq, "accepted fewer tokens than one sequence and one more");
  const Tensor batch = tokens->batch(7, 3, 0, 2);
  for (int64_t i = 0; i < batch.numElements(); ++i)
    fuzz::require(batch.getInt(i) >= 0 && batch.getInt(i) < kVocab,
                  "a batch holds a token outside the vocabulary");
  return 0;
}
