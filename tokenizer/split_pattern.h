// A pre-tokenizer's regular expression, compiled by PCRE2 (Unicode
// properties, lookahead and inline flags, as tokenizer.json patterns use
// them) and JIT-compiled once; each thread matches with scratch of its own.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "support/error.h"

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;

namespace kiln::tokenizer {

// A byte range [begin, end) of the text being split.
struct Span {
  size_t begin = 0, end = 0;
};

class SplitPattern {
public:
  // `regex`: a PCRE pattern; `literal`: match the text as it is.
  static Expected<SplitPattern> compile(const std::string &pattern, bool literal);

  // Per-thread match state.
  class Scratch {
  public:
    Scratch() = default;
    Scratch(Scratch &&) noexcept;
    Scratch &operator=(Scratch &&) noexcept;
    ~Scratch();

  private:
    friend class SplitPattern;
    pcre2_real_match_data_8 *data_ = nullptr;
  };

  // Every non-empty match in `text` (valid UTF-8), left to right.
  Status matches(std::string_view text, Scratch &scratch, std::vector<Span> &out) const;

  const std::string &pattern() const { return pattern_; }

private:
  struct CodeDeleter {
    void operator()(pcre2_real_code_8 *code) const;
  };
  std::string pattern_;
  std::shared_ptr<pcre2_real_code_8> code_;
};

} // namespace kiln::tokenizer
