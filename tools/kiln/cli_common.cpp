#include "tools/kiln/cli_common.h"

#include <iostream>

#include "ir/printable_text.h"

namespace kiln::cli {

int fail(const Error &error) { return fail(error.message()); }

int fail(const std::string &message) {
  std::cerr << "kiln: error: " << printableText(message) << "\n";
  return kExitError;
}

void note(const std::string &message) { std::cerr << "kiln: " << printableText(message) << "\n"; }

void printText(const std::string &text) { std::cout << printableText(text); }

namespace {

DType parseFloatDType(const std::string &flag, const std::string &text) {
  auto parsed = parseDType(text);
  if (!parsed || !isFloat(*parsed))
    throw CLI::ValidationError(flag, "expected f32, f16 or bf16, got '" + text + "'");
  return *parsed;
}

OverflowMode parseOverflow(const std::string &text) {
  auto parsed = parseOverflowMode(text);
  if (!parsed)
    throw CLI::ValidationError("--overflow-mode",
                               "expected infnan or saturation, got '" + text + "'");
  return *parsed;
}

} // namespace

CLI::Option *addDTypeFlag(CLI::App &app, const std::string &name, DType &dtype,
                          const std::string &help) {
  return app
      .add_option_function<std::string>(
          name, [&dtype, name](const std::string &text) { dtype = parseFloatDType(name, text); },
          help)
      ->type_name("f32|f16|bf16");
}

CLI::Option *addOptionalDTypeFlag(CLI::App &app, std::optional<DType> &dtype) {
  return app
      .add_option_function<std::string>(
          "--dtype",
          [&dtype](const std::string &text) { dtype = parseFloatDType("--dtype", text); },
          "compute dtype of the model")
      ->type_name("f32|f16|bf16");
}

CLI::Option *addOptionalOverflowFlag(CLI::App &app, std::optional<OverflowMode> &mode) {
  return app
      .add_option_function<std::string>(
          "--overflow-mode", [&mode](const std::string &text) { mode = parseOverflow(text); },
          "how fp16/bf16 results that overflow are rounded (default: the target's)")
      ->type_name("infnan|saturation");
}

} // namespace kiln::cli
