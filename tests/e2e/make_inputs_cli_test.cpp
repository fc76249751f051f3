// kiln make-inputs for an artifact: everything `kiln run job.kiln` needs
// besides the weights, a training artifact's first AdamW state included, so
// a compiled training step runs from kiln's own files alone.
#include <gtest/gtest.h>

#include "formats/safetensors.h"
#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;

class MakeInputsCli : public Cli {};

TEST_F(MakeInputsCli, ATrainingArtifactRunsFromInputsKilnWrote) {
  ASSERT_EQ(run("init " + kTiny + " -o w.safetensors").exit_code, 0);
  Result compiled = run("compile " + kTiny + " --training --seq 8 --batch 2 -o train.kiln");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;

  // Without --training the state would be missing: refused, saying why.
  expectRunError(run("make-inputs train.kiln -o i.safetensors"),
                 {"train.kiln", "whole training step", "add --training"});
  Result made = run("make-inputs train.kiln --training --lr 1e-3 --seed 3 -o i.safetensors");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_NE(made.err.find("first AdamW step"), std::string::npos) << made.err;

  auto inputs = readSafetensors(path("i.safetensors"));
  auto weights = readSafetensors(path("w.safetensors"));
  ASSERT_TRUE(inputs && weights);
  const auto &t = inputs->tensors;
  ASSERT_TRUE(t.count("input_ids") && t.count("lr") && t.count("adam.step"));
  EXPECT_EQ(t.at("input_ids").shape(), (Shape{2, 8}));
  for (int64_t i = 0; i < t.at("input_ids").numElements(); ++i) {
    EXPECT_GE(t.at("input_ids").getInt(i), 0);
    EXPECT_LT(t.at("input_ids").getInt(i), 512); // the tiny model's vocabulary
  }
  EXPECT_FLOAT_EQ(t.at("lr").getFloat(0), 1e-3f);
  EXPECT_EQ(t.at("adam.step").getInt(0), 0);
  for (const auto &[name, w] : weights->tensors)
    for (const std::string moment : {"adam.m.", "adam.v."}) {
      ASSERT_TRUE(t.count(moment + name)) << moment + name;
      EXPECT_EQ(t.at(moment + name).shape(), w.shape()) << moment + name;
      EXPECT_EQ(t.at(moment + name).getFloat(0), 0.0f) << moment + name;
    }

  Result step = run("run train.kiln --training --weights w.safetensors --inputs i.safetensors "
                    "--outputs o.safetensors");
  ASSERT_EQ(step.exit_code, 0) << step.err;
  EXPECT_NE(step.out.find("loss "), std::string::npos) << step.out;
  auto out = readSafetensors(path("o.safetensors"));
  ASSERT_TRUE(out);
  ASSERT_TRUE(out->tensors.count("adam.step"));
  EXPECT_EQ(out->tensors.at("adam.step").getInt(0), 1);
}

TEST_F(MakeInputsCli, AForwardArtifactGetsItsBucketsIds) {
  ASSERT_EQ(run("init " + kTiny + " -o w.safetensors").exit_code, 0);
  ASSERT_EQ(run("compile " + kTiny + " --seq 8,16 -o job.kiln").exit_code, 0);
  Result made = run("make-inputs job.kiln --seq 16 -o i.safetensors");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  auto inputs = readSafetensors(path("i.safetensors"));
  ASSERT_TRUE(inputs);
  EXPECT_EQ(inputs->tensors.size(), 1u);
  EXPECT_EQ(inputs->tensors.at("input_ids").shape(), (Shape{1, 16}));
  Result r =
      run("run job.kiln --weights w.safetensors --inputs i.safetensors --outputs o.safetensors");
  EXPECT_EQ(r.exit_code, 0) << r.err;

  expectRunError(run("make-inputs job.kiln --training -o t.safetensors"),
                 {"job.kiln", "forward pass", "--training"});
  expectRunError(run("make-inputs job.kiln --seq 12 -o t.safetensors"), {"12"});
}

TEST_F(MakeInputsCli, TrainingFlagsWithoutAnArtifactAreUsageErrors) {
  Result r = run("make-inputs " + kTiny + " --training -o i.safetensors");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("not an artifact"), std::string::npos) << r.err;
  EXPECT_EQ(run("make-inputs " + kTiny + " --lr 1e-3 -o i.safetensors").exit_code, 2);
  ASSERT_EQ(run("compile " + kTiny + " --training --seq 8 -o train.kiln").exit_code, 0);
  EXPECT_EQ(run("make-inputs train.kiln --training --batch 4 -o i.safetensors").exit_code, 2);
  EXPECT_EQ(run("make-inputs train.kiln --training --lr 0 -o i.safetensors").exit_code, 2);
}

} // namespace
} // namespace kiln
