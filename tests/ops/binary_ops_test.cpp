// Tests of Add, Sub, Mul, Div, BiasAdd and AddN: shape inference, kernels
// against naive loops, 16-bit rounding and overflow, and gradient checks.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "ir/float16.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

const OverflowMode kInfNan = OverflowMode::InfNan;
const OverflowMode kSat = OverflowMode::Saturation;

// A random differentiable input of `type` drawn from [lo, hi).
// ---- shape inference ----

TEST(BinaryOpsInfer, BroadcastsLikeNumpy) {
  for (const char *op : {"Add", "Sub", "Mul", "Div"}) {
    auto t = inferOp(op, {f32({3, 4}), f32({4})});
    ASSERT_TRUE(t) << op << ": " << t.message();
    EXPECT_EQ((*t)[0], f32({3, 4})) << op;
    t = inferOp(op, {f32({2, 1, 3}), f32({4, 1})});
    ASSERT_TRUE(t) << t.message();
    EXPECT_EQ((*t)[0], f32({2, 4, 3})) << op;
    t = inferOp(op, {f32({}), f32({5})});
    ASSERT_TRUE(t) << t.message();
    EXPECT_EQ((*t)[0], f32({5})) << op;
  }
}

TEST(BinaryOpsInfer, KeepsTheInputDType) {
  for (DType d : {DType::F16, DType::BF16, DType::I32, DType::I64}) {
    auto t = inferOp("Add", {TensorType{d, {2}}, TensorType{d, {}}});
    ASSERT_TRUE(t) << t.message();
    EXPECT_EQ((*t)[0], (TensorType{d, {2}}));
  }
}

TEST(BinaryOpsInfer, RejectsMixedDTypesNamingBoth) {
  auto t = inferOp("Mul", {f32({2, 3}), TensorType{DType::F16, {2, 3}}});
  ASSERT_FALSE(t);
  EXPECT_NE(t.message().find("f32[2,3]"), std::string::npos) << t.message();
  EXPECT_NE(t.message().find("f16[2,3]"), std::string::npos) << t.message();
  EXPECT_NE(t.message().find("Mul"), std::string::npos) << t.message();
}

TEST(BinaryOpsInfer, RejectsShapesThatDoNotBroadcast) {
  auto t = inferOp("Add", {f32({3, 4}), f32({3})});
  ASSERT_FALSE(t);
  EXPECT_NE(t.message().find("[3,4]"), std::string::npos) << t.message();
  EXPECT_NE(t.message().find("broadcast"), std::string::npos) << t.message();
}

TEST(BinaryOpsInfer, RejectsIntegerDivAndWrongArity) {
  EXPECT_FALSE(inferOp("Div", {TensorType{DType::I32, {2}}, TensorType{DType::I32, {2}}}));
  EXPECT_FALSE(inferOp("Add", {f32({2})}));
  EXPECT_FALSE(inferOp("Sub", {f32({2}), f32({2}), f32({2})}));
  EXPECT_FALSE(inferOp("Mul", {TensorType{DType::Bool, {2}}, TensorType{DType::Bool, {2}}}));
}

TEST(BiasAddInfer, GoodAndBad) {
  auto t = inferOp("BiasAdd", {f32({2, 5, 3}), f32({3})});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], f32({2, 5, 3}));
  auto bad_len = inferOp("BiasAdd", {f32({2, 3}), f32({2})});
  ASSERT_FALSE(bad_len);
  EXPECT_NE(bad_len.message().find("last dim"), std::string::npos) << bad_len.message();
  EXPECT_FALSE(inferOp("BiasAdd", {f32({2, 3}), f32({1, 3})}));
  EXPECT_FALSE(inferOp("BiasAdd", {f32({}), f32({1})}));
  auto bad_dtype = inferOp("BiasAdd", {f32({2, 3}), TensorType{DType::BF16, {3}}});
  ASSERT_FALSE(bad_dtype);
  EXPECT_NE(bad_dtype.message().find("bf16[3]"), std::string::npos) << bad_dtype.message();
}

