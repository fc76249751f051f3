// kiln train --sequence-parallel: inside each tensor-parallel group the
// norms and residuals run on each rank's slice of the sequence, the
// group's all-reduces become all-gather and reduce-scatter. The tiny Qwen
// and a grouped-query Qwen2 train as one device does (the loss and gradient
// norm within 1e-5, the final weights within 1e-4) with data parallelism,
// ZeRO-1 and -3, pipeline stages and recomputation too; each device's measured peak is its plan; a
// resumed run ends as the unbroken one; two MPI processes match one; on
// Qwen-14B the plan's activations fall as Korthikanti et al.'s formula says.
#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/train_fixture.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using nlohmann::json;

const std::string kQwen2Tiny = kSource + "/examples/qwen2-tiny/config.json";

class SequenceParallelCli : public TrainCli {
protected:
  std::string trainModel(const std::string &model, const std::string &flags) {
    return "train " + model + " --data train.bin --batch 8 --seq 16 --lr 1e-3 " + flags;
  }
  // A 20-step run checkpointed at 10 and 20; its log.
  std::vector<json> trainAs(const std::string &model, const std::string &name,
                            const std::string &flags) {
    Result r = runCheckpointed(trainModel(model, flags), name);
    expectMeasuredPeakIsPlan(r.out, name);
    return logLines(name + ".jsonl");
  }
  // `learns`: the one-device loss falls by 0.05 over the 20 steps (a
  // four-layer Qwen2 on these tokens takes longer).
  void expectAsOneDevice(const std::string &model,
                         const std::vector<std::pair<std::string, std::string>> &layouts,
                         bool learns = true) {
    const std::vector<json> one = trainAs(model, "one", "--devices 1");
    ASSERT_EQ(one.size(), 20u);
    for (const auto &[name, flags] : layouts) {
      const std::vector<json> got = trainAs(model, name, flags);
      ASSERT_EQ(got.size(), 20u) << name;
      expectNearLog(one, got, 1e-5, name);
      expectNearTensors("one/step-000020.safetensors", name + "/step-000020.safetensors", 1e-4);
    }
    if (learns) {
      EXPECT_LT(one.back()["loss"].get<double>(), one.front()["loss"].get<double>() - 0.05);
    }
  }
};

