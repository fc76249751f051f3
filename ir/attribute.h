// Node attributes: a small closed set of value kinds keyed by name.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, DType>;

enum class AttrKind { Bool, Int, Float, String, Ints, Floats, DType };

AttrKind attrKindOf(const AttrValue &value);
std::string_view attrKindName(AttrKind kind);
std::optional<AttrKind> parseAttrKind(std::string_view name);
// Text form used by the printer: true, 3, 0.5, "s", [1,2], [0.5,1], f16.
std::string attrValueToString(const AttrValue &value);

class AttrMap {
public:
  AttrMap() = default;
  AttrMap(std::initializer_list<std::pair<const std::string, AttrValue>> init) : map_(init) {}

  void set(const std::string &name, AttrValue value) { map_[name] = std::move(value); }
  bool has(const std::string &name) const { return map_.count(name) != 0; }
  const AttrValue *find(const std::string &name) const;
  void erase(const std::string &name) { map_.erase(name); }

  // Typed getters; the op's definition guarantees presence and kind after
  // verification, so a missing or ill-typed attribute here is a bug (asserts).
  bool getBool(const std::string &name) const;
  int64_t getInt(const std::string &name) const;
  double getFloat(const std::string &name) const;
  const std::string &getString(const std::string &name) const;
  const std::vector<int64_t> &getInts(const std::string &name) const;
  const std::vector<double> &getFloats(const std::string &name) const;
  DType getDType(const std::string &name) const;

  auto begin() const { return map_.begin(); }
  auto end() const { return map_.end(); }
  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  bool operator==(const AttrMap &) const = default;

private:
  std::map<std::string, AttrValue> map_;
};

} // namespace kiln
