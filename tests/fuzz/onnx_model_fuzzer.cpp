// Fuzzes the ONNX frontend: any bytes as an .onnx model, read and imported
// (a batch or sequence dimension bound to 2). Whatever is refused is an
// error naming the file; the importer verifies what it accepts itself.
#include "compiler/frontend/onnx/onnx_import.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  const std::string source = "fuzz/model.onnx";
  frontend::OnnxImportOptions options;
  options.batch = 2;
  options.seq = 2;
  auto model = frontend::importOnnxModel(std::string(fuzz::asText(data, size)), source, options);
  fuzz::requireNamesSource(model, source);
  return 0;
}
