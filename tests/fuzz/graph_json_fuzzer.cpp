// Fuzzes the graph JSON reader and the op verifier behind it (what
// `kiln graph`/`kiln compile` do with a graph file); an accepted graph
// round-trips exactly.
#include "formats/graph_json.h"
#include "ops/op_verifier.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace kiln;
  constexpr std::string_view kSource = "fuzz/graph.json";
  auto graph = parseGraphJson(fuzz::asText(data, size), kSource);
  fuzz::requireNamesSource(graph, kSource);
  if (!graph)
    return 0;
  (void)ops::verifyGraph(*graph);
  const nlohmann::json written = graphToJson(*graph);
  auto again = graphFromJson(written, kSource);
  fuzz::require(again.isOk(), "a graph written by graphToJson is refused",
                again ? "" : again.message());
  fuzz::require(graphToJson(*again) == written, "graph JSON does not round-trip");
  return 0;
}
