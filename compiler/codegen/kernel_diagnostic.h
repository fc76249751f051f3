// A kernel that cannot be built for the target, as a record: the coded error
// in CANN's style (E + module 4 "TE fusion" + number), the kernel, its member
// ops with their scopes, the pass or rule that formed it and the constraint
// it breaks, with the numbers.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::codegen {

// The codes kiln's kernel compiler reports.
inline constexpr const char *kErrUbOverflow = "E40001";      // working set exceeds the UB
inline constexpr const char *kErrL0cOverflow = "E40002";     // matmul output tile exceeds L0C
inline constexpr const char *kErrFixPipeEpilogue = "E40003"; // FixPipe cannot apply an op
inline constexpr const char *kErrDType = "E40004";           // dtype the target lacks
inline constexpr const char *kErrCubeDType = "E40005";       // matmul operand dtype the cube lacks
inline constexpr const char *kErrFusedOp = "E40006";  // a fused op the target lacks or cannot tile
inline constexpr const char *kErrLowering = "E49001"; // no kernel lowering for an op

struct KernelMember {
  std::string name; // scoped node name: "transformer.h.3.attn.softmax"
  std::string op;
};

struct KernelDiagnostic {
  std::string code;
  std::string kernel;
  std::string kind;
  std::string formed_by; // pass or rule; empty for a single op
  std::vector<KernelMember> members;
  std::string constraint; // "needs 300.0 KiB of UB, ascend910b has 192.0 KiB"
  std::string ir_dump;    // path of the kernel's dump, when written

  // "E40001 kernel 'fused.x' (eltwise, formed by TbeEltwiseFusionPass): ..." plus the members.
  std::string toString() const;
  nlohmann::json toJson() const;
};

} // namespace kiln::codegen
