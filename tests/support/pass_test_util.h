// Helpers for pass tests: a tiny Qwen training step with data for every
// input, pass contexts for a target and switch settings, and comparing the
// fused graph's results with the unfused one's on the reference interpreter.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ir/graph.h"
#include "ops/interpreter.h"
#include "passes/pass_context.h"
#include "passes/pass_manager.h"
#include "passes/pass_switches.h"

namespace kiln::testing {

struct TinyTrainingStep {
  Graph graph;         // forward, loss, backward and AdamW of examples/qwen-tiny
  ops::TensorMap feed; // data for every graph input
};

// The tiny Qwen training step in `dtype` with deterministic weights, tokens,
// AdamW state (step 3, random moments) and lr 1e-3.
TinyTrainingStep tinyTrainingStep(DType dtype, int64_t batch = 2, int64_t seq = 8);

// num_hidden_layers of examples/qwen-tiny, so counts in tests follow the config.
int64_t tinyQwenLayers();

// With `pass` switched off, the default pipeline on the tiny f16 training
// step does not run it and no group carries it, while other passes still fuse.
void expectSwitchedOffFusesNothing(const std::string &pass);

struct Qwen14bTrainingStep {
  Graph graph;        // the whole training step of examples/qwen-14b, seq 2048, batch 1
  int64_t layers = 0; // num_hidden_layers of its config
};
// Built in `dtype` (about 30 ms; not for the interpreter).
Qwen14bTrainingStep qwen14bTrainingStep(DType dtype);

// Switch layer helpers: one pass on or off, or a group's ALL.
passes::SwitchLayer switchPasses(const std::vector<std::pair<std::string, bool>> &passes,
                                 const std::string &source = "test");
passes::SwitchLayer switchAll(passes::PassGroup group, bool on, const std::string &source = "test");

// A context for the built-in target `target` after applying `layers`; fails
// the test on a bad layer.
passes::PassContext
contextFor(const std::string &target, const std::vector<passes::SwitchLayer> &layers = {},
           const passes::PassRegistry &registry = passes::PassRegistry::builtin());
// Every GraphFusion and UBFusion pass off except `pass` (Cleanup and
// Precision passes keep their defaults).
passes::PassContext
onlyFusionPass(const std::string &target, const std::string &pass,
               const passes::PassRegistry &registry = passes::PassRegistry::builtin());
// Every GraphFusion and UBFusion pass off: the unfused reference.
passes::PassContext
noFusion(const std::string &target,
         const passes::PassRegistry &registry = passes::PassRegistry::builtin());

// Runs the pipeline on `graph`; fails the test on an error.
passes::PipelineReport
runPasses(Graph &graph, const passes::PassContext &ctx,
          const passes::PassRegistry &registry = passes::PassRegistry::builtin());

// Runs the registered pass `name` alone on `graph` with `ctx` and, when
// `verify`, compacts and verifies the graph as the pass manager would.
passes::PassResult runOnePass(Graph &graph, const std::string &name, const passes::PassContext &ctx,
                              bool verify = true);
// The same in a default context for `target`.
passes::PassResult runOnePass(Graph &graph, const std::string &name,
                              const std::string &target = "ascend910b");

// The reason the pass gave for leaving `node` alone, or a marker text.
std::string reasonFor(const passes::PassResult &result, const std::string &node);
// The names of the members of the group `node` belongs to, in node order
// (empty when it is in none).
std::vector<std::string> groupMemberNames(const Graph &graph, const std::string &node);

// Every output of `expected` is in `actual` with the same type and each
// element within atol + rtol * |expected| (NaN only where expected is NaN).
::testing::AssertionResult outputsAgree(const ops::TensorMap &expected,
                                        const ops::TensorMap &actual, double rtol, double atol);

// Runs `fused` and `unfused` on the same feed and compares them with the
// tolerance suited to `dtype` (f32: 1e-5; f16: 2e-2; bf16: 6e-2 relative).
::testing::AssertionResult fusedMatchesUnfused(const Graph &fused, const Graph &unfused,
                                               const ops::TensorMap &feed, DType dtype);

// The matmul fusion tests' start: x [4, 8] times w [16, 8] transposed
// ("mm"), every input random in [-1, 1) from `seed` up, in `feed`.
struct MatMulCase {
  Graph g{"t"};
  ValueId x, w, mm;
  ops::TensorMap feed;
  uint64_t seed;

  explicit MatMulCase(DType dtype = DType::F16, uint64_t seed = 31);
  // A further graph input, with its random data.
  ValueId input(const std::string &name, TensorType type);
};

} // namespace kiln::testing
