// A pass's options, declared beside the pass as MLIR's Option<> is: each has
// a name, a type, a default and a description (PassInfo::options), so the
// listing, docs/passes.md and the checks come from that one declaration.
//
// A job sets them in its file ("pass_options": {"RecomputePass": {"mode":
// "full"}}) or on the command line (--pass-option RecomputePass.mode=full);
// some have a flag of their own (--recompute). Values are parsed once, when
// the job is resolved, into the PassContext; an option the pass does not
// declare, or a value its type refuses, is an error with a code, naming the
// pass, the option and where it was written.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "support/error.h"

namespace kiln::passes {

class PassRegistry;

// An unknown pass or option (CANN's module 1: parameters).
inline constexpr const char *kErrUnknownPassOption = "E10010";
// A value the option's type refuses, or a setting not written PASS.OPTION=VALUE.
inline constexpr const char *kErrBadPassOptionValue = "E10011";

enum class PassOptionType : uint8_t {
  Bool,   // true, false
  Int,    // a decimal integer
  IntSet, // "0,3,5" (a JSON array in a job file); "" is the empty set
  Choice, // one of PassOptionInfo::choices
};

struct PassOptionInfo {
  std::string name; // "layers"
  PassOptionType type = PassOptionType::Bool;
  std::string default_value; // as the user would write it: "none", "", "128"
  std::string description;   // one line
  std::vector<std::string> choices;

  // "bool", "int", "int list", "none|selective|full"
  std::string typeText() const;
};

using PassOptionValue = std::variant<bool, int64_t, std::set<int64_t>, std::string>;

// `text` as `option`'s type; an error (kErrBadPassOptionValue) says what the
// type takes.
Expected<PassOptionValue> parsePassOption(const PassOptionInfo &option, std::string_view text);
// The value as it would be written: "true", "128", "0,3", "full".
std::string passOptionText(const PassOptionValue &value);

// The values of one pass's options: each declared option's default unless
// the job set it.
class PassOptions {
public:
  PassOptions() = default;
  // The defaults of `declared` (a pass's PassInfo::options).
  explicit PassOptions(const std::vector<PassOptionInfo> &declared);

  // Sets a declared option from `text`; `source` says where it was written.
  Status set(const PassOptionInfo &option, std::string_view text, std::string source);

  // The typed values; the name must be declared with that type.
  bool getBool(std::string_view name) const;
  int64_t getInt(std::string_view name) const;
  std::set<int64_t> getInts(std::string_view name) const;
  std::string getChoice(std::string_view name) const;
  // "built-in default", or where the job set it.
  std::string source(std::string_view name) const;

  struct Entry {
    PassOptionValue value;
    std::string source;
  };
  const std::map<std::string, Entry, std::less<>> &entries() const { return values_; }

private:
  const PassOptionValue &value(std::string_view name) const;
  std::map<std::string, Entry, std::less<>> values_;
};

// One option a job sets: "RecomputePass.mode=full" from `source`.
struct PassOptionSetting {
  std::string pass, option, value;
  std::string source; // "--pass-option", "job.json: $.pass_options.RecomputePass.mode"
};

// "PASS.OPTION=VALUE" (kErrBadPassOptionValue when it is not).
Expected<PassOptionSetting> parsePassOptionSetting(std::string_view text, std::string source);

// Every option of every pass of `registry` that declares any: the
// defaults, then `settings` in order (a later one beats an earlier one). An
// unknown pass or option is kErrUnknownPassOption, with the nearest names.
Expected<std::map<std::string, PassOptions>>
resolvePassOptions(const PassRegistry &registry, const std::vector<PassOptionSetting> &settings);

} // namespace kiln::passes
