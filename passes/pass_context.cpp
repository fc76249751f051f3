#include "passes/pass_context.h"

#include "passes/pass.h"

namespace kiln::passes {

PassDecision PassContext::decide(const Pass &pass) const {
  const PassInfo &info = pass.info();
  PassDecision d;
  d.enabled = isEnabled(info.name, info.default_on);
  d.decided_by = decidedBy(info.name);
  d.not_applicable = pass.appliesTo(*this).reason();
  return d;
}

} // namespace kiln::passes
