#include "compiler/frontend/lora_adapter.h"

#include <filesystem>
#include <set>
#include <system_error>
#include <vector>

#include <cblas.h>

#include "compiler/frontend/decoder_init.h"
#include "compiler/frontend/decoder_model.h"
#include "formats/safetensors.h"
#include "ir/finite_values.h"
#include "support/file_io.h"

namespace kiln::frontend {
namespace {

namespace fs = std::filesystem;

// "base_model.model.<module>.lora_A.weight" -> "<module>.weight".
std::string baseWeightOf(const std::string &lora_a) {
  const std::string a_suffix = ".lora_A.weight";
  const std::string module = lora_a.substr(0, lora_a.size() - a_suffix.size());
  return module.substr(kPeftPrefix.size()) + ".weight";
}

// The tensor as f64, whatever float dtype it is stored in.
std::vector<double> asDoubles(const Tensor &t) {
  std::vector<double> out(static_cast<size_t>(t.numElements()));
  for (int64_t i = 0; i < t.numElements(); ++i)
    out[static_cast<size_t>(i)] = t.getFloat(i);
  return out;
}

} // namespace

Expected<LoraAdapter> readLoraAdapter(const std::string &dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Error(dir + ": a LoRA adapter is a folder holding " + kAdapterConfigFile + " and " +
                 kAdapterWeightsFile + " (as PEFT's save_pretrained writes it)");
  const std::string config_path = (fs::path(dir) / kAdapterConfigFile).string();
  KILN_ASSIGN_OR_RETURN(nlohmann::json doc, readJsonFile(config_path));
  LoraAdapter adapter;
  KILN_ASSIGN_OR_RETURN(adapter.config, parseAdapterConfig(doc, config_path));
  KILN_ASSIGN_OR_RETURN(SafetensorsFile weights,
                        readSafetensors((fs::path(dir) / kAdapterWeightsFile).string()));
  adapter.tensors = std::move(weights.tensors);
  return adapter;
}

Status writeLoraAdapter(const std::string &dir, const LoraAdapter &adapter) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return Error(dir + ": cannot create the adapter folder: " + ec.message());
  const std::string config_path = (fs::path(dir) / kAdapterConfigFile).string();
  KILN_ASSIGN_OR_RETURN(std::string text,
                        jsonText(adapterConfigJson(adapter.config), config_path, 2));
  KILN_RETURN_IF_ERROR(writeFileAtomic(config_path, text + "\n"));
  SafetensorsFile weights;
  weights.tensors = adapter.tensors;
  weights.metadata["format"] = "pt";
  return writeSafetensors((fs::path(dir) / kAdapterWeightsFile).string(), weights);
}

Status checkLoraAdapter(const DecoderConfig &config, const LoraAdapter &adapter,
                        const std::string &source) {
  auto expected = loraParameters(config, adapter.config);
  if (!expected)
    return expected.error().withContext(source);
  std::set<std::string> known;
  for (const ParamSpec &p : *expected) {
    known.insert(p.name);
    auto it = adapter.tensors.find(p.name);
    if (it == adapter.tensors.end())
      return Error(source + ": no tensor '" + p.name + "' (the adapter config targets its layer)");
    if (it->second.shape() != p.shape || !isFloat(it->second.dtype()))
      return Error(source + ": tensor '" + p.name + "' is " + typeToString(it->second.type()) +
                   ", the model and rank " + std::to_string(adapter.config.rank) +
                   " need a float tensor of shape " + shapeToString(p.shape));
  }
  for (const auto &[name, t] : adapter.tensors)
    if (!known.count(name))
      return Error(source + ": tensor '" + name +
                   "' is not the A or B of a layer the adapter config targets");
  return Status::ok();
}

Expected<LoraAdapter> startingAdapter(const DecoderConfig &config, const std::string &dir,
                                      const LoraConfig &fresh, uint64_t seed) {
  if (!dir.empty()) {
    KILN_ASSIGN_OR_RETURN(LoraAdapter adapter, readLoraAdapter(dir));
    const std::string file = (fs::path(dir) / kAdapterWeightsFile).string();
    KILN_RETURN_IF_ERROR(checkLoraAdapter(config, adapter, file));
    KILN_RETURN_IF_ERROR(refuseNonFinite(adapter.tensors, file, kTrainingNeedsFiniteValues));
    return adapter;
  }
  LoraAdapter adapter{withDefaultTargets(config, fresh), {}};
  KILN_ASSIGN_OR_RETURN(adapter.tensors, initLoraWeights(config, adapter.config, seed));
  return adapter;
}

Expected<std::map<std::string, Tensor>> mergeLoraAdapter(const DecoderConfig &config,
                                                         std::map<std::string, Tensor> base,
                                                         const LoraAdapter &adapter,
                                                         const std::string &weights_source) {
  KILN_ASSIGN_OR_RETURN(std::vector<ParamSpec> specs, loraParameters(config, adapter.config));
  std::map<std::string, Tensor> model;
  for (const ParamSpec &p : decoderParameters(config)) {
    auto it = base.find(p.name);
    if (it == base.end())
      return Error(weights_source + ": no tensor '" + p.name + "' (a parameter of the model)");
    model.emplace(p.name, std::move(it->second));
  }
  base = std::move(model);
  const double scale = adapter.config.scale();
  const int64_t r = adapter.config.rank;
  for (size_t k = 0; k + 1 < specs.size(); k += 2) {
    const std::string weight = baseWeightOf(specs[k].name);
    auto w = base.find(weight);
    const Shape shape = {specs[k + 1].shape[0], specs[k].shape[1]}; // [out, in]
    if (w == base.end() || w->second.shape() != shape || !isFloat(w->second.dtype()))
      return Error(weights_source + ": no float " + shapeToString(shape) + " tensor '" + weight +
                   "' to merge the adapter into" +
                   (w == base.end() ? "" : "; it holds " + typeToString(w->second.type())));
    const std::vector<double> a = asDoubles(adapter.tensors.at(specs[k].name));
    const std::vector<double> b = asDoubles(adapter.tensors.at(specs[k + 1].name));
    std::vector<double> delta(static_cast<size_t>(shape[0] * shape[1]));
    // delta = scale * B [out, r] A [r, in]
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(shape[0]),
                static_cast<int>(shape[1]), static_cast<int>(r), scale, b.data(),
                static_cast<int>(r), a.data(), static_cast<int>(shape[1]), 0.0, delta.data(),
                static_cast<int>(shape[1]));
    Tensor merged(w->second.type());
    for (int64_t i = 0; i < merged.numElements(); ++i)
      merged.setFloat(i, static_cast<float>(w->second.getFloat(i) + delta[static_cast<size_t>(i)]),
                      OverflowMode::InfNan);
    w->second = std::move(merged);
  }
  return base;
}

} // namespace kiln::frontend
