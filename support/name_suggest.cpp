#include "support/name_suggest.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace kiln {

namespace {

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                  std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

bool startsWithIgnoringCase(std::string_view s, std::string_view prefix) {
  if (prefix.size() > s.size())
    return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i])))
      return false;
  return true;
}

} // namespace

std::vector<std::string> nearestNames(std::string_view name, const std::vector<std::string> &known,
                                      size_t count) {
  // A name the query begins (a truncated name) is the likeliest meaning.
  std::vector<std::string> out;
  for (const std::string &k : known)
    if (out.size() < count && !name.empty() && startsWithIgnoringCase(k, name))
      out.push_back(k);
  if (!out.empty())
    return out;
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string &k : known)
    scored.push_back({editDistance(name, k), k});
  std::sort(scored.begin(), scored.end());
  // Only the nearest names, and only when they share most letters with the
  // query: a far-off suggestion is noise.
  if (scored.empty() || scored[0].first > std::max<size_t>(2, name.size() / 3))
    return out;
  for (const auto &[distance, k] : scored)
    if (out.size() < count && distance == scored[0].first)
      out.push_back(k);
  return out;
}

std::string joinNames(const std::vector<std::string> &names) {
  std::string out;
  for (const std::string &n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

} // namespace kiln
