// ONNX's backend tests (Debian's libonnx-testdata: ONNX 1.12's node tests and
// the pytorch-operator, pytorch-converted and simple models) run through
// kiln in one process: import, the job's passes, the kernels (through one
// kernel cache in the build folder), the executor, and a comparison with
// the test's own expected outputs at ONNX's tolerances (rtol 1e-3, atol
// 1e-7). A test ends in a pass, a coded "unsupported" error, or a failure;
// a test listed in conformance_passing.txt that does not pass fails this
// test. KILN_ONNX_CONFORMANCE_UPDATE=1 rewrites that list and the table in
// docs/onnx.md from the run.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "compiler/driver/compile.h"
#include "compiler/driver/job.h"
#include "compiler/driver/kernels.h"
#include "compiler/frontend/onnx/onnx_errors.h"
#include "compiler/frontend/onnx/onnx_import.h"
#include "compiler/frontend/onnx/onnx_reader.h"
#include "ir/tensor_compare.h"
#include "runtime/executor.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using frontend::onnx_import::isUnsupportedCode;

constexpr const char *kTestData = "/usr/share/libonnx-testdata/data";
constexpr const char *kSuites[] = {"node", "pytorch-operator", "pytorch-converted", "simple"};
const std::string kExpectations =
    std::string(KILN_SOURCE_DIR) + "/tests/compiler/onnx/conformance_passing.txt";
const std::string kDoc = std::string(KILN_SOURCE_DIR) + "/docs/onnx.md";
constexpr const char *kTableBegin = "<!-- conformance table: generated, do not edit -->";
constexpr const char *kTableEnd = "<!-- end of conformance table -->";

enum class Verdict { Pass, Unsupported, Fail };

struct Result {
  std::string test; // "node/test_add"
  std::string ops;  // the model's op types, by first appearance
  Verdict verdict = Verdict::Fail;
  std::string why;
};

std::string opsOf(const onnx::ModelProto &m) {
  std::vector<std::string> seen;
  for (const auto &n : m.graph().node())
    if (std::find(seen.begin(), seen.end(), n.op_type()) == seen.end())
      seen.push_back(n.op_type());
  std::string s;
  for (const auto &o : seen)
    s += (s.empty() ? "" : " ") + o;
  return s;
}

std::vector<std::string> sortedFiles(const fs::path &dir, const std::string &prefix) {
  std::vector<std::pair<int, std::string>> files;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.ends_with(".pb"))
      files.emplace_back(std::stoi(name.substr(prefix.size())), e.path().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  for (auto &f : files)
    out.push_back(f.second);
  return out;
}

