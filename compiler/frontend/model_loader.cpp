// Tells Hugging Face configs from kiln graph files and loads either.
#include "compiler/frontend/model_loader.h"

#include <filesystem>
#include <system_error>

#include "compiler/frontend/onnx/onnx_import.h"
#include "formats/graph_json.h"
#include "ops/op_verifier.h"
#include "support/file_io.h"

namespace kiln::frontend {

namespace {

constexpr const char *kGraphFormat = "kiln.graph";

Expected<LoadedModel> loadGraphFile(const nlohmann::json &doc, const std::string &file,
                                    const ModelOptions &options) {
  if (options.tensor_parallel != 1)
    return Error(file + ": tensor parallelism needs a model kiln knows how to split (a Hugging "
                        "Face decoder config); a graph runs with --tp 1");
  KILN_ASSIGN_OR_RETURN(Graph graph, graphFromJson(doc, file));
  graph.setVocabulary(options.ops);
  Status verified = ops::verifyGraph(graph);
  if (!verified)
    return verified.error().withContext(file);
  return LoadedModel{std::move(graph), std::nullopt, {}};
}

Expected<LoadedModel> loadConfigFile(const nlohmann::json &doc, const std::string &file,
                                     const ModelOptions &options) {
  KILN_ASSIGN_OR_RETURN(DecoderConfig config, parseDecoderConfig(doc, file));
  auto graph = buildDecoderForward(config, options);
  if (!graph)
    return graph.error().withContext(file);
  LoadedModel loaded{std::move(graph).value(), std::move(config), {}};
  loaded.graph.setVocabulary(options.ops);
  for (const ParamSpec &p : decoderParameters(*loaded.config))
    loaded.splits[p.name] = p.split;
  if (options.lora.enabled()) {
    KILN_ASSIGN_OR_RETURN(std::vector<ParamSpec> adapters,
                          loraParameters(*loaded.config, options.lora));
    for (const ParamSpec &p : adapters)
      loaded.splits[p.name] = p.split;
  }
  return loaded;
}

Expected<LoadedModel> loadOnnx(const std::string &path, const ModelOptions &options) {
  if (options.tensor_parallel != 1)
    return Error(path + ": tensor parallelism needs a model kiln knows how to split (a Hugging "
                        "Face decoder config); an ONNX model runs with --tp 1");
  OnnxImportOptions onnx;
  onnx.batch = options.batch;
  onnx.seq = options.seq;
  onnx.ops = options.ops;
  onnx.input_shapes = options.input_shapes;
  KILN_ASSIGN_OR_RETURN(OnnxModel model, loadOnnxModel(path, onnx));
  LoadedModel loaded{std::move(model.graph), std::nullopt, {}};
  loaded.weights = std::move(model.weights);
  loaded.onnx = true;
  return loaded;
}

} // namespace

Expected<std::string> modelFile(const std::string &path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::string file = (fs::path(path) / "config.json").string();
    if (!fs::exists(file, ec))
      return Error(path + ": a model folder must hold config.json (a Hugging Face config of " +
                   supportedArchitectures() + "); none found");
    return file;
  }
  if (!fs::exists(path, ec))
    return Error(path + ": no such file or folder (expected a config.json, a folder holding "
                        "one, or a kiln graph JSON)");
  return path;
}

Expected<LoadedModel> loadModel(const std::string &path, const ModelOptions &options) {
  if (isOnnxPath(path))
    return loadOnnx(path, options);
  if (!options.input_shapes.empty())
    return Error(path + ": --input-shape binds an ONNX model's inputs; this model is not one");
  KILN_ASSIGN_OR_RETURN(std::string file, modelFile(path));
  KILN_ASSIGN_OR_RETURN(nlohmann::json doc, readJsonFile(file));
  if (!doc.is_object())
    return Error(file + ": expected a JSON object (a Hugging Face config or a kiln graph)");

  auto format = doc.find("format");
  if (format != doc.end()) {
    if (*format != kGraphFormat)
      return Error(file + ": field 'format': expected \"" + std::string(kGraphFormat) +
                   "\" (a kiln graph), got " + format->dump());
    return loadGraphFile(doc, file, options);
  }
  if (!doc.contains("architectures") && !doc.contains("model_type"))
    return Error(file + ": neither a kiln graph (no \"format\": \"" + std::string(kGraphFormat) +
                 "\") nor a Hugging Face config (no \"architectures\")");
  return loadConfigFile(doc, file, options);
}

} // namespace kiln::frontend
