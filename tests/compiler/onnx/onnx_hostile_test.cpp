// Hostile ONNX files end in one coded error, never a crash: garbage and
// truncated protobuf, a cycle, an undefined value, an initializer whose size
// disagrees with its shape, external data that leaves the model's folder or
// is missing, too many nodes, deep nesting, another domain, an old opset.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "compiler/frontend/onnx/onnx_errors.h"
#include "compiler/frontend/onnx/onnx_import.h"
#include "compiler/frontend/onnx/onnx_reader.h"

namespace kiln::frontend {
namespace {

namespace fs = std::filesystem;
using namespace onnx_import;

class OnnxHostile : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_onnx_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "model");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // y = x + x over a float [2] input, opset 17.
  onnx::ModelProto addModel() {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    auto *g = m.mutable_graph();
    g->set_name("g");
    auto *in = g->add_input();
    in->set_name("x");
    in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
    auto *n = g->add_node();
    n->set_name("add");
    n->set_op_type("Add");
    n->add_input("x");
    n->add_input("x");
    n->add_output("y");
    g->add_output()->set_name("y");
    return m;
  }
  std::string save(const onnx::ModelProto &m) { return saveBytes(m.SerializeAsString()); }
  std::string saveBytes(const std::string &bytes) {
    const std::string p = (dir_ / "model" / "m.onnx").string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  static void expectCode(const Expected<OnnxModel> &r, const char *code, const std::string &text) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), code) << r.message();
    EXPECT_NE(r.message().find(text), std::string::npos) << r.message();
  }
  fs::path dir_;
};

TEST_F(OnnxHostile, AWellFormedModelLoads) {
  auto r = loadOnnxModel(save(addModel()), {});
  ASSERT_TRUE(r) << r.message();
  EXPECT_TRUE(r->graph.findOutput("y"));
}

TEST_F(OnnxHostile, BytesInMemoryImportAsTheFileDoes) {
  // What the onnx_model fuzz target calls: the bytes, named by a source.
  auto r = importOnnxModel(addModel().SerializeAsString(), "mem/m.onnx", {});
  ASSERT_TRUE(r) << r.message();
  EXPECT_TRUE(r->graph.findOutput("y"));
  auto bad = importOnnxModel("\xff\xff garbage", "mem/m.onnx", {});
  expectCode(bad, kErrOnnxMalformed, "mem/m.onnx");
}

TEST_F(OnnxHostile, ANodeWithTooFewInputsIsMalformed) {
  // Found by the onnx_model fuzz target: a Gather with its indices missing.
  onnx::ModelProto m = addModel();
  auto *n = m.mutable_graph()->mutable_node(0);
  n->set_op_type("Gather");
  n->clear_input();
  n->add_input("x");
  expectCode(loadOnnxModel(save(m), {}), kErrOnnxMalformed,
             "node 'add' (Gather): input 1 is missing (the node has 1)");
  n->set_op_type("MatMul");
  expectCode(loadOnnxModel(save(m), {}), kErrOnnxMalformed, "input 1 is missing");
}

TEST_F(OnnxHostile, AGatherWhoseIndicesCannotBeWrappedIsRefused) {
  // Found by the onnx_model fuzz target (UBSan: the shape of a value the
  // builder had refused to make); the model's bytes as it found them.
  const std::string bytes(
      "\x08\x64\x2d\x74\x65\x73\x74\x3a\x8c\x01\x0a\x27\x0a\x04\x64\x61\x74\x61\x0a\x07\x69\x6e\x64"
      "\x69\x63\x65\x73\x12\x01\x79\x22\x06\x47\x61\x74\x68\x65\x72\x2a\x0b\x0a\x04\x61\x78\x69\x73"
      "\x18\x01\xa0\x00\x02\x12\x0d\x74\x65\x73\x74\x5f\x67\x61\x74\x68\xa2\x72\x5f\x30\x5a\x1e\x0a"
      "\x04\x64\x61\x74\x61\x12\x16\x0a\x14\x08\x01\x12\x10\x0a\x02\x08\x05\x0a\x02\x08\x04\x0a\x02"
      "\x08\x03\x0a\x02\x08\x02\x5a\x15\x0a\x07\x69\x6e\x64\x69\x63\x65\x73\x12\x0a\x0a\x08\x08\x09"
      "\x12\x04\x0a\x02\x08\x01\x62\x1b\x0a\x01\x79\x12\x16\x0a\x14\x08\x01\x12\x10\x0a\x02\x08\x03"
      "\x0a\x02\x08\x04\x0a\x02\x08\x03\x0a\x02\x08\x07\x12\x0c\x62\x0c\x08\x01\x12\x08\x0a\x02\x08"
      "\x03\x0a\x02\x08\x03\x42\x04\x0a\x00\x10\x0d",
      172);
  auto r = importOnnxModel(bytes, "fuzz/model.onnx", {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), kErrOnnxUnsupportedAttr) << r.message();
  EXPECT_NE(r.message().find("fuzz/model.onnx"), std::string::npos) << r.message();
}

