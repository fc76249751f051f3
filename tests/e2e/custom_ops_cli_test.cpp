// `--custom-ops DIR` on the command line: a graph JSON using the ops of
// examples/custom-ops compiles (the elementwise one fused with its
// neighbour) and trains on the compiled kernels as on the interpreter; a
// malformed definition is a one-line error at file:line:column.
#include <cmath>

#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "tests/e2e/cli_fixture.h"

namespace kiln::testing {
namespace {

const std::string kOps = kSource + "/examples/custom-ops";
const std::string kGraph = kOps + "/graph.json";

class CustomOpsCli : public Cli {
protected:
  // x [4, 8] and w [8] as the example graph takes them.
  void writeInputs() {
    for (int i = 0; i < 32; ++i)
      x_.push_back(static_cast<float>(std::sin(0.7 * i) * 2));
    for (int j = 0; j < 8; ++j)
      w_.push_back(static_cast<float>(0.25 + 0.1 * j));
    SafetensorsFile weights, inputs;
    weights.tensors["w"] = Tensor::fromFloats(DType::F32, {8}, w_);
    inputs.tensors["x"] = Tensor::fromFloats(DType::F32, {4, 8}, x_);
    inputs.tensors["input_ids"] = Tensor::fromInts(DType::I64, {1, 1}, {0});
    ASSERT_TRUE(writeSafetensors(path("w.st"), weights).isOk());
    ASSERT_TRUE(writeSafetensors(path("i.st"), inputs).isOk());
  }

  std::map<std::string, Tensor> outputs(const std::string &file) {
    auto f = readSafetensors(path(file));
    EXPECT_TRUE(f.isOk()) << (f ? "" : f.message());
    return f ? f->tensors : std::map<std::string, Tensor>{};
  }

