// Target descriptions: the built-in chips and malformed target files.
#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/file_io.h"
#include "target/target.h"

namespace kiln::target {
namespace {

TEST(Target, BuiltinsCarryTheChipFacts) {
  auto a = loadTarget("ascend910");
  ASSERT_TRUE(a) << a.message();
  EXPECT_FALSE(a->fixpipe.present);
  EXPECT_FALSE(a->supports(OverflowMode::InfNan));
  EXPECT_FALSE(a->supports(DType::BF16));
  EXPECT_EQ(a->memory.ub_bytes, 256 * 1024);
  EXPECT_EQ(a->cube_cores, 32);
  EXPECT_TRUE(a->cubeTakes(DType::F16));
  EXPECT_EQ(a->peak_tflops.at(DType::F16), 256.0);
  EXPECT_EQ(a->cube_tile, (std::array<int64_t, 3>{16, 16, 16}));
  EXPECT_GT(a->hbm_bandwidth_gbps, 0);
  EXPECT_FALSE(a->cubeTakes(DType::F32));
  EXPECT_EQ(a->interconnect.devices_per_node, 8);
  EXPECT_EQ(a->interconnect.inter_node_gbps, 12.5) << "the 910's 100 Gb/s RoCE port";
  EXPECT_GT(a->vector_peak_tflops.at(DType::F32), 0);

  auto b = loadTarget("ascend910b");
  ASSERT_TRUE(b) << b.message();
  EXPECT_TRUE(b->fixpipe.present);
  EXPECT_TRUE(b->fixpipeApplies("Cast"));
  EXPECT_FALSE(b->fixpipeApplies("Silu"));
  EXPECT_EQ(b->default_overflow_mode, OverflowMode::InfNan);
  EXPECT_EQ(b->memory.ub_bytes, 192 * 1024);
  EXPECT_EQ(b->memory.l0c_bytes, 128 * 1024);
  EXPECT_EQ(b->cube_cores, 24);
  EXPECT_FALSE(b->peak_tflops.contains(DType::F32)) << "not published: unknown, not invented";
  for (const char *guessed : {"peak_tflops", "vector_peak_tflops", "interconnect"})
    EXPECT_NE(std::find(b->unconfirmed.begin(), b->unconfirmed.end(), guessed),
              b->unconfirmed.end())
        << guessed << " has no public figure and must say so";
  EXPECT_EQ(builtinTargetNames(), (std::vector<std::string>{"ascend910", "ascend910b"}));
}

nlohmann::json validTarget() {
  auto text = readFile(std::string(KILN_SOURCE_DIR) + "/target/data/ascend910b.json");
  EXPECT_TRUE(text);
  return nlohmann::json::parse(*text);
}

TEST(Target, MalformedFilesNameThePath) {
  struct Case {
    std::function<void(nlohmann::json &)> edit;
    const char *expect;
  };
  const std::vector<Case> cases = {
      {[](auto &j) { j.erase("memory"); }, "$: missing field 'memory'"},
      {[](auto &j) { j["memory"]["ub_bytes"] = -1; }, "$.memory.ub_bytes: expected a positive"},
      {[](auto &j) { j["memory"]["ub"] = 1; }, "$.memory.ub: unknown field"},
      {[](auto &j) { j["dtypes"][0] = "f64"; }, "$.dtypes[0]: unknown dtype 'f64'"},
      {[](auto &j) { j["overflow_modes"] = {"saturation"}; },
       "$.default_overflow_mode: not one of $.overflow_modes"},
      {[](auto &j) { j["fixpipe"]["present"] = false; },
       "$.fixpipe.epilogue_ops: must be empty when FixPipe is not present"},
      {[](auto &j) { j["format"] = "kiln.job"; }, "$.format: expected \"kiln.target\""},
      {[](auto &j) { j["cores"]["cube"] = "24"; }, "$.cores.cube: expected an integer"},
      {[](auto &j) {
         j["cube_tile"] = {16, 16};
       },
       "$.cube_tile: expected [m, n, k]"},
      {[](auto &j) {
         j["peak_tflops"] = {{"f64", 1}};
       },
       "$.peak_tflops.f64: 'f64' is not one"},
      {[](auto &j) {
         j["peak_tflops"] = {{"f16", -1}};
       },
       "$.peak_tflops.f16: expected a positive"},
      {[](auto &j) { j["hbm_bandwidth_gbps"] = 0; }, "$.hbm_bandwidth_gbps: expected a positive"},
      {[](auto &j) { j["vector_peak_tflops"]["i8"] = 1; },
       "$.vector_peak_tflops.i8: 'i8' is not one"},
      {[](auto &j) { j["interconnect"]["inter_node_gbps"] = 0; },
       "$.interconnect.inter_node_gbps: expected a positive"},
      {[](auto &j) { j["interconnect"].erase("devices_per_node"); },
       "$.interconnect: missing field 'devices_per_node'"},
      {[](auto &j) { j["interconnect"]["nvlink_gbps"] = 1; },
       "$.interconnect.nvlink_gbps: unknown field"},
      {[](auto &j) { j["cube_input_dtypes"] = {"f64"}; },
       "$.cube_input_dtypes[0]: 'f64' is not one of $.dtypes"},
  };
  for (const Case &c : cases) {
    nlohmann::json j = validTarget();
    c.edit(j);
    auto t = parseTarget(j, "my_target.json");
    ASSERT_FALSE(t) << c.expect;
    EXPECT_NE(t.message().find("my_target.json: "), std::string::npos) << t.message();
    EXPECT_NE(t.message().find(c.expect), std::string::npos) << t.message();
  }
  EXPECT_TRUE(parseTarget(validTarget(), "ok.json"));
}

TEST(Target, UnknownNameListsTheBuiltins) {
  auto t = loadTarget("ascend310p");
  ASSERT_FALSE(t);
  EXPECT_NE(t.message().find("ascend910, ascend910b"), std::string::npos) << t.message();
  auto f = loadTarget("/nonexistent/chip.json");
  ASSERT_FALSE(f);
  EXPECT_NE(f.message().find("/nonexistent/chip.json"), std::string::npos) << f.message();
}

} // namespace
} // namespace kiln::target
