// `kiln inspect`: what an artifact holds — its manifest, whether this kiln
// and host may run it, and per bucket the kernels, the fusion groups and the
// memory plan.
#include <filesystem>
#include <iostream>

#include "compiler/artifact/artifact_summary.h"
#include "support/printable_text.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {
namespace {

struct InspectOptions {
  std::string path;
  std::string format = "text";
  size_t largest = 10;
  std::string kernels; // --kernels N|all; empty: kDefaultKernels
};

// The kernels and fusion groups a bucket lists by default: the first few
// show their shape; the Qwen-14B artifact has thousands.
constexpr size_t kDefaultKernels = 20;

int runInspect(const InspectOptions &opts) {
  if (opts.format == "json" && !opts.kernels.empty())
    return usage("--kernels bounds the text listing; --format json lists every kernel and "
                 "fusion group: drop one of the two");
  auto artifact = artifact::readArtifact(opts.path);
  if (!artifact)
    return fail(artifact.error());
  std::error_code ec;
  const uint64_t bytes = std::filesystem::file_size(opts.path, ec);
  nlohmann::json summary = artifact::summarizeArtifact(*artifact, ec ? 0 : bytes, opts.largest);
  if (opts.format == "json") {
    std::cout << summary.dump(2) << "\n";
    return 0;
  }
  const size_t shown = opts.kernels.empty()    ? kDefaultKernels
                       : opts.kernels == "all" ? SIZE_MAX
                                               : std::stoull(opts.kernels);
  printText(artifact::summaryToText(summary, shown));
  return 0;
}

} // namespace

void registerInspectCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<InspectOptions>();
  CLI::App *cmd = app.add_subcommand(
      "inspect", "Show what an artifact (FILE.kiln) holds and whether it runs here");
  cmd->add_option("ARTIFACT", opts->path, "an artifact written by kiln compile -o FILE.kiln")
      ->required();
  cmd->add_option("--format", opts->format, "text (default) or json")
      ->check(OneOf({"text", "json"}));
  cmd->add_option("--largest", opts->largest,
                  "how many of each bucket's largest buffers to list (default 10)")
      ->check(NonNegativeInteger);
  cmd->add_option("--kernels", opts->kernels,
                  "how many of each bucket's kernels and fusion groups to list, or all "
                  "(default 20; text only)")
      ->check(CLI::Validator(
          [](std::string &n) -> std::string {
            return n == "all" || NonNegativeInteger(n).empty()
                       ? std::string()
                       : "expected a whole number of at least 0 or all, got '" + printableName(n) +
                             "'";
          },
          "N|all", "KERNEL_COUNT"));
  suggestOnUnknownArguments(*cmd);
  cmd->callback([opts, &action] { action = [opts] { return runInspect(*opts); }; });
}

} // namespace kiln::cli
