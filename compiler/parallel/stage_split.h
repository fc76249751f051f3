// Uneven splits of the layers over pipeline stages, as MindFormers' `offset`
// and Megatron's account for the embedding and the head give them: the
// first stage also holds the embedding, the last the final norm and
// lm_head, so with equal layer counts those two hold the most. The split
// that evens out what each stage holds gives them fewer layers.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/parallel/training_program.h"

namespace kiln::parallel {

// Each stage's layer count (in order, each at least one) for `layer_weight`
// (per layer) over `stages` stages, the first also weighing `first_extra`
// and the last `last_extra`, that makes the heaviest stage lightest; of
// equal ones, the one nearest the balanced split (the least sum of squared
// differences from it). Empty when there are
// fewer layers than stages.
std::vector<int> evenedStageLayers(const std::vector<double> &layer_weight, double first_extra,
                                   double last_extra, int stages);

// The split above by what `program`'s parameters hold (elements; a
// layer's from its name, the embedding on the first stage, every other
// weight outside the layers on the last), for `stages` stages.
std::vector<int> parameterEvenedStageLayers(const TrainingProgram &program, int64_t layers,
                                            int stages);

} // namespace kiln::parallel
