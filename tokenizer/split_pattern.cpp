#include "tokenizer/split_pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace kiln::tokenizer {
namespace {

std::string pcreMessage(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char *>(buffer);
}

} // namespace

void SplitPattern::CodeDeleter::operator()(pcre2_real_code_8 *code) const { pcre2_code_free(code); }

SplitPattern::Scratch::Scratch(Scratch &&other) noexcept : data_(other.data_) {
  other.data_ = nullptr;
}
SplitPattern::Scratch &SplitPattern::Scratch::operator=(Scratch &&other) noexcept {
  std::swap(data_, other.data_);
  return *this;
}
SplitPattern::Scratch::~Scratch() { pcre2_match_data_free(data_); }

Expected<SplitPattern> SplitPattern::compile(const std::string &pattern, bool literal) {
  // UCP: \s, \w and \d by Unicode properties, as the regex engines of
  // Hugging Face's tokenizers (Oniguruma) and JavaScript read them.
  uint32_t options = PCRE2_UTF | PCRE2_UCP;
  if (literal)
    options = PCRE2_UTF | PCRE2_LITERAL;
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code *code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error, &offset, nullptr);
  if (!code)
    return Error("the pattern '" + pattern + "' does not compile at offset " +
                 std::to_string(offset) + ": " + pcreMessage(error));
  // The JIT is a speed-up only: where it is unavailable the interpreter runs.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  SplitPattern p;
  p.pattern_ = pattern;
  p.code_.reset(code, CodeDeleter());
  return p;
}

Status SplitPattern::matches(std::string_view text, Scratch &scratch,
                             std::vector<Span> &out) const {
  if (!scratch.data_)
    scratch.data_ = pcre2_match_data_create_from_pattern(code_.get(), nullptr);
  const auto *subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    // The text was made valid UTF-8 before it got here.
    const int rc = pcre2_match(code_.get(), subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                               scratch.data_, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH)
      break;
    if (rc < 0)
      return Error("matching the pattern '" + pattern_ + "' failed: " + pcreMessage(rc));
    const PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(scratch.data_);
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      out.push_back({begin, end});
      start = end;
      continue;
    }
    // An empty match: step over one whole code point.
    if (begin >= text.size())
      break;
    start = begin + 1;
    while (start < text.size() && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80)
      ++start;
  }
  return Status::ok();
}

} // namespace kiln::tokenizer
