// Operator versions: the table agrees with libonnx's schema registry, each
// node gets the version its model's opset selects (Softmax at opset 11 is
// the coerced 2-D form, at 13 the per-axis one), the older forms with
// attributes import as their newer equivalents, and a version kiln does not
// read is E12013 naming the node, the opset and the versions it reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <onnx/defs/schema.h>

#include "compiler/frontend/onnx/onnx_context.h"
#include "compiler/frontend/onnx/onnx_errors.h"
#include "compiler/frontend/onnx/onnx_versions.h"
#include "ir/tensor_compare.h"
#include "tests/compiler/onnx/onnx_test_model.h"
#include "tests/support/random.h"

namespace kiln::frontend::onnx_import {
namespace {

using testing::OnnxTestModel;
constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

// ONNX 1.12's registry knows opsets up to 17; opset 18's versions come
// from the changelog alone.
TEST(OnnxVersions, TableMatchesOnnxSchemasUpToOpset17) {
  for (const OpVersions &v : opVersionTable()) {
    for (int64_t opset = kMinOpset; opset <= 17; ++opset) {
      const auto *schema = onnx::OpSchemaRegistry::Schema(std::string(v.op), opset, "");
      const int want = schema ? schema->SinceVersion() : 0;
      EXPECT_EQ(resolveVersion(v, opset), want) << v.op << " at opset " << opset;
    }
    for (int k : v.kiln)
      EXPECT_TRUE(std::find(v.onnx.begin(), v.onnx.end(), k) != v.onnx.end()) << v.op << "-" << k;
  }
}

TEST(OnnxVersions, EveryConvertedOperatorHasVersions) {
  std::set<std::string> table;
  for (const OpVersions &v : opVersionTable())
    table.insert(std::string(v.op));
  for (const std::string &op : convertedOps())
    EXPECT_TRUE(table.count(op)) << op << " is converted but has no versions";
  for (const std::string &op : table)
    EXPECT_NE(findConverter(op), nullptr) << op << " has versions but no conversion";
  // Every version an opset kiln reads can select is one kiln reads.
  for (const OpVersions &v : opVersionTable())
    for (int64_t opset = kMinOpset; opset <= kMaxOpset; ++opset) {
      if (int r = resolveVersion(v, opset); r != 0) {
        EXPECT_TRUE(kilnReads(v, r)) << v.op << "-" << r << " at opset " << opset;
      }
    }
}

// docs/onnx.md's table of the versions kiln reads, generated from the
// table; KILN_ONNX_CONFORMANCE_UPDATE=1 rewrites it.
TEST(OnnxVersions, DocsListTheVersionsKilnReads) {
  const std::string begin = "<!-- operator versions: generated, do not edit -->";
  const std::string end = "<!-- end of operator versions -->";
  std::ostringstream table;
  table << begin << "\n\n| operator | ONNX's versions | kiln reads | how they differ |\n"
        << "|---|---|---|---|\n";
  for (const OpVersions &v : opVersionTable())
    table << "| " << v.op << " | " << versionList(v.onnx) << " | " << versionList(v.kiln) << " | "
          << v.note << " |\n";
  table << "\n";
  const std::string path = std::string(KILN_SOURCE_DIR) + "/docs/onnx.md";
  std::stringstream doc;
  doc << std::ifstream(path).rdbuf();
  std::string text = doc.str();
  const size_t b = text.find(begin), e = text.find(end);
  ASSERT_NE(b, std::string::npos) << path << " has no " << begin;
  ASSERT_NE(e, std::string::npos) << path << " has no " << end;
  const char *update = std::getenv("KILN_ONNX_CONFORMANCE_UPDATE");
  if (update && std::string(update) == "1") {
    text = text.substr(0, b) + table.str() + text.substr(e);
    std::ofstream(path) << text;
    return;
  }
  EXPECT_EQ(text.substr(b, e - b), table.str())
      << "docs/onnx.md's operator versions are stale: run KILN_ONNX_CONFORMANCE_UPDATE=1 "
         "build/tests/onnx_tests";
}

TEST(OnnxVersions, ResolvesTheNewestVersionAtOrBelowTheOpset) {
  const OpVersions softmax{"Softmax", {1, 11, 13}, {1, 11, 13}};
  EXPECT_EQ(resolveVersion(softmax, 7), 1);
  EXPECT_EQ(resolveVersion(softmax, 11), 11);
  EXPECT_EQ(resolveVersion(softmax, 12), 11);
  EXPECT_EQ(resolveVersion(softmax, 18), 13);
  const OpVersions layer_norm{"LayerNormalization", {17}, {17}};
  EXPECT_EQ(resolveVersion(layer_norm, 16), 0);
  EXPECT_EQ(versionList({1, 11, 13}), "1, 11 and 13");
}

// softmax over `x`'s rows of `width` elements.
Tensor rowSoftmax(const Tensor &x, int64_t width) {
  Tensor y(x.type());
  for (int64_t r = 0; r < x.numElements() / width; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < width; ++j)
      max = std::max<double>(max, x.getFloat(r * width + j));
    for (int64_t j = 0; j < width; ++j)
      sum += std::exp(x.getFloat(r * width + j) - max);
    for (int64_t j = 0; j < width; ++j)
      y.setFloat(r * width + j, float(std::exp(x.getFloat(r * width + j) - max) / sum),
                 OverflowMode::InfNan);
  }
  return y;
}

Expected<ops::TensorMap> softmaxAt(int64_t opset, const Tensor &x) {
  OnnxTestModel m(opset);
  m.input("x", kFloat, {2, 3, 4});
  m.node("Softmax", {"x"}, {"y"});
  m.output("y");
  return m.run({{"x", x}});
}

TEST(OnnxVersions, SoftmaxBeforeOpset13NormalizesTheCoercedRows) {
  const Tensor x = testing::randomTensor({DType::F32, {2, 3, 4}}, 7, -2, 2);
  auto old = softmaxAt(11, x);
  ASSERT_TRUE(old) << old.message();
  EXPECT_EQ(firstMismatch(old->at("y"), rowSoftmax(x, 12), 1e-5, 1e-6), "");
  auto current = softmaxAt(13, x);
  ASSERT_TRUE(current) << current.message();
  EXPECT_EQ(firstMismatch(current->at("y"), rowSoftmax(x, 4), 1e-5, 1e-6), "");
}

// y of a one-node model over x [2, 3]: `build` adds the node.
Tensor runOn(int64_t opset, const Tensor &x, const std::function<void(OnnxTestModel &)> &build) {
  OnnxTestModel m(opset);
  m.input("x", kFloat, {2, 3});
  build(m);
  m.output("y");
  auto out = m.run({{"x", x}});
  EXPECT_TRUE(out) << out.message();
  return out ? out->at("y") : Tensor();
}

TEST(OnnxVersions, ReductionAxesAreAnAttributeBeforeTheirInputVersion) {
  const Tensor x = testing::randomTensor({DType::F32, {2, 3}}, 3);
  Tensor want(TensorType{DType::F32, {2}});
  for (int64_t r = 0; r < 2; ++r)
    want.setFloat(r, (x.getFloat(3 * r) + x.getFloat(3 * r + 1) + x.getFloat(3 * r + 2)) / 3,
                  OverflowMode::InfNan);
  const Tensor old = runOn(11, x, [](OnnxTestModel &m) {
    auto &n = m.node("ReduceMean", {"x"}, {"y"});
    OnnxTestModel::attr(n, "axes", std::vector<int64_t>{1});
    OnnxTestModel::attr(n, "keepdims", int64_t{0});
  });
  EXPECT_EQ(firstMismatch(old, want, 1e-6, 1e-7), "");
  const Tensor current = runOn(18, x, [](OnnxTestModel &m) {
    m.ints("axes", {-1});
    OnnxTestModel::attr(m.node("ReduceMean", {"x", "axes"}, {"y"}), "keepdims", int64_t{0});
  });
  EXPECT_EQ(firstMismatch(current, want, 1e-6, 1e-7), "");
}

TEST(OnnxVersions, OlderAttributeFormsImportAsTheirNewerEquivalents) {
  const Tensor x = testing::randomTensor({DType::F32, {2, 3}}, 5);
  // Slice-1: starts, ends and axes as attributes.
  const Tensor sliced = runOn(9, x, [](OnnxTestModel &m) {
    auto &n = m.node("Slice", {"x"}, {"y"});
    OnnxTestModel::attr(n, "starts", std::vector<int64_t>{1});
    OnnxTestModel::attr(n, "ends", std::vector<int64_t>{100});
    OnnxTestModel::attr(n, "axes", std::vector<int64_t>{1});
  });
  ASSERT_EQ(sliced.shape(), (Shape{2, 2}));
  EXPECT_EQ(sliced.getFloat(3), x.getFloat(5));
  // Clip-6: min and max as attributes.
  const Tensor clipped = runOn(10, x, [](OnnxTestModel &m) {
    auto &n = m.node("Clip", {"x"}, {"y"});
    OnnxTestModel::attr(n, "min", -0.25f);
    OnnxTestModel::attr(n, "max", 0.25f);
  });
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(clipped.getFloat(i), std::clamp(x.getFloat(i), -0.25f, 0.25f));
  // Unsqueeze-11 and Squeeze-11: axes as attributes.
  const Tensor squeezed = runOn(11, x, [](OnnxTestModel &m) {
    OnnxTestModel::attr(m.node("Unsqueeze", {"x"}, {"u"}), "axes", std::vector<int64_t>{0, -1});
    OnnxTestModel::attr(m.node("Squeeze", {"u"}, {"y"}), "axes", std::vector<int64_t>{3});
  });
  EXPECT_EQ(squeezed.shape(), (Shape{1, 2, 3}));
  // Split-11: the sizes as an attribute.
  const Tensor split = runOn(11, x, [](OnnxTestModel &m) {
    auto &n = m.node("Split", {"x"}, {"a", "y"});
    OnnxTestModel::attr(n, "axis", int64_t{1});
    OnnxTestModel::attr(n, "split", std::vector<int64_t>{1, 2});
  });
  ASSERT_EQ(split.shape(), (Shape{2, 2}));
  EXPECT_EQ(split.getFloat(0), x.getFloat(1));
  // Dropout-7: the ratio an attribute, the mask of the input's type.
  OnnxTestModel dropout(7);
  dropout.input("x", kFloat, {2, 3});
  OnnxTestModel::attr(dropout.node("Dropout", {"x"}, {"y", "mask"}), "ratio", 0.3f);
  dropout.output("y");
  dropout.output("mask");
  auto out = dropout.run({{"x", x}});
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(firstMismatch(out->at("y"), x, 0, 0), "");
  EXPECT_EQ(out->at("mask").dtype(), DType::F32);
}

TEST(OnnxVersions, AVersionKilnDoesNotReadIsE12013) {
  OnnxTestModel m(16); // LayerNormalization is defined from opset 17
  m.input("x", kFloat, {2, 3});
  m.input("scale", kFloat, {3});
  m.node("LayerNormalization", {"x", "scale"}, {"y"});
  m.output("y");
  auto r = m.import();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), kErrOnnxOpset) << r.message();
  for (const char *part : {"LayerNormalization_1", "opset 16", "version 17"})
    EXPECT_NE(r.message().find(part), std::string::npos) << part << ": " << r.message();
}

TEST(OnnxVersions, OpsetsOutside7To18AreRefused) {
  for (int64_t opset : {6, 19}) {
    OnnxTestModel m(opset);
    m.input("x", kFloat, {2});
    m.node("Relu", {"x"}, {"y"});
    m.output("y");
    auto r = m.import();
    ASSERT_FALSE(r) << opset;
    EXPECT_EQ(r.error().code(), kErrOnnxOpset) << r.message();
    EXPECT_NE(r.message().find("opsets 7 to 18"), std::string::npos) << r.message();
  }
}

} // namespace
} // namespace kiln::frontend::onnx_import
