// Fuzzes the op-definition XML reader (ops/defs/*.xml, the base of custom ops).
#include "ops/op_def.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  constexpr std::string_view kSource = "fuzz/ops.xml";
  auto defs = ops::parseOpDefs(fuzz::asText(data, size), kSource);
  fuzz::requireNamesSource(defs, kSource);
  if (!defs)
    return 0;
  for (const ops::OpDef &def : *defs) {
    (void)def.minInputs();
    (void)def.maxInputs();
    (void)ops::completeAttrs(def, {}, kSource);
  }
  return 0;
}
