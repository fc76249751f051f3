#include "tokenizer/corpus.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/file_io.h"
#include "support/progress.h"
#include "support/thread_pool.h"

namespace kiln::tokenizer {
namespace {

namespace fs = std::filesystem;

// A file is read whole, and ICU indexes text with 32-bit ints: a larger
// file is refused (split it) rather than misread.
constexpr size_t kMaxFileBytes = size_t{INT32_MAX};

bool isJsonLines(const fs::path &p) {
  const std::string ext = p.extension().string();
  return ext == ".jsonl" || ext == ".ndjson";
}

Expected<std::vector<fs::path>> expandInputs(const std::vector<std::string> &inputs) {
  std::vector<fs::path> files;
  for (const std::string &input : inputs) {
    std::error_code ec;
    const auto status = fs::status(input, ec);
    if (ec || !fs::exists(status))
      return Error(input + ": no such file or folder");
    if (fs::is_regular_file(status)) {
      files.emplace_back(input);
      continue;
    }
    if (!fs::is_directory(status))
      return Error(input + ": not a file or a folder");
    std::vector<fs::path> found;
    for (auto it = fs::recursive_directory_iterator(input, ec); !ec && it != fs::end(it);
         it.increment(ec))
      if (it->is_regular_file(ec))
        found.push_back(it->path());
    if (ec)
      return Error(input + ": cannot be listed: " + ec.message());
    if (found.empty())
      return Error(input + ": a folder without files");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  if (files.empty())
    return Error("no input files");
  return files;
}

// One file's documents: views into `text` (plain text) or owned strings (JSON lines).
Status readDocuments(const fs::path &path, const std::string &text, const std::string &field,
                     std::vector<std::string> &documents) {
  const std::string name = path.string();
  if (const void *nul = std::memchr(text.data(), 0, text.size()))
    return Error(name + ": a NUL byte at offset " +
                 std::to_string(static_cast<const char *>(nul) - text.data()) +
                 ": a binary file, not text (kiln tokenize reads UTF-8 text and JSON lines)");
  if (!isJsonLines(path)) {
    if (!text.empty())
      documents.push_back(text);
    return Status::ok();
  }
  std::istringstream lines(text);
  std::string line;
  for (int64_t number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    const std::string where = name + ":" + std::to_string(number);
    auto record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_discarded())
      return Error(where + ": not a JSON value");
    if (!record.is_object() || !record.contains(field))
      return Error(where + ": no field \"" + field + "\" (--field names the text's field)");
    const auto &value = record[field];
    if (value.is_array() || value.is_object())
      return Error(where + ": field \"" + field +
                   "\" is a list or an object (chat records?): kiln does not render chat "
                   "templates; render the records to text first, or name a text field with "
                   "--field");
    if (!value.is_string())
      return Error(where + ": field \"" + field + "\" is not text");
    documents.push_back(value.get<std::string>());
  }
  return Status::ok();
}

std::string littleEndian(const std::vector<uint32_t> &ids, size_t begin, size_t end, int width) {
  std::string bytes;
  bytes.reserve((end - begin) * width);
  for (size_t i = begin; i < end; ++i)
    for (int b = 0; b < width; ++b)
      bytes.push_back(static_cast<char>((ids[i] >> (8 * b)) & 0xff));
  return bytes;
}

// Documents to encode together, and the file each came from.
struct Batch {
  std::vector<std::string> documents;
  std::vector<size_t> file_of;
  size_t bytes = 0;
};
constexpr size_t kBatchBytes = size_t{32} << 20;

// Encodes `batch` on every core and appends its ids, each document followed
// by `separator`, in input order.
Status encodeBatch(const Tokenizer &tokenizer, const Batch &batch,
                   const std::vector<fs::path> &files, ThreadPool &pool,
                   std::vector<Tokenizer::Session> &sessions, uint32_t separator,
                   CorpusSummary &summary, std::vector<uint32_t> &ids,
                   std::vector<size_t> &document_ends) {
  const size_t n = batch.documents.size();
  std::vector<std::vector<uint32_t>> encoded(n);
  std::vector<Status> failures(n);
  std::vector<size_t> replaced(n);
  pool.parallelFor(static_cast<int64_t>(n), [&](int64_t d, int worker) {
    replaced[d] = illFormedUtf8Sequences(batch.documents[d]);
    auto e = tokenizer.encode(batch.documents[d], /*add_special_tokens=*/true, sessions[worker]);
    if (e)
      encoded[d] = std::move(*e);
    else
      failures[d] = e.status();
  });
  for (size_t d = 0; d < n; ++d) {
    if (!failures[d])
      return Error(files[batch.file_of[d]].string() + ": " + failures[d].message());
    summary.replaced += replaced[d];
    ids.insert(ids.end(), encoded[d].begin(), encoded[d].end());
    ids.push_back(separator);
    document_ends.push_back(ids.size());
  }
  summary.documents += static_cast<int64_t>(n);
  summary.bytes += batch.bytes;
  return Status::ok();
}

} // namespace

std::string defaultEvalPath(const std::string &output) {
  const fs::path p(output);
  return (p.parent_path() / (p.stem().string() + ".eval" + p.extension().string())).string();
}

Expected<CorpusSummary> tokenizeCorpus(const Tokenizer &tokenizer, const CorpusOptions &options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.output.empty())
    return Error("no output file");
  if (!(options.eval_split >= 0 && options.eval_split < 1))
    return Error("the held-out fraction must be at least 0 and below 1");
  if (options.model_vocab > 0 && tokenizer.vocabSize() > options.model_vocab)
    return Error(tokenizer.source() + ": the tokenizer has " +
                 std::to_string(tokenizer.vocabSize()) + " tokens, more than the model's " +
                 std::to_string(options.model_vocab) + " (vocab_size): not this model's tokenizer");

