// Typed reads of the fields of the artifact's JSON sections; an absent or
// ill-typed field is an error naming where it was looked for.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/error.h"

namespace kiln::artifact {

class JsonFields {
public:
  // `where` names the object in errors ("manifest", "bucket 1: kernel 3").
  JsonFields(const nlohmann::json &object, std::string where)
      : object_(object), where_(std::move(where)) {}

  bool isObject() const { return object_.is_object(); }
  const std::string &where() const { return where_; }
  Error error(std::string_view key, std::string_view what) const {
    return Error(where_ + ": '" + std::string(key) + "' " + std::string(what));
  }

  Expected<std::string> string(std::string_view key) const {
    const nlohmann::json *j = find(key);
    if (!j || !j->is_string())
      return error(key, "must be a string");
    return j->get<std::string>();
  }
  Expected<int64_t> integer(std::string_view key) const {
    const nlohmann::json *j = find(key);
    if (!j || !j->is_number_integer())
      return error(key, "must be an integer");
    return j->get<int64_t>();
  }
  Expected<bool> boolean(std::string_view key) const {
    const nlohmann::json *j = find(key);
    if (!j || !j->is_boolean())
      return error(key, "must be true or false");
    return j->get<bool>();
  }
  Expected<const nlohmann::json *> object(std::string_view key) const {
    const nlohmann::json *j = find(key);
    if (!j || !j->is_object())
      return error(key, "must be an object");
    return j;
  }
  Expected<const nlohmann::json *> array(std::string_view key) const {
    const nlohmann::json *j = find(key);
    if (!j || !j->is_array())
      return error(key, "must be an array");
    return j;
  }
  Expected<std::vector<std::string>> stringArray(std::string_view key) const {
    KILN_ASSIGN_OR_RETURN(const nlohmann::json *list, array(key));
    std::vector<std::string> out;
    for (const nlohmann::json &s : *list) {
      if (!s.is_string())
        return error(key, "must be an array of strings");
      out.push_back(s.get<std::string>());
    }
    return out;
  }

private:
  const nlohmann::json *find(std::string_view key) const {
    if (!object_.is_object())
      return nullptr;
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  const nlohmann::json &object_;
  std::string where_;
};

} // namespace kiln::artifact
