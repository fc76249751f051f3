// What a training step reports (trainer.h StepRecord): the --log-json
// record and the text line.
#include <cmath>
#include <cstdio>

#include "runtime/trainer.h"

namespace kiln::runtime {

nlohmann::json StepRecord::toJson() const {
  auto number = [](double v) -> nlohmann::json {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  nlohmann::json json = {{"step", step},
                         {"loss", number(loss)},
                         {"loss_scale", loss_scale},
                         {"grad_norm", number(grad_norm)},
                         {"lr", lr},
                         {"overflow", overflow},
                         {"seconds", seconds},
                         {"tokens_per_s", tokens_per_s}};
  if (validation) {
    // kiln report draws every "eval..." number: the loss beside the training
    // loss, the perplexity in a chart of its own.
    json["eval_loss"] = number(validation->loss);
    json["eval_perplexity"] = number(validation->perplexity);
    json["validation"] = validation->toJson();
  }
  return json;
}

std::string StepRecord::validationText() const {
  return validation ? "validation at step " + std::to_string(step) + ": " + validation->toText()
                    : "";
}

std::string StepRecord::toText(int64_t steps) const {
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "step %lld/%lld  loss %.4f  loss scale %.0f  grad norm %.4g  lr %.3g  %.0f "
                "tokens/s%s",
                static_cast<long long>(step), static_cast<long long>(steps), loss, loss_scale,
                grad_norm, lr, tokens_per_s,
                overflow ? "  overflow: update skipped on every device" : "");
  return buf;
}

} // namespace kiln::runtime
