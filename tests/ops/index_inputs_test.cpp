// checkIndexInput: an index input followed through the ops that only move
// values to the ops that read it as indices, each element checked against
// that op's range with its position in the input.
#include <gtest/gtest.h>

#include "ops/index_inputs.h"
#include "ops/op_builder.h"

namespace kiln::ops {
namespace {

struct Lookup {
  Graph graph;
  ValueId ids = kNoValue;
};

// table f32[10, 4]; ids i64[2, 3] -> Transpose -> Slice (drops row 0 of the
// transposed [3, 2]) -> Gather.
Lookup transposedAndSliced(bool skip_out_of_range) {
  Lookup l;
  l.ids = l.graph.addInput("ids", {DType::I64, {2, 3}}, InputRole::Data);
  const ValueId table = l.graph.addInput("table", {DType::F32, {10, 4}}, InputRole::Parameter);
  OpBuilder b(l.graph);
  const ValueId t = b.create("Transpose", "t", {l.ids}, {{"perm", std::vector<int64_t>{1, 0}}});
  const ValueId s =
      b.create("Slice", "s", {t},
               {{"begin", std::vector<int64_t>{1, 0}}, {"end", std::vector<int64_t>{3, 2}}});
  const ValueId rows =
      b.create("Gather", "rows", {table, s}, {{"skip_out_of_range", skip_out_of_range}});
  EXPECT_TRUE(b.status()) << b.status().message();
  l.graph.addOutput("rows", rows);
  return l;
}

Status check(const Lookup &l, const std::vector<int64_t> &ids) {
  return checkIndexInput(l.graph, *l.graph.findInput("ids"),
                         Tensor::fromInts(DType::I64, {2, 3}, ids), "ids");
}

TEST(IndexInputs, PositionsAreThoseOfTheInputThroughTransposeAndSlice) {
  const Lookup l = transposedAndSliced(false);
  EXPECT_TRUE(check(l, {0, 1, 2, 3, 4, 9}));
  Status bad = check(l, {0, 1, 2, 3, 10, 9});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.message(), "tensor 'ids': index 10 at position 4 ([1, 1]) is outside [0, 10), "
                           "the rows of the table of Gather node 'rows'");
}

TEST(IndexInputs, ElementsNoIndexOpReadsAreNotChecked) {
  // The Slice drops column 0 of the input (row 0 of its transpose).
  EXPECT_TRUE(check(transposedAndSliced(false), {-5, 1, 2, 1'000'000, 4, 9}));
}

TEST(IndexInputs, AGatherThatSkipsOutOfRangeRowsAcceptsAnyIndex) {
  EXPECT_TRUE(check(transposedAndSliced(true), {0, -1, 2, 3, 100, 9}));
}

// An ONNX import's Gather of run-time indices wraps the negative ones:
// Where(ids < 0, ids + 10, ids). [-10, 10) reach the table's rows.
TEST(IndexInputs, AnImportsWrapCountsNegativeIndicesFromTheEnd) {
  Lookup l;
  l.ids = l.graph.addInput("ids", {DType::I64, {2, 3}}, InputRole::Data);
  const ValueId table = l.graph.addInput("table", {DType::F32, {10, 4}}, InputRole::Parameter);
  OpBuilder b(l.graph);
  const ValueId negative = b.create("Less", "negative", {l.ids, b.constant(0, DType::I64, "zero")});
  const ValueId wrapped = b.create("Add", "wrap", {l.ids, b.constant(10, DType::I64, "ten")});
  const ValueId indices = b.create("Where", "indices", {negative, wrapped, l.ids});
  l.graph.addOutput("rows", b.create("Gather", "rows", {table, indices}));
  ASSERT_TRUE(b.status()) << b.status().message();
  EXPECT_TRUE(check(l, {0, -1, 9, -10, 4, 5}));
  for (const auto &[bad, message] : std::vector<std::pair<std::vector<int64_t>, std::string>>{
           {{0, 1, 2, 3, 10, 5},
            "tensor 'ids': index 10 at position 4 ([1, 1]) is outside [-10, 10), the rows of "
            "the table of Gather node 'rows'"},
           {{0, 1, -11, 3, 4, 5},
            "tensor 'ids': index -11 at position 2 ([0, 2]) is outside [-10, 10), the rows of "
            "the table of Gather node 'rows'"}}) {
    Status status = check(l, bad);
    ASSERT_FALSE(status);
    EXPECT_EQ(status.message(), message);
  }
}

// GatherElements counts a negative index from the end of its axis, as ONNX
// does; the compiled kernel clamps what lies outside [-n, n), the reference
// refuses it, and so does the check before either runs.
TEST(IndexInputs, GatherElementsTakesIndicesFromTheEndOfItsAxis) {
  Graph g;
  const ValueId x = g.addInput("x", {DType::F32, {2, 6}}, InputRole::Data);
  const ValueId idx = g.addInput("idx", {DType::I64, {2, 2}}, InputRole::Data);
  OpBuilder b(g);
  g.addOutput("y", b.create("GatherElements", "pick", {x, idx}, {{"axis", int64_t{-1}}}));
  ASSERT_TRUE(b.status()) << b.status().message();
  const GraphInput &in = *g.findInput("idx");
  EXPECT_TRUE(checkIndexInput(g, in, Tensor::fromInts(DType::I64, {2, 2}, {0, 5, -1, -6}), "idx"));
  Status bad = checkIndexInput(g, in, Tensor::fromInts(DType::I64, {2, 2}, {0, 5, 6, 1}), "idx");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.message(), "tensor 'idx': index 6 at position 2 ([1, 0]) is outside [-6, 6), the "
                           "elements along the axis of GatherElements node 'pick'");
  EXPECT_FALSE(checkIndexInput(g, in, Tensor::fromInts(DType::I64, {2, 2}, {0, -7, 1, 1}), "idx"));
}

TEST(IndexInputs, LabelsMayBeIgnoreIndex) {
  Graph g;
  const ValueId labels = g.addInput("labels", {DType::I32, {3}}, InputRole::Data);
  const ValueId logits = g.addInput("logits", {DType::F32, {3, 5}}, InputRole::Data);
  OpBuilder b(g);
  g.addOutput("loss", b.create("CrossEntropyLoss", "loss", {logits, labels},
                               {{"ignore_index", int64_t{-1}}}));
  ASSERT_TRUE(b.status()) << b.status().message();
  const GraphInput &in = *g.findInput("labels");
  EXPECT_TRUE(checkIndexInput(g, in, Tensor::fromInts(DType::I32, {3}, {4, -1, 0}), "labels"));
  Status bad = checkIndexInput(g, in, Tensor::fromInts(DType::I32, {3}, {4, -100, 0}), "labels");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.message(), "tensor 'labels': label -100 at position 1 ([1]) is outside [0, 5) and "
                           "is not ignore_index -1, the classes of the logits of "
                           "CrossEntropyLoss node 'loss'");
}

} // namespace
} // namespace kiln::ops
