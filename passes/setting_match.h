// What one entry of a list-like job setting (a keep_dtype line, a
// modify_mixlist entry, a layer of attention_fp32_layers) matched in the
// model's graph: the compile report lists them, so a setting that did
// nothing is seen, not guessed at.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::passes {

struct SettingMatch {
  std::string setting; // "keep_dtype", "modify_mixlist", "attention_fp32_layers"
  std::string source;  // the file or the flag it came from
  std::string entry;   // as written: "OpType::SoftmaxV2", "white-list to-add MatMulV2"
  std::vector<std::string> op_types; // for op type entries: the kiln op types it stands for
  int64_t nodes = 0;                 // nodes of the graph (before the passes) it matched
};

} // namespace kiln::passes