TEST(AddNInfer, GoodAndBad) {
  auto one = inferOp("AddN", {f32({2, 3})});
  ASSERT_TRUE(one) << one.message();
  EXPECT_EQ((*one)[0], f32({2, 3}));
  auto three = inferOp(
      "AddN", {TensorType{DType::I64, {}}, TensorType{DType::I64, {}}, TensorType{DType::I64, {}}});
  ASSERT_TRUE(three) << three.message();
  EXPECT_EQ((*three)[0], (TensorType{DType::I64, {}}));
  EXPECT_FALSE(inferOp("AddN", {}));
  auto shape = inferOp("AddN", {f32({2, 3}), f32({3})});
  ASSERT_FALSE(shape);
  EXPECT_NE(shape.message().find("input 1"), std::string::npos) << shape.message();
  EXPECT_FALSE(inferOp("AddN", {f32({2}), TensorType{DType::F16, {2}}}));
}

// ---- kernels ----

using DoubleOp = std::function<double(double, double)>;

// Checks z = op(x, y) for x [2,1,3] and y [4,1] against a loop over explicit indices.
void checkBroadcastKernel(const char *op, const DoubleOp &ref, float ylo, float yhi) {
  Tensor x = randomTensor(f32({2, 1, 3}), 11);
  Tensor y = randomTensor(f32({4, 1}), 12, ylo, yhi);
  Tensor z = run1(op, {x, y});
  ASSERT_EQ(z.type(), f32({2, 4, 3})) << op;
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t c = 0; c < 3; ++c) {
        double want = ref(x.getFloat(a * 3 + c), y.getFloat(b));
        EXPECT_FLOAT_EQ(z.getFloat((a * 4 + b) * 3 + c), static_cast<float>(want))
            << op << " at " << a << "," << b << "," << c;
      }
}

TEST(BinaryOpsKernel, BroadcastMatchesNaiveLoop) {
  checkBroadcastKernel("Add", std::plus<double>(), -1, 1);
  checkBroadcastKernel("Sub", std::minus<double>(), -1, 1);
  checkBroadcastKernel("Mul", std::multiplies<double>(), -1, 1);
  checkBroadcastKernel("Div", std::divides<double>(), 0.5f, 2);
}

TEST(BinaryOpsKernel, ScalarOperandOnEitherSide) {
  Tensor v = Tensor::fromFloats(DType::F32, {3}, {1, 2, 4});
  Tensor s = Tensor::scalar(DType::F32, 8);
  EXPECT_EQ(run1("Sub", {s, v}).toFloats(), (std::vector<float>{7, 6, 4}));
  EXPECT_EQ(run1("Div", {v, s}).toFloats(), (std::vector<float>{0.125f, 0.25f, 0.5f}));
  EXPECT_EQ(run1("Div", {s, v}).toFloats(), (std::vector<float>{8, 4, 2}));
}

TEST(BinaryOpsKernel, IntegersAreExactAndWrap) {
  Tensor step = Tensor::fromInts(DType::I64, {}, {41});
  Tensor one = Tensor::fromInts(DType::I64, {}, {1});
  Tensor next = run1("Add", {step, one});
  EXPECT_EQ(next.dtype(), DType::I64);
  EXPECT_EQ(next.getInt(0), 42);
  // Beyond 2^53 a float path would lose the low bits.
  Tensor big = Tensor::fromInts(DType::I64, {}, {(int64_t(1) << 60) + 1});
  EXPECT_EQ(run1("Add", {big, one}).getInt(0), (int64_t(1) << 60) + 2);
  EXPECT_EQ(run1("Sub", {big, one}).getInt(0), int64_t(1) << 60);

  Tensor a = Tensor::fromInts(DType::I32, {3}, {-7, 5, std::numeric_limits<int32_t>::max()});
  Tensor b = Tensor::fromInts(DType::I32, {3}, {3, -4, 1});
  Tensor prod = run1("Mul", {a, b});
  EXPECT_EQ(prod.getInt(0), -21);
  EXPECT_EQ(prod.getInt(1), -20);
  EXPECT_EQ(run1("Add", {a, b}).getInt(2), std::numeric_limits<int32_t>::min());
}

