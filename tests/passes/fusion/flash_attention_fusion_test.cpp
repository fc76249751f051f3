// FlashAttentionFusionPass on attention as exporters write it: k^T as a
// Transpose of k's last two axes (torch's q @ k.transpose(-2, -1), as an
// ONNX export holds it) fuses like the matmul's own transpose_b; heads
// transposed from BSND fuse in BSND; the fused op computes what the unfused
// graph does.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ops/op_builder.h"
#include "tests/support/op_test_util.h"
#include "tests/support/pass_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

const char *kPass = "FlashAttentionFusionPass";

// q, k, v [1,4,4,4] (square, so any transpose of k still multiplies); scores q k^T (a Transpose
// node when `transpose_node`, else the matmul's transpose_b), scaled, causally masked, softmaxed,
// times v.
struct AttentionCase {
  Graph g{"attn"};
  ops::TensorMap feed;

  AttentionCase(bool transpose_node, const std::vector<int64_t> &perm = {0, 1, 3, 2},
                bool k_t_output = false) {
    const TensorType t{DType::F32, {1, 4, 4, 4}};
    ValueId q = input("q", t), k = input("k", t), v = input("v", t);
    ops::OpBuilder b(g);
    ValueId kt = transpose_node ? b.create("Transpose", "k_t", {k}, {{"perm", perm}}) : k;
    ValueId s = b.create("BatchMatMul", "scores", {q, kt}, {{"transpose_b", !transpose_node}});
    s = b.create("Div", "scale", {s, b.constant(2.0, DType::F32, "scale_factor")});
    s = b.create("CausalMask", "mask", {s}, {{"fill", -1e9}});
    ValueId p = b.create("Softmax", "softmax", {s}, {{"axis", int64_t{3}}});
    g.addOutput("out", b.create("BatchMatMul", "context", {p, v}));
    if (k_t_output)
      g.addOutput("k_t", kt);
    EXPECT_TRUE(b.status().isOk()) << b.status().message();
  }
  ValueId input(const std::string &name, TensorType type) {
    feed[name] = randomTensor(type, 41 + feed.size());
    return g.addInput(name, std::move(type), InputRole::Data);
  }
  int count(const std::string &op) const {
    int n = 0;
    for (const Node &node : g.nodes())
      n += node.op == op;
    return n;
  }
};

TEST(FlashAttentionFusion, FusesKTransposedByATransposeOfItsLastTwoAxes) {
  for (bool transpose_node : {false, true}) {
    AttentionCase c(transpose_node);
    Graph unfused = c.g;
    passes::PassResult r = runOnePass(c.g, kPass);
    EXPECT_EQ(r.match_times, 1);
    EXPECT_EQ(r.effect_times, 1) << (r.rejections.empty() ? "" : r.rejections[0].reason);
    EXPECT_EQ(c.count("FlashAttentionScore"), 1);
    EXPECT_EQ(c.count("Transpose"), 0) << "the transpose of k is the fused op's";
    EXPECT_EQ(c.count("BatchMatMul"), 0);
    EXPECT_TRUE(fusedMatchesUnfused(c.g, unfused, c.feed, DType::F32)) << transpose_node;
  }
}

TEST(FlashAttentionFusion, LeavesOtherTransposesAndSharedOnesAlone) {
  // Swapping the head and sequence axes is not k^T.
  AttentionCase other(true, {0, 2, 1, 3});
  passes::PassResult r = runOnePass(other.g, kPass);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(mentions(reasonFor(r, "softmax"), {"BatchMatMul 'scores' is not q k^T"}));

  AttentionCase shared(true, {0, 1, 3, 2}, /*k_t_output=*/true);
  r = runOnePass(shared.g, kPass);
  EXPECT_EQ(r.effect_times, 0);
  EXPECT_TRUE(mentions(reasonFor(r, "softmax"), {"'k_t'", "graph output"}));
}

// q, k and v [1, 6, 2, 4] BSND as a projection's heads come, each
// transposed to BNSD for the attention and the context transposed back: the
// fused op reads and writes BSND, and the four transposes go with it, unless
// one of them is read elsewhere.
struct BsndCase {
  Graph g{"attn_bsnd"};
  ops::TensorMap feed;
  ValueId q_heads = kNoValue;

  explicit BsndCase(bool q_heads_output) {
    const TensorType t{DType::F32, {1, 6, 2, 4}};
    ops::OpBuilder b(g);
    const AttrMap swap{{"perm", std::vector<int64_t>{0, 2, 1, 3}}};
    std::vector<ValueId> heads;
    for (const char *name : {"q", "k", "v"}) {
      feed[name] = randomTensor(t, 7 + feed.size());
      heads.push_back(b.create("Transpose", std::string(name) + "_heads",
                               {g.addInput(name, t, InputRole::Data)}, swap));
    }
    ValueId s = b.create("BatchMatMul", "scores", {heads[0], heads[1]}, {{"transpose_b", true}});
    s = b.create("Mul", "scale", {s, b.constant(0.5, DType::F32, "scale_factor")});
    s = b.create("CausalMask", "mask", {s}, {{"fill", -1e9}});
    ValueId p = b.create("Softmax", "softmax", {s}, {{"axis", int64_t{3}}});
    ValueId context = b.create("BatchMatMul", "context", {p, heads[2]});
    g.addOutput("out", b.create("Transpose", "context_bsnd", {context}, swap));
    if (q_heads_output)
      g.addOutput("q_heads", heads[0]);
    EXPECT_TRUE(b.status().isOk()) << b.status().message();
  }
  int count(const std::string &op) const {
    int n = 0;
    for (const Node &node : g.nodes())
      n += node.op == op;
    return n;
  }
  const Node *fused() const {
    for (const Node &node : g.nodes())
      if (node.op == "FlashAttentionScore")
        return &node;
    return nullptr;
  }
};

TEST(FlashAttentionFusion, TakesBsndHeadsWithoutTransposes) {
  BsndCase c(false);
  Graph unfused = c.g;
  passes::PassResult r = runOnePass(c.g, kPass);
  EXPECT_EQ(r.effect_times, 1);
  EXPECT_EQ(r.statistics["bsnd"], 1);
  ASSERT_NE(c.fused(), nullptr);
  EXPECT_EQ(c.fused()->attrs.getString("input_layout"), "BSND");
  EXPECT_EQ(c.count("Transpose"), 0);
  EXPECT_TRUE(fusedMatchesUnfused(c.g, unfused, c.feed, DType::F32));

  // q's heads also a graph output: its Transpose stays, and with it BNSD.
  BsndCase shared(true);
  unfused = shared.g;
  r = runOnePass(shared.g, kPass);
  EXPECT_EQ(r.effect_times, 1);
  ASSERT_NE(shared.fused(), nullptr);
  EXPECT_EQ(shared.fused()->attrs.getString("input_layout"), "BNSD");
  EXPECT_EQ(shared.count("Transpose"), 4);
  EXPECT_TRUE(fusedMatchesUnfused(shared.g, unfused, shared.feed, DType::F32));
}

} // namespace
} // namespace kiln::testing
