// `kiln ops`: the op vocabulary, from the op definitions; with --custom-ops,
// a job's custom ops and their gradient ops beside the built-in ones.
#include <iostream>

#include "compiler/frontend/custom_ops.h"
#include "ops/op_docs.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {

void registerOpsCommand(CLI::App &app, Action &action) {
  auto format = std::make_shared<std::string>("markdown");
  auto custom_op_dirs = std::make_shared<std::vector<std::string>>();
  CLI::App *cmd = app.add_subcommand("ops", "List the ops kiln knows, with their signatures");
  cmd->add_option("--format", *format, "markdown or json")->check(OneOf({"markdown", "json"}));
  cmd->add_option("--custom-ops", *custom_op_dirs,
                  "a folder of custom op definitions to list too, docs/custom-ops.md (repeatable)");
  cmd->callback([format, custom_op_dirs, &action] {
    action = [format, custom_op_dirs] {
      auto custom = frontend::loadCustomOps(*custom_op_dirs);
      if (!custom)
        return fail(custom.error());
      const ops::OpRegistry &registry = *custom ? **custom : ops::OpRegistry::builtin();
      if (*format == "json")
        std::cout << ops::opsToJson(registry).dump(2) << "\n";
      else
        std::cout << ops::opsToMarkdown(registry);
      return 0;
    };
  });
  suggestOnUnknownArguments(*cmd);
}

} // namespace kiln::cli
