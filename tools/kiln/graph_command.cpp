// `kiln graph`: build a model's graph and print it as text, JSON or stats.
#include <fstream>
#include <iostream>

#include "compiler/autodiff/training_step.h"
#include "compiler/driver/graph_stats.h"
#include "compiler/driver/job.h"
#include "compiler/driver/training_loss.h"
#include "compiler/frontend/custom_ops.h"
#include "compiler/frontend/model_loader.h"
#include "formats/graph_json.h"
#include "ir/printer.h"
#include "support/file_io.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"
#include "tools/kiln/loss_flags.h"

namespace kiln::cli {
namespace {

struct GraphOptions {
  std::string model;
  bool training = false;
  std::string loss; // an ONNX model's, with --training
  int64_t batch = 1;
  int64_t seq = 0;
  DType dtype = driver::kDefaultModelDType;
  std::string format = "text";
  std::string output;
  bool provenance = false;
  std::vector<std::string> custom_op_dirs;
  std::map<std::string, std::vector<int64_t>> input_shapes;
};

int runGraph(const GraphOptions &opts) {
  if (Status loss = checkLossFlag(opts.model, opts.training, opts.loss); !loss)
    return fail(loss.error());
  frontend::ModelOptions model_options;
  model_options.batch = opts.batch;
  model_options.seq = opts.seq;
  model_options.dtype = opts.dtype;
  model_options.input_shapes = opts.input_shapes;
  auto custom = frontend::loadCustomOps(opts.custom_op_dirs);
  if (!custom)
    return fail(custom.error());
  model_options.ops = *custom;
  auto model = frontend::loadModel(opts.model, model_options);
  if (!model)
    return fail(model.error());
  if (opts.training) {
    autodiff::TrainingStepOptions step;
    auto loss = driver::trainingLoss(*model, opts.model, opts.loss);
    if (!loss)
      return fail(loss.error());
    step.loss = *loss;
    auto train = autodiff::buildTrainingStep(model->graph, step);
    if (!train)
      return fail(train.error());
    model->graph = std::move(*train);
  }
  const Graph &graph = model->graph;
  std::string text;
  if (opts.format == "text")
    text = graphToText(graph, PrintOptions{opts.provenance});
  else if (opts.format == "json")
    text = graphToJson(graph).dump(1) + "\n";
  else
    text = driver::graphStats(graph).dump(2) + "\n";
  if (opts.output.empty()) {
    std::cout << text;
    return 0;
  }
  Status written = writeFileAtomic(opts.output, text);
  return written ? 0 : fail(written.error());
}

} // namespace

void registerGraphCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<GraphOptions>();
  CLI::App *cmd = app.add_subcommand("graph", "Build a model's graph and print it");
  addModelArgument(*cmd, opts->model, ModelArgument::AnyModel);
  cmd->add_flag("--training", opts->training,
                "the whole training step: forward, loss, backward, AdamW");
  addLossFlag(*cmd, opts->loss);
  cmd->add_option("--batch", opts->batch, "batch size")->check(PositiveInteger);
  cmd->add_option("--seq", opts->seq, "sequence length (default: the config's seq_length)")
      ->check(PositiveInteger);
  addInputShapeFlag(*cmd, opts->input_shapes);
  addDTypeFlag(*cmd, "--dtype", opts->dtype,
               "the model's dtype (default f32, as in every command)");
  cmd->add_option("--format", opts->format, "text, json or stats")
      ->check(OneOf({"text", "json", "stats"}));
  cmd->add_flag("--provenance", opts->provenance, "text: show which pass made each node");
  cmd->add_option("-o,--output", opts->output, "write to FILE instead of stdout");
  cmd->add_option("--custom-ops", opts->custom_op_dirs,
                  "a folder of custom op definitions a graph JSON uses, docs/custom-ops.md "
                  "(repeatable)");
  cmd->callback([opts, &action] { action = [opts] { return runGraph(*opts); }; });
  suggestOnUnknownArguments(*cmd);
}

} // namespace kiln::cli
