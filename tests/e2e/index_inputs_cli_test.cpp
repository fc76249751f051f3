// Index inputs are range-checked on every path of kiln run as the reference
// interpreter checks them: token ids past the vocabulary, negative or huge,
// labels outside the classes, a graph JSON's Gather indices. The compiled
// kernels clamp an index (a memory-safety net) and used to print a loss; now
// the compiled path, the reference and an artifact give the same one-line
// error naming the file, the tensor, the value, its position and the range.
#include <gtest/gtest.h>

#include "formats/safetensors.h"
#include "tests/e2e/cli_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;

class IndexInputsCli : public Cli {
protected:
  void SetUp() override {
    Cli::SetUp();
    ASSERT_EQ(run("init " + kTiny + " -o w.st --seed 3").exit_code, 0);
  }

  // input_ids (and labels, when given) of the tiny Qwen: batch 2, seq 4.
  void writeInputs(const std::string &name, const std::vector<int64_t> &ids,
                   const std::vector<int64_t> &labels = {}) {
    SafetensorsFile file;
    file.tensors["input_ids"] = Tensor::fromInts(DType::I64, {2, 4}, ids);
    if (!labels.empty())
      file.tensors["labels"] = Tensor::fromInts(DType::I64, {2, 4}, labels);
    ASSERT_TRUE(writeSafetensors(path(name), file));
  }

  Result runOn(const std::string &model, const std::string &inputs, const std::string &extra) {
    return run("run " + model + " --weights w.st --inputs " + inputs + " --outputs o.st " + extra);
  }

  // The compiled kernels, the reference and (when given) an artifact refuse
  // `inputs` with the same line, holding every fragment; nothing is written.
  void expectRefusedEverywhere(const std::string &inputs,
                               std::initializer_list<std::string> fragments,
                               const std::string &artifact = "") {
    for (const char *extra : {"", "--training"}) {
      SCOPED_TRACE(inputs + " " + extra);
      Result compiled = runOn(kTiny, inputs, extra);
      expectRunError(compiled, fragments);
      Result reference = runOn(kTiny, inputs, std::string(extra) + " --reference");
      expectRunError(reference, fragments);
      EXPECT_EQ(compiled.err, reference.err);
      EXPECT_FALSE(fs::exists(path("o.st")));
    }
    if (!artifact.empty()) {
      Result packed = runOn(artifact, inputs, "");
      expectRunError(packed, fragments);
      EXPECT_FALSE(fs::exists(path("o.st")));
    }
  }
};

TEST_F(IndexInputsCli, TokenIdsOutsideTheVocabularyAreRefusedOnEveryPath) {
  ASSERT_EQ(run("compile " + kTiny + " --seq 4 --batch 2 -o tiny.kiln").exit_code, 0);
  writeInputs("past.st", {1, 2, 3, 4, 5, 512, 6, 7});
  expectRefusedEverywhere("past.st",
                          {"past.st: tensor 'input_ids': index 512 at position 5 ([1, 1])",
                           "outside [0, 512)", "Gather node 'transformer.wte'"},
                          path("tiny.kiln"));
  writeInputs("negative.st", {1, -1, 3, 4, 5, 6, 7, 8});
  expectRefusedEverywhere("negative.st", {"negative.st: tensor 'input_ids': index -1 at position 1",
                                          "outside [0, 512)"});
  writeInputs("huge.st", {1, 2, 3, 1'000'000'000'000, 5, 6, 7, 8});
  expectRefusedEverywhere(
      "huge.st",
      {"huge.st: tensor 'input_ids': index 1000000000000 at position 3 ([0, 3])",
       "outside [0, 512)"},
      path("tiny.kiln"));
  // In range, the same run prints its loss.
  writeInputs("good.st", {1, 2, 3, 4, 5, 6, 7, 511});
  Result good = runOn(kTiny, "good.st", "");
  ASSERT_EQ(good.exit_code, 0) << good.err;
  EXPECT_NE(good.out.find("loss "), std::string::npos);
}

TEST_F(IndexInputsCli, LabelsOutsideTheClassesAreRefusedButIgnoreIndexIsNot) {
  const std::vector<int64_t> ids{1, 2, 3, 4, 5, 6, 7, 8};
  writeInputs("label.st", ids, {1, 2, 3, 4, 5, 600, 7, 8});
  expectRefusedEverywhere("label.st",
                          {"label.st: tensor 'labels': label 600 at position 5 ([1, 1])",
                           "outside [0, 512) and is not ignore_index -100",
                           "CrossEntropyLoss node 'loss'"});
  // -100 is ignore_index; the first label of each row is dropped by the shift
  // (nothing predicts it), so the reference never reads it: neither path refuses.
  writeInputs("ignored.st", ids, {9999, 2, -100, 4, -7, 6, 7, -100});
  for (const char *extra : {"", "--reference"}) {
    Result r = runOn(kTiny, "ignored.st", extra);
    EXPECT_EQ(r.exit_code, 0) << extra << ": " << r.err;
  }
}

// A graph JSON whose indices reach the Gather through a Reshape: the
// position is the one in the input file.
TEST_F(IndexInputsCli, AGraphJsonsGatherIndicesAreCheckedThroughAReshape) {
  write("g.json", R"({"format": "kiln.graph", "version": 1, "name": "lookup",
 "inputs": [{"name": "ids", "dtype": "i32", "shape": [6], "role": "data"},
            {"name": "table", "dtype": "f32", "shape": [10, 4], "role": "param"}],
 "nodes": [{"op": "Reshape", "name": "grid", "inputs": ["ids"],
            "outputs": [{"dtype": "i32", "shape": [2, 3]}], "attrs": {"shape": {"ints": [2, 3]}}},
           {"op": "Gather", "name": "rows", "inputs": ["table", "grid"],
            "outputs": [{"dtype": "f32", "shape": [2, 3, 4]}],
            "attrs": {"skip_out_of_range": {"bool": false}}},
           {"op": "ReduceMean", "name": "loss", "inputs": ["rows"],
            "outputs": [{"dtype": "f32", "shape": []}],
            "attrs": {"axes": {"ints": []}, "keepdims": {"bool": false}}}],
 "outputs": [{"name": "loss", "value": "loss"}]})");
  ASSERT_EQ(run("init g.json -o w.st").exit_code, 0);
  for (int64_t bad : {int64_t{10}, int64_t{-3}, int64_t{1'000'000'000'000}}) {
    SafetensorsFile file;
    file.tensors["ids"] = Tensor::fromInts(DType::I64, {6}, {0, 1, 2, 3, bad, 5});
    ASSERT_TRUE(writeSafetensors(path("ids.st"), file));
    const std::string value = std::to_string(bad);
    for (const char *extra : {"", "--reference", "--training"}) {
      SCOPED_TRACE(value + " " + extra);
      expectRunError(runOn("g.json", "ids.st", extra),
                     {"ids.st: tensor 'ids': index " + value + " at position 4 ([4])",
                      "outside [0, 10)", "Gather node 'rows'"});
    }
  }
}

} // namespace
} // namespace kiln
