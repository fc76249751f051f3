// Re-typing a graph: the engine under the precision passes. A plan says, per
// node, which float dtype it computes in; applyRetype rewrites the graph so
// that every node gets its inputs in that dtype (inserting Cast nodes where a
// producer's dtype differs), re-infers output types, and keeps the graph's
// inputs and outputs exactly as they were (casting back where needed).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/graph.h"
#include "passes/pass.h"
#include "support/error.h"

namespace kiln::passes {

struct NodeRetype {
  std::optional<DType> dtype; // the float dtype the node computes in; none: as it is
  AttrMap attr_overrides;     // e.g. fp32_out on a matmul
  std::string why;            // "white list", "black list", "attention fp32", ...
};

// One entry per node of the graph, by node id.
using RetypePlan = std::vector<NodeRetype>;

// Rewrites `graph` after `plan`. Cast nodes are never re-typed (their target
// dtype is what they mean; only their input may change); Fill nodes and
// CausalMask's fill value follow their node's new dtype. A cast of value v to
// dtype d is one node named "<v>.to_<d>" shared by every consumer, provenance
// `pass`. Returns the decisions made. Leaves appended nodes for compact().
Expected<std::vector<DTypeDecision>> applyRetype(Graph &graph, const RetypePlan &plan,
                                                 const std::string &pass);

} // namespace kiln::passes