// One backend test: model.onnx with test_data_set_0.
Result runOne(const fs::path &dir, const std::string &test, const driver::ResolvedJob &job,
              cache::KernelCache *cache, const driver::KernelSettings &settings) {
  Result r{test, "", Verdict::Fail, ""};
  const std::string model_path = (dir / "model.onnx").string();
  auto fail = [&](Verdict v, const std::string &why) {
    r.verdict = v;
    r.why = why;
    return r;
  };
  auto proto = frontend::onnx_import::readOnnxModel(model_path);
  if (!proto)
    return fail(Verdict::Fail, proto.message());
  r.ops = opsOf(**proto);
  const fs::path data = dir / "test_data_set_0";
  // The inputs in the order of the graph's inputs that are not initializers.
  std::set<std::string> initializers;
  for (const auto &i : (*proto)->graph().initializer())
    initializers.insert(i.name());
  std::vector<std::string> input_names;
  for (const auto &i : (*proto)->graph().input())
    if (!initializers.count(i.name()))
      input_names.push_back(i.name());
  ops::TensorMap inputs;
  frontend::OnnxImportOptions options;
  const std::vector<std::string> input_files = sortedFiles(data, "input_");
  for (size_t k = 0; k < input_files.size() && k < input_names.size(); ++k) {
    auto t = frontend::onnx_import::readOnnxTensorFile(input_files[k]);
    if (!t) {
      // Not a tensor (a sequence, an optional): the model's own refusal says why.
      auto refused = frontend::loadOnnxModel(model_path, {});
      if (!refused && isUnsupportedCode(refused.error().code()))
        return fail(Verdict::Unsupported, refused.error().code() + " " + refused.message());
      return fail(isUnsupportedCode(t.error().code()) ? Verdict::Unsupported : Verdict::Fail,
                  t.message());
    }
    options.input_shapes[input_names[k]] = t->shape();
    inputs[input_names[k]] = std::move(*t);
  }
  options.ops = job.ops;
  auto model = frontend::loadOnnxModel(model_path, options);
  if (!model) {
    const std::string &code = model.error().code();
    return fail(isUnsupportedCode(code) ? Verdict::Unsupported : Verdict::Fail,
                (code.empty() ? "" : code + " ") + model.message());
  }
  Graph graph = std::move(model->graph);
  for (auto &[name, t] : model->weights)
    inputs[name] = t;
  auto compiled = driver::compileGraph(graph, job, {}, false);
  if (!compiled)
    return fail(Verdict::Fail, "passes: " + compiled.message());
  auto kernels = driver::compileJobKernels(graph, job, settings, nullptr, cache);
  if (!kernels) {
    const std::string &code = kernels.error().code();
    // A dtype the target lacks is the target's refusal, not a wrong answer.
    if (code == "E40004" || code == "E40005")
      return fail(Verdict::Unsupported, code + " " + kernels.message());
    return fail(Verdict::Fail, "kernels: " + kernels.message());
  }
  auto executor = runtime::Executor::create(graph, std::move(kernels->kernels));
  if (!executor)
    return fail(Verdict::Fail, "executor: " + executor.message());
  auto got = (*executor)->run(inputs);
  if (!got)
    return fail(Verdict::Fail, "run: " + got.message());
  const std::vector<std::string> output_files = sortedFiles(data, "output_");
  const auto &outputs = (*proto)->graph().output();
  for (size_t k = 0; k < output_files.size() && static_cast<int>(k) < outputs.size(); ++k) {
    auto want = frontend::onnx_import::readOnnxTensorFile(output_files[k]);
    if (!want)
      return fail(isUnsupportedCode(want.error().code()) ? Verdict::Unsupported : Verdict::Fail,
                  want.error().code() + " expected output: " + want.message());
    const std::string &name = outputs[static_cast<int>(k)].name();
    auto it = got->find(name);
    if (it == got->end())
      return fail(Verdict::Fail, "no output '" + name + "'");
    const std::string mismatch = firstMismatch(it->second, *want, 1e-3, 1e-7);
    if (!mismatch.empty())
      return fail(Verdict::Fail, "output '" + name + "': " + mismatch);
  }
  r.verdict = Verdict::Pass;
  return r;
}

std::string cell(std::string s) {
  std::replace(s.begin(), s.end(), '|', '/');
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > 160)
    s = s.substr(0, 157) + "...";
  return s;
}

// "unsupported: E12010" / "fail": what the table's verdict column says.
std::string verdictText(const Result &r) {
  switch (r.verdict) {
  case Verdict::Pass:
    return "pass";
  case Verdict::Unsupported:
    return "unsupported";
  case Verdict::Fail:
    return "FAIL";
  }
  return "";
}

// Shortens "model.onnx: node 'x' (Op, opset 17): why" to "why" for the table.
std::string reason(const Result &r) {
  std::string why = r.why;
  const size_t at = why.find("): ");
  if (r.verdict == Verdict::Unsupported && at != std::string::npos)
    why = why.substr(0, why.find(' ')) + " " + why.substr(at + 3);
  const size_t model = why.find("model.onnx: ");
  if (model != std::string::npos)
    why = why.substr(0, why.rfind(' ', model) + 1) + why.substr(model + 12);
  return cell(why);
}

