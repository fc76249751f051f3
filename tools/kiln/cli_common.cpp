#include "tools/kiln/cli_common.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <regex>

#include "compiler/codegen/kernel_diagnostic.h"
#include "compiler/frontend/model_loader.h"
#include "runtime/token_data.h"
#include "support/byte_size.h"
#include "support/name_suggest.h"
#include "support/printable_text.h"

namespace kiln::cli {

Error usageError(const std::string &message) { return Error(message).withCode(kUsageErrorCode); }

Error usageError(const Error &error) { return error.withCode(kUsageErrorCode); }

bool isUsageError(const Error &error) { return error.code() == kUsageErrorCode; }

namespace {

// What to do after an error, for the errors that have a usual next step.
std::string nextStep(const Error &error) {
  // A matmul operand dtype the cube lacks (an f32 model on ascend910): no
  // pass formed that, the job's precision decides it.
  if (error.code() == codegen::kErrCubeDType)
    return "\nnext: the cube multiplies only the operand dtypes its target lists "
           "(cube_input_dtypes): --precision-mode force_fp32 (f16 into the cube, f32 out, as "
           "CANN's cube_fp16in_fp32out) or allow_fp32_to_fp16 lowers an f32 model's matmuls, "
           "--dtype f16 builds a Hugging Face model in f16 (docs/precision.md)";
  // A kernel the target cannot hold (E40001 and on): find the pass that
  // formed it, or compile it another way.
  if (error.code().rfind("E400", 0) == 0)
    return "\nnext: 'kiln debug bisect' with the same model and flags names the pass that formed "
           "the kernel (switch it off with --disable-pass), or --on-compile-error fallback "
           "compiles it as single-op kernels (or the op's reference kernel on the host) and "
           "lists each fallback";
  return "";
}

} // namespace

int fail(const Error &error) {
  std::cerr << "kiln: error: " << printableText(error.message() + nextStep(error)) << "\n";
  return isUsageError(error) ? kExitUsage : kExitError;
}

int fail(const std::string &message) { return fail(Error(message)); }

int usage(const std::string &message) { return fail(usageError(message)); }

void note(const std::string &message) { std::cerr << "kiln: " << printableText(message) << "\n"; }

void printText(const std::string &text) { std::cout << printableText(text); }

namespace {

// The number in `text`, whole of it; nothing when it is not one.
std::optional<double> parseNumber(const std::string &text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size())
      return v;
  } catch (const std::exception &) {
  }
  return std::nullopt;
}

CLI::Validator numberCheck(bool whole, bool zero_allowed, const std::string &name) {
  return CLI::Validator(
      [whole, zero_allowed](std::string &text) -> std::string {
        const std::string want = std::string(whole ? "a whole number" : "a finite number") +
                                 (zero_allowed ? " of at least 0" : " above 0");
        if (whole) {
          long long v = 0;
          const char *end = text.data() + text.size();
          auto [at, ec] = std::from_chars(text.data(), end, v);
          if (ec == std::errc::result_out_of_range)
            return "'" + printableName(text) + "' is too large";
          if (ec != std::errc() || at != end || v < 0 || (v == 0 && !zero_allowed))
            return "must be " + want + ", got '" + printableName(text) + "'";
          return {};
        }
        const std::optional<double> v = parseNumber(text);
        if (!v || !std::isfinite(*v) || *v < 0 || (*v == 0 && !zero_allowed))
          return "must be " + want + ", got '" + printableName(text) + "'";
        return {};
      },
      whole ? (zero_allowed ? "INT>=0" : "INT>0") : (zero_allowed ? "NUMBER>=0" : "NUMBER>0"),
      name);
}

DType parseFloatDType(const std::string &flag, const std::string &text) {
  auto parsed = parseDType(text);
  if (!parsed || !isFloat(*parsed))
    throw CLI::ValidationError(flag, "expected f32, f16 or bf16, got '" + text + "'");
  return *parsed;
}

OverflowMode parseOverflow(const std::string &text) {
  auto parsed = parseOverflowMode(text);
  if (!parsed)
    throw CLI::ValidationError("--overflow-mode",
                               "expected infnan or saturation, got '" + text + "'");
  return *parsed;
}

} // namespace

const CLI::Validator OpenFraction = CLI::Validator(
    [](std::string &text) -> std::string {
      double v = 0;
      const char *end = text.data() + text.size();
      auto [at, ec] = std::from_chars(text.data(), end, v);
      if (ec != std::errc() || at != end || !(v > 0 && v < 1))
        return "must be a fraction above 0 and below 1, got '" + printableName(text) + "'";
      return {};
    },
    "FRACTION", "OPEN_FRACTION");