TEST_F(SequenceParallelCli, TinyQwenTrainsAsOneDevice) {
  expectAsOneDevice(
      kTiny, {{"tp2", "--devices 2 --tp 2 --sequence-parallel"},
              {"tp4", "--devices 4 --tp 4 --sequence-parallel"},
              {"tp2dp2z1", "--devices 4 --tp 2 --zero 1 --sequence-parallel"},
              {"tp2full", "--devices 2 --tp 2 --sequence-parallel --recompute full"},
              {"tp2z3", "--devices 4 --tp 2 --zero 3 --sequence-parallel"},
              {"pp2tp2", "--devices 4 --pp 2 --tp 2 --micro-batches 2 --sequence-parallel"}});
  // Resumed from the checkpoint of step 10, the run ends exactly where the
  // unbroken one did.
  fs::create_directories(dir_ / "resumed");
  fs::copy_file(dir_ / "tp2dp2z1" / "step-000010.safetensors",
                dir_ / "resumed" / "step-000010.safetensors");
  Result resumed = run(train("--steps 20 --devices 4 --tp 2 --zero 1 --sequence-parallel "
                             "--checkpoint-dir resumed --resume"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expectSameTensors("tp2dp2z1/step-000020.safetensors", "resumed/step-000020.safetensors");
}

// Qwen2's grouped-query attention (4 query heads sharing 2 key/value heads)
// and its q, k, v biases: the bias of a column-parallel layer is split with
// it, inside the gathered region.
TEST_F(SequenceParallelCli, GroupedQueryQwen2TrainsAsOneDevice) {
  expectAsOneDevice(
      kQwen2Tiny,
      {{"tp2", "--devices 2 --tp 2 --sequence-parallel"},
       {"tp2dp2z1full", "--devices 4 --tp 2 --zero 1 --sequence-parallel --recompute full"}});
}

// The grouped-query Qwen2 (four layers) with everything at once: an
// interleaved pipeline (two devices, two model stages each) of TP2 groups
// with sequence parallelism, two ZeRO-1 replicas, and the slices gathered
// again in the backward (no recomputation, so SequenceRegatherPass runs).
TEST_F(SequenceParallelCli, GroupedQueryQwen2InAnInterleavedPipelineTrainsAsOneDevice) {
  json config = json::parse(slurp(kQwen2Tiny));
  config["num_hidden_layers"] = 4;
  write("qwen2-4.json", config.dump());
  expectAsOneDevice(path("qwen2-4.json"),
                    {{"pp2v2tp2dp2spz1", "--devices 8 --pp 2 --virtual-stages 2 --tp 2 "
                                         "--sequence-parallel --zero 1 --micro-batches 2"}},
                    /*learns=*/false);
}

// The job file's setting is the flag's; the flag needs a tensor-parallel
// group, and the sequence must split evenly over it.
TEST_F(SequenceParallelCli, JobFileAndBadLayouts) {
  write("job.json", R"({"sequence_parallel": true})");
  Result flag = run(train("--steps 2 --devices 2 --tp 2 --sequence-parallel --log-json f.jsonl"));
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  Result file =
      run(train("--steps 2 --devices 2 --tp 2 --log-json j.jsonl --job " + path("job.json")));
  ASSERT_EQ(file.exit_code, 0) << file.err;
  EXPECT_NE(file.out.find("dp 1 x tp 2, zero 0, sequence parallel"), std::string::npos) << file.out;
  const std::vector<json> f = logLines("f.jsonl"), j = logLines("j.jsonl");
  ASSERT_EQ(f.size(), 2u);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(f[1]["loss"], j[1]["loss"]);
  expectUsageError(run(train("--steps 1 --devices 2 --sequence-parallel")),
                   {"needs --tp 2 or more"});
  expectRunError(run("train " + kTiny +
                     " --data train.bin --batch 8 --seq 18 --steps 1 --devices 4 --tp 4 "
                     "--sequence-parallel"),
                 {"sequence length 18", "must divide"});
}

// Two processes, each holding one tensor-parallel group of two: the
// gradients are summed across them as without sequence parallelism.
TEST_F(SequenceParallelCli, TwoMpiProcessesMatchOne) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "OpenMPI's mpirun is not installed";
  const std::string flags =
      "--steps 4 --devices 4 --tp 2 --zero 1 --sequence-parallel --checkpoint-every 4 ";
  ASSERT_EQ(run(train(flags + "--log-json one.jsonl --checkpoint-dir one")).exit_code, 0);
  Result mpi = shell("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
                     "--oversubscribe -np 2 " +
                     kiln_ + " " +
                     train(flags + "--devices-per-process 2 --log-json mpi.jsonl "
                                   "--checkpoint-dir mpi"));
  if (mpi.exit_code != 0 && mpi.err.find("built without MPI") != std::string::npos)
    GTEST_SKIP() << "kiln was built without MPI";
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  std::vector<json> one = logLines("one.jsonl"), two = logLines("mpi.jsonl");
  ASSERT_EQ(two.size(), 4u);
  expectSameLog(one, two);
  expectSameTensors("one/step-000004.safetensors", "mpi/step-000004.safetensors");
}

// Qwen-14B on 8 x ascend910b (planned as if it had 256 GiB, which the
// unfused attention at seq 8192 needs), tp 8, f16, no recomputation: what
// sequence parallelism takes off the plan's activations is what it takes off
// the formula's, within 15 %: the 16sbh a layer outside the tensor-parallel
// regions of kiln's layer (the paper's 10sbh, with each RMSNorm's input in
// f32 and its normalised output kept, no dropout), split 8 ways, the
// projections' inputs too (SequenceRegatherPass gathers them again for the
// backward, docs/training.md).
TEST_F(SequenceParallelCli, Qwen14BActivationsFallAsTheFormulaSays) {
  for (const char *seq : {"2048", "8192"}) {
    double plan[2] = {}, formula[2] = {};
    for (int sp = 0; sp < 2; ++sp) {
      Result r =
          run("train " + k14b + " --compile-only --devices 8 --tp 8 --batch 1 --seq " + seq +
              " --dtype f16 --target ascend910b --device-memory 256GiB" +
              // The attention unfused: with FlashAttentionFusionPass the
              // activations no longer set the peak at seq 2048.
              " --disable-pass FlashAttentionFusionPass" + (sp ? " --sequence-parallel" : ""));
      ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
      std::smatch step, paper;
      // The step's activations, at the device's peak or beside the update's.
      ASSERT_TRUE(std::regex_search(
          r.out, step,
          std::regex("(at the peak \\(the step\\)|the step at its peak):.* activations "
                     "([0-9.]+ GiB)")))
          << r.out;
      ASSERT_TRUE(std::regex_search(r.out, paper, std::regex("\\+ activations ([0-9.]+ GiB) =")))
          << r.out;
      plan[sp] = formattedBytes(step[2]);
      formula[sp] = formattedBytes(paper[1]);
    }
    const double planned = plan[0] - plan[1], expected = formula[0] - formula[1];
    EXPECT_GT(planned, 0) << seq;
    EXPECT_LT(std::abs(planned - expected), 0.15 * expected)
        << "seq " << seq << ": the plan's activations fall by " << planned / (1 << 30)
        << " GiB, the formula's by " << expected / (1 << 30) << " GiB";
  }
}

} // namespace
} // namespace kiln
