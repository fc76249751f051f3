// Fuzzes the custom-op file reader (XML plus compute and gradient
// expressions, --custom-ops DIR), then builds and runs what it accepts.
#include "ops/custom/custom_op_file.h"
#include "tests/fuzz/custom_op_eval.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  const std::string source = "fuzz/custom_ops.xml";
  auto specs = ops::custom::parseCustomOpFile(fuzz::asText(data, size), source);
  fuzz::requireNamesSource(specs, source);
  if (!specs)
    return 0;
  for (const ops::custom::CustomOpSpec &spec : *specs)
    fuzz::buildAndEvaluate(spec);
  return 0;
}
