#include "tools/kiln/cli_common.h"

#include <iostream>

namespace kiln::cli {

int fail(const Error &error) { return fail(error.message()); }

int fail(const std::string &message) {
  std::cerr << "kiln: error: " << message << "\n";
  return 1;
}

CLI::Option *addDTypeFlag(CLI::App &app, const std::string &name, DType &dtype,
                          const std::string &help) {
  return app
      .add_option_function<std::string>(
          name,
          [&dtype, name](const std::string &text) {
            auto parsed = parseDType(text);
            if (!parsed || !isFloat(*parsed))
              throw CLI::ValidationError(name, "expected f32, f16 or bf16, got '" + text + "'");
            dtype = *parsed;
          },
          help)
      ->type_name("f32|f16|bf16");
}

CLI::Option *addOverflowFlag(CLI::App &app, OverflowMode &mode) {
  return app
      .add_option_function<std::string>(
          "--overflow-mode",
          [&mode](const std::string &text) {
            auto parsed = parseOverflowMode(text);
            if (!parsed)
              throw CLI::ValidationError("--overflow-mode",
                                         "expected infnan or saturation, got '" + text + "'");
            mode = *parsed;
          },
          "how fp16/bf16 results that overflow are rounded (default infnan)")
      ->type_name("infnan|saturation");
}

} // namespace kiln::cli