  CorpusSummary summary;
  summary.output = options.output;
  summary.separator = options.separator.value_or(tokenizer.eosToken());
  if (summary.separator.empty())
    return Error(tokenizer.source() +
                 ": no eos_token (tokenizer_config.json beside it names one): name the token "
                 "between documents with --separator");
  const auto separator = tokenizer.tokenId(summary.separator);
  if (!separator)
    return Error("the separator '" + summary.separator + "' is not a token of " +
                 tokenizer.source());
  summary.token_bytes = tokenizer.vocabSize() > 65536 ? 4 : 2;

  KILN_ASSIGN_OR_RETURN(auto files, expandInputs(options.inputs));
  std::vector<uint64_t> sizes;
  uint64_t total_bytes = 0;
  for (const auto &f : files) {
    std::error_code ec;
    sizes.push_back(fs::file_size(f, ec));
    total_bytes += ec ? 0 : sizes.back();
  }

  ThreadPool pool(options.threads);
  std::vector<Tokenizer::Session> sessions;
  for (int w = 0; w < pool.size(); ++w)
    sessions.push_back(tokenizer.session());

  // Documents are gathered over files into batches of about kBatchBytes and
  // each batch encoded on every core, so folders of small files keep every
  // core busy too.
  Batch batch;
  std::vector<uint32_t> ids;
  std::vector<size_t> document_ends; // in `ids`, after each separator
  uint64_t done_bytes = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    KILN_ASSIGN_OR_RETURN(std::string text, readFile(files[f].string(), kMaxFileBytes));
    const size_t before = batch.documents.size();
    KILN_RETURN_IF_ERROR(readDocuments(files[f], text, options.field, batch.documents));
    batch.file_of.resize(batch.documents.size(), f);
    for (size_t d = before; d < batch.documents.size(); ++d)
      batch.bytes += batch.documents[d].size();
    done_bytes += sizes[f];
    if (batch.bytes < kBatchBytes && f + 1 < files.size())
      continue;
    KILN_RETURN_IF_ERROR(encodeBatch(tokenizer, batch, files, pool, sessions, *separator, summary,
                                     ids, document_ends));
    batch = Batch();
    progress::report("tokenizing: " + std::to_string(done_bytes >> 20) + " of " +
                     std::to_string(total_bytes >> 20) + " MiB");
  }
  if (summary.documents == 0)
    return Error("the input holds no text (empty files or no JSON lines)");
  if (options.model_vocab > 0)
    for (uint32_t id : ids)
      if (id >= options.model_vocab)
        return Error("token id " + std::to_string(id) + " is past the model's vocabulary of " +
                     std::to_string(options.model_vocab));

  size_t cut = ids.size();
  if (options.eval_split > 0) {
    const double target = static_cast<double>(ids.size()) * (1 - options.eval_split);
    // The document boundary nearest the target, when it leaves both sides some tokens.
    cut = static_cast<size_t>(std::llround(target));
    size_t best = cut;
    double best_distance = HUGE_VAL;
    for (size_t end : document_ends)
      if (end > 0 && end < ids.size() && std::abs(double(end) - target) < best_distance) {
        best = end;
        best_distance = std::abs(double(end) - target);
      }
    if (best_distance <= 0.5 * options.eval_split * double(ids.size()))
      cut = best;
    if (cut == 0 || cut >= ids.size())
      return Error("--eval-split " + std::to_string(options.eval_split) + " of " +
                   std::to_string(ids.size()) + " tokens leaves one side empty");
    summary.eval_output =
        options.eval_output.empty() ? defaultEvalPath(options.output) : options.eval_output;
    KILN_RETURN_IF_ERROR(writeFileAtomic(summary.eval_output,
                                         littleEndian(ids, cut, ids.size(), summary.token_bytes)));
    summary.eval_tokens = static_cast<int64_t>(ids.size() - cut);
  }
  KILN_RETURN_IF_ERROR(
      writeFileAtomic(options.output, littleEndian(ids, 0, cut, summary.token_bytes)));
  summary.tokens = static_cast<int64_t>(cut);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