TEST(BinaryOpsKernel, F16RoundsToNearestEven) {
  // The f16 spacing just above 1 is 2^-10: 1 + 2^-11 is a tie and goes to 1
  // (even), 1 + 3 * 2^-11 is a tie and goes to 1 + 2^-9 (even).
  Tensor one = Tensor::fromFloats(DType::F16, {}, {1.0f});
  Tensor tie_down = Tensor::fromFloats(DType::F16, {}, {std::ldexp(1.0f, -11)});
  Tensor tie_up = Tensor::fromFloats(DType::F16, {}, {3 * std::ldexp(1.0f, -11)});
  EXPECT_EQ(run1("Add", {one, tie_down}).getFloat(0), 1.0f);
  EXPECT_EQ(run1("Add", {one, tie_up}).getFloat(0), 1.0f + std::ldexp(1.0f, -9));
}

TEST(BinaryOpsKernel, BF16RoundsToNearestEven) {
  // (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14; bf16 keeps 7 fraction bits.
  Tensor a = Tensor::fromFloats(DType::BF16, {}, {1.0f + std::ldexp(1.0f, -7)});
  Tensor z = run1("Mul", {a, a});
  EXPECT_EQ(z.dtype(), DType::BF16);
  EXPECT_EQ(z.getFloat(0), 1.0f + std::ldexp(1.0f, -6));
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even is 1.
  Tensor one = Tensor::fromFloats(DType::BF16, {}, {1.0f});
  Tensor half_ulp = Tensor::fromFloats(DType::BF16, {}, {std::ldexp(1.0f, -8)});
  EXPECT_EQ(run1("Add", {one, half_ulp}).getFloat(0), 1.0f);
}

TEST(BinaryOpsKernel, F16OverflowFollowsTheMode) {
  Tensor x = Tensor::fromFloats(DType::F16, {2}, {300, -300});
  Tensor y = Tensor::fromFloats(DType::F16, {}, {300});
  Tensor inf = run1("Mul", {x, y}, {}, kInfNan);
  EXPECT_TRUE(std::isinf(inf.getFloat(0)) && inf.getFloat(0) > 0);
  EXPECT_TRUE(std::isinf(inf.getFloat(1)) && inf.getFloat(1) < 0);
  Tensor sat = run1("Mul", {x, y}, {}, kSat);
  EXPECT_EQ(sat.getFloat(0), kF16Max);
  EXPECT_EQ(sat.getFloat(1), -kF16Max);

  Tensor m = Tensor::fromFloats(DType::F16, {}, {kF16Max});
  EXPECT_TRUE(std::isinf(run1("Add", {m, m}, {}, kInfNan).getFloat(0)));
  EXPECT_EQ(run1("Add", {m, m}, {}, kSat).getFloat(0), kF16Max);
}

TEST(BinaryOpsKernel, DivByZeroFollowsTheMode) {
  Tensor num = Tensor::fromFloats(DType::F16, {2}, {1, 0});
  Tensor zero = Tensor::fromFloats(DType::F16, {}, {0});
  Tensor ieee = run1("Div", {num, zero}, {}, kInfNan);
  EXPECT_TRUE(std::isinf(ieee.getFloat(0)));
  EXPECT_TRUE(std::isnan(ieee.getFloat(1)));
  // Saturation clamps inf to the largest finite value and turns NaN into 0.
  Tensor sat = run1("Div", {num, zero}, {}, kSat);
  EXPECT_EQ(sat.getFloat(0), kF16Max);
  EXPECT_EQ(sat.getFloat(1), 0.0f);
}