TEST_F(OnnxHostile, AGatherOfAScalarIsRefused) {
  // Found by the onnx_model fuzz target (UBSan: data[axis] of a rank-0 shape).
  onnx::ModelProto m = addModel();
  auto *g = m.mutable_graph();
  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->clear_dim();
  auto *n = g->mutable_node(0);
  n->set_op_type("Gather");
  auto r = loadOnnxModel(save(m), {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), kErrOnnxGraph) << r.message();
  EXPECT_NE(r.message().find("Gather needs rank 1 or more"), std::string::npos) << r.message();
  // Nor has any other op an axis of a scalar (a Split of one read past its shape).
  n->set_op_type("Split");
  n->clear_input();
  n->add_input("x");
  auto split = loadOnnxModel(save(m), {});
  ASSERT_FALSE(split);
  EXPECT_EQ(split.error().code(), kErrOnnxGraph) << split.message();
  EXPECT_NE(split.message().find("axis 0 is out of range for rank 0"), std::string::npos)
      << split.message();
}

TEST_F(OnnxHostile, GarbageAndTruncatedFilesAreNotModels) {
  expectCode(loadOnnxModel(saveBytes("\xff\xff\xff\xff garbage"), {}), kErrOnnxMalformed,
             "not an ONNX model");
  const std::string bytes = addModel().SerializeAsString();
  expectCode(loadOnnxModel(saveBytes(bytes.substr(0, bytes.size() - 3)), {}), kErrOnnxMalformed,
             "");
  expectCode(loadOnnxModel(saveBytes(""), {}), kErrOnnxMalformed, "empty");
}

TEST_F(OnnxHostile, ACycleIsNamed) {
  onnx::ModelProto m = addModel();
  auto *g = m.mutable_graph();
  g->mutable_node(0)->set_input(1, "z");
  auto *n = g->add_node();
  n->set_name("loop_back");
  n->set_op_type("Neg");
  n->add_input("y");
  n->add_output("z");
  expectCode(loadOnnxModel(save(m), {}), kErrOnnxGraph, "cycle");
}

TEST_F(OnnxHostile, AnUndefinedValueIsNamed) {
  onnx::ModelProto m = addModel();
  m.mutable_graph()->mutable_node(0)->set_input(1, "nowhere");
  expectCode(loadOnnxModel(save(m), {}), kErrOnnxGraph, "'nowhere'");
}

TEST_F(OnnxHostile, AnInitializerMustMatchItsShape) {
  onnx::ModelProto m = addModel();
  auto *t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_raw_data(std::string(12, '\0'));
  expectCode(loadOnnxModel(save(m), {}), kErrOnnxMalformed, "needs 16");
}

TEST_F(OnnxHostile, ExternalDataStaysInTheModelsFolder) {
  std::ofstream(dir_ / "secret.bin", std::ios::binary) << std::string(16, '\0');
  for (const char *location : {"../secret.bin", "/etc/passwd", "missing.bin"}) {
    onnx::ModelProto m = addModel();
    auto *t = m.mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(4);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto *e = t->add_external_data();
    e->set_key("location");
    e->set_value(location);
    expectCode(loadOnnxModel(save(m), {}), kErrOnnxExternalData, location);
  }
  // Inside the folder it is read.
  std::ofstream(dir_ / "model" / "w.bin", std::ios::binary) << std::string(16, '\0');
  onnx::ModelProto m = addModel();
  auto *t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto *e = t->add_external_data();
  e->set_key("location");
  e->set_value("w.bin");
  EXPECT_TRUE(loadOnnxModel(save(m), {}));
}

TEST_F(OnnxHostile, TooManyNodesAreCountedBeforeParsing) {
  onnx::ModelProto m = addModel();
  for (int i = 0; i < 20; ++i)
    m.mutable_graph()->add_node();
  ReadLimits limits;
  limits.max_nodes = 10;
  auto r = parseOnnxModel(m.SerializeAsString(), "m.onnx", limits);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), kErrOnnxLimit) << r.message();
}

TEST_F(OnnxHostile, DeepNestingIsRefused) {
  // A chain of subgraph attributes, each a level of protobuf nesting.
  onnx::ModelProto m = addModel();
  onnx::GraphProto *g = m.mutable_graph();
  for (int i = 0; i < 100; ++i) {
    auto *n = g->add_node();
    n->set_op_type("If");
    auto *a = n->add_attribute();
    a->set_name("then_branch");
    g = a->mutable_g();
  }
  auto r = parseOnnxModel(m.SerializeAsString(), "m.onnx");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), kErrOnnxMalformed) << r.message();
}

TEST_F(OnnxHostile, OtherDomainsAndOpsetsAreNamed) {
  onnx::ModelProto m = addModel();
  m.mutable_graph()->mutable_node(0)->set_domain("com.microsoft");
  expectCode(loadOnnxModel(save(m), {}), kErrOnnxOpset, "com.microsoft");
  onnx::ModelProto old = addModel();
  old.mutable_opset_import(0)->set_version(6);
  expectCode(loadOnnxModel(save(old), {}), kErrOnnxOpset, "opsets 7 to 18");
  onnx::ModelProto conv = addModel();
  conv.mutable_graph()->mutable_node(0)->set_op_type("Conv");
  expectCode(loadOnnxModel(save(conv), {}), kErrOnnxUnsupportedOp, "convolutions");
}

} // namespace
} // namespace kiln::frontend
