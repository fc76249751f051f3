// Fuzzes the artifact manifest's reader on its own (JSON, manifest.h); an
// accepted manifest round-trips.
#include "compiler/artifact/manifest.h"
#include "support/file_io.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  auto doc = parseJson(fuzz::asText(data, size), "fuzz/manifest.json");
  if (!doc)
    return 0;
  auto manifest = artifact::manifestFromJson(*doc);
  if (!manifest)
    return 0;
  const nlohmann::json written = artifact::manifestToJson(*manifest);
  auto again = artifact::manifestFromJson(written);
  fuzz::require(again.isOk(), "a manifest written by manifestToJson is refused",
                again ? "" : again.message());
  fuzz::require(artifact::manifestToJson(*again) == written, "the manifest does not round-trip");
  return 0;
}