TEST(BiasAddKernel, AddsAlongTheLastAxis) {
  Tensor x = randomTensor(f32({2, 2, 3}), 21);
  Tensor bias = randomTensor(f32({3}), 22);
  Tensor y = run1("BiasAdd", {x, bias});
  ASSERT_EQ(y.type(), x.type());
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 3; ++c)
      EXPECT_FLOAT_EQ(y.getFloat(r * 3 + c),
                      static_cast<float>(double(x.getFloat(r * 3 + c)) + bias.getFloat(c)));
}

TEST(BiasAddKernel, F16Overflow) {
  Tensor x = Tensor::fromFloats(DType::F16, {1, 2}, {60000, 1});
  Tensor bias = Tensor::fromFloats(DType::F16, {2}, {10000, 2});
  EXPECT_TRUE(std::isinf(run1("BiasAdd", {x, bias}, {}, kInfNan).getFloat(0)));
  Tensor sat = run1("BiasAdd", {x, bias}, {}, kSat);
  EXPECT_EQ(sat.getFloat(0), kF16Max);
  EXPECT_EQ(sat.getFloat(1), 3.0f);
}

TEST(AddNKernel, SumsAllInputs) {
  std::vector<Tensor> xs;
  for (int k = 0; k < 4; ++k)
    xs.push_back(randomTensor(f32({2, 3}), 30 + k));
  Tensor y = run1("AddN", xs);
  for (int64_t i = 0; i < 6; ++i) {
    double want = 0;
    for (const Tensor &x : xs)
      want += x.getFloat(i);
    EXPECT_NEAR(y.getFloat(i), want, 1e-6);
  }
  EXPECT_EQ(run1("AddN", {xs[0]}), xs[0]);
}

TEST(AddNKernel, IntegersAndF16Overflow) {
  Tensor a = Tensor::fromInts(DType::I64, {2}, {1, -5});
  Tensor b = Tensor::fromInts(DType::I64, {2}, {10, 7});
  Tensor y = run1("AddN", {a, b, a});
  EXPECT_EQ(y.getInt(0), 12);
  EXPECT_EQ(y.getInt(1), -3);
  Tensor h = Tensor::fromFloats(DType::F16, {}, {40000});
  EXPECT_TRUE(std::isinf(run1("AddN", {h, h}, {}, kInfNan).getFloat(0)));
  EXPECT_EQ(run1("AddN", {h, h}, {}, kSat).getFloat(0), kF16Max);
}

// ---- gradients ----

struct ShapePair {
  Shape x, y;
};
const ShapePair kShapePairs[] = {
    {{2, 3}, {2, 3}}, {{3, 4}, {4}}, {{4}, {3, 4}}, {{2, 1, 3}, {4, 1}}, {{}, {2, 3}}, {{2, 3}, {}},
};

TEST(BinaryOpsGradient, FiniteDifferences) {
  for (const char *op : {"Add", "Sub", "Mul", "Div"})
    for (const ShapePair &p : kShapePairs) {
      // Div's divisor stays away from zero.
      const bool div = std::string(op) == "Div";
      GradCheckInput y = div ? gradInput(f32(p.y), 0.5f, 2.0f) : gradInput(f32(p.y));
      EXPECT_TRUE(checkOpGradient(op, {gradInput(f32(p.x)), y}))
          << op << " " << shapeToString(p.x) << " " << shapeToString(p.y);
    }
}

TEST(BinaryOpsGradient, NegativeDivisor) {
  EXPECT_TRUE(checkOpGradient("Div", {gradInput(f32({3, 4})), gradInput(f32({4}), -2.0f, -0.5f)}));
}

TEST(BiasAddGradient, FiniteDifferences) {
  for (Shape s : {Shape{3}, Shape{2, 3}, Shape{2, 2, 3}})
    EXPECT_TRUE(checkOpGradient("BiasAdd", {gradInput(f32(s)), gradInput(f32({3}))}))
        << shapeToString(s);
}

