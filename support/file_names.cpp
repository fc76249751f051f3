#include "support/file_names.h"

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

std::string fileStem(std::string_view name) {
  std::string stem;
  for (char c : name.substr(0, 80))
    stem +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c : '_';
  return stem.empty() || stem[0] == '.' ? "_" + stem : stem;
}

} // namespace kiln
