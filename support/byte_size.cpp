#include "support/byte_size.h"

#include <cctype>
#include <cstdio>

namespace kiln {

std::string formatBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

Expected<uint64_t> parseByteSize(std::string_view text) {
  auto bad = [&] {
    return Error("size '" + std::string(text) + "' is not a number of bytes (e.g. 500M or 2GiB)");
  };
  uint64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (value > (UINT64_MAX - 9) / 10)
      return Error("size '" + std::string(text) + "' is too large");
    value = value * 10 + uint64_t(text[i] - '0');
  }
  if (i == 0)
    return bad();
  std::string unit;
  for (char c : text.substr(i))
    unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (!unit.empty() && unit != "B") {
    const std::string prefixes = "KMGT";
    const size_t p = prefixes.find(unit[0]);
    const std::string rest = unit.substr(1);
    if (p == std::string::npos || !(rest.empty() || rest == "B" || rest == "IB"))
      return bad();
    shift = 10 * static_cast<int>(p + 1);
  }
  if (value > (UINT64_MAX >> shift))
    return Error("size '" + std::string(text) + "' is too large");
  return value << shift;
}

} // namespace kiln