TEST(AddNGradient, FiniteDifferences) {
  EXPECT_TRUE(checkOpGradient("AddN", {gradInput(f32({2, 3}))}));
  EXPECT_TRUE(checkOpGradient(
      "AddN", {gradInput(f32({2, 3})), gradInput(f32({2, 3})), gradInput(f32({2, 3}))}));
}

// Applies `op`'s gradient rule to a node on inputs of `types`, with a given
// output gradient (or none).
Expected<std::vector<ValueId>> gradientOf(Graph &graph, const char *op,
                                          const std::vector<TensorType> &types, bool with_grad) {
  std::vector<ValueId> args;
  for (size_t i = 0; i < types.size(); ++i)
    args.push_back(graph.addInput("in_" + std::to_string(i), types[i], InputRole::Data));
  ops::OpBuilder b(graph);
  KILN_ASSIGN_OR_RETURN(std::vector<ValueId> outs, b.tryCreate(op, "op", args));
  ValueId dz = with_grad ? graph.addInput("dz", graph.type(outs[0]), InputRole::Data) : kNoValue;
  const Node node = graph.node(graph.value(outs[0]).producer);
  ops::GradContext ctx{b, node, {dz}};
  return ops::OpRegistry::builtin().find(op)->impl.grad(ctx);
}

TEST(BinaryOpsGradient, IntegerOperandsGetNoGradient) {
  for (const char *op : {"Add", "Sub", "Mul"}) {
    Graph g;
    TensorType i64{DType::I64, {2}};
    auto grads = gradientOf(g, op, {i64, i64}, /*with_grad=*/true);
    ASSERT_TRUE(grads) << grads.message();
    EXPECT_EQ(*grads, (std::vector<ValueId>{kNoValue, kNoValue})) << op;
  }
  Graph g;
  TensorType i32{DType::I32, {2}};
  auto grads = gradientOf(g, "AddN", {i32, i32}, true);
  ASSERT_TRUE(grads) << grads.message();
  EXPECT_EQ(*grads, (std::vector<ValueId>{kNoValue, kNoValue}));
}

TEST(BinaryOpsGradient, MissingOutputGradientGivesNone) {
  for (const char *op : {"Add", "Sub", "Mul", "Div", "BiasAdd"}) {
    Graph g;
    auto grads = gradientOf(g, op, {f32({2, 3}), f32({3})}, /*with_grad=*/false);
    ASSERT_TRUE(grads) << grads.message();
    EXPECT_EQ(*grads, (std::vector<ValueId>{kNoValue, kNoValue})) << op;
  }
}

TEST(BinaryOpsGradient, SumsOnlyWhenShapesDiffer) {
  auto countSums = [](const Graph &g) {
    int n = 0;
    for (const Node &node : g.nodes())
      n += node.op == "SumToShape";
    return n;
  };
  Graph same;
  ASSERT_TRUE(gradientOf(same, "Mul", {f32({2, 3}), f32({2, 3})}, true));
  EXPECT_EQ(countSums(same), 0);
  Graph bcast;
  ASSERT_TRUE(gradientOf(bcast, "Mul", {f32({2, 3}), f32({3})}, true));
  EXPECT_EQ(countSums(bcast), 1);
}

TEST(BinaryOpsGradient, F16GradientsKeepTheInputType) {
  TensorType h{DType::F16, {2, 1, 3}}, hy{DType::F16, {4, 1}};
  for (const char *op : {"Add", "Sub", "Mul", "Div"}) {
    Graph g;
    auto grads = gradientOf(g, op, {h, hy}, true);
    ASSERT_TRUE(grads) << grads.message();
    EXPECT_EQ(g.type((*grads)[0]), h) << op;
    EXPECT_EQ(g.type((*grads)[1]), hy) << op;
  }
}

} // namespace
} // namespace kiln::testing
