// What a job decides for the passes: the target and which passes run. Built
// once per job (see compiler/driver/job.h); nothing global is edited to change
// one job.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "ir/dtype.h"
#include "passes/pass_options.h"
#include "passes/precision/precision_settings.h"
#include "target/target.h"

namespace kiln::passes {

class Pass;

// Whether a pass runs for a job, and if not, why.
struct PassDecision {
  bool enabled = false;
  std::string decided_by;     // the switch layer that decided `enabled`
  std::string not_applicable; // why the pass does nothing for this job, or empty
  bool runs() const { return enabled && not_applicable.empty(); }
};

class PassContext {
public:
  PassContext(target::Target target, std::map<std::string, bool> enabled,
              std::map<std::string, std::string> decided_by = {})
      : target_(std::move(target)), enabled_(std::move(enabled)),
        decided_by_(std::move(decided_by)) {}

  const PrecisionSettings &precision() const { return precision_; }
  void setPrecision(PrecisionSettings precision) { precision_ = std::move(precision); }

  // The job's values of a pass's declared options (pass_options.h), set
  // once when the job is resolved; a pass the job set nothing for has its
  // declared defaults. By name: a built-in pass's.
  PassOptions options(const Pass &pass) const;
  PassOptions options(std::string_view pass) const;
  void setOptions(std::map<std::string, PassOptions> options) { options_ = std::move(options); }
  // The options the job resolved, by pass (resolvePassOptions).
  const std::map<std::string, PassOptions> &optionValues() const { return options_; }
  // Sets one option of a pass the context knows (a variant of a job).
  Status setOption(const Pass &pass, std::string_view option, std::string_view value,
                   std::string source);

  const target::Target &target() const { return target_; }
  // A pass the switches never mention keeps its built-in default.
  bool isEnabled(const std::string &pass, bool default_on) const {
    auto it = enabled_.find(pass);
    return it == enabled_.end() ? default_on : it->second;
  }
  // The one answer to "does this pass run for this job": switched on, and
  // applicable to the job's target and settings. The pass manager, the
  // listings, the job's JSON, the debug tools and the driver all ask it.
  PassDecision decide(const Pass &pass) const;
  bool willRun(const Pass &pass) const { return decide(pass).runs(); }
  const std::map<std::string, bool> &switches() const { return enabled_; }
  // Which switch layer decided a pass's state ("built-in default" when none).
  std::string decidedBy(const std::string &pass) const {
    auto it = decided_by_.find(pass);
    return it == decided_by_.end() ? "built-in default" : it->second;
  }

private:
  target::Target target_;
  PrecisionSettings precision_;
  std::map<std::string, PassOptions> options_; // by pass name
  std::map<std::string, bool> enabled_;
  std::map<std::string, std::string> decided_by_;
};

} // namespace kiln::passes
