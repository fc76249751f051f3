#include "passes/pass_context.h"

#include <algorithm>

#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace kiln::passes {

PassDecision PassContext::decide(const Pass &pass) const {
  const PassInfo &info = pass.info();
  PassDecision d;
  d.enabled = isEnabled(info.name, info.default_on);
  d.decided_by = decidedBy(info.name);
  d.not_applicable = pass.appliesTo(*this).reason();
  return d;
}

PassOptions PassContext::options(const Pass &pass) const {
  auto it = options_.find(pass.info().name);
  return it != options_.end() ? it->second : PassOptions(pass.info().options);
}

PassOptions PassContext::options(std::string_view pass) const {
  if (auto it = options_.find(std::string(pass)); it != options_.end())
    return it->second;
  const Pass *builtin = PassRegistry::builtin().find(pass);
  return builtin ? PassOptions(builtin->info().options) : PassOptions();
}

Status PassContext::setOption(const Pass &pass, std::string_view option, std::string_view value,
                              std::string source) {
  const std::vector<PassOptionInfo> &declared = pass.info().options;
  auto info = std::find_if(declared.begin(), declared.end(),
                           [&](const PassOptionInfo &o) { return o.name == option; });
  if (info == declared.end())
    return Error(pass.info().name + " has no option '" + std::string(option) + "'")
        .withCode(kErrUnknownPassOption);
  auto [it, fresh] = options_.try_emplace(pass.info().name, declared);
  return it->second.set(*info, value, std::move(source));
}

} // namespace kiln::passes
