#include "ir/attribute.h"

#include <cassert>
#include <charconv>
#include <cmath>

namespace kiln {

AttrKind attrKindOf(const AttrValue &value) { return static_cast<AttrKind>(value.index()); }

std::string_view attrKindName(AttrKind kind) {
  switch (kind) {
  case AttrKind::Bool:
    return "bool";
  case AttrKind::Int:
    return "int";
  case AttrKind::Float:
    return "float";
  case AttrKind::String:
    return "string";
  case AttrKind::Ints:
    return "ints";
  case AttrKind::Floats:
    return "floats";
  case AttrKind::DType:
    return "dtype";
  }
  return "?";
}

std::optional<AttrKind> parseAttrKind(std::string_view name) {
  for (int k = 0; k <= static_cast<int>(AttrKind::DType); ++k)
    if (attrKindName(static_cast<AttrKind>(k)) == name)
      return static_cast<AttrKind>(k);
  return std::nullopt;
}

namespace {

// Shortest text that reads back to the same double.
std::string doubleToString(double v) {
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  if (std::isnan(v))
    return "nan";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, end);
  if (s.find_first_of(".eE") == std::string::npos)
    s += ".0";
  return s;
}

// Quotes a string so that the text form stays one line per node and reads back unambiguously.
std::string quoteString(const std::string &v) {
  static const char *kHex = "0123456789abcdef";
  std::string s = "\"";
  for (char c : v) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      s += '\\';
      s += c;
    } else if (c == '\n') {
      s += "\\n";
    } else if (c == '\t') {
      s += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      s += "\\x";
      s += kHex[u >> 4];
      s += kHex[u & 15];
    } else {
      s += c;
    }
  }
  return s + "\"";
}

} // namespace

std::string attrValueToString(const AttrValue &value) {
  struct Visitor {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return doubleToString(v); }
    std::string operator()(const std::string &v) const { return quoteString(v); }
    std::string operator()(const std::vector<int64_t> &v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i)
        s += (i ? "," : "") + std::to_string(v[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<double> &v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i)
        s += (i ? "," : "") + doubleToString(v[i]);
      return s + "]";
    }
    std::string operator()(DType v) const { return std::string(dtypeName(v)); }
  };
  return std::visit(Visitor{}, value);
}

const AttrValue *AttrMap::find(const std::string &name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

template <typename T> static const T &getAs(const AttrMap &map, const std::string &name) {
  const AttrValue *v = map.find(name);
  assert(v && std::holds_alternative<T>(*v) && "attribute missing or of another kind");
  return std::get<T>(*v);
}

bool AttrMap::getBool(const std::string &name) const { return getAs<bool>(*this, name); }
int64_t AttrMap::getInt(const std::string &name) const { return getAs<int64_t>(*this, name); }
double AttrMap::getFloat(const std::string &name) const { return getAs<double>(*this, name); }
const std::string &AttrMap::getString(const std::string &name) const {
  return getAs<std::string>(*this, name);
}
const std::vector<int64_t> &AttrMap::getInts(const std::string &name) const {
  return getAs<std::vector<int64_t>>(*this, name);
}
const std::vector<double> &AttrMap::getFloats(const std::string &name) const {
  return getAs<std::vector<double>>(*this, name);
}
DType AttrMap::getDType(const std::string &name) const { return getAs<DType>(*this, name); }

} // namespace kiln
