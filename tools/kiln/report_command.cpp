// `kiln report`: draw what kiln wrote (a training log, a plan, a profile)
// as one self-contained HTML page (compiler/report/).
#include <memory>

#include "compiler/report/report_html.h"
#include "support/file_io.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> inputs;
  std::string output;
  std::string title = "kiln report";
};

int runReport(const ReportOptions &opts) {
  auto inputs = report::readReportInputs(opts.inputs);
  if (!inputs)
    return fail(inputs.error());
  const std::string html = report::renderReport(*inputs, opts.title);
  if (Status written = writeFileAtomic(opts.output, html); !written)
    return fail(written.error());
  note("wrote " + opts.output + " (" + std::to_string(inputs->size()) + " section(s), " +
       std::to_string(html.size() / 1024) + " KiB)");
  return kExitOk;
}

} // namespace

void registerReportCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<ReportOptions>();
  CLI::App *cmd = app.add_subcommand(
      "report", "Draw training logs, plans and profiles as one self-contained HTML page");
  cmd->add_option("INPUT", opts->inputs,
                  "a kiln train --log-json file, a kiln plan --format json file or a --profile "
                  "folder; each makes a section, in this order")
      ->required();
  cmd->add_option("-o,--output", opts->output, "the HTML file to write")->required();
  cmd->add_option("--title", opts->title, "the page's title (default: kiln report)");
  cmd->callback([opts, &action] { action = [opts] { return runReport(*opts); }; });
  suggestOnUnknownArguments(*cmd);
}

} // namespace kiln::cli
