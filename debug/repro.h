// A reproducer folder, as MLIR's crash reproducers and Inductor's minifier
// leave one: the graph, a job file that repeats the job exactly (every pass
// switched explicitly, the target, precision settings, and copies of the
// custom-op and fusion-rule folders it read), and a README with the one
// command that shows the failure. Everything it refers to lies inside it, so
// the folder can be attached to a bug report as it is.
#pragma once

#include <string>

#include "compiler/driver/job.h"
#include "ir/graph.h"

namespace kiln::debug {

struct ReproNotes {
  std::string failure;   // the diagnostic the repro shows, as printed
  std::string origin;    // what it was reduced from ("examples/debug/graph.json --training")
  std::string reduction; // how ("412 nodes to 3 in 57 trials")
};

// Writes graph.json, job.json, README.md and the copied folders into `dir`
// (created when missing; files of an earlier repro there are replaced).
Status writeRepro(const std::string &dir, const Graph &graph, const driver::ResolvedJob &job,
                  const ReproNotes &notes);

} // namespace kiln::debug
