// `kiln inspect`: what an artifact holds — its manifest, whether this kiln
// and host may run it, and per bucket the kernels, the fusion groups and the
// memory plan.
#include <filesystem>
#include <iostream>

#include "compiler/artifact/artifact_summary.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {
namespace {

struct InspectOptions {
  std::string path;
  std::string format = "text";
  size_t largest = 10;
};

int runInspect(const InspectOptions &opts) {
  auto artifact = artifact::readArtifact(opts.path);
  if (!artifact)
    return fail(artifact.error());
  std::error_code ec;
  const uint64_t bytes = std::filesystem::file_size(opts.path, ec);
  nlohmann::json summary = artifact::summarizeArtifact(*artifact, ec ? 0 : bytes, opts.largest);
  if (opts.format == "json")
    std::cout << summary.dump(2) << "\n";
  else
    printText(artifact::summaryToText(summary));
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
      ->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--largest", opts->largest,
                  "how many of each bucket's largest buffers to list (default 10)");
  suggestOnUnknownArguments(*cmd);
  cmd->callback([opts, &action] { action = [opts] { return runInspect(*opts); }; });
}

} // namespace kiln::cli
