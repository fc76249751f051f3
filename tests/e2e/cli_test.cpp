// The kiln command line as a user meets it: real processes, exit codes and
// the one-line errors on bad input.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;

TEST_F(Cli, Qwen14bTrainingGraphStats) {
  Result r = run("graph " + k14b + " --training --seq 2048 --batch 1 --format stats");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto stats = nlohmann::json::parse(r.out);
  EXPECT_EQ(stats["parameter_count"].get<int64_t>(), 14167290880);
  EXPECT_GT(stats["nodes"].get<int64_t>(), 40 * 50);
  EXPECT_EQ(stats["ops"]["AdamW"].get<int64_t>(), 2 + 40 * 8 + 1);
  EXPECT_EQ(stats["ops"]["Softmax"].get<int64_t>(), 40);
  EXPECT_EQ(stats["ops"]["SoftmaxGrad"].get<int64_t>(), 40);
}

TEST_F(Cli, GraphTextAndJson) {
  Result text = run("graph " + kTiny + " --seq 8");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("%transformer.h.1.attn.softmax: f32[1,4,8,8] = Softmax("),
            std::string::npos);
  Result json = run("graph " + kTiny + " --seq 8 --format json -o " + path("g.json"));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  // The graph JSON is itself a MODEL: it prints back to the same text.
  Result again = run("graph " + path("g.json"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, text.out);
}

TEST_F(Cli, InitRunTrainingOnTinyQwen) {
  ASSERT_EQ(run("init " + kTiny + " -o " + path("w.safetensors") + " --seed 3").exit_code, 0);
  ASSERT_EQ(
      run("make-inputs " + kTiny + " --batch 2 --seq 8 -o " + path("in.safetensors")).exit_code, 0);
  Result r = run("run " + kTiny + " --weights " + path("w.safetensors") + " --inputs " +
                 path("in.safetensors") + " --outputs " + path("out.safetensors") + " --training");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto out = readSafetensors(path("out.safetensors"));
  ASSERT_TRUE(out) << out.message();
  auto weights = readSafetensors(path("w.safetensors"));
  ASSERT_TRUE(weights);
  EXPECT_EQ(out->tensors.at("logits").shape(), (Shape{2, 8, 512}));
  EXPECT_NEAR(out->tensors.at("loss").getFloat(0), std::log(512.0), 0.1);
  for (const auto &[name, w] : weights->tensors) {
    ASSERT_TRUE(out->tensors.count("grad." + name)) << name;
    EXPECT_EQ(out->tensors.at("grad." + name).shape(), w.shape());
    EXPECT_EQ(out->tensors.at("grad." + name).dtype(), DType::F32);
  }
}

TEST_F(Cli, BadConfigsAreOneLineErrors) {
  write("missing.json", R"({"architectures": ["QWenLMHeadModel"], "hidden_size": 64})");
  expectRunError(run("graph " + path("missing.json")), {"missing.json", "field '"});
  nlohmann::json typed = nlohmann::json::parse(slurp(kTiny));
  typed["hidden_size"] = "64";
  write("typed.json", typed.dump());
  expectRunError(run("graph " + path("typed.json")), {"typed.json", "hidden_size"});
  write("arch.json", R"({"architectures": ["MistralForCausalLM"]})");
  expectRunError(run("graph " + path("arch.json")),
                 {"arch.json", "MistralForCausalLM", "Qwen2ForCausalLM"});
  write("broken.json", "{\"architectures\": [");
  expectRunError(run("graph " + path("broken.json")), {"broken.json", "line 1"});
  expectRunError(run("graph " + path("absent.json")), {"absent.json"});
}

TEST_F(Cli, BadSafetensorsAreOneLineErrors) {
  ASSERT_EQ(run("make-inputs " + kTiny + " --seq 4 -o " + path("in.safetensors")).exit_code, 0);
  write("short.safetensors", std::string("\x10\0\0\0", 4));
  expectRunError(run("run " + kTiny + " --weights " + path("short.safetensors") + " --inputs " +
                     path("in.safetensors") + " --outputs " + path("o.safetensors")),
                 {"short.safetensors"});
  std::string header = R"({"transformer.wte.weight":{"dtype":"F32","shape":[512,64],)"
                       R"("data_offsets":[0,400000]}})";
  std::string len(8, '\0');
  len[0] = static_cast<char>(header.size());
  write("range.safetensors", len + header + std::string(16, '\0'));
  expectRunError(run("run " + kTiny + " --weights " + path("range.safetensors") + " --inputs " +
                     path("in.safetensors") + " --outputs " + path("o.safetensors")),
                 {"range.safetensors", "transformer.wte.weight"});
  EXPECT_FALSE(fs::exists(path("o.safetensors")));
}

TEST_F(Cli, MissingWeightIsNamed) {
  ASSERT_EQ(run("make-inputs " + kTiny + " --seq 4 -o " + path("in.safetensors")).exit_code, 0);
  SafetensorsFile partial;
  partial.tensors["transformer.wte.weight"] = Tensor(TensorType{DType::F32, {512, 64}});
  ASSERT_TRUE(writeSafetensors(path("w.safetensors"), partial));
  expectRunError(run("run " + kTiny + " --weights " + path("w.safetensors") + " --inputs " +
                     path("in.safetensors") + " --outputs " + path("o.safetensors")),
                 {"w.safetensors", "transformer.h.0.ln_1.weight"});
}

TEST_F(Cli, BadArgumentsAreErrors) {
  expectUsageError(run("graph"), {"MODEL"});
  expectUsageError(run("graph " + kTiny + " --format yaml"), {"yaml"});
  expectUsageError(run("graph " + kTiny + " --dtype f64"), {"f64"});
  expectUsageError(run("graph " + kTiny + " --batch 0"), {"batch"});
  expectRunError(run("graph " + kTiny + " --seq 100000"), {"seq"});
  expectUsageError(run("frobnicate"), {"frobnicate"});
  expectUsageError(run("run " + kTiny + " --weights x --inputs y --outputs z --overflow-mode wrap"),
                   {"wrap"});
}

TEST_F(Cli, HelpOnEverySubcommand) {
  for (const char *cmd : {"", "graph", "init", "run", "make-inputs"}) {
    Result r = run(std::string(cmd) + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << cmd;
  }
}

} // namespace
} // namespace kiln
