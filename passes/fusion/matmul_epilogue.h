// The epilogue of a cube op: the chain of ops after a MatMul/BatchMatMul that
// one fused kernel applies to the cube result before storing it. Walked the
// same way by TbeMatmulFixPipeFusionPass and ATbeMatmulElemwiseFusionPass;
// each pass decides which ops may be links.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion/fusion_group_util.h"

namespace kiln::passes {

// MatMul or BatchMatMul: the anchors of the matmul fusions.
bool isCubeOp(const Node &node);

// "MatMul 'transformer.h.0.attn.c_attn'": how rejection texts name a node.
std::string describeNode(const Node &node);

// The distinct nodes reading `v`, in node order.
std::vector<NodeId> distinctUsers(const FusionView &view, ValueId v);
// "N users (Cast 'a', AdamW 'b')", naming at most three.
std::string describeUsers(const Graph &graph, const std::vector<NodeId> &users);

// What a pass says about the next link of a chain.
struct LinkVerdict {
  enum class Kind { Take, View, Stop };
  Kind kind = Kind::Stop;
  std::string reason; // for Stop: which op, which condition

  static LinkVerdict take() { return {Kind::Take, {}}; }
  // A free view (a Reshape in ND layout): absorbed between epilogue ops.
  static LinkVerdict view() { return {Kind::View, {}}; }
  static LinkVerdict stop(std::string why) { return {Kind::Stop, std::move(why)}; }
};

struct EpilogueChain {
  // The anchor, then every link up to the last one taken (views between
  // taken links included; views after the last one are not).
  std::vector<NodeId> members;
  // Every link walked, taken or view, in chain order (members plus the
  // trailing views), for passes that look back along the chain.
  std::vector<NodeId> walked;
  int64_t epilogue_ops = 0; // links taken (not views)
  int64_t views = 0;        // views among `members`
  std::string stop_reason;  // why the chain goes no further

  // The value at the end of the walk so far (what the next link reads).
  ValueId end(const Graph &graph) const { return graph.node(walked.back()).outputs[0]; }
};

// `decide` is asked about each candidate link `next`: the one node that reads the
// current end of the chain. The walk stops by itself before a value that is a
// graph output, has no user or more than one user, before a node that is in a
// fusion group already or has more than one output.
using LinkFn = std::function<LinkVerdict(NodeId next, const EpilogueChain &so_far)>;
EpilogueChain walkEpilogue(const FusionView &view, NodeId anchor, const LinkFn &decide);

// The matmul passes' walk: `visit(id)` for every MatMul and BatchMatMul not
// in a fusion group yet, in graph order, each counted as a match; one that
// is grouped already is rejected with the reason. `visit` may erase nodes.
void forEachUngroupedCubeOp(Graph &graph, PassResult &result,
                            const std::function<void(NodeId)> &visit);

// One chain's walk for a pass: its verdict on each link, and what it counts
// of a chain it makes a group.
class EpilogueLinks {
public:
  virtual ~EpilogueLinks() = default;
  virtual LinkVerdict operator()(NodeId next, const EpilogueChain &so_far) = 0;
  virtual void count(const EpilogueChain &formed, PassResult &result) const = 0;
};

struct EpilogueFusion {
  const char *pass;   // the pass's name, for the groups it forms
  const char *kernel; // the groups' kernel kind
  const char *what;   // "FixPipe": the rejection "no FixPipe epilogue: ..."
  Intermediates intermediates;
  // Fresh links for the chain of each cube op.
  std::function<std::unique_ptr<EpilogueLinks>(const FusionView &)> links;
};

// The loop of the matmul epilogue passes: every MatMul and BatchMatMul not
// in a group yet walks its epilogue, and a chain of at least one epilogue op
// that is convex becomes one group; every other candidate is rejected with
// the reason.
PassResult runEpilogueFusion(Graph &graph, const EpilogueFusion &fusion);

} // namespace kiln::passes
