#include "ir/file_names.h"

#include <cctype>

namespace kiln {

std::string plainFileNameProblem(std::string_view name) {
  if (name.empty())
    return "is empty";
  if (name.find('\0') != std::string_view::npos)
    return "contains a NUL byte";
  if (name.front() == '/')
    return "is an absolute path";
  if (name.find('/') != std::string_view::npos)
    return "names a folder ('/'), not a plain file name";
  if (name == "." || name == "..")
    return "names a folder ('" + std::string(name) + "'), not a file";
  return "";
}

std::string printableName(std::string_view name) {
  static const char *kHex = "0123456789abcdef";
  std::string s;
  for (char c : name) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      s += "\\x";
      s += kHex[u >> 4];
      s += kHex[u & 15];
    } else {
      s += c;
    }
  }
  return s;
}

std::string fileStem(std::string_view name) {
  std::string stem;
  for (char c : name.substr(0, 80))
    stem +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c : '_';
  return stem.empty() || stem[0] == '.' ? "_" + stem : stem;
}

} // namespace kiln
