#include "compiler/driver/compile.h"

#include <iterator>

#include "compiler/autodiff/training_step.h"
#include "compiler/driver/training_loss.h"
#include "compiler/frontend/model_loader.h"
#include "ops/op_verifier.h"
#include "passes/fusion/flash_attention_fusion.h"
#include "passes/precision/setting_matches.h"

namespace kiln::driver {

Expected<Graph> buildModelGraph(const ModelRequest &request, const ResolvedJob &job) {
  frontend::ModelOptions options;
  options.batch = request.batch;
  options.seq = request.seq;
  options.dtype = job.dtype;
  options.lora = request.lora;
  options.ops = job.ops;
  options.input_shapes = request.input_shapes;
  KILN_ASSIGN_OR_RETURN(frontend::LoadedModel model, frontend::loadModel(request.model, options));
  autodiff::TrainingStepOptions step;
  if (request.training) {
    KILN_ASSIGN_OR_RETURN(step.loss, trainingLoss(model, request.model, request.loss));
  }
  // Attention fuses before autodiff: its backward is then the fused op's.
  KILN_RETURN_IF_ERROR(passes::fuseAttentionBeforeAutodiff(model.graph, *job.context).status());
  if (!request.training)
    return std::move(model.graph);
  return autodiff::buildTrainingStep(model.graph, step);
}

Expected<passes::PipelineReport> compileGraph(Graph &graph, const ResolvedJob &job,
                                              const passes::Instrumentation &instrumentation,
                                              bool check_settings,
                                              const GraphRewrite &after_precision) {
  std::vector<passes::SettingMatch> settings;
  if (check_settings) {
    KILN_ASSIGN_OR_RETURN(settings, passes::matchPrecisionSettings(graph, *job.context));
  }
  passes::PassManager manager(*job.registry, *job.context, instrumentation);
  if (!after_precision) {
    KILN_ASSIGN_OR_RETURN(passes::PipelineReport report, manager.run(graph));
    report.settings = std::move(settings);
    return report;
  }
  // Group by group, the rewrite after the precision passes.
  passes::PipelineReport report;
  for (passes::PassGroup group : passes::kAllPassGroups) {
    KILN_ASSIGN_OR_RETURN(passes::PipelineReport part, manager.run(graph, group));
    report.target = part.target;
    std::move(part.passes.begin(), part.passes.end(), std::back_inserter(report.passes));
    if (group == passes::PassGroup::Precision) {
      KILN_RETURN_IF_ERROR(after_precision(graph));
      KILN_RETURN_IF_ERROR(graph.compact());
      KILN_RETURN_IF_ERROR(ops::verifyGraph(graph));
    }
  }
  report.settings = std::move(settings);
  return report;
}

} // namespace kiln::driver
