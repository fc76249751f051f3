// What `kiln passes list` and `kiln passes show` print: every pass of a job's
// registry with its declaration and its effective state for the job.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "compiler/driver/job.h"

namespace kiln::driver {

// One object per pass in run order: name, group, priority, default,
// may_disable (and why not), enabled for this job and the layer that decided
// it, applicable to the job's target (or why not), summary, description.
nlohmann::json passListing(const ResolvedJob &job);
// The listing as an aligned table (name, group, default, state, target).
std::string passTable(const nlohmann::json &listing, const std::string &target);
// docs/passes.md: every pass of `registry` with its declaration and, per
// built-in target, whether it applies there.
std::string passesToMarkdown(const passes::PassRegistry &registry);
// One pass in full; an unknown name suggests the nearest ones.
Expected<std::string> describePass(const ResolvedJob &job, const std::string &name);

} // namespace kiln::driver
