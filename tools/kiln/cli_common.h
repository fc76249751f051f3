// Pieces every kiln subcommand shares: error reporting, common flags.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "compiler/frontend/decoder_config.h"
#include "ir/dtype.h"
#include "support/error.h"

namespace kiln::cli {

// The work of the chosen subcommand; main() runs it after parsing and exits
// with its result.
using Action = std::function<int()>;

// kiln's exit codes, for scripts (docs/cli.md, "Exit codes").
inline constexpr int kExitOk = 0;            // done, nothing found
inline constexpr int kExitError = 1;         // an error, printed as one "kiln: error:" line
inline constexpr int kExitUsage = 2;         // bad command line (unknown flag, bad value)
inline constexpr int kExitOverflowFound = 3; // kiln debug overflow found an overflow
inline constexpr int kExitDoesNotFit = 4;    // the plan exceeds the device memory

// A usage error: the command line itself is wrong (a flag's value, a flag
// given twice, flags that do not go together, a pass name kiln lacks),
// whatever the files it names hold. It carries CANN's code for an invalid
// parameter, and fail() exits with kExitUsage for it: every command reports
// its usage errors through this one code (docs/cli.md, "Exit codes").
inline constexpr const char *kUsageErrorCode = "E10001";
Error usageError(const std::string &message);
Error usageError(const Error &error);
bool isUsageError(const Error &error);

// Prints "kiln: error: <message>" to stderr, control characters escaped
// (support/printable_text.h), and returns kExitUsage for a usage error, else
// kExitError.
int fail(const Error &error);
int fail(const std::string &message);
// fail(usageError(message)).
int usage(const std::string &message);

// main()'s report of a command line CLI11 could not parse: a one-line usage
// error in kiln's words ("--steps given twice"), or, for a command that
// needs a subcommand and got none, that command's help. Returns kExitUsage.
int reportParseError(const CLI::App &app, const CLI::ParseError &error);
// Prints "kiln: <message>" to stderr, control characters escaped: what a
// command tells besides its output (cache misses, fallbacks, files written).
void note(const std::string &message);
// Writes a command's text output (not JSON) to stdout, control characters
// in the names it holds escaped.
void printText(const std::string &text);

// Adds `--NAME f32|f16|bf16` bound to `dtype`.
CLI::Option *addDTypeFlag(CLI::App &app, const std::string &name, DType &dtype,
                          const std::string &help);
// Adds `--data-dtype auto|uint16|uint32`, a token file's id width (kiln
// train, kiln eval), bound to `dtype` ("auto" by default).
CLI::Option *addDataDTypeFlag(CLI::App &app, std::string &dtype);
// The same flags, for settings that fall back to a job file or a target.
CLI::Option *addOptionalDTypeFlag(CLI::App &app, std::optional<DType> &dtype);
CLI::Option *addOptionalOverflowFlag(CLI::App &app, std::optional<OverflowMode> &mode);

// Range checks for numeric flags, with messages a reader can act on ("--batch:
// must be a whole number above 0, got '0'"), unlike CLI11's PositiveNumber,
// which lets NaN through and prints its bounds with 309 digits.
// A finite number above 0 / at least 0 (NaN and inf are refused).
extern const CLI::Validator FinitePositive;
extern const CLI::Validator FiniteNonNegative;
// A whole number above 0 / at least 0.
extern const CLI::Validator PositiveInteger;
extern const CLI::Validator NonNegativeInteger;
// A number strictly between 0 and 1 (a share of something: --eval-split).
extern const CLI::Validator OpenFraction;
// A whole number from `low` to `high` ("must be 0, 1, 2 or 3, got '5'").
CLI::Validator IntegerIn(int low, int high);
// One of `values` ("expected text or json, got 'x'"), unlike CLI11's
// IsMember, whose message is its own.
CLI::Validator OneOf(std::vector<std::string> values);
// A size (--device-memory 600KiB, --shard-size 5GB): above zero, at most
// INT64_MAX bytes.
extern const CLI::Validator ByteSize;
// A value `parse` accepts; its error is the message. For the flags whose
// values a library parses (--loss-scale, --schedule, --target).
template <typename Parse> CLI::Validator parsedBy(Parse parse, const std::string &name) {
  return CLI::Validator(
      [parse](std::string &text) -> std::string {
        auto parsed = parse(text);
        return parsed ? std::string() : parsed.error().message();
      },
      "", name);
}

// "Did you mean": the subcommand of `app` nearest to a misspelt `word`, or
// the flag of `command` nearest to `flag`; empty when none is close.
// main() calls suggestCommand for a word that names no subcommand.
std::string suggestCommand(const CLI::App &app, const std::string &word);
std::string suggestFlag(const CLI::App &command, const std::string &flag);
// Makes an unknown flag or word given to `command` (and to each of its
// subcommands) a usage error that names it and suggests the nearest flag or
// subcommand: "--disable-pas: not a flag of 'kiln train' (did you mean
// --disable-pass?)". Call after all of the command's options are added.
void suggestOnUnknownArguments(CLI::App &command);

// The MODEL argument every model command takes, required. A decoder
// (kiln train, plan, merge) is a config.json or a folder holding it; any
// model may also be a kiln graph JSON; `also` names what else the command
// takes ("or an artifact ...").
enum class ModelArgument { Decoder, AnyModel };
// MODEL's Hugging Face config; a kiln graph JSON is an error saying that
// `command` ("kiln train") needs a decoder's config.json.
Expected<frontend::DecoderConfig> decoderConfigOf(const std::string &model,
                                                  const std::string &command);
// The value of size flag `flag` ("--device-memory 32GiB"): above zero and at
// most INT64_MAX bytes, or an error naming the flag.
Expected<int64_t> parseSizeFlag(const std::string &flag, const std::string &value);
void addModelArgument(CLI::App &cmd, std::string &model, ModelArgument kind,
                      const std::string &also = "");

void registerGraphCommand(CLI::App &app, Action &action);
void registerInitCommand(CLI::App &app, Action &action);
void registerRunCommand(CLI::App &app, Action &action);
void registerMakeInputsCommand(CLI::App &app, Action &action);
void registerOpsCommand(CLI::App &app, Action &action);
void registerCompileCommand(CLI::App &app, Action &action);
void registerPassesCommand(CLI::App &app, Action &action);
void registerCacheCommand(CLI::App &app, Action &action);
void registerDebugCommand(CLI::App &app, Action &action);
void registerDebugReduce(CLI::App &debug, Action &action);   // under `kiln debug`
void registerDebugOverflow(CLI::App &debug, Action &action); // under `kiln debug`
void registerInspectCommand(CLI::App &app, Action &action);
void registerTrainCommand(CLI::App &app, Action &action);
void registerTokenizeCommand(CLI::App &app, Action &action);
void registerEvalCommand(CLI::App &app, Action &action);
void registerKeysCommand(CLI::App &app, Action &action);
void registerMergeCommand(CLI::App &app, Action &action);
void registerPlanCommand(CLI::App &app, Action &action);
void registerReportCommand(CLI::App &app, Action &action);

} // namespace kiln::cli
