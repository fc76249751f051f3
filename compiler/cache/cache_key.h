// The kernel-cache key: a SHA-256 of named parts, kept apart so a miss can say which part changed.
// Whole-program entries (program_key.h) share the key's shape, under parts of their own.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::cache {

// Everything that changes a kernel's object code, and nothing else: not the job
// name, not switches that did not touch this kernel. Each field is canonical
// text (the caller sorts maps, drops comments) so equal inputs hash equally.
struct CacheKeyInputs {
  std::string kernel_name; // for messages only; identical kernels share an entry
  std::string kernel_ir;   // canonical kernel IR text
  std::string target;      // canonical target description
  std::string host_features;
  std::string kiln_version;
  std::string kiln_source_hash;
  std::string llvm_version;
  std::string codegen_options;
};

// The parts in hashing order; "target changed" in explanations uses these names.
inline constexpr std::array<std::string_view, 7> kKeyPartNames = {
    "kernel_ir",        "target",       "host_features",  "kiln_version",
    "kiln_source_hash", "llvm_version", "codegen_options"};

// What an entry holds: one kernel's object, or a whole compiled program (the
// graph after the passes and the kernel plan, naming its kernels' entries).
enum class EntryKind { Kernel, Program };
std::string_view entryKindName(EntryKind kind); // "kernel", "program"

struct CacheKey {
  EntryKind kind = EntryKind::Kernel;
  std::string kernel_name; // the kernel's name, or the program's (program_key.h)
  std::string hex;         // 64 lower-case hex digits: the entry's file name
  // (part name, SHA-256 hex of that part), in kKeyPartNames order.
  std::vector<std::pair<std::string, std::string>> parts;
};

CacheKey makeCacheKey(const CacheKeyInputs &inputs);

// The key of named parts under `domain` (kernel and program keys alike):
// each part's SHA-256, then the SHA-256 of "domain\nname=hex\n..." in order.
// Bump the domain when the key's make-up changes, so old entries miss.
CacheKey hashKeyParts(std::string_view domain, const std::vector<std::string_view> &names,
                      const std::vector<const std::string *> &values);

// True for 64 lower-case hex digits.
bool isKeyHex(std::string_view text);

} // namespace kiln::cache
