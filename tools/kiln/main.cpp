// kiln: the command-line driver. Each subcommand lives in its own file.
#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"kiln: ahead-of-time graph compiler for LLM training on Ascend-class NPUs"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
