// Loading custom ops: every job (and every artifact) has an op registry of
// its own over the built-in ops; job files name folders relative to
// themselves; a variant of a job reads no op file again; conflicting or
// malformed definitions are errors naming the file.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "compiler/driver/job.h"
#include "compiler/frontend/custom_ops.h"
#include "ops/op_registry.h"
#include "tests/compiler/custom_op_test_util.h"
#include "tests/support/op_test_util.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

using CustomOpLoading = CustomOpFolders;

// Custom ops belong to the job that loads them: two jobs of one process may
// give a name different definitions, and neither changes the built-in ops.
TEST_F(CustomOpLoading, EachJobHasItsOwnOps) {
  auto examples = frontend::loadCustomOps({kCustomOpExamples});
  ASSERT_TRUE(examples.isOk()) << examples.message();
  auto doubled = frontend::loadCustomOps({folder("a", {{"a.xml", R"(<ops>
    <op name="SwishX" kind="elementwise"><input name="x"/><output name="y"/>
    <compute>y[i, j] = x[i, j] * 2</compute></op></ops>)"}})});
  ASSERT_TRUE(doubled.isOk()) << doubled.message();
  Tensor x = Tensor::fromFloats(DType::F32, {1, 2}, {1.0f, -3.0f});
  EXPECT_EQ(run1("SwishX", {x}, {}, OverflowMode::InfNan, *doubled).toFloats(),
            (std::vector<float>{2.0f, -6.0f}));
  EXPECT_NE(run1("SwishX", {x}, {}, OverflowMode::InfNan, *examples).getFloat(0), 2.0f);
  EXPECT_EQ(ops::OpRegistry::builtin().find("SwishX"), nullptr);
  // A graph without the vocabulary does not know the op.
  auto unknown = runOp("SwishX", {x});
  ASSERT_FALSE(unknown.isOk());
  EXPECT_NE(unknown.message().find("SwishX"), std::string::npos) << unknown.message();
  // No folder: the built-in ops, no layer over them.
  auto none = frontend::loadCustomOps({});
  ASSERT_TRUE(none.isOk());
  EXPECT_EQ(*none, nullptr);
}

TEST_F(CustomOpLoading, JobFilesLoadFoldersRelativeToThemselves) {
  folder("job/ops", {{"a.xml", R"(<ops><op name="TJobOp" kind="elementwise"><input name="x"/>
      <output name="y"/><compute>y[i] = 2 * x[i]</compute></op></ops>)"}});
  std::ofstream(dir_ / "job" / "job.json") << R"({"custom_ops": ["ops"]})";
  auto job = driver::readJobFile((dir_ / "job" / "job.json").string());
  ASSERT_TRUE(job.isOk()) << job.message();
  ASSERT_EQ(job->custom_op_dirs.size(), 1u);
  EXPECT_EQ(job->custom_op_dirs[0], (dir_ / "job" / "ops").string());
  auto resolved = driver::resolveJob(*job, driver::JobSettings{}, DType::F32);
  ASSERT_TRUE(resolved.isOk()) << resolved.message();
  // The job holds its ops; resolving registered nothing process-wide.
  ASSERT_NE(resolved->ops, nullptr);
  EXPECT_NE(resolved->ops->find("TJobOp"), nullptr);
  EXPECT_NE(resolved->ops->find("MatMul"), nullptr);
  EXPECT_EQ(ops::OpRegistry::builtin().find("TJobOp"), nullptr);
  // Another job's registry is as it was.
  auto examples = frontend::loadCustomOps({kCustomOpExamples});
  ASSERT_TRUE(examples.isOk()) << examples.message();
  EXPECT_EQ((*examples)->find("TJobOp"), nullptr);
  // A variant of the job (a bisection trial) reads no op file again.
  fs::remove_all(dir_ / "job" / "ops");
  auto variant = driver::resolveJob(resolved->spec.withPassesDisabled({"TbeEltwiseFusionPass"}));
  ASSERT_TRUE(variant.isOk()) << variant.message();
  EXPECT_EQ(variant->ops, resolved->ops);
  folder("job/ops", {{"a.xml", R"(<ops><op name="TJobOp" kind="elementwise"><input name="x"/>
      <output name="y"/><compute>y[i] = 2 * x[i]</compute></op></ops>)"}});
  // A precision list may name them.
  std::ofstream(dir_ / "job" / "mixlist.json") << R"({"black-list": {"to-add": ["TJobOp"]}})";
  driver::JobSettings with_list;
  with_list.modify_mixlist = (dir_ / "job" / "mixlist.json").string();
  auto listed = driver::resolveJob(*job, with_list, DType::F32);
  ASSERT_TRUE(listed.isOk()) << listed.message();
  EXPECT_EQ(listed->context->precision().mixlist.listOf("TJobOp"), passes::PrecisionList::Black);

  driver::JobSettings cli;
  cli.custom_op_dirs = {(dir_ / "missing").string()};
  auto missing = driver::resolveJob(std::nullopt, cli, DType::F32);
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find("custom ops folder does not exist"), std::string::npos);
}

TEST_F(CustomOpLoading, ConflictsAndBadFilesAreErrors) {
  auto builtin = frontend::loadCustomOps({folder("builtin", {{"a.xml", R"(<ops>
    <op name="Exp" kind="elementwise"><input name="x"/><output name="y"/>
    <compute>y[i] = x[i]</compute></op></ops>)"}})});
  ASSERT_FALSE(builtin.isOk());
  EXPECT_NE(builtin.message().find("a.xml:2: op Exp is the name of a built-in op"),
            std::string::npos)
      << builtin.message();

  // Within one job: the examples' SwishX, then another.
  auto changed = frontend::loadCustomOps({kCustomOpExamples, folder("changed", {{"a.xml", R"(<ops>
    <op name="SwishX" kind="elementwise"><input name="x"/><output name="y"/>
    <compute>y[i, j] = x[i, j] * 2</compute></op></ops>)"}})});
  ASSERT_FALSE(changed.isOk());
  EXPECT_NE(changed.message().find("op SwishX is defined already, differently, at "),
            std::string::npos)
      << changed.message();

  const char *twice = R"(<ops><op name="TTwice" kind="elementwise"><input name="x"/>
    <output name="y"/><compute>y[i] = x[i]</compute></op></ops>)";
  auto dup = frontend::loadCustomOps({folder("dup", {{"a.xml", twice}, {"b.xml", twice}})});
  ASSERT_FALSE(dup.isOk());
  EXPECT_NE(dup.message().find("b.xml:1: op TTwice is defined twice (also at "), std::string::npos)
      << dup.message();

  auto bad = frontend::loadCustomOps({folder("bad", {{"a_good.xml", R"(<ops>
    <op name="TGood" kind="elementwise"><input name="x"/><output name="y"/>
    <compute>y[i] = x[i]</compute></op></ops>)"},
                                                     {"b_bad.xml", R"(<ops>
    <op name="TBad" kind="elementwise"><input name="x"/><output name="y"/>
    <compute>y[i] = x[i] +</compute></op></ops>)"}})});
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("b_bad.xml:3:27: op TBad: expected a number, a name or '(', got "
                               "the end of the compute"),
            std::string::npos)
      << bad.message();
}

} // namespace
} // namespace kiln::testing
