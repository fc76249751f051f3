// Loads at a row's outer indices alone (a Gather's token id) are emitted
// once per row, ahead of the row's loops (llvm_emitter.cpp): the table row
// they index is then read with vector loads, not gathered element by
// element, and the results stay the reference interpreter's.
#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "tests/support/codegen_test_util.h"

namespace kiln::testing {
namespace {

// y = table[ids] (table [rows, width], ids [2, 8]), `table` made by `make`
// from the input t.
template <typename Make> Graph gatherGraph(DType dtype, DType index, int64_t width, Make make) {
  Graph g("gather");
  const ValueId t = g.addInput("t", {dtype, {64, width}}, InputRole::Parameter);
  const ValueId ids = g.addInput("ids", {index, {2, 8}}, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("y", b.create("Gather", "gather", {make(b, t), ids}));
  EXPECT_TRUE(b.status()) << b.status().message();
  return g;
}

ValueId asIs(ops::OpBuilder &, ValueId t) { return t; }

TEST(RowInvariantLoads, AGatherReadsItsTableRowsWithoutGathers) {
  for (DType d : {DType::F32, DType::BF16})
    for (DType index : {DType::I32, DType::I64}) {
      const Graph g = gatherGraph(d, index, 512, asIs);
      expectCompiledMatchesReference(g, randomInputs(g, 3, -2, 2, 64));
      const std::string ir = kernelIr(g);
      EXPECT_EQ(ir.find("gather"), std::string::npos) << dtypeName(d) << ":\n" << ir;
    }
}

TEST(RowInvariantLoads, RowsShorterThanAVectorAndOddWidthsKeepTheirValues) {
  for (int64_t width : {1, 3, 17, 100})
    for (DType d : {DType::F32, DType::F16, DType::BF16}) {
      const Graph g = gatherGraph(d, DType::I64, width, asIs);
      expectCompiledMatchesReference(g, randomInputs(g, 5, -2, 2, 64));
    }
}

// A table computed in the Gather's own kernel (t * t, one group: an
// inlined stage) is read at the token id, an index the kernel computes: the
// stage's row axis there is the id, not the kernel's row, so its load stays
// inside. Taken for the row's own, it would read the kernel's row of the
// table, and the values would differ.
TEST(RowInvariantLoads, AComputedIndexIntoAnInlinedStageKeepsItsValues) {
  for (DType d : {DType::F32, DType::BF16}) {
    Graph g = gatherGraph(d, DType::I64, 64, [](ops::OpBuilder &b, ValueId t) {
      return b.create("Mul", "scale", {t, t});
    });
    const GroupId group =
        g.addGroup(FusionGroup{"fused.gather", "eltwise", "test", Intermediates::Storage});
    for (NodeId n = 0; n < static_cast<NodeId>(g.numNodes()); ++n)
      g.node(n).group = group;
    ASSERT_TRUE(g.compact());
    ASSERT_FALSE(kernelIr(g).empty()) << "one kernel: the product inlined into the Gather";
    expectCompiledMatchesReference(g, randomInputs(g, 7, -2, 2, 64));
  }
}

// Each element reads its own index (GatherElements on the last axis): the
// index is not row-invariant and the values stay the reference's.
TEST(RowInvariantLoads, PerElementIndicesStayInTheLoop) {
  Graph g("gather_elements");
  const ValueId x = g.addInput("x", {DType::F32, {4, 32}}, InputRole::Data);
  const ValueId idx = g.addInput("idx", {DType::I64, {4, 16}}, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("y", b.create("GatherElements", "ge", {x, idx}, {{"axis", int64_t{1}}}));
  ASSERT_TRUE(b.status()) << b.status().message();
  expectCompiledMatchesReference(g, randomInputs(g, 9, -2, 2, 32));
}

} // namespace
} // namespace kiln::testing
