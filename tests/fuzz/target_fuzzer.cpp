// Fuzzes the target-description reader (target/data/*.json, --target FILE);
// an accepted target round-trips.
#include "support/file_io.h"
#include "target/target.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  constexpr std::string_view kSource = "fuzz/target.json";
  auto doc = parseJson(fuzz::asText(data, size), kSource);
  if (!doc)
    return 0;
  auto target = target::parseTarget(*doc, kSource);
  fuzz::requireNamesSource(target, kSource);
  if (!target)
    return 0;
  const nlohmann::json written = target::targetToJson(*target);
  auto again = target::parseTarget(written, kSource);
  fuzz::require(again.isOk(), "a target written by targetToJson is refused",
                again ? "" : again.message());
  return 0;
}
