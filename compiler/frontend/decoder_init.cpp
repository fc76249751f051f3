// Deterministic, per-parameter-seeded initialisation of decoder weights.
#include "compiler/frontend/decoder_init.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string_view>

#include "compiler/frontend/decoder_model.h"
#include "compiler/frontend/random_init.h"

namespace kiln::frontend {

namespace {

Tensor initialValue(const ParamSpec &p, const DecoderConfig &config, uint64_t seed) {
  Tensor t(TensorType{DType::F32, p.shape});
  float *data = t.dataAs<float>();
  const int64_t n = t.numElements();
  std::mt19937_64 rng = generatorFor(seed, p.name);
  switch (p.kind) {
  case ParamKind::Norm:
    std::fill(data, data + n, 1.0f);
    break;
  case ParamKind::Bias:
  case ParamKind::LoraB:
    break; // zero-filled already
  case ParamKind::Embedding:
  case ParamKind::Weight: {
    const double proj_std =
        config.initializer_range / std::sqrt(2.0 * static_cast<double>(config.num_hidden_layers));
    std::normal_distribution<double> dist(0.0, config.family->scaled_output_init &&
                                                       p.name.ends_with("c_proj.weight")
                                                   ? proj_std
                                                   : config.initializer_range);
    for (int64_t i = 0; i < n; ++i)
      data[i] = static_cast<float>(dist(rng));
    break;
  }
  case ParamKind::LoraA: {
    // nn.init.kaiming_uniform_(a=sqrt(5)), PEFT's default: U(-1/sqrt(in), 1/sqrt(in)).
    const double bound = 1.0 / std::sqrt(static_cast<double>(p.shape.at(1)));
    std::uniform_real_distribution<double> dist(-bound, bound);
    for (int64_t i = 0; i < n; ++i)
      data[i] = static_cast<float>(dist(rng));
    break;
  }
  }
  return t;
}

} // namespace

std::map<std::string, Tensor> initDecoderWeights(const DecoderConfig &config, uint64_t seed) {
  std::map<std::string, Tensor> weights;
  for (const ParamSpec &p : decoderParameters(config))
    weights.emplace(p.name, initialValue(p, config, seed));
  return weights;
}

Expected<std::map<std::string, Tensor>> initLoraWeights(const DecoderConfig &config,
                                                        const LoraConfig &lora, uint64_t seed) {
  KILN_ASSIGN_OR_RETURN(std::vector<ParamSpec> adapters, loraParameters(config, lora));
  std::map<std::string, Tensor> weights;
  for (const ParamSpec &p : adapters)
    weights.emplace(p.name, initialValue(p, config, seed));
  return weights;
}

Status scaleWeights(std::map<std::string, Tensor> &weights, const std::string &pattern,
                    double factor) {
  int matched = 0;
  for (auto &[name, t] : weights) {
    if (fnmatch(pattern.c_str(), name.c_str(), 0) != 0)
      continue;
    ++matched;
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.setFloat(i, static_cast<float>(t.getFloat(i) * factor), OverflowMode::InfNan);
  }
  if (matched == 0)
    return Error("--scale: no weight matches '" + pattern + "'");
  return Status::ok();
}

} // namespace kiln::frontend
