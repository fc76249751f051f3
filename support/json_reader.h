// Reads fields of a parsed JSON document and reports every problem as
// "<file>: <json path>: <what is wrong>", e.g.
//   job.json: $.fusion_switch.UBFusion.TbeEltwiseFusionPass: expected "on" or "off"
// Shared by every kiln file format (graphs, targets, jobs, fusion rules).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/error.h"

namespace kiln {

class JsonReader {
public:
  explicit JsonReader(std::string_view source) : source_(source) {}

  const std::string &source() const { return source_; }
  Error error(const std::string &path, const std::string &what) const;

  // A required member of object `obj` (found at `path`).
  Expected<const nlohmann::json *> member(const nlohmann::json &obj, const std::string &path,
                                          std::string_view key) const;
  // The member, or nullptr when absent (an error when `obj` is not an object).
  Expected<const nlohmann::json *>
  optionalMember(const nlohmann::json &obj, const std::string &path, std::string_view key) const;
  Expected<std::string> string(const nlohmann::json &obj, const std::string &path,
                               std::string_view key) const;
  Expected<const nlohmann::json *> array(const nlohmann::json &obj, const std::string &path,
                                         std::string_view key) const;
  Expected<const nlohmann::json *> object(const nlohmann::json &obj, const std::string &path,
                                          std::string_view key) const;
  Expected<bool> boolean(const nlohmann::json &obj, const std::string &path,
                         std::string_view key) const;

  // Scalars at `path` itself.
  Expected<std::string> asString(const nlohmann::json &v, const std::string &path) const;
  // Numbers, and the strings "inf", "-inf", "nan".
  Expected<double> number(const nlohmann::json &v, const std::string &path) const;
  Expected<int64_t> integer(const nlohmann::json &v, const std::string &path) const;
  Expected<std::vector<std::string>> stringList(const nlohmann::json &v,
                                                const std::string &path) const;

  // Errors on a key of object `obj` not in `known`, naming the known ones:
  // a misspelt option must not be ignored silently.
  Status checkKeys(const nlohmann::json &obj, const std::string &path,
                   std::initializer_list<std::string_view> known) const;

  static std::string child(const std::string &path, std::string_view key);
  static std::string index(const std::string &path, size_t i);

private:
  std::string source_;
};

} // namespace kiln
