// Fuzzes the custom-op compute language on its own: the input is the text of
// one <compute> of an op with inputs x, y, outputs z, w and attributes alpha
// (float), n (int) and flag (bool); what parses is built (gradients derived)
// and run on small tensors.
#include <string>

#include "ops/custom/custom_op_file.h"
#include "tests/fuzz/custom_op_eval.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

std::string xmlEscaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  const std::string source = "fuzz/expr.xml";
  const std::string xml = "<ops>\n<op name=\"FuzzOp\" kind=\"opaque\">\n"
                          "<input name=\"x\"/><input name=\"y\"/>\n"
                          "<output name=\"z\"/><output name=\"w\"/>\n"
                          "<attr name=\"alpha\" type=\"float\" default=\"0.5\"/>\n"
                          "<attr name=\"n\" type=\"int\" default=\"3\"/>\n"
                          "<attr name=\"flag\" type=\"bool\" default=\"true\"/>\n"
                          "<compute>" +
                          xmlEscaped(fuzz::asText(data, size)) + "</compute>\n</op>\n</ops>\n";
  auto specs = ops::custom::parseCustomOpFile(xml, source);
  fuzz::requireNamesSource(specs, source);
  if (!specs)
    return 0;
  for (const ops::custom::CustomOpSpec &spec : *specs)
    fuzz::buildAndEvaluate(spec);
  return 0;
}