nlohmann::json CorpusSummary::toJson() const {
  nlohmann::json j = {{"documents", documents},
                      {"tokens", tokens},
                      {"bytes", bytes},
                      {"bytes_per_token",
                       tokens + eval_tokens > 0 ? double(bytes) / double(tokens + eval_tokens) : 0},
                      {"token_dtype", token_bytes == 2 ? "uint16" : "uint32"},
                      {"separator", separator},
                      {"invalid_utf8_replaced", replaced},
                      {"seconds", seconds},
                      {"output", output}};
  if (!eval_output.empty()) {
    j["eval_output"] = eval_output;
    j["eval_tokens"] = eval_tokens;
  }
  return j;
}

std::string CorpusSummary::toText() const {
  std::ostringstream out;
  const int64_t all = tokens + eval_tokens;
  out << documents << " documents, " << bytes << " bytes -> " << all << " tokens ("
      << (token_bytes == 2 ? "uint16" : "uint32") << ", "
      << (all > 0 ? std::round(100.0 * double(bytes) / double(all)) / 100 : 0.0)
      << " bytes/token, '" << separator << "' after each document) in "
      << std::round(seconds * 100) / 100 << " s ("
      << (seconds > 0 ? std::round(double(bytes) / seconds / 1e4) / 100 : 0.0) << " MB/s)\n";
  out << "wrote " << tokens << " tokens to " << output << "\n";
  if (!eval_output.empty())
    out << "wrote " << eval_tokens << " held-out tokens to " << eval_output << "\n";
  if (replaced > 0)
    out << replaced << " ill-formed UTF-8 sequences were read as U+FFFD\n";
  return out.str();
}

} // namespace kiln::tokenizer
