// `kiln tokenize`'s work: text files and JSON lines in, one token file out
// in the format `kiln train --data` reads (uint16 ids, uint32 when the
// vocabulary passes 65536), each document followed by the end-of-document
// token, optionally with a held-out tail written beside it. Documents are
// encoded on every core; the output is the same for any thread count.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "support/error.h"
#include "tokenizer/tokenizer.h"

namespace kiln::tokenizer {

struct CorpusOptions {
  // Files and folders (read recursively, in name order). Files ending in
  // .jsonl or .ndjson are JSON lines, one document per line; any other file
  // is one document of text.
  std::vector<std::string> inputs;
  std::string field = "text"; // the text of a JSON line
  std::string output;
  // > 0: this fraction of the tokens, from the end, goes to `eval_output`
  // instead (cut at the document boundary nearest to it).
  double eval_split = 0;
  std::string eval_output; // default: the output's name with ".eval" before its extension
  // The token after each document; default: the tokenizer's eos_token.
  std::optional<std::string> separator;
  // > 0: the ids must stay below it (the model's vocab_size).
  int64_t model_vocab = 0;
  int threads = 0; // <= 0: one per core
};

struct CorpusSummary {
  int64_t documents = 0;
  int64_t tokens = 0;      // in `output`
  int64_t eval_tokens = 0; // in `eval_output`
  uint64_t bytes = 0;      // of text read
  size_t replaced = 0;     // ill-formed UTF-8 sequences read as U+FFFD
  int token_bytes = 2;     // 2: uint16 ids, 4: uint32
  double seconds = 0;
  std::string output, eval_output;
  std::string separator;
  nlohmann::json toJson() const;
  std::string toText() const;
};

// The output's name for the held-out tail: "data/train.bin" -> "data/train.eval.bin".
std::string defaultEvalPath(const std::string &output);

Expected<CorpusSummary> tokenizeCorpus(const Tokenizer &tokenizer, const CorpusOptions &options);

} // namespace kiln::tokenizer