void writeUpdate(const std::vector<Result> &results) {
  std::ofstream list(kExpectations);
  list << "# ONNX backend tests kiln passes (tests/compiler/onnx/onnx_conformance_test.cpp);\n"
          "# regenerate with KILN_ONNX_CONFORMANCE_UPDATE=1.\n";
  for (const Result &r : results)
    if (r.verdict == Verdict::Pass)
      list << r.test << "\n";
  std::ifstream in(kDoc);
  std::stringstream doc;
  doc << in.rdbuf();
  std::string text = doc.str();
  const size_t b = text.find(kTableBegin), e = text.find(kTableEnd);
  if (b == std::string::npos || e == std::string::npos)
    return;
  std::map<Verdict, int> counts;
  for (const Result &r : results)
    ++counts[r.verdict];
  std::ostringstream table;
  table << kTableBegin << "\n\n"
        << results.size() << " tests: " << counts[Verdict::Pass] << " pass, "
        << counts[Verdict::Unsupported] << " end in a coded unsupported error, "
        << counts[Verdict::Fail] << " fail.\n\n| test | ops | result | why |\n|---|---|---|---|\n";
  for (const Result &r : results)
    table << "| " << r.test << " | " << cell(r.ops) << " | " << verdictText(r) << " | "
          << (r.verdict == Verdict::Pass ? "" : reason(r)) << " |\n";
  table << "\n";
  text = text.substr(0, b) + table.str() + text.substr(e);
  std::ofstream(kDoc) << text;
}

TEST(OnnxConformance, BackendTestsPassOrEndInACodedError) {
  ASSERT_TRUE(fs::is_directory(kTestData))
      << kTestData << " is missing: install libonnx-testdata (scripts/setup.sh --deps-only)";
  auto job = driver::resolveJob(std::nullopt, driver::JobSettings{}, DType::F32);
  ASSERT_TRUE(job) << job.message();
  driver::KernelSettings settings;
  settings.dir = std::string(KILN_BINARY_DIR) + "/onnx-conformance-cache";
  settings.dump_dir = "";
  std::string cache_dir;
  auto cache = driver::openKernelCache(settings, cache_dir);

  std::set<std::string> expected;
  {
    std::ifstream list(kExpectations);
    for (std::string line; std::getline(list, line);)
      if (!line.empty() && line[0] != '#')
        expected.insert(line);
  }
  const char *only = std::getenv("KILN_ONNX_CONFORMANCE_ONLY"); // a substring, for debugging
  std::vector<Result> results;
  for (const char *suite : kSuites) {
    std::vector<fs::path> dirs;
    for (const auto &e : fs::directory_iterator(fs::path(kTestData) / suite))
      if (fs::exists(e.path() / "model.onnx"))
        dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const fs::path &dir : dirs) {
      const std::string test = std::string(suite) + "/" + dir.filename().string();
      if (only && test.find(only) == std::string::npos)
        continue;
      results.push_back(runOne(dir, test, *job, cache.get(), settings));
    }
  }
  std::map<Verdict, int> counts;
  for (const Result &r : results) {
    ++counts[r.verdict];
    if (r.verdict == Verdict::Fail)
      std::cout << "FAIL " << r.test << " [" << r.ops << "]: " << r.why << "\n";
    if (expected.count(r.test))
      EXPECT_EQ(r.verdict, Verdict::Pass) << r.test << " passed before: " << r.why;
    else if (r.verdict == Verdict::Pass && !only)
      std::cout << "newly passing: " << r.test << " (add it to conformance_passing.txt)\n";
  }
  if (std::getenv("KILN_ONNX_CONFORMANCE_VERBOSE"))
    for (const Result &r : results)
      std::cout << verdictText(r) << " " << r.test << " [" << r.ops << "]: " << r.why << "\n";
  std::cout << results.size() << " tests: " << counts[Verdict::Pass] << " pass, "
            << counts[Verdict::Unsupported] << " unsupported, " << counts[Verdict::Fail]
            << " fail\n";
  const char *update = std::getenv("KILN_ONNX_CONFORMANCE_UPDATE");
  if (update && std::string(update) == "1" && !only)
    writeUpdate(results);
}

} // namespace
} // namespace kiln
