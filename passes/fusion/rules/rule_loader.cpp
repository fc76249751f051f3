#include "passes/fusion/rules/rule_loader.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <system_error>

#include "passes/fusion/rules/embedded_rules.h"
#include "passes/fusion/rules/rule_pass.h"
#include "support/file_io.h"

namespace kiln::passes::rules {

namespace fs = std::filesystem;

namespace {

std::string_view baseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

} // namespace

Expected<std::vector<FusionRule>> builtinFusionRules(const PassRegistry &builtin) {
  std::vector<FusionRule> rules;
  for (const EmbeddedFile &file : kiln::passes::embeddedFusionRuleFiles()) {
    if (baseName(file.path) == kDefaultSwitchFileName)
      continue;
    KILN_ASSIGN_OR_RETURN(FusionRule rule, parseFusionRuleText(file.contents, file.path, builtin));
    rules.push_back(std::move(rule));
  }
  return rules;
}

Expected<std::vector<FusionRule>>
loadFusionRuleDir(const std::string &dir, const PassRegistry &builtin, const ops::OpRegistry &ops) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Error(dir + ": not a folder of fusion rules (it does not exist or is a file)");
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path &p = it->path();
    if (p.extension() == ".json" && p.filename() != kDefaultSwitchFileName &&
        it->is_regular_file(ec))
      files.push_back(p.string());
  }
  if (ec)
    return Error(dir + ": cannot list the folder: " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<FusionRule> rules;
  for (const std::string &file : files) {
    KILN_ASSIGN_OR_RETURN(std::string text, readFile(file));
    KILN_ASSIGN_OR_RETURN(FusionRule rule, parseFusionRuleText(text, file, builtin, ops));
    rules.push_back(std::move(rule));
  }
  return rules;
}

Status addFusionRules(PassRegistry &registry, std::vector<FusionRule> rules) {
  for (FusionRule &rule : rules) {
    if (const Pass *taken = registry.find(rule.info.name)) {
      const std::string where = rule.source + ": $.name: ";
      if (const auto *other = dynamic_cast<const RulePass *>(taken))
        return Error(where + "pass '" + rule.info.name + "' is defined twice (also by " +
                     other->rule().source + ")");
      return Error(where + "'" + rule.info.name +
                   "' is the name of a built-in pass; give the rule its own name");
    }
    KILN_RETURN_IF_ERROR(registry.add(std::make_shared<RulePass>(std::move(rule))));
  }
  return Status::ok();
}

Expected<PassRegistry> registryWithFusionRules(const PassRegistry &base,
                                               const std::vector<std::string> &rule_dirs,
                                               const ops::OpRegistry &ops) {
  PassRegistry registry = base;
  KILN_ASSIGN_OR_RETURN(std::vector<FusionRule> builtin, builtinFusionRules(base));
  KILN_RETURN_IF_ERROR(addFusionRules(registry, std::move(builtin)));
  for (const std::string &dir : rule_dirs) {
    KILN_ASSIGN_OR_RETURN(std::vector<FusionRule> rules, loadFusionRuleDir(dir, base, ops));
    KILN_RETURN_IF_ERROR(addFusionRules(registry, std::move(rules)));
  }
  return registry;
}

} // namespace kiln::passes::rules
