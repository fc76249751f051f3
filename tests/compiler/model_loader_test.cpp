// Tests of loadModel: config folders, config files and kiln graph JSON files.
#include "compiler/frontend/model_loader.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "formats/graph_json.h"
#include "support/file_io.h"

namespace kiln::frontend {
namespace {

namespace fs = std::filesystem;

const std::string kTinyDir = std::string(KILN_SOURCE_DIR) + "/examples/qwen-tiny";

// A fresh folder under the test temp dir, removed at the end of the test.
class ModelLoaderTest : public ::testing::Test {
protected:
  void SetUp() override {
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) / (std::string("kiln_loader_") + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string &name, const std::string &text) {
    std::string path = (dir_ / name).string();
    Status s = writeFileAtomic(path, text);
    EXPECT_TRUE(s.isOk()) << s.message();
    return path;
  }

  fs::path dir_;
};

TEST_F(ModelLoaderTest, LoadsConfigFolderAndFile) {
  for (const std::string &path : {kTinyDir, kTinyDir + "/config.json"}) {
    auto model = loadModel(path, ModelOptions{2, 8, DType::F16});
    ASSERT_TRUE(model.isOk()) << model.message();
    ASSERT_TRUE(model->config.has_value());
    EXPECT_EQ(model->config->hidden_size, 64);
    const GraphInput *ids = model->graph.findInput("input_ids");
    ASSERT_NE(ids, nullptr);
    EXPECT_EQ(model->graph.type(ids->value).shape, (Shape{2, 8}));
    const GraphInput *wte = model->graph.findInput("transformer.wte.weight");
    ASSERT_NE(wte, nullptr);
    EXPECT_EQ(model->graph.type(wte->value).dtype, DType::F16);
  }
}

TEST_F(ModelLoaderTest, LoadsKilnGraphJson) {
  auto built = loadModel(kTinyDir, ModelOptions{1, 4, DType::F32});
  ASSERT_TRUE(built.isOk()) << built.message();
  const std::string path = write("graph.json", graphToJson(built->graph).dump());
  // Options do not apply to a stored graph.
  auto model = loadModel(path, ModelOptions{7, 9, DType::BF16});
  ASSERT_TRUE(model.isOk()) << model.message();
  EXPECT_FALSE(model->config.has_value());
  EXPECT_EQ(graphToJson(model->graph), graphToJson(built->graph));
}

// A config splits for tensor parallelism (each parameter's piece, the split
// recorded); a stored graph cannot.
TEST_F(ModelLoaderTest, ConfigsSplitForTensorParallelismGraphsDoNot) {
  auto split = loadModel(kTinyDir, ModelOptions{1, 4, DType::F32, 2});
  ASSERT_TRUE(split.isOk()) << split.message();
  const std::map<std::string, Shape> pieces = {{"transformer.h.0.attn.c_attn.weight", {96, 64}},
                                               {"transformer.h.0.attn.c_attn.bias", {96}},
                                               {"transformer.h.0.attn.c_proj.weight", {64, 32}},
                                               {"transformer.h.0.mlp.w1.weight", {64, 64}},
                                               {"transformer.h.0.mlp.c_proj.weight", {64, 64}},
                                               {"transformer.h.0.ln_1.weight", {64}},
                                               {"transformer.wte.weight", {256, 64}},
                                               {"lm_head.weight", {256, 64}}};
  for (const auto &[name, shape] : pieces) {
    const GraphInput *in = split->graph.findInput(name);
    ASSERT_NE(in, nullptr) << name;
    EXPECT_EQ(split->graph.type(in->value).shape, shape) << name;
  }
  EXPECT_EQ(split->splits.at("transformer.h.0.attn.c_attn.weight"), (TensorSplit{0, 3}));
  EXPECT_EQ(split->splits.at("transformer.h.1.mlp.c_proj.weight"), TensorSplit{1});
  EXPECT_EQ(split->splits.at("transformer.wte.weight"), (TensorSplit{0, 1, 512})); // vocab-parallel
  EXPECT_TRUE(split->splits.at("transformer.h.0.ln_1.weight").replicated());

  auto odd = loadModel(kTinyDir, ModelOptions{1, 4, DType::F32, 3});
  ASSERT_FALSE(odd.isOk());
  EXPECT_NE(odd.message().find("must divide num_attention_heads (4)"), std::string::npos)
      << odd.message();

  auto built = loadModel(kTinyDir, ModelOptions{1, 4, DType::F32});
  ASSERT_TRUE(built.isOk()) << built.message();
  const std::string path = write("graph.json", graphToJson(built->graph).dump());
  auto graph = loadModel(path, ModelOptions{1, 4, DType::F32, 2});
  ASSERT_FALSE(graph.isOk());
  EXPECT_NE(graph.message().find("graph.json: tensor parallelism needs a model kiln knows how"),
            std::string::npos)
      << graph.message();
}

TEST_F(ModelLoaderTest, GraphThatFailsVerificationNamesPath) {
  auto built = loadModel(kTinyDir, ModelOptions{1, 4, DType::F32});
  ASSERT_TRUE(built.isOk()) << built.message();
  nlohmann::json doc = graphToJson(built->graph);
  // A Softmax on integer token ids breaks the op's signature.
  for (auto &node : doc["nodes"])
    if (node["op"] == "Gather") {
      node["op"] = "Softmax";
      node["inputs"] = {"input_ids"};
      break;
    }
  const std::string path = write("bad_graph.json", doc.dump());
  auto model = loadModel(path, ModelOptions{});
  ASSERT_FALSE(model.isOk());
  EXPECT_EQ(model.message().rfind(path + ": ", 0), 0u) << model.message();
}

TEST_F(ModelLoaderTest, ErrorsNameThePath) {
  struct Case {
    std::string path;
    std::string fragment;
  };
  const std::string empty_dir = (dir_ / "empty").string();
  fs::create_directories(empty_dir);
  const Case cases[] = {
      {(dir_ / "missing.json").string(), "no such file or folder"},
      {empty_dir, "must hold config.json"},
      {write("onnx.json", R"({"format": "onnx"})"), "field 'format': expected \"kiln.graph\""},
      {write("other.json", R"({"hello": 1})"), "neither a kiln graph"},
      {write("list.json", "[1, 2]"), "expected a JSON object"},
      {write("broken.json", "{"), "invalid JSON"},
      {std::string(KILN_SOURCE_DIR) + "/tests/compiler/data/qwen_wrong_type.json",
       "field 'hidden_size'"},
  };
  for (const Case &c : cases) {
    auto model = loadModel(c.path, ModelOptions{});
    ASSERT_FALSE(model.isOk()) << c.path;
    EXPECT_NE(model.message().find(c.path), std::string::npos) << model.message();
    EXPECT_NE(model.message().find(c.fragment), std::string::npos) << model.message();
  }
}

TEST_F(ModelLoaderTest, BuildErrorNamesConfigPath) {
  auto model = loadModel(kTinyDir, ModelOptions{1, 1000, DType::F32});
  ASSERT_FALSE(model.isOk());
  EXPECT_EQ(model.message().rfind(kTinyDir + "/config.json: ", 0), 0u) << model.message();
  EXPECT_NE(model.message().find("sequence length 1000"), std::string::npos) << model.message();
}

} // namespace
} // namespace kiln::frontend