  std::vector<float> x_, w_;
};

TEST_F(CustomOpsCli, CompilesAGraphUsingThemAndFusesTheElementwiseOne) {
  Result r =
      run("compile " + kGraph + " --custom-ops " + kOps + " --report " + path("report.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("TbeEltwiseFusionPass: match_times 1, effect_times 1"), std::string::npos)
      << r.out;
  nlohmann::json report = nlohmann::json::parse(slurp(path("report.json")));
  ASSERT_EQ(report["groups"].size(), 1u);
  EXPECT_EQ(report["groups"][0]["members"], (nlohmann::json{"act", "scaled"}));

  // The same through the example's job file ("custom_ops": ["."]).
  Result job = run("compile " + kGraph + " --job " + kOps + "/job.json");
  EXPECT_EQ(job.exit_code, 0) << job.err;
}

// Forward and backward on the compiled kernels, on the interpreter and by hand:
// loss = mean_i sum_j (swish(x_ij) w_j)^2, dloss/dw_j = sum_i swish(x_ij)^2 w_j / 2.
TEST_F(CustomOpsCli, TrainsOnCompiledKernelsAsOnTheInterpreter) {
  writeInputs();
  const std::string common = "run " + kGraph + " --custom-ops " + kOps + " --training --weights " +
                             path("w.st") + " --inputs " + path("i.st") + " --outputs ";
  Result compiled = run(common + path("compiled.st"));
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  Result reference = run(common + path("reference.st") + " --reference");
  ASSERT_EQ(reference.exit_code, 0) << reference.err;

  double loss = 0;
  std::vector<double> grad(8, 0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      const double x = x_[i * 8 + j];
      const double s = x / (1 + std::exp(-x));
      loss += s * s * w_[j] * w_[j] / 4;
      grad[j] += s * s * w_[j] / 2;
    }
  for (const char *file : {"compiled.st", "reference.st"}) {
    auto out = outputs(file);
    ASSERT_TRUE(out.count("loss") && out.count("grad.w")) << file;
    EXPECT_NEAR(out["loss"].getFloat(0), loss, 1e-5 * loss) << file;
    for (int j = 0; j < 8; ++j)
      EXPECT_NEAR(out["grad.w"].getFloat(j), grad[j], 1e-5 * std::fabs(grad[j]) + 1e-6)
          << file << " j=" << j;
  }
}

// The gradient of a row normalisation used to evaluate the row's sum once
// per element of the row: quadratic per row compiled, cubic on the
// interpreter, which never finished at width 32768. The derivative now
// moves what does not depend on a summed index out of the sum, and the
// interpreter computes a sum once per value of the indices it reads; both
// finish at once, and agree.
TEST_F(CustomOpsCli, AGradientThroughARowNormIsLinearPerRow) {
  fs::create_directories(dir_ / "ops");
  write("ops/ops.xml", R"(<?xml version="1.0"?>
<ops>
  <op name="RowNormalize" kind="reduce">
    <summary>x / sqrt(sum of squares of the row)</summary>
    <input name="x" dtypes="f32,f16,bf16"/>
    <output name="y"/>
    <compute>y[i, j] = x[i, j] * rsqrt(sum(k, x[i, k] * x[i, k]))</compute>
  </op>
</ops>)");
  write("g.json", R"({"format": "kiln.graph", "version": 1, "name": "rownorm",
 "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 32768], "role": "data"},
            {"name": "w", "dtype": "f32", "shape": [32768], "role": "param"}],
 "nodes": [{"op": "Mul", "name": "xw", "inputs": ["x", "w"],
            "outputs": [{"dtype": "f32", "shape": [2, 32768]}], "attrs": {}},
           {"op": "RowNormalize", "name": "n", "inputs": ["xw"],
            "outputs": [{"dtype": "f32", "shape": [2, 32768]}], "attrs": {}},
           {"op": "ReduceMean", "name": "loss", "inputs": ["n"],
            "outputs": [{"dtype": "f32", "shape": []}],
            "attrs": {"axes": {"ints": []}, "keepdims": {"bool": false}}}],
 "outputs": [{"name": "loss", "value": "loss"}]})");
  const std::string model = "g.json --custom-ops ops";
  ASSERT_EQ(run("init " + model + " -o w.st").exit_code, 0);
  ASSERT_EQ(run("make-inputs " + model + " -o i.st").exit_code, 0);
  const std::string common = "run " + model + " --weights w.st --inputs i.st --training ";
  // A bound on the work, not a timing: before, the interpreter ran for hours.
  Result compiled = shell("timeout 120 " + kiln_ + " " + common + "--outputs c.st");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  Result reference = shell("timeout 120 " + kiln_ + " " + common + "--reference --outputs r.st");
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const Tensor got = outputs("c.st").at("grad.w"), want = outputs("r.st").at("grad.w");
  ASSERT_EQ(got.numElements(), 32768);
  double scale = 0;
  for (int64_t i = 0; i < want.numElements(); ++i)
    scale = std::max(scale, std::abs(static_cast<double>(want.getFloat(i))));
  ASSERT_GT(scale, 0);
  for (int64_t i = 0; i < got.numElements(); i += 97)
    EXPECT_NEAR(got.getFloat(i), want.getFloat(i), 1e-4 * scale) << i;
}

TEST_F(CustomOpsCli, WithoutTheFolderTheGraphNamesTheUnknownOp) {
  expectRunError(run("compile " + kGraph), {"graph.json", "unknown op 'SwishX'"});
}

TEST_F(CustomOpsCli, AMalformedDefinitionIsAOneLineErrorAtLineAndColumn) {
  fs::create_directories(path("bad"));
  write("bad/ops.xml", "<ops>\n"
                       "  <op name=\"Broken\" kind=\"elementwise\">\n"
                       "    <input name=\"x\"/>\n"
                       "    <output name=\"y\"/>\n"
                       "    <compute>y[i, j] = x[i, j) * 2</compute>\n"
                       "  </op>\n"
                       "</ops>\n");
  Result r = run("compile " + kGraph + " --custom-ops " + path("bad"));
  expectRunError(
      r, {"bad/ops.xml:5:30: op Broken: expected ',' or ']' after index 'j' of x, got ')'"});
  EXPECT_EQ(r.exit_code, 1);

  write("bad/ops.xml", "<ops>\n"
                       "  <op name=\"Broken\" kind=\"elementwise\">\n"
                       "    <input name=\"x\"/>\n"
                       "    <output name=\"y\"/>\n"
                       "    <compute>\n"
                       "      y[i, j] = x[i, j] *\n"
                       "                softplus(x[i, j])\n"
                       "    </compute>\n"
                       "  </op>\n"
                       "</ops>\n");
  r = run("run " + kGraph + " --custom-ops " + path("bad") + " --weights w --inputs i --outputs o");
  expectRunError(r, {"bad/ops.xml:7:17: op Broken: unknown function 'softplus'"});
  EXPECT_EQ(r.exit_code, 1);
}

// `kiln ops --custom-ops` lists a folder's ops among the built-in ones;
// without it, the built-in ops only.
TEST_F(CustomOpsCli, OpsListsThemWithTheBuiltInOps) {
  Result with = run("ops --format json --custom-ops " + kOps);
  ASSERT_EQ(with.exit_code, 0) << with.err;
  for (const char *name : {"\"SwishX\"", "\"SwishXGrad0\"", "\"SumSquares\"", "\"MatMul\""})
    EXPECT_NE(with.out.find(name), std::string::npos) << name;
  Result without = run("ops --format json");
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_EQ(without.out.find("\"SwishX\""), std::string::npos);
  EXPECT_NE(without.out.find("\"MatMul\""), std::string::npos);
  // kiln graph reads a graph JSON that uses them, its training step too.
  Result graph = run("graph " + kGraph + " --training --custom-ops " + kOps);
  ASSERT_EQ(graph.exit_code, 0) << graph.err;
  EXPECT_NE(graph.out.find("SumSquaresGrad0"), std::string::npos) << graph.out;
  expectRunError(run("graph " + kGraph), {"unknown op 'SwishX'"});
  Result missing = run("ops --custom-ops " + path("missing"));
  expectRunError(missing, {"missing: custom ops folder does not exist"});
  EXPECT_EQ(missing.exit_code, 1);
}

} // namespace
} // namespace kiln::testing
