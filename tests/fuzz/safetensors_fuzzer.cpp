// Fuzzes the safetensors reader: any accepted file round-trips exactly.
#include "formats/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  constexpr std::string_view kSource = "fuzz.safetensors";
  auto file = parseSafetensors(fuzz::asText(data, size), kSource);
  fuzz::requireNamesSource(file, kSource);
  if (!file)
    return 0;
  auto again = parseSafetensors(serializeSafetensors(*file), kSource);
  fuzz::require(again.isOk(), "a file read back from serializeSafetensors is refused",
                again ? "" : again.message());
  fuzz::require(again->tensors == file->tensors && again->metadata == file->metadata,
                "serializeSafetensors does not round-trip");
  return 0;
}
