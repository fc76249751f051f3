// ONNX operator versions. A model imports one opset of the default domain;
// each of its nodes then means the newest version of its operator whose
// since-version is at most that opset (ONNX's Changelog.md lists them). The
// table holds, per operator kiln converts, ONNX's since-versions up to
// opset 18 and the versions kiln's conversion reads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::frontend::onnx_import {

// The opsets of the default domain kiln reads: below 7 the elementwise
// operators broadcast by ONNX's old `broadcast`/`axis` attributes.
inline constexpr int64_t kMinOpset = 7, kMaxOpset = 18;

struct OpVersions {
  std::string_view op;
  std::vector<int> onnx;      // ONNX's since-versions of the operator, ascending
  std::vector<int> kiln;      // those kiln's conversion implements
  std::string_view note = {}; // how the versions kiln reads differ, for docs/onnx.md
};

// The operator's entry, or nullptr when kiln converts no version of it.
const OpVersions *findOpVersions(std::string_view op);
const std::vector<OpVersions> &opVersionTable();

// The version `opset` selects: the newest since-version <= opset, or 0
// when ONNX defines the operator only from a later opset.
int resolveVersion(const OpVersions &versions, int64_t opset);
bool kilnReads(const OpVersions &versions, int version);

// "1, 11 and 13": the versions kiln reads, for messages and docs.
std::string versionList(const std::vector<int> &versions);

} // namespace kiln::frontend::onnx_import