CLI::Validator IntegerIn(int low, int high) {
  std::string want;
  if (high - low < 5) {
    for (int v = low; v <= high; ++v)
      want += (v == low ? "" : v == high ? " or " : ", ") + std::to_string(v);
  } else {
    want = "a whole number from " + std::to_string(low) + " to " + std::to_string(high);
  }
  return CLI::Validator(
      [low, high, want](std::string &text) -> std::string {
        long long v = 0;
        const char *end = text.data() + text.size();
        auto [at, ec] = std::from_chars(text.data(), end, v);
        if (ec != std::errc() || at != end || v < low || v > high)
          return "must be " + want + ", got '" + printableName(text) + "'";
        return {};
      },
      std::to_string(low) + ".." + std::to_string(high), "INTEGER_IN");
}

CLI::Validator OneOf(std::vector<std::string> values) {
  std::string want, type;
  for (size_t i = 0; i < values.size(); ++i) {
    want += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + values[i];
    type += (i == 0 ? "" : "|") + values[i];
  }
  return CLI::Validator(
      [values, want](std::string &text) -> std::string {
        if (std::find(values.begin(), values.end(), text) != values.end())
          return {};
        return "expected " + want + ", got '" + printableName(text) + "'";
      },
      type, "ONE_OF");
}

const CLI::Validator ByteSize = CLI::Validator(
    [](std::string &text) -> std::string {
      auto bytes = parseByteSize(text);
      if (!bytes)
        return bytes.error().message();
      if (*bytes == 0 || *bytes > INT64_MAX)
        return "'" + printableName(text) + "' is not a size above zero";
      return {};
    },
    "SIZE", "BYTE_SIZE");

const CLI::Validator FinitePositive = numberCheck(false, false, "FINITE_POSITIVE");
const CLI::Validator FiniteNonNegative = numberCheck(false, true, "FINITE_NON_NEGATIVE");
const CLI::Validator PositiveInteger = numberCheck(true, false, "POSITIVE_INTEGER");
const CLI::Validator NonNegativeInteger = numberCheck(true, true, "NON_NEGATIVE_INTEGER");

namespace {

std::string didYouMean(const std::string &word, const std::vector<std::string> &known) {
  const std::vector<std::string> near = nearestNames(word, known, 1);
  return near.empty() ? std::string() : near.front();
}

std::string commandPath(const CLI::App &command) {
  std::string path;
  for (const CLI::App *a = &command; a != nullptr; a = a->get_parent())
    path = a->get_parent() == nullptr ? "kiln" + path : " " + a->get_name() + path;
  return path;
}

} // namespace

std::string suggestCommand(const CLI::App &app, const std::string &word) {
  std::vector<std::string> names;
  for (const CLI::App *sub : app.get_subcommands([](const CLI::App *) { return true; }))
    names.push_back(sub->get_name());
  return didYouMean(word, names);
}

std::string suggestFlag(const CLI::App &command, const std::string &flag) {
  std::vector<std::string> names;
  for (const CLI::Option *o : command.get_options()) {
    for (const std::string &l : o->get_lnames())
      names.push_back("--" + l);
    for (const std::string &s : o->get_snames())
      names.push_back("-" + s);
  }
  // "--disable-pas=X" is the flag "--disable-pas".
  return didYouMean(flag.substr(0, flag.find('=')), names);
}

void suggestOnUnknownArguments(CLI::App &command) {
  command.allow_extras(true);
  command.parse_complete_callback([&command] {
    const std::vector<std::string> extras = command.remaining(false);
    if (extras.empty())
      return;
    const std::string &first = extras.front();
    const bool is_flag = first.size() > 1 && first[0] == '-';
    const std::string near = is_flag ? suggestFlag(command, first) : suggestCommand(command, first);
    throw CLI::ExtrasError(
        printableName(first) + ": " + (is_flag ? "not a flag of '" : "not expected by '") +
            commandPath(command) + "'" +
            (near.empty() ? std::string(" (see --help)") : " (did you mean " + near + "?)"),
        CLI::ExitCodes::ExtrasError);
  });
  for (CLI::App *sub : command.get_subcommands([](const CLI::App *) { return true; }))
    suggestOnUnknownArguments(*sub);
}

