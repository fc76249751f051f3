// A description of an NPU target, read from data (target/data/*.json,
// embedded at build time, or a user file): which dtypes and overflow modes it
// has, whether it has FixPipe and which epilogues FixPipe applies, its core
// counts and on-chip buffer sizes. Passes and codegen ask it; nothing about a
// chip is hard-coded elsewhere.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ir/dtype.h"
#include "support/error.h"

namespace kiln::target {

struct FixPipe {
  bool present = false;
  // Ops FixPipe applies to a cube result on its way out of L0C.
  std::vector<std::string> epilogue_ops;
};

struct Memory {
  int64_t ub_bytes = 0; // Unified Buffer of a vector core
  int64_t l1_bytes = 0;
  int64_t l0a_bytes = 0;
  int64_t l0b_bytes = 0;
  int64_t l0c_bytes = 0; // cube accumulator
  int64_t l2_bytes = 0;
  int64_t hbm_bytes = 0;
};

// The links between devices, for the cost model's collectives: a ring
// inside a node runs at the intra-node figures, one that crosses nodes at
// the inter-node ones. Bandwidths are per device and direction; 0 is unknown.
struct Interconnect {
  int64_t devices_per_node = 0;
  double intra_node_gbps = 0;
  double intra_node_latency_us = 0;
  double inter_node_gbps = 0;
  double inter_node_latency_us = 0;
};

struct Target {
  std::string name;
  std::string description;
  std::vector<DType> dtypes;
  // Input dtypes the cube unit (matmuls) takes; it always accumulates in f32
  // and can store f32 (ascend910's cube takes f16 only).
  std::vector<DType> cube_input_dtypes;
  std::vector<OverflowMode> overflow_modes;
  OverflowMode default_overflow_mode = OverflowMode::Saturation;
  FixPipe fixpipe;
  int64_t cube_cores = 0;
  int64_t vector_cores = 0;
  Memory memory;
  // Elements one vector-core pass over a tensor processes at a time; fused
  // elementwise kernels need one such tile per live buffer in the UB.
  int64_t vector_tile_elements = 0;
  // The cube's native (m, n, k) tile: 16 x 16 x 16 fp16 on both chips.
  std::array<int64_t, 3> cube_tile{16, 16, 16};
  // HBM bandwidth in GB/s, 0 when unknown.
  int64_t hbm_bandwidth_gbps = 0;
  // Peak throughput of the cube (matmuls) in TFLOPS by input dtype; a dtype
  // absent is unknown.
  std::map<DType, double> peak_tflops;
  // Peak throughput of the vector units (everything else) in TFLOPS, one
  // operation per element; a dtype absent runs at the f32 rate.
  std::map<DType, double> vector_peak_tflops;
  Interconnect interconnect;
  // Fused operators the chip's operator library ships beyond the basic ones
  // ("FlashAttentionScore": CANN has it for the Atlas A2 series only). A
  // pass that produces one applies only where the target lists it.
  std::vector<std::string> fused_ops;
  // Fields whose value is a default rather than a published fact.
  std::vector<std::string> unconfirmed;

  bool supports(DType dtype) const;
  bool cubeTakes(DType dtype) const;
  bool supports(OverflowMode mode) const;
  bool fixpipeApplies(std::string_view op) const;
  bool hasFusedOp(std::string_view op) const;
};

// `source` names the file in errors; every error carries the JSON path.
Expected<Target> parseTarget(const nlohmann::json &doc, std::string_view source);
// The target in the file format parseTarget reads (keys sorted when dumped):
// its canonical description, for cache keys and artifact manifests.
nlohmann::json targetToJson(const Target &target);
// The built-in targets, by name.
std::vector<std::string> builtinTargetNames();
// A built-in target by name, or a target file when `name_or_path` ends in
// .json; an unknown name lists the known ones.
Expected<Target> loadTarget(std::string_view name_or_path);

} // namespace kiln::target
