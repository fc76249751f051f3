// The passes kiln knows. Built-in passes register themselves with one line
// beside their definition:
//   KILN_REGISTER_PASS(MatMulBiasAddFusionPass);
// A job's registry is a copy of the built-in one plus its fusion rules.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "passes/pass.h"
#include "support/error.h"

namespace kiln::passes {

class PassRegistry {
public:
  // Every pass registered with KILN_REGISTER_PASS.
  static const PassRegistry &builtin();

  // A name that exists already is an error.
  Status add(std::shared_ptr<const Pass> pass);
  const Pass *find(std::string_view name) const;
  // In run order (pipeline.h): by group, then priority, then name.
  std::vector<const Pass *> ordered() const;
  // Up to `count` registered names closest to `name` (for "did you mean").
  std::vector<std::string> nearestNames(std::string_view name, size_t count = 3) const;
  // "unknown pass 'X' (did you mean A, B?)"
  std::string unknownPassMessage(std::string_view name) const;

private:
  std::vector<std::shared_ptr<const Pass>> passes_;
};

// Used by KILN_REGISTER_PASS during static initialisation.
bool registerBuiltinPass(std::shared_ptr<const Pass> pass);

} // namespace kiln::passes

#define KILN_REGISTER_PASS(CLASS)                                                                  \
  [[maybe_unused]] static const bool KILN_CONCAT(kiln_pass_registered_, __LINE__) =                \
      ::kiln::passes::registerBuiltinPass(std::make_shared<CLASS>())
