// kiln: the command-line driver. Each subcommand lives in its own file.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <new>
#include <optional>
#include <string_view>
#include <unistd.h>

#include <spdlog/cfg/helpers.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "support/printable_text.h"
#include "support/progress.h"
#include "tools/kiln/cli_common.h"

namespace {

// Formats a log line with a pattern, then escapes the control characters a
// name read from a file may have brought into it.
class PrintableFormatter final : public spdlog::formatter {
public:
  explicit PrintableFormatter(const std::string &pattern) : pattern_(pattern), inner_(pattern) {}
  void format(const spdlog::details::log_msg &msg, spdlog::memory_buf_t &dest) override {
    spdlog::memory_buf_t line;
    inner_.format(msg, line);
    const std::string text = kiln::printableText({line.data(), line.size()});
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<PrintableFormatter>(pattern_);
  }

private:
  std::string pattern_;
  spdlog::pattern_formatter inner_;
};

} // namespace

int main(int argc, char **argv) {
  // Log to stderr so that stdout carries only a command's own output.
  spdlog::set_default_logger(spdlog::stderr_color_mt("kiln"));
  spdlog::set_formatter(std::make_unique<PrintableFormatter>("kiln: %l: %v"));
  if (const char *level = std::getenv("KILN_LOG_LEVEL"))
    spdlog::cfg::helpers::load_levels(level);
  // Progress lines on steps that take seconds: on a terminal, or on request.
  std::string progress_warning;
  std::unique_ptr<kiln::progress::Reporter> progress = kiln::progress::stderrReporter(
      std::getenv("KILN_PROGRESS"), ::isatty(STDERR_FILENO) != 0, &progress_warning);
  if (!progress_warning.empty())
    spdlog::warn("{}", progress_warning);
  std::optional<kiln::progress::Scope> progress_scope;
  if (progress)
    progress_scope.emplace(*progress);

  CLI::App app{"kiln: an ahead-of-time graph compiler and fusion-pass manager for training\n"
               "large language models on Ascend-class NPUs (kernels run on the host CPU\n"
               "with the NPU's numerics)."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");
  kiln::cli::Action action;
  kiln::cli::registerGraphCommand(app, action);
  kiln::cli::registerInitCommand(app, action);
  kiln::cli::registerRunCommand(app, action);
  kiln::cli::registerMakeInputsCommand(app, action);
  kiln::cli::registerOpsCommand(app, action);
  kiln::cli::registerCompileCommand(app, action);
  kiln::cli::registerPassesCommand(app, action);
  kiln::cli::registerCacheCommand(app, action);
  kiln::cli::registerDebugCommand(app, action);
  kiln::cli::registerInspectCommand(app, action);
  kiln::cli::registerTrainCommand(app, action);
  kiln::cli::registerTokenizeCommand(app, action);
  kiln::cli::registerEvalCommand(app, action);
  kiln::cli::registerKeysCommand(app, action);
  kiln::cli::registerMergeCommand(app, action);
  kiln::cli::registerPlanCommand(app, action);
  kiln::cli::registerReportCommand(app, action);
  if (argc > 1 && argv[1][0] != '-' &&
      app.get_subcommands([&](const CLI::App *c) { return c->check_name(argv[1]); }).empty()) {
    // CLI11 would only say "a subcommand is required"; name the word it did not know.
    const std::string nearest = kiln::cli::suggestCommand(app, argv[1]);
    std::cerr << "kiln: error: unknown command '" << kiln::printableName(argv[1]) << "' ("
              << (nearest.empty() ? "" : "did you mean " + nearest + "? ")
              << "run 'kiln --help' for the list)\n";
    return kiln::cli::kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // --help and --version exit 0; everything else is a usage error.
    return e.get_exit_code() == 0 ? app.exit(e) : kiln::cli::reportParseError(app, e);
  }
  // KILN_CHECK_COMMAND_LINE=1: the command line is checked (the command, its
  // flags, their values' forms) and nothing is done; docs' examples are
  // tested this way.
  if (const char *check = std::getenv("KILN_CHECK_COMMAND_LINE");
      check && *check && std::string_view(check) != "0")
    return 0;
  // Every error is a value below tools/; an exception that still escapes (a
  // library's, an allocation that failed) is one line and exit code 1, never
  // an abort.
  try {
    return action ? action() : 0;
  } catch (const std::bad_alloc &) {
    std::cerr << "kiln: error: out of memory: an input or a plan needs more memory than this "
                 "machine has (check the sizes named in the model, the data and the flags)\n";
  } catch (const std::exception &e) {
    std::cerr << "kiln: error: " << kiln::printableText(e.what()) << "\n";
  }
  return kiln::cli::kExitError;
}
