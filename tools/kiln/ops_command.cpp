// `kiln ops`: the op vocabulary, from the op definitions.
#include <iostream>

#include "ops/op_docs.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {

void registerOpsCommand(CLI::App &app, Action &action) {
  auto format = std::make_shared<std::string>("markdown");
  CLI::App *cmd = app.add_subcommand("ops", "List the ops kiln knows, with their signatures");
  cmd->add_option("--format", *format, "markdown or json")
      ->check(CLI::IsMember({"markdown", "json"}));
  cmd->callback([format, &action] {
    action = [format] {
      const ops::OpRegistry &registry = ops::OpRegistry::global();
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
