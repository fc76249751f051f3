#include "ir/layer_scope.h"

#include <charconv>

namespace kiln {
namespace {

constexpr std::string_view kLayerScopes[] = {"transformer.h.", "model.layers."};
constexpr std::string_view kEmbeddings[] = {"transformer.wte.", "model.embed_tokens."};

// A scope found at `at` of `name` (at 0 or after a '.'): the layer number
// after it and where the number ends, or -1.
int64_t layerAt(std::string_view name, size_t at, std::string_view scope, size_t *end) {
  if (at != 0 && name[at - 1] != '.')
    return -1;
  const char *begin = name.data() + at + scope.size(), *last = name.data() + name.size();
  int64_t layer = -1;
  auto [ptr, ec] = std::from_chars(begin, last, layer);
  if (ec != std::errc() || ptr == begin || (ptr != last && *ptr != '.'))
    return -1;
  if (end)
    *end = static_cast<size_t>(ptr - name.data());
  return layer;
}

// The first layer scope in `name` (from position `from` only when
// `anywhere`), with the end of its number.
int64_t findLayer(std::string_view name, bool anywhere, size_t *end) {
  for (std::string_view scope : kLayerScopes) {
    for (size_t at = name.find(scope); at != std::string_view::npos;
         at = anywhere ? name.find(scope, at + 1) : std::string_view::npos) {
      if (!anywhere && at != 0)
        break;
      if (const int64_t layer = layerAt(name, at, scope, end); layer >= 0)
        return layer;
    }
  }
  return -1;
}

} // namespace

int64_t layerAtStart(std::string_view name) { return findLayer(name, false, nullptr); }

int64_t layerWithin(std::string_view name) { return findLayer(name, true, nullptr); }

std::string_view layerModuleOf(std::string_view name) {
  size_t end = 0;
  if (findLayer(name, true, &end) < 0)
    return {};
  // "<...>.layers.<i>" ends at `end`; the module is the next component.
  if (end + 1 >= name.size())
    return {};
  const size_t next = name.find('.', end + 1);
  if (next == std::string_view::npos)
    return {};
  size_t start = 0;
  for (std::string_view scope : kLayerScopes)
    if (size_t at = name.find(scope); at != std::string_view::npos && at < end)
      start = at;
  return name.substr(start, next - start);
}

bool isEmbeddingName(std::string_view name) {
  for (std::string_view e : kEmbeddings)
    if (name.find(e) != std::string_view::npos)
      return true;
  return false;
}

} // namespace kiln
