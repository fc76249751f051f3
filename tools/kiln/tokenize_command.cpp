// `kiln tokenize`: text in, the token file `kiln train --data` and
// `kiln eval --data` read out, with the model's own tokenizer.
#include <iostream>

#include <nlohmann/json.hpp>

#include "tokenizer/corpus.h"
#include "tokenizer/tokenizer.h"
#include "tools/kiln/cli_common.h"

namespace kiln::cli {
namespace {

struct TokenizeOptions {
  std::string tokenizer;
  std::string model; // a config.json whose vocab_size the ids must fit
  tokenizer::CorpusOptions corpus;
  std::string format = "text";
};

int runTokenize(TokenizeOptions opts) {
  auto tok = tokenizer::Tokenizer::load(opts.tokenizer);
  if (!tok)
    return fail(tok.error());
  if (!opts.model.empty()) {
    auto config = decoderConfigOf(opts.model, "kiln tokenize --model");
    if (!config)
      return fail(config.error());
    opts.corpus.model_vocab = config->vocab_size;
  }
  auto summary = tokenizer::tokenizeCorpus(*tok, opts.corpus);
  if (!summary)
    return fail(summary.error());
  if (opts.format == "json")
    std::cout << summary->toJson().dump(2) << "\n";
  else
    printText(summary->toText());
  return 0;
}

} // namespace

void registerTokenizeCommand(CLI::App &app, Action &action) {
  auto opts = std::make_shared<TokenizeOptions>();
  CLI::App *cmd = app.add_subcommand(
      "tokenize", "Turn text into the token file kiln train --data reads, with the model's "
                  "tokenizer (tokenizer.json)");
  cmd->add_option("--tokenizer", opts->tokenizer,
                  "The model's folder (its tokenizer.json) or a tokenizer.json")
      ->required();
  cmd->add_option("inputs", opts->corpus.inputs,
                  "Text files, .jsonl files (one record a line) or folders of them")
      ->required();
  cmd->add_option("-o,--output", opts->corpus.output, "The token file to write")->required();
  cmd->add_option("--field", opts->corpus.field, "The text field of a JSON line (default text)");
  cmd->add_option("--eval-split", opts->corpus.eval_split,
                  "Hold out this fraction of the tokens, from the end, in a second file")
      ->check(OpenFraction);
  cmd->add_option("--eval-output", opts->corpus.eval_output,
                  "Where the held-out tokens go (default: the output with .eval before its "
                  "extension)");
  cmd->add_option("--separator", opts->corpus.separator,
                  "The token after each document (default: the tokenizer's eos_token)");
  cmd->add_option("--model", opts->model,
                  "A model (config.json or its folder) whose vocabulary the ids must fit");
  cmd->add_option("--threads", opts->corpus.threads, "Threads (default: one per core)")
      ->check(PositiveInteger);
  cmd->add_option("--format", opts->format, "text or json")->check(OneOf({"text", "json"}));
  cmd->callback([opts, cmd, &action] {
    if (cmd->count("--eval-output") > 0 && cmd->count("--eval-split") == 0)
      action = [] { return usage("--eval-output: only with --eval-split"); };
    else
      action = [opts] { return runTokenize(*opts); };
  });
}

} // namespace kiln::cli
