#include "passes/fusion/matmul_epilogue.h"

#include <algorithm>

namespace kiln::passes {

bool isCubeOp(const Node &node) { return node.op == "MatMul" || node.op == "BatchMatMul"; }

std::string describeNode(const Node &node) { return node.op + " '" + node.name + "'"; }

std::vector<NodeId> distinctUsers(const FusionView &view, ValueId v) {
  std::vector<NodeId> users = view.users(v);
  std::sort(users.begin(), users.end());
  users.erase(std::unique(users.begin(), users.end()), users.end());
  return users;
}

std::string describeUsers(const Graph &graph, const std::vector<NodeId> &users) {
  std::string list;
  for (size_t i = 0; i < users.size() && i < 3; ++i)
    list += (i ? ", " : "") + describeNode(graph.node(users[i]));
  if (users.size() > 3)
    list += ", ...";
  return std::to_string(users.size()) + (users.size() == 1 ? " user (" : " users (") + list + ")";
}

namespace {

// Why the chain cannot go on past `end` (produced by `producer`), or empty
// with `next` set to the one node that reads it.
std::string soleUser(const FusionView &view, ValueId end, const Node &producer, NodeId &next) {
  const Graph &graph = view.graph();
  const std::string what = "the result of " + describeNode(producer);
  if (view.isGraphOutput(end))
    return what + " is a graph output, so it must be stored as it is";
  const std::vector<NodeId> users = distinctUsers(view, end);
  if (users.empty())
    return what + " has no users";
  if (users.size() > 1)
    return what + " has " + describeUsers(graph, users) +
           "; an epilogue link must be its only user";
  next = users[0];
  return {};
}

} // namespace

EpilogueChain walkEpilogue(const FusionView &view, NodeId anchor, const LinkFn &decide) {
  const Graph &graph = view.graph();
  EpilogueChain chain;
  chain.members.push_back(anchor);
  chain.walked.push_back(anchor);
  int64_t views_walked = 0;
  for (;;) {
    const Node &end_node = graph.node(chain.walked.back());
    NodeId next = kNoNode;
    chain.stop_reason = soleUser(view, end_node.outputs[0], end_node, next);
    if (!chain.stop_reason.empty())
      break;
    const Node &link = graph.node(next);
    if (Verdict grouped = checkUngrouped(graph, {next}); !grouped) {
      chain.stop_reason = grouped.reason();
      break;
    }
    // The pass's verdict first: it names the op and the pass's own condition.
    LinkVerdict verdict = decide(next, chain);
    if (verdict.kind == LinkVerdict::Kind::Stop) {
      chain.stop_reason = std::move(verdict.reason);
      break;
    }
    if (link.outputs.size() != 1) {
      chain.stop_reason = describeNode(link) + " has " + std::to_string(link.outputs.size()) +
                          " outputs; an epilogue op has one";
      break;
    }
    chain.walked.push_back(next);
    if (verdict.kind == LinkVerdict::Kind::View) {
      ++views_walked;
      continue;
    }
    // A taken link pulls in the views walked before it.
    chain.members.assign(chain.walked.begin(), chain.walked.end());
    chain.views = views_walked;
    ++chain.epilogue_ops;
  }
  return chain;
}

void forEachUngroupedCubeOp(Graph &graph, PassResult &result,
                            const std::function<void(NodeId)> &visit) {
  for (NodeId id = 0; id < static_cast<NodeId>(graph.numNodes()); ++id) {
    if (graph.isErased(id) || !isCubeOp(graph.node(id)))
      continue;
    ++result.match_times;
    if (Verdict grouped = checkUngrouped(graph, {id}); !grouped) {
      result.reject(graph.node(id), grouped);
      continue;
    }
    visit(id);
  }
}

PassResult runEpilogueFusion(Graph &graph, const EpilogueFusion &fusion) {
  PassResult result;
  const FusionView view(graph);
  forEachUngroupedCubeOp(graph, result, [&](NodeId id) {
    const Node &mm = graph.node(id);
    std::unique_ptr<EpilogueLinks> links = fusion.links(view);
    EpilogueChain chain = walkEpilogue(view, id, std::ref(*links));
    if (chain.epilogue_ops == 0)
      return result.reject(mm,
                           std::string("no ") + fusion.what + " epilogue: " + chain.stop_reason);
    if (Verdict why = checkConvex(view, chain.members); !why)
      return result.reject(mm, why);
    links->count(chain, result);
    formGroup(graph, chain.members, id, fusion.kernel, fusion.pass, fusion.intermediates);
    ++result.effect_times;
  });
  return result;
}

} // namespace kiln::passes
