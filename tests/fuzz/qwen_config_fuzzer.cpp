// Fuzzes the Hugging Face config.json reader, and builds the forward graph of
// every config it accepts (at its own seq_length) with few enough layers to
// stay fast.
#include "compiler/frontend/decoder_config.h"
#include "compiler/frontend/decoder_model.h"
#include "support/file_io.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  constexpr std::string_view kSource = "fuzz/config.json";
  auto doc = parseJson(fuzz::asText(data, size), kSource);
  fuzz::requireNamesSource(doc, kSource);
  if (!doc)
    return 0;
  auto config = frontend::parseDecoderConfig(*doc, kSource);
  fuzz::requireNamesSource(config, kSource);
  if (!config || config->num_hidden_layers > 2)
    return 0;
  (void)frontend::buildDecoderForward(*config, frontend::ModelOptions{});
  return 0;
}
