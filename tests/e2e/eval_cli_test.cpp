// kiln eval: its loss on a window is the training step's on that window
// with the same weights, bit for bit; a briefly trained tiny Qwen has a
// lower held-out perplexity than the untrained one, and kiln eval of a
// checkpoint is the run's own last validation; bad input is one clear line.
#include <cmath>

#include "tests/e2e/train_fixture.h"

namespace kiln::testing {
namespace {

using json = nlohmann::json;

class EvalCli : public TrainCli {
protected:
  // kiln eval's JSON record; the run must succeed.
  json evaluate(const std::string &args) {
    Result r = run("eval " + kTiny + " " + args + " --format json");
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
    return json::parse(r.out, nullptr, false);
  }

  // The first `tokens` tokens of train.bin as a file of their own.
  void writeFirstTokens(const std::string &name, size_t tokens) {
    write(name, slurp(path("train.bin")).substr(0, 2 * tokens));
  }
};

// A file of one window and one token more: the training step can draw only
// that window, so its loss (step 1, before the update) and kiln eval's are
// of the same tokens and weights; each compiles its own graph (the whole
// step, the forward alone) with the job's passes.
TEST_F(EvalCli, ItsLossIsTheTrainingStepsOnTheSameWindow) {
  writeFirstTokens("window.bin", 17);
  ASSERT_EQ(run("init " + kTiny + " -o w.safetensors").exit_code, 0);
  for (const std::string job :
       {"", "--dtype f16", "--dtype bf16", "--precision-mode allow_mix_precision",
        "--dtype f16 --disable-pass FlashAttentionFusionPass"}) {
    SCOPED_TRACE(job);
    const std::vector<double> step =
        trainLosses(kTiny + " --data window.bin --steps 1 --batch 1 --seq 16 --devices 1 " +
                        "--weights w.safetensors " + job,
                    "step.jsonl");
    ASSERT_EQ(step.size(), 1u);
    const json eval = evaluate("--weights w.safetensors --data window.bin --seq 16 " + job);
    EXPECT_EQ(eval["loss"].get<double>(), step[0]);
    EXPECT_DOUBLE_EQ(eval["perplexity"].get<double>(), std::exp(step[0]));
    EXPECT_EQ(eval["windows"], 1);
    EXPECT_EQ(eval["tokens"], 16);
    EXPECT_EQ(eval["overflow"], false);
  }
}

// 60 steps on the learnable stream lower the perplexity of held-out text of
// the same rule (other noise) well below the untrained model's; kiln eval
// of the final checkpoint (and of a LoRA run's adapter folder on the frozen
// base) gives the run's own validation after its last step.
TEST_F(EvalCli, TrainingLowersTheHeldOutPerplexity) {
  ASSERT_EQ(run("make-inputs " + kTiny + " --tokens 4000 --seed 7 -o held.bin").exit_code, 0);
  ASSERT_EQ(run("init " + kTiny + " -o w.safetensors").exit_code, 0);
  Result trained =
      run("train " + kTiny +
          " --data train.bin --batch 8 --seq 16 --lr 1e-2 --warmup 5 --steps 60 --devices 2 "
          "--weights w.safetensors --checkpoint-dir ckpt --eval-data held.bin "
          "--log-json log.jsonl");
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const std::string eval = "--data held.bin --seq 16 --batch 8 ";
  const json before = evaluate(eval + "--weights w.safetensors");
  const json after = evaluate(eval + "--weights ckpt/step-000060.safetensors");
  EXPECT_EQ(before["windows"], 248); // 4000 tokens: 250 windows, 31 whole batches of 8
  EXPECT_LT(after["perplexity"].get<double>(), 0.5 * before["perplexity"].get<double>())
      << before << after;
  const json last = logLines("log.jsonl").back();
  ASSERT_TRUE(last.contains("eval_loss")) << last;
  EXPECT_NEAR(after["loss"].get<double>(), last["eval_loss"].get<double>(), 1e-6);

  Result lora = run(train("--steps 10 --devices 1 --weights w.safetensors --lora-rank 4 "
                          "--checkpoint-dir lora --eval-data held.bin --log-json lora.jsonl"));
  ASSERT_EQ(lora.exit_code, 0) << lora.err;
  const json adapted = evaluate(eval + "--weights w.safetensors --lora lora/step-000010-adapter");
  EXPECT_NEAR(adapted["loss"].get<double>(), logLines("lora.jsonl").back()["eval_loss"], 1e-6);
  EXPECT_NE(adapted["loss"], before["loss"]) << "the adapter must change the model";

  Result text =
      run("eval " + kTiny + " " + eval + "--weights ckpt/step-000060.safetensors --max-tokens 256");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.err.find("a kiln checkpoint's optimizer state"), std::string::npos) << text.err;
  EXPECT_EQ(std::count(text.err.begin(), text.err.end(), '\n'), 1) << "said once: " << text.err;
  EXPECT_NE(text.out.find("perplexity "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("tokens 256 (16 windows of 16)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("tokens/s "), std::string::npos) << text.out;
}

TEST_F(EvalCli, BadInputIsAClearError) {
  ASSERT_EQ(run("init " + kTiny + " -o w.safetensors").exit_code, 0);
  std::vector<uint16_t> ids(40, 7);
  ids[33] = 600; // the tiny Qwen's vocabulary is 512
  write("big.bin", std::string(reinterpret_cast<const char *>(ids.data()), 2 * ids.size()));
  writeFirstTokens("short.bin", 10);
  writeFirstTokens("two.bin", 40);
  const std::string eval = "eval " + kTiny + " --weights w.safetensors --seq 16 ";
  expectError(run(eval + "--data big.bin"),
              {"big.bin", "token 600 at position 33", "vocabulary of 512"});
  expectError(run(eval + "--data short.bin"), {"short.bin", "10 tokens, fewer than one sequence"});
  expectError(run(eval + "--data two.bin --batch 4"),
              {"two.bin", "2 windows of 16 tokens, fewer than one batch of 4"});
  expectError(run(eval + "--data missing.bin"), {"missing.bin"});
  Result few = run(eval + "--data two.bin --batch 2 --max-tokens 20");
  EXPECT_EQ(few.exit_code, 2) << few.err;
  expectError(few, {"--max-tokens 20 is less than one batch of 2 windows of 16 tokens"});

  // The same files as a training run's held-out data, refused before anything compiles.
  expectError(run(train("--steps 1 --eval-data big.bin")), {"big.bin", "token 600 at position 33"});
  expectError(run(train("--steps 1 --eval-data short.bin")), {"short.bin", "fewer than one"});
  expectError(run(train("--steps 1 --eval-data two.bin")),
              {"two.bin", "fewer than one batch of 8"});
  Result every = run(train("--steps 1 --eval-every 5"));
  EXPECT_EQ(every.exit_code, 2) << every.err;
  expectError(every, {"--eval-every needs --eval-data"});
  Result tokens = run(train("--steps 1 --eval-data train.bin --eval-tokens 64"));
  EXPECT_EQ(tokens.exit_code, 2) << tokens.err;
  expectError(tokens, {"--eval-tokens 64 is less than one global batch of 8 windows"});
}

} // namespace
} // namespace kiln::testing
