#include "support/json_reader.h"

#include <limits>

namespace kiln {

using nlohmann::json;

Error JsonReader::error(const std::string &path, const std::string &what) const {
  return Error::at(source_ + ": " + path, what);
}

std::string JsonReader::child(const std::string &path, std::string_view key) {
  return path + "." + std::string(key);
}

std::string JsonReader::index(const std::string &path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

Expected<const json *> JsonReader::optionalMember(const json &obj, const std::string &path,
                                                  std::string_view key) const {
  if (!obj.is_object())
    return error(path, "expected an object");
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

Expected<const json *> JsonReader::member(const json &obj, const std::string &path,
                                          std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const json *v, optionalMember(obj, path, key));
  if (!v)
    return error(path, "missing field '" + std::string(key) + "'");
  return v;
}

Expected<std::string> JsonReader::asString(const json &v, const std::string &path) const {
  if (!v.is_string())
    return error(path, "expected a string");
  return v.get<std::string>();
}

Expected<std::string> JsonReader::string(const json &obj, const std::string &path,
                                         std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const json *v, member(obj, path, key));
  return asString(*v, child(path, key));
}

Expected<const json *> JsonReader::array(const json &obj, const std::string &path,
                                         std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const json *v, member(obj, path, key));
  if (!v->is_array())
    return error(child(path, key), "expected an array");
  return v;
}

Expected<const json *> JsonReader::object(const json &obj, const std::string &path,
                                          std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const json *v, member(obj, path, key));
  if (!v->is_object())
    return error(child(path, key), "expected an object");
  return v;
}

Expected<bool> JsonReader::boolean(const json &obj, const std::string &path,
                                   std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const json *v, member(obj, path, key));
  if (!v->is_boolean())
    return error(child(path, key), "expected true or false");
  return v->get<bool>();
}

Expected<double> JsonReader::number(const json &v, const std::string &path) const {
  if (v.is_number())
    return v.get<double>();
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "inf")
      return std::numeric_limits<double>::infinity();
    if (s == "-inf")
      return -std::numeric_limits<double>::infinity();
    if (s == "nan")
      return std::numeric_limits<double>::quiet_NaN();
  }
  return error(path, "expected a number");
}

Expected<int64_t> JsonReader::integer(const json &v, const std::string &path) const {
  if (!v.is_number_integer())
    return error(path, "expected an integer");
  // get<int64_t> would wrap values in [2^63, 2^64) to negative numbers.
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return error(path, "integer " + v.dump() + " does not fit in 64 bits");
  return v.get<int64_t>();
}

Expected<std::vector<std::string>> JsonReader::stringList(const json &v,
                                                          const std::string &path) const {
  if (!v.is_array())
    return error(path, "expected an array of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(std::string s, asString(v[i], index(path, i)));
    out.push_back(std::move(s));
  }
  return out;
}

Status JsonReader::checkKeys(const json &obj, const std::string &path,
                             std::initializer_list<std::string_view> known) const {
  if (!obj.is_object())
    return error(path, "expected an object");
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    for (std::string_view k : known)
      ok = ok || it.key() == k;
    if (ok)
      continue;
    std::string list;
    for (std::string_view k : known)
      list += (list.empty() ? "" : ", ") + std::string(k);
    return error(child(path, it.key()), "unknown field (expected one of: " + list + ")");
  }
  return Status::ok();
}

} // namespace kiln
