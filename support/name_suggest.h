// Names in messages: "a, b, c", and "did you mean": the known names closest
// to a misspelt one (passes, ops, fields), by case-insensitive edit distance.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// Up to `count` of `known` at the smallest distance from `name`; none when
// even those share few letters with it.
std::vector<std::string> nearestNames(std::string_view name, const std::vector<std::string> &known,
                                      size_t count = 3);

// "a, b, c" for messages.
std::string joinNames(const std::vector<std::string> &names);

} // namespace kiln
