// The options a job sets for its passes (passes/pass_options.h): the job
// file's "pass_options" and --pass-option, and the flags that are one pass's
// option under a name of their own (--recompute and --recompute-layers are
// RecomputePass's mode and layers, --attention-fp32-layers is
// AttentionFp32CastPass's layers, each with its job file field).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "compiler/driver/job.h"
#include "passes/pass_options.h"
#include "support/json_reader.h"

namespace kiln::driver {

// $.pass_options of a job file: {"PASS": {"OPTION": value}}, a value a JSON
// string, number, boolean or array of integers. Names are checked against the
// passes when the job is resolved.
Expected<std::vector<passes::PassOptionSetting>>
parsePassOptions(const JsonReader &r, const nlohmann::json &doc, const std::string &source);

// Every option setting of the job in precedence order, lowest first: the job
// file's own flags' fields, its pass_options, then the command line's flags
// and --pass-option. A later setting of one option beats an earlier one.
std::vector<passes::PassOptionSetting> passOptionSettings(const JobSettings &job,
                                                          const JobSettings &command_line);

} // namespace kiln::driver
