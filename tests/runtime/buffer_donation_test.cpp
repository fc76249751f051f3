// Buffer donation (Executor::runDonating): an update's outputs named like
// its inputs are written over the inputs' bytes when the caller hands them
// over, with the interpreter's bits; never over bytes someone else still
// holds, nor over an input a later kernel reads, nor through a kernel that
// reads the input at other elements than it writes.
#include <gtest/gtest.h>

#include "compiler/autodiff/training_step.h"
#include "ops/interpreter.h"
#include "ops/op_builder.h"
#include "runtime/executor.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/random.h"

namespace kiln {
namespace {

const TensorType kType{DType::F32, {8, 64}};

// m' = m + g*g and w' = w - m', the outputs named "m" and "w"; `then`
// adds what reads the inputs besides.
Graph update(const std::function<void(ops::OpBuilder &, ValueId w, ValueId m, Graph &)> &then) {
  Graph g("update");
  ValueId w = g.addInput("w", kType, InputRole::Parameter);
  ValueId grad = g.addInput("g", kType, InputRole::Data);
  ValueId m = g.addInput("m", kType, InputRole::Data);
  ops::OpBuilder b(g);
  ValueId square = b.create("Mul", "square", {grad, grad});
  ValueId new_m = b.create("Add", "new_m", {m, square});
  ValueId new_w = b.create("Sub", "new_w", {w, new_m});
  g.addOutput("m", new_m);
  g.addOutput("w", new_w);
  if (then)
    then(b, w, m, g);
  EXPECT_TRUE(b.status()) << b.status().message();
  return g;
}

ops::TensorMap inputsOf() {
  return {{"w", testing::randomTensor(kType, 1, -1, 1)},
          {"g", testing::randomTensor(kType, 2, -1, 1)},
          {"m", testing::randomTensor(kType, 3, -1, 1)}};
}

const void *bytesOf(const ops::TensorMap &map, const std::string &name) {
  return std::as_const(map.at(name)).data();
}

// `inputs` with bytes of their own, held by the map alone.
ops::TensorMap ownCopies(const ops::TensorMap &inputs) {
  ops::TensorMap copies;
  for (const auto &[name, t] : inputs)
    copies[name] = t.copy();
  return copies;
}

// The update of update(nullptr) compiled, its inputs and the interpreter's
// results for them.
class BufferDonationOfAnUpdate : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(executor);
    ASSERT_TRUE(want) << want.message();
  }
  const Graph g = update(nullptr);
  std::unique_ptr<runtime::Executor> executor = testing::compiledExecutor(g);
  const ops::TensorMap inputs = inputsOf();
  const Expected<ops::TensorMap> want = ops::interpret(g, inputs);
};

TEST_F(BufferDonationOfAnUpdate, AHandedOverInputIsWrittenOverWithTheInterpretersBits) {
  ops::TensorMap handed = ownCopies(inputs);
  const void *w = bytesOf(handed, "w"), *m = bytesOf(handed, "m");
  auto got = executor->runDonating(std::move(handed));
  ASSERT_TRUE(got) << got.message();
  EXPECT_EQ(got->at("w"), want->at("w"));
  EXPECT_EQ(got->at("m"), want->at("m"));
  EXPECT_EQ(bytesOf(*got, "w"), w) << "w' over w";
  EXPECT_EQ(bytesOf(*got, "m"), m) << "m' over m";

  // run() keeps its inputs: the outputs lie in the arena.
  auto kept = executor->run(inputs);
  ASSERT_TRUE(kept) << kept.message();
  EXPECT_NE(bytesOf(*kept, "w"), bytesOf(inputs, "w"));
  EXPECT_EQ(kept->at("w"), want->at("w"));
}

TEST_F(BufferDonationOfAnUpdate, BytesSomeoneElseHoldsAreNotWrittenOver) {
  ops::TensorMap handed = inputs; // `inputs` shares every tensor's bytes
  auto got = executor->runDonating(std::move(handed));
  ASSERT_TRUE(got) << got.message();
  EXPECT_EQ(got->at("w"), want->at("w"));
  EXPECT_NE(bytesOf(*got, "w"), bytesOf(inputs, "w"));
  EXPECT_EQ(inputs.at("w"), inputsOf().at("w")) << "the holder's w is unchanged";
  EXPECT_EQ(inputs.at("m"), inputsOf().at("m"));
}

// w read again after its update (a later kernel), and m read across rows
// (a sum over its rows): neither is written over, and every result is the
// one run() gives (the sums round otherwise than the interpreter's).
TEST(BufferDonation, AnInputReadElsewhereOrLaterIsNotWrittenOver) {
  const Graph g = update([](ops::OpBuilder &b, ValueId w, ValueId m, Graph &graph) {
    ValueId sum = b.create("ReduceSum", "w_sum", {w}, {{"axes", std::vector<int64_t>{0}}});
    ValueId row = b.create("ReduceSum", "m_rows", {m}, {{"axes", std::vector<int64_t>{1}}});
    graph.addOutput("w_sum", sum);
    graph.addOutput("m_rows", row);
  });
  auto executor = testing::compiledExecutor(g);
  ASSERT_TRUE(executor);
  const ops::TensorMap inputs = inputsOf();
  auto want = executor->run(inputs);
  ASSERT_TRUE(want) << want.message();
  ops::TensorMap handed = ownCopies(inputs);
  const void *w = bytesOf(handed, "w"), *m = bytesOf(handed, "m");
  auto got = executor->runDonating(std::move(handed));
  ASSERT_TRUE(got) << got.message();
  for (const char *name : {"w", "m", "w_sum", "m_rows"})
    EXPECT_EQ(got->at(name), want->at(name)) << name;
  EXPECT_NE(bytesOf(*got, "w"), w);
  EXPECT_NE(bytesOf(*got, "m"), m);
}

// The optimizer program AdamW runs in (buildOptimizerStep): the update in
// place gives run()'s bits.
TEST(BufferDonation, AdamWInPlaceGivesTheBitsOfTheUpdateBeside) {
  auto g = autodiff::buildOptimizerStep({{"w", kType}, {"b", {DType::F32, {64}}}}, {});
  ASSERT_TRUE(g) << g.message();
  auto executor = testing::compiledExecutor(*g);
  ASSERT_TRUE(executor);
  ops::TensorMap inputs;
  uint64_t seed = 10;
  for (const GraphInput &in : g->inputs()) {
    const TensorType &t = g->type(in.value);
    if (t.dtype == DType::I64)
      inputs[in.name] = Tensor::fromInts(DType::I64, t.shape, {3});
    else if (t.shape.empty())
      inputs[in.name] = Tensor::scalar(DType::F32, 1e-2);
    else
      inputs[in.name] = testing::randomTensor(t, seed++, 0.01f, 1);
  }
  auto want = executor->run(inputs);
  ASSERT_TRUE(want) << want.message();
  ops::TensorMap handed = ownCopies(inputs);
  const void *w = bytesOf(handed, "w");
  auto got = executor->runDonating(std::move(handed));
  ASSERT_TRUE(got) << got.message();
  EXPECT_EQ(bytesOf(*got, "w"), w);
  for (const auto &[name, t] : *want)
    EXPECT_EQ(got->at(name), t) << name;
}

} // namespace
} // namespace kiln