namespace {

// The deepest command the parse reached ("kiln debug bisect").
const CLI::App &deepestCommand(const CLI::App &app) {
  const CLI::App *at = &app;
  for (std::vector<CLI::App *> subs = at->get_subcommands(); !subs.empty();
       subs = at->get_subcommands())
    at = subs.front();
  return *at;
}

// What a value of an option of type `type` (CLI11's "INT", "UINT", "FLOAT")
// must be, in words.
std::string valueWords(const std::string &type) {
  if (type.rfind("UINT", 0) == 0)
    return "a whole number of at least 0";
  if (type.rfind("INT", 0) == 0)
    return "a whole number";
  if (type.rfind("FLOAT", 0) == 0)
    return "a number";
  return "a value of the form " + type;
}

// CLI11's messages for a command line it could not take, in kiln's words.
std::string usageText(const CLI::App &command, const CLI::ParseError &error) {
  const std::string what = error.what();
  std::smatch m;
  static const std::regex at_most(R"(^(\S+): At Most (\d+) required but received (\d+)$)");
  static const std::regex at_least(R"(^(\S+): At least (\d+) required but received (\d+)$)");
  static const std::regex missing(R"(^(\S+): (\d+) required .* missing$)");
  static const std::regex convert(R"(^Could not convert: (\S+) = (.*)$)");
  if (std::regex_match(what, m, at_most))
    return m[2] == "1" ? m[1].str() + " given " + m[3].str() + " times: give it once"
                       : m[1].str() + " takes at most " + m[2].str() + " values, got " + m[3].str();
  if (std::regex_match(what, m, at_least))
    return m[1].str() + " takes " + m[2].str() + " values, got " + m[3].str();
  if (std::regex_match(what, m, missing))
    return m[1].str() + " needs a value (" + commandPath(command) + " --help says which)";
  if (std::regex_match(what, m, convert)) {
    const CLI::Option *o = command.get_option_no_throw(m[1].str());
    return m[1].str() + ": expected " + (o ? valueWords(o->get_type_name()) : "another value") +
           ", got '" + printableName(m[2].str()) + "'";
  }
  // "--loss-scale: --loss-scale 'x': ..." (a library's message that names the
  // flag itself) reads once.
  const size_t colon = what.find(": ");
  if (colon != std::string::npos && colon > 2 && what.rfind("--", 0) == 0 &&
      what.compare(colon + 2, colon, what, 0, colon) == 0)
    return what.substr(colon + 2);
  return what;
}

} // namespace

int reportParseError(const CLI::App &app, const CLI::ParseError &error) {
  const CLI::App &command = deepestCommand(app);
  // "kiln", "kiln debug": a command that only groups others, given none of
  // them: its help lists them.
  if (command.get_require_subcommand_min() > 0 && command.get_subcommands().empty() &&
      dynamic_cast<const CLI::RequiredError *>(&error) != nullptr) {
    std::cerr << command.help();
    return kExitUsage;
  }
  std::cerr << "kiln: error: " << printableText(usageText(command, error)) << "\n";
  return kExitUsage;
}

CLI::Option *addDTypeFlag(CLI::App &app, const std::string &name, DType &dtype,
                          const std::string &help) {
  return app
      .add_option_function<std::string>(
          name, [&dtype, name](const std::string &text) { dtype = parseFloatDType(name, text); },
          help)
      ->type_name("f32|f16|bf16");
}

CLI::Option *addDataDTypeFlag(CLI::App &app, std::string &dtype) {
  dtype = "auto";
  return app
      .add_option("--data-dtype", dtype,
                  "auto (default: uint32 past 65536 tokens of vocabulary, as kiln tokenize "
                  "writes), uint16 or uint32")
      ->check(parsedBy([](const std::string &text) { return runtime::parseTokenDType(text); },
                       "TOKEN_DTYPE"));
}

CLI::Option *addOptionalDTypeFlag(CLI::App &app, std::optional<DType> &dtype) {
  return app
      .add_option_function<std::string>(
          "--dtype",
          [&dtype](const std::string &text) { dtype = parseFloatDType("--dtype", text); },
          "the model's dtype (default f32 in every command; a --precision-mode lowers what "
          "may run low)")
      ->type_name("f32|f16|bf16");
}

CLI::Option *addOptionalOverflowFlag(CLI::App &app, std::optional<OverflowMode> &mode) {
  return app
      .add_option_function<std::string>(
          "--overflow-mode", [&mode](const std::string &text) { mode = parseOverflow(text); },
          "how fp16/bf16 results that overflow are rounded (default: the target's)")
      ->type_name("infnan|saturation");
}

void addModelArgument(CLI::App &cmd, std::string &model, ModelArgument kind,
                      const std::string &also) {
  std::string what = kind == ModelArgument::Decoder
                         ? "config.json or a folder holding it"
                         : "config.json, a folder holding it" +
                               std::string(also.empty() ? ", or a kiln graph JSON"
                                                        : ", a kiln graph JSON, " + also);
  cmd.add_option("MODEL", model, what)->required();
}

Expected<frontend::DecoderConfig> decoderConfigOf(const std::string &model,
                                                  const std::string &command) {
  frontend::ModelOptions probe;
  probe.seq = 2; // the config only
  KILN_ASSIGN_OR_RETURN(frontend::LoadedModel loaded, frontend::loadModel(model, probe));
  if (!loaded.config)
    return Error(model + ": " + command + " needs a Hugging Face config.json (one of " +
                 frontend::supportedArchitectures() + ")");
  return *loaded.config;
}

Expected<int64_t> parseSizeFlag(const std::string &flag, const std::string &value) {
  auto bytes = parseByteSize(value);
  if (!bytes)
    return bytes.error().withContext(flag);
  if (*bytes == 0 || *bytes > INT64_MAX)
    return Error(flag + ": '" + value + "' is not a size above zero");
  return static_cast<int64_t>(*bytes);
}

} // namespace kiln::cli
