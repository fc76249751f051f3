// Decoder layers in scoped names. Every frontend names a layer's nodes and
// weights under a layer scope, the Hugging Face module path: "transformer.h.
// <i>." (Qwen v1) or "model.layers.<i>." (Qwen2, Llama, Qwen3). Passes that
// work per layer (recomputation, pipeline cuts, per-layer precision) find
// the layer here instead of knowing a model.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln {

// The layer of a name that starts with a layer scope ("model.layers.3.mlp",
// or the layer itself, "model.layers.3"), or -1.
int64_t layerAtStart(std::string_view name);

// The layer of a name holding a layer scope anywhere (a gradient
// "grad.model.layers.3...", a PEFT adapter "base_model.model.transformer.h.3..."),
// or -1.
int64_t layerWithin(std::string_view name);

// The module of a layer a name lies in, the component after the layer number
// included ("model.layers.1.mlp" for "grad.model.layers.1.mlp.mul"); empty
// when the name holds no layer scope.
std::string_view layerModuleOf(std::string_view name);

// Whether a name lies under the token embedding ("transformer.wte.",
// "model.embed_tokens.").
bool isEmbeddingName(std::string_view name);

} // namespace kiln
