#include "compiler/parallel/stage_split.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/layer_scope.h"

namespace kiln::parallel {
namespace {

// The lightest heaviest stage of the first stages holding the first
// layers, how far its counts stray from the balanced split (the sum of
// the squared differences), and where its
// last stage begins (-1: no such split).
struct Cell {
  double heaviest = std::numeric_limits<double>::infinity();
  int stray = 0;
  int from = -1;
};

} // namespace

std::vector<int> evenedStageLayers(const std::vector<double> &layer_weight, double first_extra,
                                   double last_extra, int stages) {
  const int layers = static_cast<int>(layer_weight.size());
  if (stages < 1 || layers < stages)
    return {};
  std::vector<double> prefix(layers + 1, 0.0);
  for (int i = 0; i < layers; ++i)
    prefix[i + 1] = prefix[i] + layer_weight[i];
  auto weight = [&](int s, int from, int to) { // stage s holding layers [from, to)
    return prefix[to] - prefix[from] + (s == 0 ? first_extra : 0) +
           (s == stages - 1 ? last_extra : 0);
  };
  // best[s][i]: stages 0..s holding layers [0, i).
  std::vector<std::vector<Cell>> best(stages, std::vector<Cell>(layers + 1));
  const int base = layers / stages, longer = layers % stages;
  auto balanced = [&](int s) { return base + (s < longer ? 1 : 0); };
  auto square = [](int n) { return n * n; };
  for (int i = 1; i <= layers; ++i)
    best[0][i] = {weight(0, 0, i), square(i - balanced(0)), 0};
  for (int s = 1; s < stages; ++s)
    for (int i = s + 1; i <= layers; ++i)
      for (int j = s; j < i; ++j) {
        const Cell &before = best[s - 1][j];
        if (before.from < 0)
          continue;
        const Cell c{std::max(before.heaviest, weight(s, j, i)),
                     before.stray + square(i - j - balanced(s)), j};
        Cell &at = best[s][i];
        if (c.heaviest < at.heaviest * (1 - 1e-12) ||
            (c.heaviest <= at.heaviest * (1 + 1e-12) && c.stray < at.stray))
          at = c;
      }
  std::vector<int> counts(stages);
  for (int s = stages - 1, i = layers; s >= 0; --s) {
    const int from = best[s][i].from;
    counts[s] = i - from;
    i = from;
  }
  return counts;
}

std::vector<int> parameterEvenedStageLayers(const TrainingProgram &program, int64_t layers,
                                            int stages) {
  std::vector<double> per_layer(static_cast<size_t>(std::max<int64_t>(0, layers)), 0.0);
  double first = 0, last = 0;
  for (const std::vector<Parameter> *table : {&program.params, &program.frozen})
    for (const Parameter &p : *table) {
      const double n = static_cast<double>(numElements(p.type.shape));
      const int64_t layer = layerWithin(p.name);
      if (layer >= 0 && layer < layers)
        per_layer[layer] += n;
      else
        (isEmbeddingName(p.name) ? first : last) += n;
    }
  return evenedStageLayers(per_layer, first, last, stages);
}

} // namespace kiln::parallel
