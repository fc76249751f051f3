// `kiln passes list|show`: the passes kiln has, and what a job makes of them.
#include <iostream>

#include "compiler/driver/pass_listing.h"
#include "tools/kiln/cli_common.h"
#include "tools/kiln/job_flags.h"

namespace kiln::cli {
namespace {

struct PassesOptions {
  JobFlags job;
  std::string format = "table";
  std::string name;
};

int runList(const PassesOptions &opts) {
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  nlohmann::json listing = driver::passListing(*job);
  if (opts.format == "json")
    std::cout << listing.dump(2) << "\n";
  else if (opts.format == "markdown")
    printText(driver::passesToMarkdown(*job->registry));
  else
    printText(driver::passTable(listing, job->target.name));
  return 0;
}

int runShow(const PassesOptions &opts) {
  auto job = resolveJobFlags(opts.job, driver::kDefaultModelDType);
  if (!job)
    return fail(job.error());
  auto text = driver::describePass(*job, opts.name);
  if (!text) // NAME is no pass of the job
    return fail(usageError(text.error()));
  printText(*text);
  return 0;
}

} // namespace

void registerPassesCommand(CLI::App &app, Action &action) {
  CLI::App *cmd = app.add_subcommand("passes", "List the passes and what a job makes of them");
  cmd->require_subcommand(1);

  auto list_opts = std::make_shared<PassesOptions>();
  CLI::App *list = cmd->add_subcommand("list", "Every pass, its default and its state for a job");
  addJobFlags(*list, list_opts->job);
  list->add_option("--format", list_opts->format, "table, json or markdown (docs/passes.md)")
      ->check(OneOf({"table", "json", "markdown"}));
  list->callback([list_opts, &action] { action = [list_opts] { return runList(*list_opts); }; });

  auto show_opts = std::make_shared<PassesOptions>();
  CLI::App *show = cmd->add_subcommand("show", "One pass in full");
  show->add_option("NAME", show_opts->name, "the pass")->required();
  addJobFlags(*show, show_opts->job);
  show->callback([show_opts, &action] { action = [show_opts] { return runShow(*show_opts); }; });
  suggestOnUnknownArguments(*cmd);
}

} // namespace kiln::cli
