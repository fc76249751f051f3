// Fuzzes CANN's fusion-switch file (JSON, {"Switch": {...}}) as
// --fusion-switch-file reads it, then resolves it against the built-in passes.
#include "passes/pass_registry.h"
#include "passes/pass_switches.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  constexpr std::string_view kSource = "fuzz/fusion_switch.json";
  auto layer = passes::parseSwitchText(fuzz::asText(data, size), kSource);
  fuzz::requireNamesSource(layer, kSource);
  if (!layer)
    return 0;
  const auto &registry = passes::PassRegistry::builtin();
  (void)passes::resolveSwitches(registry, {*layer}, /*allow_unknown=*/false);
  (void)passes::resolveSwitches(registry, {*layer}, /*allow_unknown=*/true);
  return 0;
}
