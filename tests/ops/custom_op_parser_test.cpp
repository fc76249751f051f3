// The custom-op language (ops/custom/): files parse into programs, kinds are
// checked against the compute, shapes follow the index variables, and every
// malformed input is an error at file:line:column saying what was expected.
#include <string>

#include <gtest/gtest.h>

#include "ops/custom/custom_op_file.h"
#include "ops/custom/derivative.h"
#include "ops/custom/shape.h"

namespace kiln::ops::custom {
namespace {

const char *kFile = "my_ops.xml";

// One op "Op" of `kind` with inputs x (and z when `two_inputs`) and output y
// around `compute`.
std::string opFile(const std::string &compute, const std::string &kind = "elementwise",
                   bool two_inputs = false, const std::string &extra = "") {
  return "<ops>\n"
         "  <op name=\"Op\" kind=\"" +
         kind +
         "\">\n"
         "    <input name=\"x\"/>\n" +
         (two_inputs ? "    <input name=\"z\"/>\n" : "") +
         "    <output name=\"y\"/>\n"
         "    <attr name=\"alpha\" type=\"float\" default=\"0.5\"/>\n"
         "    <attr name=\"axes\" type=\"ints\" default=\"0\"/>\n" +
         extra + "    <compute>" + compute +
         "</compute>\n"
         "  </op>\n"
         "</ops>\n";
}

// "my_ops.xml:L:C" of the `nth` occurrence of `marker` in `xml` (1-based).
std::string at(const std::string &xml, const std::string &marker, int nth = 1) {
  size_t pos = std::string::npos;
  for (int k = 0; k < nth; ++k)
    pos = xml.find(marker, pos == std::string::npos ? 0 : pos + 1);
  EXPECT_NE(pos, std::string::npos) << marker;
  int line = 1, col = 1;
  for (size_t i = 0; i < pos; ++i) {
    if (xml[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::string(kFile) + ":" + std::to_string(line) + ":" + std::to_string(col) + ":";
}

// Parsing fails with a message holding every fragment.
void expectError(const std::string &xml, std::initializer_list<std::string> fragments) {
  auto specs = parseCustomOpFile(xml, kFile);
  ASSERT_FALSE(specs.isOk()) << xml;
  for (const std::string &f : fragments)
    EXPECT_NE(specs.message().find(f), std::string::npos)
        << "missing '" << f << "' in: " << specs.message();
}

Program parseOne(const std::string &xml) {
  auto specs = parseCustomOpFile(xml, kFile);
  EXPECT_TRUE(specs.isOk()) << specs.message();
  if (!specs || specs->empty())
    return {};
  return *specs->front().program;
}

TEST(CustomOpParser, ParsesTheExampleOps) {
  const std::string xml = R"(<ops>
  <op name="SwishX" kind="elementwise">
    <summary>x * sigmoid(x)</summary>
    <input name="x" dtypes="f32,f16,bf16"/>
    <output name="y"/>
    <compute>y[i,j] = x[i,j] * sigmoid(x[i,j])</compute>
  </op>
  <op name="SumSquares" kind="reduce">
    <input name="x" dtypes="f32,f16,bf16"/>
    <output name="s"/>
    <compute>s[i] = sum(j, x[i,j] * x[i,j])</compute>
  </op>
</ops>)";
  auto specs = parseCustomOpFile(xml, kFile);
  ASSERT_TRUE(specs.isOk()) << specs.message();
  ASSERT_EQ(specs->size(), 2u);
  const Program &swish = *(*specs)[0].program;
  EXPECT_EQ(programText(swish), "y[i, j] = x[i, j] * sigmoid(x[i, j])");
  EXPECT_EQ(swish.input_ranks, std::vector<int>{2});
  EXPECT_EQ((*specs)[0].def.source, std::string(kFile) + ":2");
  EXPECT_EQ((*specs)[0].def.kind, OpKind::Elementwise);
  const Program &sum = *(*specs)[1].program;
  EXPECT_EQ(programText(sum), "s[i] = sum(j, x[i, j] * x[i, j])");
  ASSERT_EQ(sum.statements.size(), 1u);
  EXPECT_EQ(sum.statements[0].vars.size(), 2u);
  EXPECT_TRUE(sum.statements[0].vars[1].reduction);
}

// The printer puts back only the parentheses precedence needs.
TEST(CustomOpParser, PrecedenceAndAssociativity) {
  Program p = parseOne(opFile("y[i] = (x[i] - 1) - (2 - x[i]) * -x[i] / (alpha + 3)"));
  EXPECT_EQ(programText(p), "y[i] = x[i] - 1 - (2 - x[i]) * -x[i] / (alpha + 3)");
  p = parseOne(opFile("y[i] = select(x[i] &lt;= 0, -x[i], pow(x[i], 2.5e-1))"));
  EXPECT_EQ(programText(p), "y[i] = select(x[i] <= 0, -x[i], pow(x[i], 0.25))");
}

TEST(CustomOpParser, MaxAndMinAreReductionsOnlyOverANewVariable) {
  Program p = parseOne(opFile("y[i] = max(k, x[i, k]) - min(x[i, i], alpha) + i", "reduce"));
  ASSERT_EQ(p.statements.size(), 1u);
  EXPECT_EQ(programText(p), "y[i] = max(k, x[i, k]) - min(x[i, i], alpha) + i");
}

TEST(CustomOpParser, SeveralOutputsAndStatementSeparators) {
  const std::string xml = R"(<ops><op name="MinMax" kind="reduce">
    <input name="x"/><output name="lo"/><output name="hi"/>
    <compute>
      hi[i] = max(j, x[i, j])
      lo[i] = min(j, x[i, j]);
    </compute></op></ops>)";
  Program p = parseOne(xml);
  EXPECT_EQ(programText(p), "lo[i] = min(j, x[i, j]); hi[i] = max(j, x[i, j])");
}

TEST(CustomOpParser, ErrorsPointAtFileLineAndColumn) {
  std::string xml = opFile("y[i, j] = q[i, j] * 2");
  expectError(xml,
              {at(xml, "q["), "op Op", "unknown input 'q'", "expected one of the op's inputs (x)"});

  xml = opFile("y[i, j] = x[i, j] * sigmoidd(x[i, j])");
  expectError(xml,
              {at(xml, "sigmoidd"), "unknown function 'sigmoidd'", "expected one of exp, log"});

  xml = opFile("y[i, j] = x[i, j) * 2");
  expectError(xml, {at(xml, ") * 2"), "expected ',' or ']' after index 'j' of x, got ')'"});

  xml = opFile("y[i, j] = x[i, j");
  expectError(xml, {at(xml, "</compute>"), "expected ',' or ']' after index 'j' of x",
                    "got the end of the compute"});

  xml = opFile("y[i, k] = x[i]", "broadcast");
  expectError(xml, {at(xml, "k]"), "index 'k' of output 'y' is not bound by any input"});

  xml = opFile("y[i, j] = sum(j, x[i, j])", "reduce");
  expectError(xml, {at(xml, "j, x"), "reduction variable 'j' is an index of output 'y'"});

  xml = opFile("y[i] = x[i] + x[i, i]");
  expectError(xml, {at(xml, "x[i, i]"), "input 'x' is read with 2 indices here but with 1 at"});

  xml = opFile("y[i] = sum(k, x[i])", "reduce");
  expectError(xml, {at(xml, "k,"), "reduction variable 'k' indexes no input"});

  xml = opFile("y[i] = sum(k, sum(k, x[k]))", "reduce");
  expectError(xml, {at(xml, "k, x"), "already bound by the enclosing reduction"});

  xml = opFile("y[i] = x[i] &gt; 0");
  expectError(xml, {at(xml, "&gt;"), "expected a value, got the comparison '>'"});

  xml = opFile("y[i] = select(x[i], 1, 0)");
  expectError(xml, {at(xml, "x[i], 1"), "expected a comparison such as x[i] > 0"});

  xml = opFile("y[i] = pow(x[i])");
  expectError(xml, {at(xml, "pow"), "pow takes 2 arguments, got 1"});

  xml = opFile("y[i] = x[i] * axes");
  expectError(xml, {at(xml, "axes", 2), "attribute 'axes' is ints"});

  xml = opFile("y[i] = x[i] + w");
  expectError(xml, {at(xml, "w</compute>"), "unknown name 'w'", "an attribute (alpha)"});

  xml = opFile("y[i] = x[i] # 2");
  expectError(xml, {at(xml, "#"), "unexpected character '#'"});

  xml = opFile("y[i] = x[i] x[i]");
  expectError(xml, {at(xml, "x[i]", 2), "expected an operator, ';' or a new line, got 'x'"});

  xml = opFile("");
  expectError(xml, {at(xml, "</compute>"), "the compute is empty"});

  xml = opFile("y[i] = x[i]; y[i] = 2 * x[i]");
  expectError(xml, {at(xml, "y[i] = 2"), "output 'y' is computed twice"});

  xml = opFile("x[i] = y[i]");
  expectError(xml, {at(xml, "x[i] ="), "'x' is an input; the left-hand side must be an output"});

  xml = opFile("y[i] = x[i] + y[i]");
  expectError(xml, {at(xml, "y[i]", 2), "output 'y' cannot be read"});

  xml = opFile("y[i] = x[i]", "elementwise", true);
  expectError(xml, {"my_ops.xml:", "input 'z' is never read by the compute"});
}

// Positions survive entities and CDATA: the column is the one in the file.
// Found by tests/fuzz (custom_op_expr_fuzzer): 10^5 nested parentheses or
// minus signs overflowed the parser's stack, and a statement of 10^5 terms the
// checker's; 1,000 factors took 40 s to differentiate. Both are refused at
// the place the limit is passed.
TEST(CustomOpParser, RefusesDeepNestingAndHugeStatements) {
  const std::string parens =
      "y[i] = " + std::string(100'000, '(') + "x[i]" + std::string(100'000, ')');
  std::string xml = opFile(parens);
  expectError(xml, {"my_ops.xml:", "op Op:", "nests deeper than 64 levels"});
  const std::string minus = "y[i] = " + std::string(100'000, '-') + "x[i]";
  expectError(opFile(minus), {"nests deeper than 64 levels"});
  std::string product = "y[i] = x[i]";
  for (int k = 0; k < 100'000; ++k)
    product += " * x[i]";
  expectError(opFile(product), {"more than 256 terms and operators"});
  // Within the limits: 60 parentheses and 100 factors.
  std::string fine = "y[i] = " + std::string(60, '(') + "x[i]" + std::string(60, ')');
  for (int k = 0; k < 99; ++k)
    fine += " * x[i]";
  auto specs = parseCustomOpFile(opFile(fine, "elementwise"), kFile);
  EXPECT_TRUE(specs.isOk()) << specs.message();
}

TEST(CustomOpParser, ColumnsCountTheRawFile) {
  std::string xml = opFile("y[i] = select(x[i] &lt; 0, 0, x[i]) + bad");
  expectError(xml, {at(xml, "bad"), "unknown name 'bad'"});
  xml = opFile("<![CDATA[y[i] = select(x[i] < 0, 0, x[i]) + bad]]>");
  expectError(xml, {at(xml, "bad"), "unknown name 'bad'"});
  xml = opFile("\n      y[i] = x[i] *\n             nope(x[i])\n    ");
  expectError(xml, {at(xml, "nope"), "unknown function 'nope'"});
}

TEST(CustomOpParser, KindMustFitTheCompute) {
  std::string xml = opFile("y[i] = sum(j, x[i, j])");
  expectError(xml, {at(xml, "sum"), "the op is elementwise, but its compute reduces",
                    "expected kind reduce"});
  xml = opFile("y[i, j] = x[i, j] + z[j]", "elementwise", true);
  expectError(xml, {at(xml, "z[j]"), "the op is elementwise, but it reads z[j] for y[i, j]"});
  xml = opFile("y[i, j] = x[i, j] + z[j, i]", "broadcast", true);
  expectError(xml, {at(xml, "z[j, i]"), "the op is broadcast, but it reads z[j, i]"});
  EXPECT_TRUE(parseCustomOpFile(opFile("y[i, j] = x[i, j] + z[j]", "broadcast", true), kFile));
  EXPECT_TRUE(parseCustomOpFile(opFile("y[i, j] = x[i, j] + z[j, i]", "injective", true), kFile));
}

TEST(CustomOpParser, DefinitionErrorsNameTheOpLine) {
  expectError("<ops>\n<op name=\"Op\" kind=\"elementwise\">\n<input name=\"x\"/><output "
              "name=\"y\"/>\n</op></ops>",
              {"my_ops.xml:2: op Op: a custom op needs a <compute> element"});
  expectError("<ops>\n<op name=\"Op\" kind=\"elementwise\">\n<input name=\"x\" dtypes=\"i32\"/>"
              "<output name=\"y\"/><compute>y[i] = x[i]</compute>\n</op></ops>",
              {"my_ops.xml:2: op Op: input 'x' takes i32"});
  expectError("<ops>\n<op name=\"Op\" kind=\"elementwise\">\n<input name=\"x\" variadic=\"true\"/>"
              "<output name=\"y\"/><compute>y[i] = x[i]</compute>\n</op></ops>",
              {"my_ops.xml:2: op Op: input 'x' is variadic"});
  expectError("<ops>\n<op name=\"Op\" kind=\"elementwise\">\n<input name=\"x\"/><output "
              "name=\"y\"/><compute>y[i] = x[i]</compute><compute>y[i] = x[i]</compute>\n</op>"
              "</ops>",
              {"my_ops.xml:3: op Op: a second <compute>"});
  expectError("<ops><op name=\"Op\" kind=\"weird\"><output name=\"y\"/></op></ops>",
              {"my_ops.xml:1: op Op: kind must be one of"});
}

TEST(CustomOpParser, DeclaredGradients) {
  std::string xml = opFile("y[i] = max(j, x[i, j])", "reduce", false,
                           "    <gradient input=\"x\">dx[i, j] = select(x[i, j] == y2, dy[i], 0)"
                           "</gradient>\n");
  expectError(xml, {at(xml, "y2"), "unknown name 'y2'"});
  xml = opFile("y[i] = max(j, x[i, j])", "reduce", false,
               "    <gradient input=\"x\">dx[i, j] = select(x[i, j] == max(k, x[i, k]), dy[i], 0)"
               "</gradient>\n");
  auto specs = parseCustomOpFile(xml, kFile);
  ASSERT_TRUE(specs.isOk()) << specs.message();
  ASSERT_EQ(specs->front().gradients.count(0), 1u);
  Program grad = *gradientProgram(*specs->front().program, 0);
  grad.statements = {specs->front().gradients.at(0).statement};
  EXPECT_EQ(programText(grad), "dx[i, j] = select(x[i, j] == max(k, x[i, k]), dy[i], 0)");
  xml = opFile("y[i] = x[i]", "elementwise", false,
               "    <gradient input=\"q\">dq[i] = dy[i]</gradient>\n");
  expectError(xml, {"my_ops.xml:7: op Op: <gradient input=\"q\"> names no input"});
  xml = opFile("y[i] = x[i]", "elementwise", false,
               "    <gradient input=\"x\">dx[i, j] = dy[i]</gradient>\n");
  expectError(xml, {at(xml, "dx["), "expected 1 indices, got 2"});
}

TEST(CustomOpShapes, ExtentsComeFromTheInputAxes) {
  Program p = parseOne(opFile("y[i, j] = sum(k, x[i, k] * z[k, j])", "opaque", true));
  auto types = inferOutputs(p, {{DType::F16, {3, 4}}, {DType::F16, {4, 5}}}, {std::nullopt});
  ASSERT_TRUE(types.isOk()) << types.message();
  EXPECT_EQ((*types)[0], (TensorType{DType::F16, {3, 5}}));
}

TEST(CustomOpShapes, DisagreeingExtentsNameTheOpAndTheAxes) {
  const std::string xml = opFile("y[i] = x[i] + z[i]", "elementwise", true);
  Program p = parseOne(xml);
  auto types = inferOutputs(p, {{DType::F32, {3}}, {DType::F32, {4}}}, {std::nullopt});
  ASSERT_FALSE(types.isOk());
  EXPECT_NE(types.message().find(at(xml, "i]", 3)), std::string::npos) << types.message();
  EXPECT_NE(types.message().find("op Op: index 'i' has extent 4 from axis 0 of z [4] but 3 from "
                                 "axis 0 of x [3]"),
            std::string::npos)
      << types.message();

  types = inferOutputs(p, {{DType::F32, {3, 1}}, {DType::F32, {3}}}, {std::nullopt});
  ASSERT_FALSE(types.isOk());
  EXPECT_NE(types.message().find("input 'x' has shape [3,1], but the compute reads it with 1 "
                                 "index"),
            std::string::npos)
      << types.message();

  types = inferOutputs(p, {{DType::F32, {3}}, {DType::F16, {3}}}, {std::nullopt});
  ASSERT_FALSE(types.isOk());
  EXPECT_NE(types.message().find("differ in dtype"), std::string::npos) << types.message();
}

// Derived gradients: elementwise products, sums that broadcast the gradient
// back, and reads under two index patterns.
TEST(CustomOpGradient, DerivesReadableExpressions) {
  auto text = [](const std::string &compute, const std::string &kind, bool two = false,
                 int input = 0) {
    Program p = parseOne(opFile(compute, kind, two));
    auto g = gradientProgram(p, input);
    EXPECT_TRUE(g.isOk());
    auto st = deriveGradient(p, input);
    EXPECT_TRUE(st.isOk()) << st.message();
    if (!g || !st)
      return std::string();
    g->statements = {*st};
    return programText(*g);
  };
  EXPECT_EQ(text("y[i] = x[i] * x[i]", "elementwise"), "dx[i] = dy[i] * x[i] + dy[i] * x[i]");
  EXPECT_EQ(text("y[i] = sum(j, x[i, j])", "reduce"), "dx[i, j] = dy[i]");
  EXPECT_EQ(text("y[i, j] = x[i, j] + z[j]", "broadcast", true, 1), "dz[j] = sum(i, dy[i, j])");
  EXPECT_EQ(text("y[i] = exp(x[i]) * alpha", "elementwise"), "dx[i] = dy[i] * (alpha * exp(x[i]))");
  EXPECT_EQ(text("y[i, j] = x[i, j] / sum(k, x[i, k])", "reduce"),
            "dx[i, j] = dy[i, j] / sum(k, x[i, k]) + sum(j2, dy[i, j2] * -(x[i, j2] / (sum(k2, "
            "x[i, k2]) * sum(k2, x[i, k2]))))");
}

TEST(CustomOpGradient, MaxReductionsAndRepeatedIndicesAreNotDerived) {
  const std::string xml = opFile("y[i] = max(j, x[i, j])", "reduce");
  auto st = deriveGradient(parseOne(xml), 0);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find(at(xml, "max(")), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("declare it with <gradient input=\"x\">"), std::string::npos);
  st = deriveGradient(parseOne(opFile("y[i] = x[i, i]", "injective")), 0);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("read with the index 'i' twice"), std::string::npos) << st.message();
}

} // namespace
} // namespace kiln::ops::custom
