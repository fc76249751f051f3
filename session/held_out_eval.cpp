#include "session/held_out_eval.h"

namespace kiln::session {

Expected<runtime::EvalRecord> evaluateHeldOut(const HeldOutEval &eval,
                                              const frontend::DecoderConfig &config,
                                              const driver::ResolvedJob &job) {
  const driver::ModelRequest &model = eval.request.model;
  KILN_ASSIGN_OR_RETURN(
      runtime::TokenData data,
      runtime::TokenData::open(eval.data, eval.data_dtype, config.vocab_size, model.seq));
  KILN_ASSIGN_OR_RETURN(int64_t windows,
                        runtime::evalWindows(data, eval.data, model.batch, eval.max_tokens));
  KILN_ASSIGN_OR_RETURN(driver::PreparedEval prepared,
                        driver::prepareEvaluation(eval.request, config, job, eval.kernels));
  return runtime::evaluate(prepared.program, prepared.weights, eval.request.weights_path, data,
                           windows);
}

} // namespace kiln::session
