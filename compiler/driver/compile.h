// The compile pipeline of a job: build the model's graph (forward or the
// whole training step) and run the job's passes over it.
#pragma once

#include <functional>
#include <map>

#include <string>

#include "compiler/driver/job.h"
#include "compiler/frontend/lora_config.h"
#include "ir/graph.h"
#include "passes/pass_manager.h"
#include "support/error.h"

namespace kiln::driver {

struct ModelRequest {
  std::string model;     // config.json, a folder holding it, or a kiln graph JSON
  bool training = false; // forward, loss, backward and AdamW
  int64_t batch = 1;
  int64_t seq = 0;           // 0: the config's seq_length
  frontend::LoraConfig lora; // with a rank: adapters trained, the base frozen
  // An ONNX model's input shapes by name (--input-shape).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // The scalar output an ONNX model's training step differentiates (--loss);
  // other models train on their own "loss" (driver/training_loss.h).
  std::string loss;
};

// The model's graph in the job's dtype, written in its ops.
Expected<Graph> buildModelGraph(const ModelRequest &request, const ResolvedJob &job);

// Runs the job's passes over `graph` in place, after checking the job's
// list-like precision settings against it (a keep_dtype name or a layer the
// graph lacks is an error); the report says what each of them matched.
// `check_settings` false skips that check: for graphs cut out of a model
// (debug reduce), which lack most of its nodes and layers.
// `after_precision`, when given, rewrites the graph between the precision
// passes and the step rewrites and fusions (the training driver's weight
// copies: they replace the Casts the precision passes made, before fusion
// takes the Casts into kernels).
using GraphRewrite = std::function<Status(Graph &)>;
Expected<passes::PipelineReport> compileGraph(Graph &graph, const ResolvedJob &job,
                                              const passes::Instrumentation &instrumentation = {},
                                              bool check_settings = true,
                                              const GraphRewrite &after_precision = {});

} // namespace kiln::driver
